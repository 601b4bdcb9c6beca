"""Per-layer quantization-error tables of an ONNX model, measured with onnxruntime on
calibration inputs, by exactly the definitions of the torch bridge
(:mod:`splitopt.torch.quant_error`; computed here with numpy, so no torch is needed):

Error = relative mean squared error ``sum((q - x)^2) / sum(x^2)`` (0 when ``x`` is all
zeros), ``q`` the quantize-dequantize of ``x``, each tensor quantized alone with
everything else in float (the additive error model of the instances, AUTO-SPLIT
Sec. 3). It is the error of the quantized tensor itself, not of the model's final
output.

* Weights: the layer's weight *after batch-norm folding*, symmetric uniform per output
  channel (``scale_c = max|w_c| / (2^(b-1) - 1)``, codes clamped to ``+-(2^(b-1) - 1)``),
  float32 arithmetic; biases are not quantized; 1-D weight tensors (norm affine, fused
  constants, embedding tables) per tensor; several tensors: summed squared error over
  summed squares.
* Activations: each fused layer's output (after its fused activation), asymmetric
  uniform per tensor, min/max calibrated over the calibration inputs with 0 kept exact
  (``lo = min(min x, 0)``, ``hi = max(max x, 0)``, ``scale = (hi - lo) / (2^b - 1)``,
  ``zero = round(-lo / scale)``, ``q = (clip(rint(x / scale) + zero, 0, 2^b - 1) - zero)
  * scale`` in float32), measured on the same inputs. The layers' outputs are read from
  one onnxruntime session whose graph also outputs every layer's output tensor; each
  calibration input runs alone (batch 1), twice (ranges, then errors), as in the torch
  bridge.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from splitopt.onnx.graph import OnnxGraph, OnnxLayer
from splitopt.onnx.runtime import run, session, with_outputs

DEFAULT_BITS = (2, 4, 6, 8)


def quantize_weight(w: np.ndarray, bits: int, per_channel: bool = True) -> np.ndarray:
    """Symmetric uniform quantize-dequantize (float32), per output channel (axis 0) or per tensor."""
    qmax = 2 ** (bits - 1) - 1
    w = np.asarray(w, dtype=np.float32)
    if per_channel and w.ndim >= 2:
        amax = np.abs(w).reshape(w.shape[0], -1).max(axis=1).reshape(-1, *([1] * (w.ndim - 1)))
    else:
        amax = np.abs(w).max() if w.size else np.float32(0)
    amax = np.asarray(amax, dtype=np.float32)
    scale = np.where(amax > 0, amax / np.float32(qmax), np.float32(1)).astype(np.float32)
    return (np.clip(np.rint(w / scale), -qmax, qmax) * scale).astype(np.float32)


def activation_qparams(bits: int, lo: float, hi: float) -> tuple[float, int] | None:
    """Scale and zero point of the asymmetric quantizer for [lo, hi] widened to contain 0;
    None when the widened range is empty (every value quantizes to 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo <= 0:
        return None
    scale = (hi - lo) / (2 ** bits - 1)
    return scale, round(-lo / scale)


def quantize_activation(x: np.ndarray, bits: int, lo: float, hi: float) -> np.ndarray:
    qp = activation_qparams(bits, lo, hi)
    if qp is None:
        return np.zeros_like(x)
    scale, zero = qp
    codes = np.clip(np.rint(x / np.float32(scale)) + np.float32(zero), 0, 2 ** bits - 1).astype(np.float32)
    return ((codes - np.float32(zero)) * np.float32(scale)).astype(np.float32)


def weight_error_table(layer: OnnxLayer, bits: Iterable[int] = DEFAULT_BITS) -> dict[int, float]:
    """Weight error per bit-width ({} when the layer has no weights)."""
    tensors: list[tuple[np.ndarray, bool]] = []
    if layer.weight is not None:
        tensors.append((layer.weight, True))
    tensors += [(p, False) for p in layer.params if p.size > 0]
    if not tensors:
        return {}
    table = {}
    for b in bits:
        err = den = 0.0
        for t, per_channel in tensors:
            t64 = np.asarray(t, dtype=np.float64)
            err += float(np.square(quantize_weight(t, b, per_channel).astype(np.float64) - t64).sum())
            den += float(np.square(t64).sum())
        table[int(b)] = 0.0 if den == 0 else err / den
    return table


def activation_error_tables(graph: OnnxGraph, calibration: Sequence[Mapping[str, np.ndarray]],
                            bits: Iterable[int] = DEFAULT_BITS, threads: int | None = None,
                            ) -> dict[str, dict[int, float]]:
    """Activation error per layer and bit-width on the calibration feeds (one per input)."""
    bits = [int(b) for b in bits]
    outs = [layer.out_tensor for layer in graph.layers]
    names = [layer.name for layer in graph.layers]
    sess = session(with_outputs(graph.model, outs), optimization="basic", threads=threads)
    lo = {n: float("inf") for n in names}
    hi = {n: float("-inf") for n in names}
    for feed in calibration:
        for n, v in zip(names, run(sess, feed, outs)):
            if v.size:
                lo[n] = min(lo[n], float(v.min()))
                hi[n] = max(hi[n], float(v.max()))
    err = {n: {b: 0.0 for b in bits} for n in names}
    den = {n: 0.0 for n in names}
    for feed in calibration:
        for n, v in zip(names, run(sess, feed, outs)):
            v = np.asarray(v, dtype=np.float32)
            den[n] += float(np.square(v.astype(np.float64)).sum())
            for b in bits:
                q = quantize_activation(v, b, lo[n], hi[n])
                err[n][b] += float(np.square((q - v).astype(np.float64)).sum())
    return {n: {b: (0.0 if den[n] == 0 else e / den[n]) for b, e in table.items()} for n, table in err.items()}


def layer_dicts_with_errors(graph: OnnxGraph, calibration: Sequence[Mapping[str, np.ndarray]],
                            bits: Iterable[int] = DEFAULT_BITS, threads: int | None = None) -> list[dict]:
    """The graph's layer dicts with ``weight_error``/``activation_error`` filled in (JSON
    form: bit-width keys as strings), as :func:`splitopt.torch.quant_error.layer_dicts_with_errors`."""
    bits = [int(b) for b in bits]
    act = activation_error_tables(graph, calibration, bits, threads=threads)
    out = []
    for layer in graph.layers:
        d = layer.to_dict()
        w = weight_error_table(layer, bits)
        if d["weights"] > 0 and w:
            d["weight_error"] = {str(b): v for b, v in sorted(w.items())}
        d["activation_error"] = {str(b): v for b, v in sorted(act[layer.name].items())}
        out.append(d)
    return out
