"""Multiply-accumulates of a module's forward pass, counted by forward hooks on its conv
and linear layers (conv: output elements x input channels per group x kernel area;
linear: output elements x input features; batch norms, pools, activations and
concatenations are not counted). Used where an instance is made from a model built in
code without the ``torch.export`` capture (:mod:`splitopt.torch.capture`), whose fused
layer graph counts MACs its own way."""

from __future__ import annotations

import torch
from torch import nn


def count_macs(module: nn.Module, x: torch.Tensor) -> int:
    """Multiply-accumulates of ``module(x)`` per sample (the first sample of the batch)."""
    total = 0

    def conv_hook(m: nn.Conv2d, _inp, out):
        nonlocal total
        kh, kw = m.kernel_size
        total += out[0].numel() * (m.in_channels // m.groups) * kh * kw

    def linear_hook(m: nn.Linear, _inp, out):
        nonlocal total
        total += out[0].numel() * m.in_features

    handles = [m.register_forward_hook(conv_hook if isinstance(m, nn.Conv2d) else linear_hook)
               for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            module(x)
    finally:
        for h in handles:
            h.remove()
    return int(total)
