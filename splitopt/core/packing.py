"""Quantize and bit-pack the tensors a plan sends across a cut, on numpy arrays (no torch).

The torch bridge's :mod:`splitopt.torch.packing` wraps these functions for torch tensors
(same bytes); the device agent (:mod:`splitopt.agents`) uses them directly, since an agent
may run with the ``onnx`` extra alone. ``formulations/packing.md`` has the full
description of the format.

* **quantized widths 1..8 bits**: asymmetric uniform quantization per tensor
  (:func:`activation_qparams`, :func:`array_codes`) to unsigned integer codes in
  ``[0, 2^bits - 1]``; the codes of the tensor in row-major (C) order are packed densely
  into one little-endian bit stream: bit ``j`` of code ``i`` is stream bit
  ``i * bits + j``, stored in payload byte ``(i * bits + j) // 8`` at bit position
  ``(i * bits + j) % 8`` (LSB = position 0). Widths that do not divide 8 (3, 5, 6, 7)
  straddle byte boundaries; the last byte is zero-padded. Payload:
  ``ceil(n * bits / 8)`` bytes for ``n`` elements. Dequantized value:
  ``(code - zero_point) * scale``.
* **pass-through widths 16 and 32 bits**: the values as little-endian IEEE float16 /
  float32 (no scale, no zero point), ``n * 2`` / ``n * 4`` payload bytes.

Header (little-endian, what :meth:`PackedTensor.to_bytes` writes before the payload):
``uint8 bits``, ``uint8 ndim``, ``ndim x uint32`` shape dims, and for quantized widths
``float32 scale`` + ``int32 zero_point``: ``2 + 4 * ndim (+ 8)`` bytes.
"""

from __future__ import annotations

import math
import numbers
import struct
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from splitopt.core.errors import InvalidPlan

#: bit-widths quantized to unsigned integer codes and bit-packed
QUANTIZED_BITS = (1, 2, 3, 4, 5, 6, 7, 8)
#: bit-widths sent as IEEE floats (no quantization): 16 -> float16, 32 -> float32
PASS_THROUGH_BITS = (16, 32)
SUPPORTED_BITS = QUANTIZED_BITS + PASS_THROUGH_BITS

#: little-endian IEEE half / single of the pass-through widths
FLOAT_DTYPE = {16: "<f2", 32: "<f4"}


def check_bits(bits: Any) -> int:
    """``bits`` as an int if the packer supports it, else InvalidPlan (one line naming the
    bit-width and the supported set)."""
    if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or int(bits) not in SUPPORTED_BITS:
        raise InvalidPlan(
            f"unsupported bit-width {bits!r} for packing a transmitted tensor: "
            f"supported bit-widths are {', '.join(map(str, SUPPORTED_BITS))}"
        )
    return int(bits)


def activation_qparams(bits: int, lo: float, hi: float) -> tuple[float, int] | None:
    """Scale (value units per code step) and zero point (code of the value 0) of the
    asymmetric ``bits``-bit quantizer for the range [lo, hi] widened to contain 0:
    ``scale = (hi - lo) / (2^bits - 1)``, ``zero = round(-lo / scale)``. None when the
    widened range is empty (lo = hi = 0): every value then quantizes to 0."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo <= 0:
        return None
    levels = 2 ** bits - 1
    scale = (hi - lo) / levels
    zero = round(-lo / scale)
    return scale, zero


def array_codes(x: np.ndarray, bits: int, scale: float, zero: int) -> np.ndarray:
    """Integer codes ``clamp(round(x / scale) + zero, 0, 2^bits - 1)`` of ``x`` (same
    float dtype, integer-valued; rounding half to even)."""
    return np.clip(np.rint(x / float(scale)) + int(zero), 0, 2 ** bits - 1)


@dataclass(frozen=True)
class PackedTensor:
    """One transmitted tensor. ``bits``: bits per element (1..8 quantized, 16/32 float);
    ``shape``: the original shape; ``scale`` (float32-representable, value per code step)
    and ``zero_point`` (code of 0.0) for quantized widths, None for 16/32; ``payload``: the
    packed elements (see the module docstring)."""

    bits: int
    shape: tuple[int, ...]
    scale: float | None
    zero_point: int | None
    payload: bytes

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def payload_bytes(self) -> int:
        """Payload size in bytes: ``ceil(elements * bits / 8)``."""
        return len(self.payload)

    @property
    def header_bytes(self) -> int:
        """Header size in bytes: 1 (bits, uint8) + 1 (ndim, uint8) + 4 per shape dim
        (uint32), + 4 (scale, float32) + 4 (zero point, int32) for quantized widths."""
        return 2 + 4 * len(self.shape) + (8 if self.bits in QUANTIZED_BITS else 0)

    @property
    def total_bytes(self) -> int:
        """Header + payload, in bytes: the length of :meth:`to_bytes`."""
        return self.header_bytes + self.payload_bytes

    def to_bytes(self) -> bytes:
        """Header followed by payload (the wire form; ``total_bytes`` long)."""
        if len(self.shape) > 255 or any(d < 0 or d >= 2 ** 32 for d in self.shape):
            raise ValueError(f"shape {self.shape} cannot be encoded (at most 255 dims, each < 2^32)")
        head = struct.pack(f"<BB{len(self.shape)}I", self.bits, len(self.shape), *self.shape)
        if self.bits in QUANTIZED_BITS:
            head += struct.pack("<fi", self.scale, self.zero_point)
        return head + self.payload

    @classmethod
    def from_bytes(cls, data: bytes) -> "PackedTensor":
        """Parse :meth:`to_bytes` output; ValueError if truncated or of the wrong length,
        InvalidPlan for an unsupported bit-width field."""
        data = bytes(data)
        if len(data) < 2:
            raise ValueError(f"packed tensor of {len(data)} bytes is shorter than the 2-byte header start")
        bits, ndim = check_bits(data[0]), data[1]
        off = 2 + 4 * ndim
        if len(data) < off:
            raise ValueError(f"packed tensor of {len(data)} bytes is shorter than its {off}-byte shape header")
        shape = tuple(struct.unpack_from(f"<{ndim}I", data, 2))
        scale = zero = None
        if bits in QUANTIZED_BITS:
            if len(data) < off + 8:
                raise ValueError(f"packed tensor of {len(data)} bytes is shorter than its {off + 8}-byte header")
            scale, zero = struct.unpack_from("<fi", data, off)
            off += 8
        want = payload_size(math.prod(shape), bits)
        if len(data) - off != want:
            raise ValueError(f"packed tensor payload is {len(data) - off} bytes, expected {want} "
                             f"for shape {shape} at {bits} bits")
        return cls(bits, shape, scale, zero, data[off:])


def payload_size(elements: int, bits: int) -> int:
    """Payload bytes of ``elements`` values at ``bits`` bits: ``ceil(elements * bits / 8)``."""
    return -(-elements * bits // 8)


def float32_of(v: float) -> float:
    """``v`` rounded to float32 (what the header stores)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def pack_codes(codes: np.ndarray, bits: int) -> bytes:
    """Dense LSB-first little-endian bit stream of uint8 ``codes`` < 2^bits."""
    if bits == 8:
        return codes.tobytes()
    stream = np.unpackbits(codes.reshape(-1, 1), axis=1, bitorder="little")[:, :bits]
    return np.packbits(stream.reshape(-1), bitorder="little").tobytes()


def unpack_codes_of(payload: bytes, n: int, bits: int) -> np.ndarray:
    """The ``n`` uint8 codes of a ``bits``-bit stream (the inverse of :func:`pack_codes`)."""
    buf = np.frombuffer(payload, dtype=np.uint8)
    if bits == 8:
        return buf[:n].copy()
    stream = np.unpackbits(buf, count=n * bits, bitorder="little").reshape(n, bits)
    return np.packbits(stream, axis=1, bitorder="little").reshape(n)


def pack_array(x: np.ndarray, bits: int, lo: float | None = None, hi: float | None = None) -> PackedTensor:
    """Quantize the numpy array ``x`` to ``bits`` bits per element and pack it.

    Quantized widths (1..8): ``x`` as float32, range [lo, hi] (default: min/max of ``x``;
    widened to contain 0), scale/zero point from :func:`activation_qparams` with the
    scale rounded to float32, codes from :func:`array_codes` (values outside the range
    saturate), packed ``ceil(n * bits / 8)`` bytes. Pass-through widths 16/32: ``x`` cast
    to float16/float32 (lo/hi ignored; integer and bool arrays through float64). An
    all-zero range gives scale 0.0, zero point 0 and all-zero codes.

    Raises InvalidPlan for an unsupported ``bits``; ValueError for non-finite values or
    range at a quantized width, ``lo > hi``, or finite values beyond the float16 range."""
    bits = check_bits(bits)
    x = np.asarray(x)
    shape = tuple(int(d) for d in x.shape)
    n = x.size
    if bits in PASS_THROUGH_BITS:
        src = x if x.dtype in (np.float16, np.float32, np.float64) else x.astype(np.float64)
        with np.errstate(over="ignore"):
            y = src.astype(FLOAT_DTYPE[bits], order="C")
        if bits == 16 and bool((np.isinf(y) & np.isfinite(src)).any()):
            raise ValueError("tensor has finite values beyond the float16 range (|x| > 65504); send it at 32 bits")
        return PackedTensor(bits, shape, None, None, y.tobytes())

    a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if n and not bool(np.isfinite(a).all()):
        raise ValueError(f"cannot quantize a tensor with non-finite values to {bits} bits")
    if lo is None:
        lo = float(a.min()) if n else 0.0
    if hi is None:
        hi = float(a.max()) if n else 0.0
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"quantization range [{lo}, {hi}] must be finite with lo <= hi")
    qp = activation_qparams(bits, lo, hi)
    if qp is None:
        return PackedTensor(bits, shape, 0.0, 0, bytes(payload_size(n, bits)))
    scale, zero = float32_of(qp[0]), qp[1]
    codes = array_codes(a, bits, scale, zero).astype(np.uint8)
    return PackedTensor(bits, shape, scale, zero, pack_codes(codes, bits))


def check_payload(p: PackedTensor) -> None:
    """ValueError unless the payload is ``ceil(elements * bits / 8)`` bytes."""
    want = payload_size(p.elements, p.bits)
    if p.payload_bytes != want:
        raise ValueError(f"payload of {p.payload_bytes} bytes does not match shape {p.shape} "
                         f"at {p.bits} bits ({want} bytes)")


def codes_array(p: PackedTensor) -> np.ndarray:
    """The uint8 codes of a quantized-width packed tensor, flat (row-major order)."""
    if p.bits not in QUANTIZED_BITS:
        raise ValueError(f"a {p.bits}-bit packed tensor holds floats, not integer codes")
    check_payload(p)
    return unpack_codes_of(p.payload, p.elements, p.bits)


def unpack_array(p: PackedTensor) -> np.ndarray:
    """The dequantized array (float32, original shape): ``(code - zero_point) * scale``
    for quantized widths, the float16/float32 values widened to float32 otherwise."""
    check_bits(p.bits)
    if p.bits in PASS_THROUGH_BITS:
        check_payload(p)
        arr = np.frombuffer(p.payload, dtype=FLOAT_DTYPE[p.bits])
        return arr.astype(np.float32).reshape(p.shape)
    values = (codes_array(p).astype(np.float32) - np.float32(p.zero_point)) * np.float32(p.scale)
    return values.reshape(p.shape)


def pack_crossing(name: str, x: np.ndarray, bits: int, ranges: Mapping[str, tuple[float, float]]) -> PackedTensor:
    """A crossing tensor's wire form between devices (``splitopt run --transport tcp`` and
    the device agents): a float array at a quantized width over the calibrated range of
    its layer (``ranges[name]``) widened to the array's own min/max, or over its own
    min/max where none was calibrated (the raw input); at 16/32 bits as float16/float32.
    Integer arrays (ids) travel exactly: as codes in ``[0, 2^bits - 1]`` with scale 1 at a
    quantized width, as floats at 16/32 bits; InvalidPlan where their values do not fit."""
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.floating):
        lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
        exact = 2 ** bits - 1 if bits in QUANTIZED_BITS else (2048 if bits == 16 else 2 ** 24)
        if lo < (0 if bits in QUANTIZED_BITS else -exact) or hi > exact:
            raise InvalidPlan(f"tensor '{name}': integer values in [{lo:g}, {hi:g}] are not exact at {bits} bits")
        return pack_array(a, bits, 0.0, float(2 ** bits - 1)) if bits in QUANTIZED_BITS else pack_array(a, bits)
    calibrated = ranges.get(name)
    if calibrated is None:
        return pack_array(a, bits)
    lo, hi = calibrated
    return pack_array(a, bits, min(lo, float(a.min())), max(hi, float(a.max())))

