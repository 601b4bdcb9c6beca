"""Per-layer quantization-error tables measured on a model's real tensors.

Error = relative mean squared error, ``mean((q - x)^2) / mean(x^2)`` (dimensionless; 0
when ``x`` is all zeros), where ``q`` is the quantize-dequantize of ``x``.

Weights (:func:`quantize_weight`): the layer's weight tensor *after batch-norm folding*,
**symmetric uniform, per output channel** (dim 0): ``scale_c = max|w_c| / (2^(b-1) - 1)``,
``q = clamp(round(w / scale_c), -(2^(b-1) - 1), 2^(b-1) - 1) * scale_c`` (2 bits: levels
{-1, 0, 1} * scale). Biases are not quantized (kept at accumulator precision) and not in
the error. Layers whose weights are only 1-D tensors (norm affine, fused scales) use the
same quantizer per tensor.

Activations (:func:`quantize_activation`): each layer's fused output (after the fused
ReLU etc.), **asymmetric uniform, per tensor, min/max calibrated**: over the calibration
inputs take ``lo = min(min x, 0)`` and ``hi = max(max x, 0)`` (so 0 is exact),
``scale = (hi - lo) / (2^b - 1)``, ``zero = round(-lo / scale)``,
``q = (clamp(round(x / scale) + zero, 0, 2^b - 1) - zero) * scale``. The error is measured
on the same calibration inputs (summed squared error over summed squared value).

Each error is that of quantizing one tensor alone, everything else in float: the tables
feed the additive error model of the instances (AUTO-SPLIT Sec. 3).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch.export.graph_signature import InputKind

from splitopt.torch.capture import Capture, CapturedLayer
from splitopt.torch.packing import activation_codes, activation_qparams

DEFAULT_BITS = (2, 4, 6, 8)


def relative_mse(q: torch.Tensor, x: torch.Tensor) -> float:
    """``mean((q - x)^2) / mean(x^2)``; 0 for an all-zero ``x``."""
    den = float(x.double().pow(2).sum())
    return 0.0 if den == 0.0 else float((q.double() - x.double()).pow(2).sum()) / den


def quantize_weight(w: torch.Tensor, bits: int, per_channel: bool = True) -> torch.Tensor:
    """Symmetric uniform quantize-dequantize, per output channel (dim 0) or per tensor."""
    qmax = 2 ** (bits - 1) - 1
    w = w.detach().float()
    if per_channel and w.dim() >= 2:
        amax = w.abs().reshape(w.shape[0], -1).amax(dim=1).reshape(-1, *([1] * (w.dim() - 1)))
    else:
        amax = w.abs().amax()
    scale = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    return torch.clamp(torch.round(w / scale), -qmax, qmax) * scale


def quantize_activation(x: torch.Tensor, bits: int, lo: float, hi: float) -> torch.Tensor:
    """Asymmetric uniform quantize-dequantize of ``x`` with the calibrated range [lo, hi]
    (widened to contain 0). The arithmetic (scale, zero point, codes) is defined once in
    :mod:`splitopt.torch.packing`, which packs the same codes for transmission."""
    qp = activation_qparams(bits, lo, hi)
    if qp is None:
        return torch.zeros_like(x)
    scale, zero = qp
    return activation_codes(x, bits, scale, zero).sub_(zero).mul_(scale)


def weight_error_table(layer: CapturedLayer, bits: Iterable[int] = DEFAULT_BITS) -> dict[int, float]:
    """Weight error per bit-width of a captured layer ({} when it has no weights).
    Conv/linear: the folded weight, per output channel; other weight tensors per tensor;
    the error of several tensors is their summed squared error over summed squares."""
    tensors: list[tuple[torch.Tensor, bool]] = []
    if layer.weight is not None:
        tensors.append((layer.weight, True))
    tensors += [(p, False) for p in layer.params if p.numel() > 0]
    if not tensors:
        return {}
    table = {}
    for b in bits:
        err = den = 0.0
        for t, per_channel in tensors:
            t = t.detach().double()
            err += float((quantize_weight(t, b, per_channel).double() - t).pow(2).sum())
            den += float(t.pow(2).sum())
        table[int(b)] = 0.0 if den == 0 else err / den
    return table


def placeholder_values(program, x: torch.Tensor) -> list[Any]:
    """The positional arguments of the exported ``program``'s graph for user input ``x``:
    ``x`` for the user input, the parameter, buffer and constant tensors for the others
    (in the graph signature's order)."""
    values = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            values.append(x)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = program.state_dict.get(spec.target)
            values.append(program.constants[spec.target] if t is None else t)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            values.append(program.constants[spec.target])
        else:
            raise ValueError(f"unsupported exported input kind {spec.kind}")
    return values


class _Recorder(torch.fx.Interpreter):
    """Runs the exported ATen graph and hands watched node outputs to ``callback``
    right after they are computed (before any later in-place op can change them)."""

    def __init__(self, gm: torch.fx.GraphModule, watch: dict[str, str], callback: Callable[[str, torch.Tensor], object]):
        super().__init__(gm)
        self.watch = watch
        self.callback = callback

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        if n.name in self.watch:
            value = out[0] if isinstance(out, (tuple, list)) else out
            self.callback(self.watch[n.name], value.detach())
        return out


def run_layers(capture: Capture, x: torch.Tensor, callback: Callable[[str, torch.Tensor], object]) -> torch.Tensor:
    """Run the captured program on one batch-1 input ``x``; ``callback(layer name,
    output)`` gets every layer's fused output (what it returns is ignored). Returns the model output."""
    program = capture.program
    watch = {layer.out_node: layer.name for layer in capture.layers}
    with torch.no_grad():
        out = _Recorder(program.graph_module, watch, callback).run(*placeholder_values(program, x))
    return out[0] if isinstance(out, (tuple, list)) else out


def activation_error_tables(capture: Capture, calibration: torch.Tensor,
                            bits: Iterable[int] = DEFAULT_BITS) -> dict[str, dict[int, float]]:
    """Activation error per layer and bit-width, calibrated and measured on the images
    of ``calibration`` (shape (n, ...), run one at a time with batch 1)."""
    bits = [int(b) for b in bits]
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}

    def ranges(name: str, t: torch.Tensor) -> None:
        lo[name] = min(lo.get(name, float("inf")), float(t.min()))
        hi[name] = max(hi.get(name, float("-inf")), float(t.max()))

    for i in range(calibration.shape[0]):
        run_layers(capture, calibration[i:i + 1], ranges)

    err = {layer.name: {b: 0.0 for b in bits} for layer in capture.layers}
    den = {layer.name: 0.0 for layer in capture.layers}

    def errors(name: str, t: torch.Tensor) -> None:
        t = t.float()
        den[name] += float(t.double().square_().sum())
        for b in bits:
            q = quantize_activation(t, b, lo[name], hi[name])
            err[name][b] += float(q.sub_(t).double().square_().sum())

    for i in range(calibration.shape[0]):
        run_layers(capture, calibration[i:i + 1], errors)
    return {n: {b: (0.0 if den[n] == 0 else e / den[n]) for b, e in table.items()} for n, table in err.items()}


def error_tables(capture: Capture, calibration: torch.Tensor,
                 bits: Iterable[int] = DEFAULT_BITS) -> dict[str, dict[str, dict[int, float]]]:
    """``{layer: {"weight_error": {bits: err}, "activation_error": {bits: err}}}``."""
    bits = [int(b) for b in bits]
    act = activation_error_tables(capture, calibration, bits)
    return {layer.name: {"weight_error": weight_error_table(layer, bits), "activation_error": act[layer.name]}
            for layer in capture.layers}


def layer_dicts_with_errors(capture: Capture, calibration: torch.Tensor,
                            bits: Iterable[int] = DEFAULT_BITS) -> list[dict[str, Any]]:
    """The capture's layer dicts with ``weight_error``/``activation_error`` filled in
    (JSON form: bit-width keys as strings)."""
    tables = error_tables(capture, calibration, bits)
    out = []
    for d in capture.layer_dicts():
        t = tables[d["name"]]
        if d["weights"] > 0 and t["weight_error"]:
            d["weight_error"] = {str(b): v for b, v in sorted(t["weight_error"].items())}
        d["activation_error"] = {str(b): v for b, v in sorted(t["activation_error"].items())}
        out.append(d)
    return out
