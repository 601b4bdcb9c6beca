"""A model built in code (``resnet50``, ``mobilenet_v2``, a user factory) as one ONNX file
for an agent to measure, and the map from the layer names the agent reports to the
instance's layer names (on the controller; needs torch and the onnx extra).

Names. An instance profiled from a model built in code (``splitopt profile resnet50``)
names its layers by the torch capture (:func:`splitopt.torch.capture.capture`) passed
through the model's ``rename`` (``layer4.2.conv3``, ``block11.project``); the agent
measures the ONNX file by the ONNX bridge's rules (:mod:`splitopt.onnx.graph`), whose
layers are the capture's layers in the same order, named by the exporter's module scopes
without ``rename`` (and checked equal by op, MACs and output shape in
``tests/test_onnx.py``). :func:`model_onnx` exports the module with the exporter and
opset of ``splitopt export`` (TorchScript exporter, opset
:data:`splitopt.torch.export_parts.ONNX_OPSET`, input named ``input``), reads the file
back with the ONNX bridge, captures the module with ``rename`` and pairs the layers by
position, checking each pair's op, MACs and output shape; a mismatch is one line
(InvalidModel) naming the first differing layer. :func:`model_onnx_by_name` does it for
a model rebuilt by name as ``splitopt run`` and ``splitopt export`` rebuild it.
"""

from __future__ import annotations

import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from splitopt.core.errors import InvalidModel


@dataclass(frozen=True)
class ModelOnnx:
    """``data``: the ONNX file's bytes; ``layer_names``: ONNX bridge layer name ->
    instance layer name (every layer, in the graph's order); ``input_shape``: the input
    shape (batch 1); ``total_macs``: the MACs of every layer together."""

    data: bytes
    layer_names: dict[str, str]
    input_shape: list[int]
    total_macs: float = 0.0


def model_onnx(module, example_input, rename: Callable[[str], str] | None = None) -> ModelOnnx:
    """``module`` on ``example_input`` (batch 1) as ONNX bytes and its layer name map
    (module docstring)."""
    import torch

    from splitopt.onnx.graph import load
    from splitopt.torch.capture import capture
    from splitopt.torch.export_parts import ONNX_OPSET

    module = module.eval()
    with tempfile.TemporaryDirectory(prefix="splitopt_model_onnx_") as tmp:
        path = Path(tmp) / "model.onnx"
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, (example_input,), str(path), dynamo=False, opset_version=ONNX_OPSET,
                                  input_names=["input"], do_constant_folding=True)
        except Exception as e:  # torch's exporter raises many types for an op it cannot translate
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise InvalidModel(f"the model does not export to ONNX (opset {ONNX_OPSET}): {type(e).__name__}: "
                               f"{first}") from None
        data = path.read_bytes()
        graph = load(path)
    captured = capture(module, example_input, rename=rename).layers
    onnx_layers = graph.layers
    if len(onnx_layers) != len(captured):
        raise InvalidModel(f"the ONNX export has {len(onnx_layers)} layers, the torch capture {len(captured)}: "
                           f"their names cannot be paired")
    names: dict[str, str] = {}
    for o, t in zip(onnx_layers, captured):
        if (o.op, float(o.macs), list(o.output_shape)) != (t.op, float(t.macs), list(t.output_shape)):
            raise InvalidModel(f"ONNX layer '{o.name}' ({o.op}, {o.macs:g} MACs, {o.output_shape}) does not match "
                               f"the captured layer '{t.name}' ({t.op}, {t.macs:g} MACs, {t.output_shape}) at the "
                               f"same position")
        names[o.name] = t.name
    return ModelOnnx(data, names, [int(d) for d in example_input.shape], float(sum(t.macs for t in captured)))


def model_onnx_file(path: Path | str, input_shape: Any = None, input_high: int | None = None) -> ModelOnnx:
    """An ONNX file as it is: its bytes, its layers named by the ONNX bridge (the names
    ``splitopt profile MODEL.onnx`` gives them; the map is the identity), the input shape
    (``input_shape``: as ``--input-shape`` for a dynamic input) and its MACs (no torch)."""
    from splitopt.onnx.graph import load
    from splitopt.onnx.profile import read_shape_arg
    from splitopt.onnx.runtime import run_shapes

    def fill(model, inputs, tensors):
        return run_shapes(model, inputs, tensors, high=input_high)

    graph = load(Path(path), read_shape_arg(input_shape), shape_fill=fill)
    shape: tuple[int, ...] = next(iter(graph.inputs.values()), ())
    return ModelOnnx(Path(path).read_bytes(), {l.name: l.name for l in graph.layers}, [int(d) for d in shape],
                     float(sum(l.macs for l in graph.layers)))


def model_onnx_by_name(model: str, seed: int, inst: Any = None, **input_options: Any) -> ModelOnnx:
    """:func:`model_onnx` of ``model`` rebuilt by name (:func:`splitopt.torch.models.build_model`:
    a built-in name or ``PATH.py:FACTORY``; ``input_options``: its input_shape,
    input_dtype, input_high), on its example input."""
    from splitopt.torch.models import build_model

    module, rename, example, _, _ = build_model(model, seed, inst, **input_options)
    return model_onnx(module, example, rename)
