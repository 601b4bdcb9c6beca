"""The wire form of a crossing tensor (:mod:`splitopt.netrun.runner`): quantized at the plan's
sent bits with the calibrated range and bit-packed (:func:`splitopt.core.packing.pack_crossing`), and
the same transmission in one process, the reference a run is checked against."""

from __future__ import annotations

from typing import Mapping



def wire_pack(name: str, tensor, bits: int, ranges: Mapping[str, tuple[float, float]]):
    """The :class:`splitopt.torch.packing.PackedTensor` sent for ``tensor`` at ``bits``:
    float tensors at a quantized width over the calibrated range of the layer widened to
    the tensor's own min/max (the raw input and uncalibrated tensors: their own min/max),
    at 16/32 bits as float16/float32; integer tensors (ids) exactly as codes (range
    ``[0, 2^bits - 1]``, scale 1) or floats, InvalidPlan when their values do not fit."""
    import torch

    from splitopt.core.packing import pack_crossing

    x = tensor.detach().to("cpu")
    if x.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds its values exactly
        x = x.float()
    return pack_crossing(name, x.contiguous().numpy(), bits, ranges)


def wire_unpack(packed, dtype):
    """The tensor as it arrives: unpacked, in ``dtype`` (the sender's), batch shape kept."""
    from splitopt.torch.packing import unpack

    t = unpack(packed)
    return t.round().to(dtype) if not dtype.is_floating_point else t.to(dtype)


def wire_transmit(split):
    """The transmission hook of the single-process reference: what :func:`wire_pack` and
    :func:`wire_unpack` do to every crossing tensor (raw input included)."""
    ranges = dict(split.ranges)

    def hook(name: str, tensor, bits: int):
        return wire_unpack(wire_pack(name, tensor, bits, ranges), tensor.dtype)

    return hook
