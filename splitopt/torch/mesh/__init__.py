"""The mesh family's torch side (:mod:`splitopt.families.mesh`): its plans cut into stages
(:mod:`splitopt.torch.mesh.partition`), their bytes compared with the mesh evaluator per
device pair and per link (:mod:`splitopt.torch.mesh.compare`), the side the commands ask
(:mod:`splitopt.torch.mesh.side`)."""
