"""The edge/cloud family's torch side (:mod:`splitopt.families.edge_cloud`): its plans cut
one part per device, edge then cloud (:mod:`splitopt.torch.edge_cloud.side`), and the
sent tensors packed at the plan's bits (:mod:`splitopt.torch.edge_cloud.packing`)."""
