"""What happens to a tensor on its way between two parts of a split model, and the
activation ranges quantized plans send and compute at.

Transmission hook: ``SplitModel.run(x, transmit)`` (:mod:`splitopt.torch.split_model`)
calls ``transmit(tensor name, tensor, bits) -> tensor`` on every tensor crossing a
boundary (once per boundary; mesh plans: once per (tensor, destination device)) and
hands the result to the later devices; the producing device keeps using its own copy.
Default: :func:`identity_transmit` for float plans; for quantized plans
:func:`packing_transmit`, pack/unpack by :mod:`splitopt.torch.packing` at the sent bits
with the range :func:`calibrate` measured on the float model (the raw input is passed
unchanged: its bits describe the sensor data, which the evaluator counts as exact).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import torch

from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.quant_error import run_layers

#: ``transmit(tensor name, tensor, bits per element) -> the tensor as it arrives``
Transmit = Callable[[str, torch.Tensor, int], torch.Tensor]


def identity_transmit(name: str, tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """The default hook for float plans: the tensor arrives unchanged."""
    return tensor


def packing_transmit(ranges: Mapping[str, tuple[float, float]]) -> Transmit:
    """A hook that sends each layer tensor through :func:`splitopt.torch.packing.pack` /
    ``unpack`` at its sent bits, with the calibrated range ``ranges[name]`` = (min, max)
    of the layer's float output when known (else the tensor's own min/max); the raw
    input passes unchanged."""
    from splitopt.torch.packing import pack, unpack

    def hook(name: str, tensor: torch.Tensor, bits: int) -> torch.Tensor:
        if name == INPUT_NAME:
            return tensor
        calibrated = ranges.get(name)
        if calibrated is None:
            return unpack(pack(tensor, bits)).to(tensor.dtype)
        lo, hi = calibrated  # a tensor already quantized at this range stays in it
        return unpack(pack(tensor, bits, min(lo, float(tensor.min())), max(hi, float(tensor.max())))).to(tensor.dtype)

    return hook


def calibrate(cap: Capture, inputs: torch.Tensor) -> dict[str, tuple[float, float]]:
    """Per layer, (min, max) of its float output over ``inputs`` (shape (n, ...), run one
    at a time through the captured program); layers whose output is not a float tensor
    are left out."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}

    def record(name: str, t: torch.Tensor) -> None:
        if t.is_floating_point():
            lo[name] = min(lo.get(name, math.inf), float(t.min()))
            hi[name] = max(hi.get(name, -math.inf), float(t.max()))

    for i in range(inputs.shape[0]):
        run_layers(cap, inputs[i:i + 1], record)
    return {n: (lo[n], hi[n]) for n in lo}
