"""The separable family's torch side (:mod:`splitopt.families.separable`, Separable NN):
the Sep-ResNeXt on scikit-learn's digits (:mod:`splitopt.torch.separable.model`), its
training and policy search (:mod:`splitopt.torch.separable.nas`), the profile into a
separable instance (:mod:`splitopt.torch.separable.profile`), a plan run over G worker
processes (:mod:`splitopt.torch.separable.run`), the options of the commands
(:mod:`splitopt.torch.separable.options`) and the side they ask
(:mod:`splitopt.torch.separable.side`). Importing the package imports no torch."""
