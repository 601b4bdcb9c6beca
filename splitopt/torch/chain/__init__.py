"""The chain family's torch side (:mod:`splitopt.families.chain`): its plans cut one part
per device in the chain's order (:mod:`splitopt.torch.chain.side`)."""
