"""The wire form of a crossing tensor (:mod:`splitopt.netrun.runner`): quantized at the plan's
sent bits with the calibrated range and bit-packed by :mod:`splitopt.torch.packing`, and
the same transmission in one process, the reference a run is checked against."""

from __future__ import annotations

from typing import Mapping

from splitopt.core.errors import InvalidPlan


def wire_pack(name: str, tensor, bits: int, ranges: Mapping[str, tuple[float, float]]):
    """The :class:`splitopt.torch.packing.PackedTensor` sent for ``tensor`` at ``bits``:
    float tensors at a quantized width over the calibrated range of the layer widened to
    the tensor's own min/max (the raw input and uncalibrated tensors: their own min/max),
    at 16/32 bits as float16/float32; integer tensors (ids) exactly as codes (range
    ``[0, 2^bits - 1]``, scale 1) or floats, InvalidPlan when their values do not fit."""
    from splitopt.torch.packing import QUANTIZED_BITS, pack

    if not tensor.is_floating_point():
        lo, hi = (float(tensor.min()), float(tensor.max())) if tensor.numel() else (0.0, 0.0)
        exact = 2 ** bits - 1 if bits in QUANTIZED_BITS else (2048 if bits == 16 else 2 ** 24)
        if lo < (0 if bits in QUANTIZED_BITS else -exact) or hi > exact:
            raise InvalidPlan(f"tensor '{name}': integer values in [{lo:g}, {hi:g}] are not exact at {bits} bits")
        return pack(tensor, bits, 0.0, float(2 ** bits - 1)) if bits in QUANTIZED_BITS else pack(tensor, bits)
    calibrated = ranges.get(name)
    if calibrated is None:
        return pack(tensor, bits)
    lo, hi = calibrated
    return pack(tensor, bits, min(lo, float(tensor.min())), max(hi, float(tensor.max())))


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
