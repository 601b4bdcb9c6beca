"""The edge/cloud family (problems ``split`` and ``split_bits``): one cut between an edge device and a cloud device, with per-layer bit-widths on the edge."""
