"""The edge/cloud family's baselines: one module per published method."""
