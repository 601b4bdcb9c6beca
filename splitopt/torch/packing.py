"""Quantize and bit-pack the tensors a plan sends across the cut (AUTO-SPLIT App. A), on
torch tensors.

The format and the numpy implementation are :mod:`splitopt.core.packing` (no torch; the
device agent packs with it): :func:`pack` here converts the tensor to a numpy array and
packs it there, so both give the same bytes. ``formulations/packing.md`` has the full
description. In short: quantized widths 1..8 bits are asymmetric uniform quantization per
tensor (the activation quantizer of :mod:`splitopt.torch.quant_error`, defined once:
:func:`activation_qparams`, :func:`activation_codes`) to unsigned codes packed densely
into a little-endian bit stream, ``ceil(n * bits / 8)`` bytes; 16 and 32 bits are the
little-endian IEEE float16 / float32 values. Header (:meth:`PackedTensor.to_bytes`):
``uint8 bits``, ``uint8 ndim``, ``ndim x uint32`` shape dims, and for quantized widths
``float32 scale`` + ``int32 zero_point``.

Relation to the evaluators: they count ``elements * bits / 8`` bytes per sent tensor, a
*fractional* byte count without headers; the packer rounds each tensor's payload up to
whole bytes, so per tensor ``0 <= payload - evaluator < 1`` byte. Headers are reported
separately (:func:`check_against_evaluator`). The tensors an edge/cloud plan sends,
packed: :func:`splitopt.torch.edge_cloud.packing.pack_sent_tensors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from splitopt.core.errors import InvalidPlan
from splitopt.core.packing import (
    PASS_THROUGH_BITS, QUANTIZED_BITS, SUPPORTED_BITS, PackedTensor, activation_qparams, array_codes, check_bits,
    codes_array, pack_array, payload_size, unpack_array,
)

__all__ = ["PASS_THROUGH_BITS", "QUANTIZED_BITS", "SUPPORTED_BITS", "PackedTensor", "activation_codes",
           "activation_qparams", "check_against_evaluator", "check_bits", "pack", "payload_size", "unpack",
           "unpack_codes", "TensorBytes", "TransmissionCheck"]


def activation_codes(x, bits: int, scale: float, zero: int):
    """Integer codes ``clamp(round(x / scale) + zero, 0, 2^bits - 1)`` of ``x``, a torch
    tensor or a numpy array (result: same kind and float dtype, integer-valued). Rounding
    is half-to-even in both; for float32 input both compute in float32 with ``scale``
    rounded to float32, so they give identical codes (numpy is used by :func:`pack` to
    avoid torch's intra-op thread start-up on small tensors)."""
    if isinstance(x, np.ndarray):
        return array_codes(x, bits, scale, zero)
    return torch.round(x / scale).add_(zero).clamp_(0, 2 ** bits - 1)


def pack(x: torch.Tensor, bits: int, lo: float | None = None, hi: float | None = None) -> PackedTensor:
    """Quantize ``x`` to ``bits`` bits per element and pack it
    (:func:`splitopt.core.packing.pack_array` on its values: float32 for quantized widths;
    bfloat16 and integer tensors through float64 for 16/32 bits).
    ``unpack(pack(x, b, lo, hi))`` equals ``quant_error.quantize_activation(x, b, lo, hi)``.

    Raises InvalidPlan for an unsupported ``bits``; ValueError for non-finite values or
    range at a quantized width, ``lo > hi``, or finite values beyond the float16 range."""
    bits = check_bits(bits)
    x = x.detach().to("cpu")
    if bits in PASS_THROUGH_BITS:
        floats = x if x.dtype in (torch.float16, torch.float32, torch.float64) else x.double()
        return pack_array(floats.contiguous().numpy(), bits, lo, hi)
    return pack_array(x.float().contiguous().numpy(), bits, lo, hi)


def unpack_codes(p: PackedTensor) -> torch.Tensor:
    """The integer codes of a quantized-width packed tensor (int64, original shape)."""
    return torch.from_numpy(codes_array(p).astype(np.int64)).reshape(p.shape)


def unpack(p: PackedTensor) -> torch.Tensor:
    """The dequantized tensor (float32, original shape): ``(code - zero_point) * scale``
    for quantized widths, the float16/float32 values widened to float32 otherwise."""
    return torch.from_numpy(unpack_array(p))


# ----- the check against the evaluator -----------------------------------------------------

@dataclass(frozen=True)
class TensorBytes:
    """One sent tensor: its packed payload and header (whole bytes) and the evaluator's
    figure ``elements * bits / 8`` (bytes, may be fractional)."""

    tensor: str
    bits: int
    elements: int
    payload_bytes: int
    header_bytes: int
    evaluator_bytes: float


@dataclass(frozen=True)
class TransmissionCheck:
    """Totals over the sent tensors, in bytes. ``payload_bytes - evaluator_bytes`` is in
    [0, number of tensors); ``header_bytes`` is not in the evaluator's figure."""

    tensors: tuple[TensorBytes, ...]
    payload_bytes: int
    header_bytes: int
    evaluator_bytes: float

    @property
    def total_bytes(self) -> int:
        return self.payload_bytes + self.header_bytes


def check_against_evaluator(packed: Mapping[str, PackedTensor],
                            sent_tensors: Any) -> TransmissionCheck:
    """Check packed tensors against the evaluator's transmission size.

    ``sent_tensors``: an evaluator's metrics with ``sent_tensors`` (the edge/cloud
    family's) or those ``(tensor, bytes)`` pairs themselves, bytes = ``elements * bits /
    8``, fractional. Checks that the packed tensors are exactly the sent ones, that each was
    packed at the evaluator's bit-width (``8 * bytes == elements * bits``), that its
    payload is ``ceil(elements * bits / 8)`` bytes, and hence exceeds the evaluator's
    figure by less than 1 byte. Headers are counted separately. Raises InvalidPlan (one line) on any
    mismatch."""
    sent: Iterable[tuple[str, float]] = getattr(sent_tensors, "sent_tensors", sent_tensors)
    sent = [(str(t), float(b)) for t, b in sent]
    names = [t for t, _ in sent]
    missing = [t for t in names if t not in packed]
    extra = [t for t in packed if t not in set(names)]
    if missing or extra:
        raise InvalidPlan(f"packed tensors do not match the sent tensors: missing {missing}, not sent {extra}")
    rows = []
    for name, ev in sent:
        p = packed[name]
        n = p.elements
        if 8 * ev != n * p.bits:
            raise InvalidPlan(f"tensor '{name}' packed at {p.bits} bits ({n} elements) but the evaluator "
                              f"counts {ev} bytes = {8 * ev / n if n else 0:g} bits per element")
        want = payload_size(n, p.bits)
        if p.payload_bytes != want or not (0 <= p.payload_bytes - ev < 1):
            raise InvalidPlan(f"tensor '{name}' payload is {p.payload_bytes} bytes, expected "
                              f"ceil({n} * {p.bits} / 8) = {want} (evaluator {ev} bytes)")
        rows.append(TensorBytes(name, p.bits, n, p.payload_bytes, p.header_bytes, ev))
    return TransmissionCheck(tuple(rows), sum(r.payload_bytes for r in rows),
                             sum(r.header_bytes for r in rows), sum(r.evaluator_bytes for r in rows))
