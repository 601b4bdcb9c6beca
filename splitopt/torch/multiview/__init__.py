"""The multiview family's torch side (:mod:`splitopt.families.multiview`): SplitNets'
splitting module (:mod:`splitopt.torch.multiview.splitting`: Conv-Reduce, Conv-Recover,
View-Fuse), its retraining on the digits (:mod:`splitopt.torch.multiview.retrain`, V
views: :mod:`splitopt.torch.multiview.retrain_views`), the retrained weights
(:mod:`splitopt.torch.multiview.weights`), the instance whose widths carry the measured
accuracies (:mod:`splitopt.torch.multiview.width_instance`), a multiview plan cut into
sensor and aggregator parts (:mod:`splitopt.torch.multiview.partition`) and run
(:mod:`splitopt.torch.multiview.run`), and the side the commands ask
(:mod:`splitopt.torch.multiview.side`)."""
