"""A crossing tensor's wire form between agents, on numpy arrays: the rule of
:func:`splitopt.netrun.wire.wire_pack` (``splitopt run --transport tcp``) without torch; both
are :func:`splitopt.core.packing.pack_crossing`.

Float tensors are packed (:func:`splitopt.core.packing.pack_array`) at the plan's sent
bits: at a quantized width over the calibrated range of the layer (the manifest's
``transmit`` ``min``/``max``) widened to the tensor's own min/max, or over the tensor's
own min/max where none was calibrated (the raw input); at 16/32 bits as float16/float32.
Integer tensors (ids) travel exactly: as codes in ``[0, 2^bits - 1]`` with scale 1 at a
quantized width, as floats at 16/32 bits; values that do not fit are an InvalidPlan.
On arrival (:func:`wire_unpack`) a tensor is unpacked and cast back to the sender's
dtype (integers rounded).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from splitopt.core.packing import PackedTensor, pack_crossing, unpack_array


def manifest_ranges(manifest: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """The calibrated (min, max) of each crossing tensor of an export manifest (the
    ``affine`` transmissions that have one)."""
    ranges: dict[str, tuple[float, float]] = {}
    for c in manifest.get("crossings", []):
        for t in c["tensors"]:
            tr = t["transmit"]
            if tr["scheme"] == "affine" and tr.get("min") is not None and tr.get("max") is not None:
                ranges[t["name"]] = (float(tr["min"]), float(tr["max"]))
    return ranges


def wire_pack(name: str, array: np.ndarray, bits: int, ranges: Mapping[str, tuple[float, float]]) -> PackedTensor:
    """The packed form of ``array`` sent at ``bits`` (:func:`splitopt.core.packing.pack_crossing`)."""
    return pack_crossing(name, array, bits, ranges)


def wire_unpack(packed: PackedTensor, dtype: Any) -> np.ndarray:
    """The array as it arrives: unpacked and cast to ``dtype`` (the sender's; integers
    rounded)."""
    values = unpack_array(packed)
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return values.astype(dtype)
    return np.rint(values).astype(dtype)
