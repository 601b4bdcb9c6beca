"""The multi-view shared-bus family (problem ``multiview``, SplitNets)."""
