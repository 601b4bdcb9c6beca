"""The loading family's torch side (:mod:`splitopt.families.loading`, the RL
modularization paper): the block models (:mod:`splitopt.torch.loading.models`), measured
into a loading instance (:mod:`splitopt.torch.loading.profile`); a plan's child models
written one checkpoint file each (:mod:`splitopt.torch.loading.children`), loaded by
threads or processes with the page cache warm or cold
(:mod:`splitopt.torch.loading.execution`, :mod:`splitopt.torch.loading.cache`) and run
(:mod:`splitopt.torch.loading.run`); the trainable tail fine-tuned
(:mod:`splitopt.torch.loading.finetune`); the options of the commands
(:mod:`splitopt.torch.loading.options`) and the side they ask
(:mod:`splitopt.torch.loading.side`). Importing the package imports no torch."""
