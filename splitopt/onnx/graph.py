"""Turn an ONNX model into splitopt's fused layer graph, by the rules of the torch
capture (:mod:`splitopt.torch.capture`), so that a model exported to ONNX and the same
module captured by torch.export give the same layers, MACs, weights and shapes.

Loading: ``onnx.load``; every data input (a graph input that is no initializer) gets a
static shape: the one the model declares, a dynamic leading (batch) dimension taken as 1,
or ``--input-shape`` (``input_shapes``); any other dynamic dimension is a one-line
:class:`~splitopt.core.errors.InvalidModel` naming the input and asking for
``--input-shape``. Then ``onnx.shape_inference.infer_shapes`` (with data propagation)
gives every tensor's shape; the few it cannot (``shape_fill``: one onnxruntime run, see
:func:`splitopt.onnx.runtime.run_shapes`) are measured. Nodes are renamed to unique
names (``<op>_<index>`` for an unnamed or repeated one) so that onnxruntime's profile
and the layers refer to the same nodes. Batch size 1: the leading batch dimension is
dropped from the recorded shapes, as in the torch capture.

Constants: initializers, ``Constant`` nodes, ``Shape``/``Size`` of a tensor (its shape
is static) and every node computed from constants only belong to no layer; their values
are computed on demand (``onnx.reference``) where a layer needs them (weights, biases,
batch-norm statistics).

Fusion (as the torch capture; ``fused`` lists the folded ops):

* **batch-norm folding**: a ``BatchNormalization`` whose input is the raw output of a
  Conv/Gemm/MatMul-with-constant layer read by nothing else is folded into it (folded
  weight ``W * gamma / sqrt(var + eps)`` and bias kept for the error tables; ``weights``
  = weight elements + output channels). The legacy torch exporter in eval mode has
  already folded BN into the Conv, which gives the same counts.
* **bias**: an ``Add`` of a constant with one value per output channel to the raw output
  of such a layer is its bias (torch's ``nn.Linear`` on a 3-D input exports as
  ``MatMul`` + ``Add``), counted in ``weights`` and not listed in ``fused``.
* **producer fusion**: unary activations (Relu, Clip, Sigmoid, HardSwish, Gelu, ...),
  elementwise ops with a constant operand (Add/Sub/Mul/Div/Pow/Max/Min/PRelu/Where),
  Dropout, Identity, Cast and shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze,
  Transpose, Expand, Slice, Gather with constant indices, ...) are fused into the layer
  that produces their input when that tensor has no other consumer (a graph output
  counts as a consumer); else they become layers of their own; shape-only ops on a graph
  input are transparent. A fused elementwise op's constant operand counts in ``weights``
  when it is an initializer of more than one element (torch counts parameters but not
  scalars; ONNX does not tell a parameter from a buffer).
* ``Pad`` is fused into its consumer; ``Split`` outputs are transparent (their
  consumers read the whole tensor).

Layers and MACs per sample: ``Conv`` (``conv``, ``dwconv`` when group == in_channels >
1): out_elements * (in_channels / group) * kernel area; ``ConvTranspose`` (``deconv``):
in_elements * (out_channels / group) * kernel area (the torch capture has no rule for
transposed convolutions and counts one MAC per output element); ``Gemm`` and ``MatMul``
with a constant operand (``linear``): out_elements * in_features; ``MatMul``/``Gemm`` of
two computed tensors (``matmul``): out_elements * K; ``MaxPool``/``AveragePool``/
``LpPool`` (``pool``): out_elements * kernel area; ``GlobalAveragePool``/
``GlobalMaxPool`` and ``Reduce*`` (``pool``): input elements; ``Softmax``/``LogSoftmax``
(``softmax``), ``LayerNormalization``/``GroupNormalization``/``InstanceNormalization``/
``RMSNormalization`` and an unfoldable ``BatchNormalization`` (``norm``), ``Add``/``Sub``
(``add``) and ``Mul``/``Div`` (``mul``) of two computed tensors, ``Max``/``Min``/
``Where`` of computed tensors, ``Gather`` from a constant table with computed indices
(``embedding``: the table is the layer's weights), and an unfused unary op:
out_elements; ``Concat`` (``concat``) and unfused shape-only ops: 0. An unknown op of
the default domain with computed inputs becomes a layer named after it with one MAC per
output element (and a warning), as in the torch capture.

Refused (one-line InvalidModel naming the node): control flow (``If``, ``Loop``,
``Scan``), sequences, recurrent ops (``LSTM``, ``GRU``, ``RNN``), already quantized
graphs (``QuantizeLinear``/``DequantizeLinear`` on computed tensors, ``QLinear*``,
``*Integer``), ops of another domain (custom or ``com.microsoft`` ops), and graphs
whose output is not computed from a data input.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from splitopt.core.errors import InvalidModel

INPUT_NAME = "input"

CONV = {"Conv"}
CONV_TRANSPOSE = {"ConvTranspose"}
GEMM = {"Gemm"}
MATMUL = {"MatMul"}
BATCH_NORM = {"BatchNormalization"}
CAT = {"Concat"}
WINDOW_POOL = {"MaxPool", "AveragePool", "LpPool"}
GLOBAL_POOL = {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}
REDUCE = {"ReduceMean": "mean", "ReduceMax": "amax", "ReduceSum": "sum", "ReduceMin": "amin",
          "ReduceProd": "prod", "ReduceL1": "norm", "ReduceL2": "norm", "ReduceLogSumExp": "logsumexp",
          "ReduceSumSquare": "sum"}
SOFTMAX = {"Softmax", "LogSoftmax"}
NORM = {"LayerNormalization", "GroupNormalization", "InstanceNormalization", "RMSNormalization"}
SHAPE_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Dropout", "Expand", "Slice",
             "Cast", "CastLike", "Gather", "GatherElements", "Tile", "DepthToSpace", "SpaceToDepth"}
UNARY = {"Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Gelu",
         "Softplus", "Softsign", "Mish", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Erf", "Sin", "Cos",
         "Floor", "Ceil", "Round", "Sign", "ThresholdedRelu", "Shrink", "Swish"}
ADD = {"Add", "Sub"}
MUL = {"Mul", "Div"}
# binary ops that, with one constant operand, are fused as "elementwise by constant"
ELEMENTWISE = ADD | MUL | {"Max", "Min", "Pow", "PRelu", "Where", "Mod"}
PAD = {"Pad"}
SPLIT = {"Split"}
CONSTANT_OF_DATA = {"Shape", "Size"}  # static shapes: constants
REFUSED = {
    "If": "control flow", "Loop": "control flow", "Scan": "control flow",
    "LSTM": "a recurrent op", "GRU": "a recurrent op", "RNN": "a recurrent op",
    "QuantizeLinear": "an already quantized graph", "DequantizeLinear": "an already quantized graph",
    "DynamicQuantizeLinear": "an already quantized graph", "QLinearConv": "an already quantized graph",
    "QLinearMatMul": "an already quantized graph", "ConvInteger": "an already quantized graph",
    "MatMulInteger": "an already quantized graph",
}
#: fused op names as the torch capture spells them, where they differ from op_type.lower()
TORCH_NAMES = {"BatchNormalization": "batch_norm", "Pad": "pad", "Clip": "clamp", "Gelu": "gelu",
               "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid", "LeakyRelu": "leaky_relu",
               "Reshape": "view", "Identity": "identity", "Expand": "expand", "Cast": "to"}


def fused_name(op_type: str) -> str:
    return TORCH_NAMES.get(op_type, op_type.lower())


def _drop_batch(shape: Sequence[int]) -> list[int]:
    """Shape without the leading batch dimension (batch size 1); a scalar becomes [1]."""
    out = list(shape[1:]) if len(shape) > 1 and shape[0] == 1 else list(shape)
    return out or [1]


def parse_input_shape(text: str) -> tuple[int, ...]:
    """``"1,3,224,224"`` (also ``1x3x224x224``, ``(1, 3, 224, 224)``) -> a tuple; the leading
    batch dimension must be 1. InvalidModel (one line) otherwise."""
    body = text.strip().strip("()[]").replace("x", ",").replace("X", ",")
    items = [s.strip() for s in body.split(",")]
    if len(items) > 1 and items[-1] == "":
        items = items[:-1]
    if not items or not all(re.fullmatch(r"\d+", s) for s in items) or any(int(s) < 1 for s in items):
        raise InvalidModel(f"--input-shape: '{text}' is not a comma-separated list of positive integers "
                           f"such as 1,3,224,224")
    shape = tuple(int(s) for s in items)
    if shape[0] != 1:
        raise InvalidModel(f"--input-shape: '{text}' must start with the batch size 1 (as in 1,3,224,224), got {shape[0]}")
    return shape


@dataclass
class OnnxLayer:
    """One fused layer. ``out_tensor``: the ONNX tensor holding its (post-fusion) output;
    ``nodes``: the (unique) names of the ONNX nodes computing it, in graph order;
    ``tensors``: every tensor those nodes write; ``weight``/``bias``: the folded weight
    (output channels first) and bias of a conv/linear layer; ``params``: other weight
    tensors (norm affine, constants of fused elementwise ops), quantized per tensor."""

    name: str
    op: str
    inputs: list[str]
    macs: float
    weights: float
    out_tensor: str
    fused: list[str] = field(default_factory=list)
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    params: list[np.ndarray] = field(default_factory=list)
    output_shape: list[int] = field(default_factory=list)
    foldable: bool = False
    nodes: list[str] = field(default_factory=list)
    tensors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The instance JSON form (schema ``$defs/layer``)."""
        out: dict[str, Any] = {"name": self.name, "op": self.op, "inputs": list(self.inputs),
                               "macs": float(self.macs), "weights": int(round(self.weights)),
                               "output_shape": list(self.output_shape)}
        if self.fused:
            out["fused"] = list(self.fused)
        return out


@dataclass
class OnnxGraph:
    """The loaded model (nodes renamed, input shapes fixed), its data inputs with their
    static shapes and ONNX element types, every tensor's shape, and the fused layers."""

    path: str
    model: Any  # onnx.ModelProto
    inputs: dict[str, tuple[int, ...]]  # ONNX input name -> shape with batch
    input_types: dict[str, int]  # ONNX input name -> TensorProto element type
    input_names: dict[str, str]  # ONNX input name -> splitopt tensor name
    shapes: dict[str, tuple[int, ...]]
    layers: list[OnnxLayer]
    input_bits: int = 8

    def graph_dict(self) -> dict[str, Any]:
        """``{"inputs": [...], "layers": [...]}``, the instance's ``graph`` field."""
        return {"inputs": [{"name": self.input_names[n], "shape": _drop_batch(s), "bits": self.input_bits}
                           for n, s in self.inputs.items()],
                "layers": [layer.to_dict() for layer in self.layers]}

    @property
    def total_macs(self) -> float:
        return sum(layer.macs for layer in self.layers)

    @property
    def total_weights(self) -> float:
        return sum(layer.weights for layer in self.layers)


# ----- loading ------------------------------------------------------------------------------

def load_model(path: str | Path):
    """``onnx.load`` with a one-line InvalidModel for a missing or unreadable file."""
    import onnx

    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidModel(f"model file '{path}' not found" if not p.exists() else f"model file '{path}' is not a file")
    try:
        return onnx.load(str(p))
    except Exception as e:  # noqa: BLE001 - a corrupt file is bad input
        first = next((l.strip() for l in str(e).splitlines() if l.strip()), type(e).__name__)
        raise InvalidModel(f"model file '{path}' is not a readable ONNX model: {first}") from e


def _unique_node_names(model) -> None:
    seen: set[str] = set()
    for i, node in enumerate(model.graph.node):
        name = node.name
        if not name or name in seen:
            name = f"{node.op_type}_{i}"
            while name in seen:
                name += "_"
            node.name = name
        seen.add(name)


def _dims(value_info) -> list[int | str | None] | None:
    t = value_info.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]


def data_inputs(model) -> list[Any]:
    """The graph inputs that are not initializers (the model's data inputs)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def fix_input_shapes(model, input_shapes: Mapping[str, Sequence[int]] | Sequence[int] | None,
                     option: str = "--input-shape") -> dict[str, tuple[int, ...]]:
    """Give every data input of ``model`` a static shape (written into the model) and
    return them. ``input_shapes``: one shape (a model with one data input) or a mapping
    input name -> shape. A dynamic leading dimension is the batch: 1."""
    inputs = data_inputs(model)
    if not inputs:
        raise InvalidModel("the ONNX model has no data input (every graph input is an initializer)")
    given: dict[str, tuple[int, ...]] = {}
    if input_shapes is not None:
        if isinstance(input_shapes, Mapping):
            unknown = sorted(set(input_shapes) - {i.name for i in inputs})
            if unknown:
                raise InvalidModel(f"{option}: the model has no data input '{unknown[0]}' "
                                   f"(its inputs: {', '.join(i.name for i in inputs)})")
            given = {k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
        else:
            if len(inputs) != 1:
                raise InvalidModel(f"{option}: the model has {len(inputs)} data inputs "
                                   f"({', '.join(i.name for i in inputs)}); give one shape per input by name")
            given = {inputs[0].name: tuple(int(d) for d in input_shapes)}
    out: dict[str, tuple[int, ...]] = {}
    for vi in inputs:
        dims = _dims(vi)
        if vi.name in given:
            shape = given[vi.name]
            if dims is not None and len(dims) != len(shape):
                raise InvalidModel(f"{option}: input '{vi.name}' has {len(dims)} dimensions, "
                                   f"the shape given has {len(shape)}")
            for i, (d, s) in enumerate(zip(dims or [], shape)):
                if isinstance(d, int) and d > 0 and d != s and i > 0:
                    raise InvalidModel(f"{option}: input '{vi.name}' has dimension {i} fixed at {d} in the model, "
                                       f"the shape given has {s}")
        else:
            if dims is None:
                raise InvalidModel(f"input '{vi.name}' has no declared shape; give it with --input-shape, "
                                   f"e.g. --input-shape 1,3,224,224")
            shape_l = []
            for i, d in enumerate(dims):
                if isinstance(d, int) and d > 0:
                    shape_l.append(d)
                elif i == 0:
                    shape_l.append(1)  # dynamic batch: batch size 1
                else:
                    raise InvalidModel(f"input '{vi.name}' has a dynamic dimension {i} ('{d or '?'}', shape "
                                       f"{[x if isinstance(x, int) and x > 0 else (x or '?') for x in dims]}); "
                                       f"give a static shape with --input-shape, e.g. --input-shape 1,3,224,224")
            shape = tuple(shape_l)
        if shape and shape[0] != 1:
            raise InvalidModel(f"input '{vi.name}' has batch size {shape[0]}; profiling needs batch size 1 "
                               f"(give --input-shape 1,...)")
        tshape = vi.type.tensor_type.shape
        while len(tshape.dim) < len(shape):
            tshape.dim.add()
        for d, s in zip(tshape.dim, shape):
            d.Clear()
            d.dim_value = int(s)
        out[vi.name] = shape
    return out


def infer_shapes(model) -> tuple[Any, dict[str, tuple[int, ...]], dict[str, int]]:
    """``(inferred model, static shapes, element types)`` of every tensor whose shape
    ``onnx.shape_inference.infer_shapes`` determines (strict off, data propagation on)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as e:  # noqa: BLE001 - a model onnx rejects is bad input
        first = next((l.strip() for l in str(e).splitlines() if l.strip()), type(e).__name__)
        raise InvalidModel(f"ONNX shape inference failed: {first}") from e
    shapes: dict[str, tuple[int, ...]] = {}
    types: dict[str, int] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        dims = _dims(vi)
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
        if dims is None:
            continue
        static = [d for d in dims if isinstance(d, int)]
        if len(static) == len(dims) and (all(d > 0 for d in static) or 0 in static):
            shapes[vi.name] = tuple(static)  # with a 0: an empty tensor
    for init in g.initializer:
        shapes[init.name] = tuple(int(d) for d in init.dims)
        types[init.name] = init.data_type
    return inferred, shapes, types


def load(path: str | Path, input_shapes: Mapping[str, Sequence[int]] | Sequence[int] | None = None,
         shape_fill: Callable[[Any, dict[str, tuple[int, ...]], list[str]], dict[str, tuple[int, ...]]] | None = None,
         input_bits: int = 8) -> OnnxGraph:
    """Load ``path`` and build its fused layer graph (see module docstring).

    ``shape_fill(model, input shapes, tensor names)`` returns the shapes of tensors that
    shape inference left unknown (by running the model); without it such a tensor is a
    one-line InvalidModel."""
    model = load_model(path)
    _unique_node_names(model)
    inputs = fix_input_shapes(model, input_shapes)
    _, shapes, types = infer_shapes(model)
    for name, shape in inputs.items():
        shapes[name] = shape
    input_types = {n: types.get(n, 1) for n in inputs}
    walker = _Walker(model, inputs, shapes)
    needed = walker.unknown_shapes()
    if needed:
        if shape_fill is None:
            raise InvalidModel(f"shape inference cannot tell the shape of tensor '{needed[0]}'; "
                               f"give a static --input-shape")
        shapes.update(shape_fill(model, inputs, needed))
    layers = walker.run()
    return OnnxGraph(path=str(path), model=model, inputs=inputs, input_types=input_types,
                     input_names=dict(walker.input_names), shapes=shapes, layers=layers, input_bits=input_bits)


# ----- the walk ------------------------------------------------------------------------------

def _attr(node, name: str, default: Any = None) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _scope(node_name: str) -> str:
    """The module path of a node named by torch's exporter (``/layer1/layer1.0/conv1/Conv``
    -> ``layer1.0.conv1``): scope components are module names whose list indices repeat
    the parent's name (``layer1``, ``layer1.0``); the last component is the op. ``""``
    for a name without scopes."""
    if not node_name.startswith("/"):
        return ""
    parts = [p for p in node_name.split("/")[1:-1] if p]
    path: list[str] = []
    for part in parts:
        atoms = part.split(".")
        if path and len(atoms) > 1 and not atoms[0].isdigit() and all(a.isdigit() for a in atoms[1:]):
            stem = path[-1].split(".")
            while stem and stem[-1].isdigit():
                stem.pop()
            if stem and stem[-1] == atoms[0]:  # a list item: its name repeats the list's
                path[-1] = ".".join(stem + atoms[1:])
                continue
        path.append(part)
    return ".".join(path)


class _Walker:
    def __init__(self, model, inputs: Mapping[str, tuple[int, ...]], shapes: dict[str, tuple[int, ...]]):
        self.model = model
        self.shapes = shapes
        g = model.graph
        self.inits = {i.name: i for i in g.initializer}
        self.const_nodes: dict[str, Any] = {}  # tensor -> node computing it from constants
        self.const_cache: dict[str, np.ndarray | None] = {}
        self.owner: dict[str, str] = {}  # data tensor -> splitopt tensor name (input or layer)
        self.pending: dict[str, list[str]] = {}
        self.layers: list[OnnxLayer] = []
        self.by_name: dict[str, OnnxLayer] = {}
        self.input_names: dict[str, str] = {}
        names = list(inputs)
        for n in names:
            self.input_names[n] = INPUT_NAME if len(names) == 1 else re.sub(r"[^0-9A-Za-z_.]", "_", n)
        self.names: set[str] = set(self.input_names.values())
        self.consumers: dict[str, int] = {}
        for node in g.node:
            for t in dict.fromkeys(i for i in node.input if i):
                self.consumers[t] = self.consumers.get(t, 0) + 1
        for o in g.output:
            self.consumers[o.name] = self.consumers.get(o.name, 0) + 1
        self.graph_inputs = list(inputs)

    # ----- constants ---------------------------------------------------------------------------
    def is_const(self, t: str) -> bool:
        return t in self.inits or t in self.const_nodes

    def value(self, t: str) -> np.ndarray | None:
        """The value of constant tensor ``t`` (None if it cannot be computed)."""
        if not t:
            return None
        if t in self.const_cache:
            return self.const_cache[t]
        out: np.ndarray | None = None
        if t in self.inits:
            import onnx.numpy_helper

            out = onnx.numpy_helper.to_array(self.inits[t])
        elif t in self.const_nodes:
            node = self.const_nodes[t]
            if node.op_type in CONSTANT_OF_DATA:
                shape = self.shapes.get(node.input[0])
                if shape is not None:
                    out = np.array(shape if node.op_type == "Shape" else math.prod(shape), dtype=np.int64)
                    if node.op_type == "Shape":
                        start, end = _attr(node, "start", 0), _attr(node, "end", None)
                        out = out[start:end]
            else:
                out = self._evaluate(node, t)
        self.const_cache[t] = out
        return out

    def _evaluate(self, node, t: str) -> np.ndarray | None:
        try:
            from onnx.reference import ReferenceEvaluator

            feeds = {}
            for i in node.input:
                if i:
                    v = self.value(i)
                    if v is None:
                        return None
                    feeds[i] = v
            results = ReferenceEvaluator(node).run(None, feeds)
            for o, r in zip(node.output, results):
                self.const_cache[o] = np.asarray(r)
            return self.const_cache.get(t)
        except Exception:  # noqa: BLE001 - an op the reference evaluator lacks: unknown value
            return None

    # ----- helpers -------------------------------------------------------------------------------
    def shape(self, t: str) -> tuple[int, ...]:
        return self.shapes[t]

    def unknown_shapes(self) -> list[str]:
        """Data tensors (outputs of nodes reading a data tensor) shape inference left
        unknown: a dry pass over the graph's data flow."""
        data = set(self.graph_inputs)
        out = []
        for node in self.model.graph.node:
            if node.op_type in CONSTANT_OF_DATA or not any(i in data for i in node.input if i):
                continue
            for o in node.output:
                if o:
                    data.add(o)
                    if o not in self.shapes:
                        out.append(o)
        return out

    def data_args(self, node) -> list[str]:
        return list(dict.fromkeys(i for i in node.input if i and i in self.owner))

    def producer_layer(self, x: str) -> OnnxLayer | None:
        owner = self.owner.get(x)
        layer = self.by_name.get(owner) if owner else None
        if layer is None or layer.out_tensor != x or self.consumers.get(x, 0) != 1:
            return None
        return layer

    def fresh_name(self, node, kind: str, own_module: bool) -> str:
        path = _scope(node.name)
        base = path if own_module and path else (f"{path}.{kind}" if path else kind)
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def new_layer(self, node, op: str, kind: str, inputs: list[str], macs: float, weights: float = 0.0,
                  own_module: bool = False) -> OnnxLayer:
        name = self.fresh_name(node, kind, own_module)
        fused: list[str] = []
        for a in inputs:
            fused.extend(self.pending.get(a, []))
        layer = OnnxLayer(name=name, op=op, inputs=list(dict.fromkeys(self.owner[a] for a in inputs)),
                          macs=float(macs), weights=float(weights), out_tensor=node.output[0], fused=fused)
        self.layers.append(layer)
        self.by_name[name] = layer
        self._own(node, layer)
        return layer

    def _own(self, node, layer: OnnxLayer) -> None:
        layer.nodes.append(node.name)
        for o in node.output:
            if o:
                self.owner[o] = layer.name
                layer.tensors.append(o)

    def fuse(self, node, layer: OnnxLayer, name: str) -> None:
        layer.fused.append(name)
        layer.out_tensor = node.output[0]
        params = self._params(node)
        layer.params.extend(params)
        layer.weights += float(sum(p.size for p in params))
        layer.foldable = False
        self._own(node, layer)

    def _params(self, node) -> list[np.ndarray]:
        """Initializers of more than one element read by an elementwise op (torch:
        parameters such as a layer-scale gamma; scalars are not counted)."""
        out = []
        for i in dict.fromkeys(i for i in node.input if i and i in self.inits):
            v = self.value(i)
            if v is not None and v.size > 1 and np.issubdtype(v.dtype, np.floating):
                out.append(v.astype(np.float32))
        return out

    # ----- main loop -----------------------------------------------------------------------------
    def run(self) -> list[OnnxLayer]:
        for name in self.graph_inputs:
            self.owner[name] = self.input_names[name]
        for node in self.model.graph.node:
            self.visit(node)
        for out in self.model.graph.output:
            if out.name not in self.owner:
                raise InvalidModel(f"graph output '{out.name}' is not computed from the model's input")
        if not self.layers:
            raise InvalidModel("the ONNX model has no layer (its outputs are its inputs)")
        for layer in self.layers:
            layer.output_shape = _drop_batch(self.shape(layer.out_tensor))
        return self.layers

    def visit(self, node) -> None:
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            raise InvalidModel(f"node '{node.name}': op {node.domain}.{op} of another domain is not supported "
                               f"(export with standard ONNX ops)")
        data = self.data_args(node)
        if not data or op in CONSTANT_OF_DATA:  # computed from constants (or static shapes) only
            for o in node.output:
                if o:
                    self.const_nodes[o] = node
            return
        if op in REFUSED or op.startswith("Sequence") or op.endswith("Integer") or op.startswith("QLinear"):
            why = REFUSED.get(op, "an already quantized graph" if "Integer" in op or "QLinear" in op else "sequences")
            raise InvalidModel(f"node '{node.name}': {op} ({why}) is not supported by the ONNX profiler")
        if op in SPLIT:  # consumers of the pieces read the whole tensor
            for o in node.output:
                if o:
                    self.owner[o] = self.owner[data[0]]
                    self.pending[o] = list(self.pending.get(data[0], []))
            return
        out = node.output[0]
        if out not in self.shapes:
            raise InvalidModel(f"node '{node.name}': the shape of its output '{out}' is unknown; "
                               f"give a static --input-shape")
        out_el = math.prod(self.shape(out))
        x = data[0]

        if op in CONV:
            self._conv(node, x, out_el)
        elif op in CONV_TRANSPOSE:
            self._conv_transpose(node, x)
        elif op in GEMM or op in MATMUL:
            self._matmul(node, data, out_el)
        elif op in BATCH_NORM:
            self._batch_norm(node, x, out_el)
        elif op in CAT:
            self.new_layer(node, "concat", "concat", data, 0)
        elif op in WINDOW_POOL:
            window = math.prod(_attr(node, "kernel_shape", [1]))
            self.new_layer(node, "pool", "pool", [x], out_el * window, own_module=True)
        elif op in GLOBAL_POOL:
            self.new_layer(node, "pool", "pool", [x], math.prod(self.shape(x)), own_module=True)
        elif op in REDUCE:
            self.new_layer(node, "pool", REDUCE[op], [x], math.prod(self.shape(x)))
        elif op in SOFTMAX:
            self.new_layer(node, "softmax", "softmax", [x], out_el, own_module=True)
        elif op in NORM:
            params = [v.astype(np.float32) for v in (self.value(i) for i in node.input[1:3] if i and self.is_const(i))
                      if v is not None]
            layer = self.new_layer(node, "norm", "norm", [x], out_el, sum(p.size for p in params), own_module=True)
            layer.params = params
        elif op == "Gather" and node.input[0] not in self.owner:  # table lookup with computed indices
            table = self.value(node.input[0])
            params = [table.astype(np.float32)] if table is not None and np.issubdtype(table.dtype, np.floating) else []
            layer = self.new_layer(node, "embedding", "embedding", data, out_el, sum(p.size for p in params))
            layer.params = params
        elif op in PAD:
            self.owner[out] = self.owner[x]
            self.pending[out] = self.pending.get(x, []) + ["pad"]
        elif op in ELEMENTWISE and len(data) >= 2:
            kind = "add" if op in ADD else "mul" if op in MUL else {"Max": "maximum", "Min": "minimum"}.get(op, op.lower())
            self.new_layer(node, kind, kind, data, out_el)
        elif op in ADD and self._bias(node, x):
            pass
        elif op in SHAPE_OPS or op in UNARY or op in ELEMENTWISE:
            self._fusible(node, op, x, out_el)
        else:
            warnings.warn(f"ONNX profile: unknown op '{op}' (node '{node.name}') kept as a layer with one MAC per "
                          f"output element")
            self.new_layer(node, op.lower(), op.lower(), data, out_el)

    # ----- op rules --------------------------------------------------------------------------------
    def _const_input(self, node, i: int) -> np.ndarray | None:
        if len(node.input) <= i or not node.input[i]:
            return None
        return self.value(node.input[i]) if self.is_const(node.input[i]) else None

    def _conv(self, node, x: str, out_el: int) -> None:
        w = self._const_input(node, 1)
        b = self._const_input(node, 2)
        group = int(_attr(node, "group", 1))
        in_ch = self.shape(x)[1]
        w_shape = w.shape if w is not None else self.shape(node.input[1])
        macs = out_el * math.prod(w_shape[1:])
        op = "dwconv" if group == in_ch and group > 1 else "conv"
        weights = (w.size if w is not None else 0) + (b.size if b is not None else 0)
        layer = self.new_layer(node, op, op, self.data_args(node), macs, weights, own_module=True)
        if w is not None:
            layer.weight = w.astype(np.float32)
            layer.bias = b.astype(np.float32).reshape(-1) if b is not None else None
            layer.foldable = True

    def _conv_transpose(self, node, x: str) -> None:
        w = self._const_input(node, 1)
        b = self._const_input(node, 2)
        w_shape = w.shape if w is not None else self.shape(node.input[1])
        group = int(_attr(node, "group", 1))
        macs = math.prod(self.shape(x)) * math.prod(w_shape[1:])
        weights = (w.size if w is not None else 0) + (b.size if b is not None else 0)
        layer = self.new_layer(node, "deconv", "deconv", self.data_args(node), macs, weights, own_module=True)
        if w is not None:  # [C_in, C_out/g, k...] -> output channels first
            c_in, c_out_g = w.shape[0], w.shape[1]
            wg = w.reshape(group, c_in // group, c_out_g, *w.shape[2:]).swapaxes(1, 2)
            layer.weight = wg.reshape(group * c_out_g, c_in // group, *w.shape[2:]).astype(np.float32)
            layer.bias = b.astype(np.float32).reshape(-1) if b is not None else None
            layer.foldable = True

    def _matmul(self, node, data: list[str], out_el: int) -> None:
        a, b = node.input[0], node.input[1]
        trans_a = node.op_type == "Gemm" and int(_attr(node, "transA", 0))
        trans_b = node.op_type == "Gemm" and int(_attr(node, "transB", 0))
        if a in self.owner and b not in self.owner and self.is_const(b) and not trans_a:
            w = self.value(b)
            if w is not None and w.ndim == 2:
                alpha = float(_attr(node, "alpha", 1.0)) if node.op_type == "Gemm" else 1.0
                w = (w if trans_b else w.T) * alpha  # [out_features, in_features]
                c = self._const_input(node, 2) if node.op_type == "Gemm" else None
                if c is not None:
                    c = (c * float(_attr(node, "beta", 1.0))).astype(np.float32)
                    if c.size != w.shape[0]:
                        c = np.broadcast_to(c.reshape(-1) if c.size == 1 else c, (w.shape[0],)).copy()
                macs = out_el * w.shape[1]
                layer = self.new_layer(node, "linear", "linear", [a], macs, w.size + (c.size if c is not None else 0),
                                       own_module=True)
                layer.weight = w.astype(np.float32)
                layer.bias = c.reshape(-1) if c is not None else None
                layer.foldable = True
                return
        a_shape = self.shape(a)
        k = a_shape[-2] if trans_a else a_shape[-1]
        self.new_layer(node, "matmul", "matmul", data, out_el * k)

    def _bias(self, node, x: str) -> bool:
        """An Add of one constant per output channel to the raw output of a conv/linear
        layer: that layer's bias. True if absorbed."""
        layer = self.producer_layer(x)
        if layer is None or not layer.foldable or layer.weight is None or node.op_type != "Add":
            return False
        other = [i for i in node.input if i and i != x]
        if len(other) != 1 or not self.is_const(other[0]):
            return False
        b = self.value(other[0])
        c = layer.weight.shape[0]
        if b is None or b.size != c:
            return False
        out_shape = self.shapes.get(node.output[0])
        if out_shape is None or out_shape != self.shapes.get(x):
            return False
        bshape = tuple(int(d) for d in b.shape)
        # the constant runs along the channel axis: last axis (linear) or axis 1 (conv)
        if layer.op == "linear":
            if bshape[-1:] != (c,):
                return False
        elif len(bshape) < len(out_shape) - 1 or [d for d in bshape if d != 1] != [c] or \
                bshape[len(bshape) - (len(out_shape) - 1)] != c:
            return False
        had = layer.bias is not None
        layer.bias = (np.zeros(c, np.float32) if layer.bias is None else layer.bias) + b.astype(np.float32).reshape(-1)
        if not had:
            layer.weights += c
        layer.out_tensor = node.output[0]
        self._own(node, layer)
        return True

    def _batch_norm(self, node, x: str, out_el: int) -> None:
        gamma, beta, mean, var = (self._const_input(node, i) for i in (1, 2, 3, 4))
        eps = float(_attr(node, "epsilon", 1e-5))
        layer = self.producer_layer(x)
        if layer is not None and layer.foldable and mean is not None and var is not None and layer.weight is not None:
            c = mean.size
            scale = (np.ones(c, np.float32) if gamma is None else gamma.astype(np.float32)) / \
                np.sqrt(var.astype(np.float32) + np.float32(eps))
            shift = np.zeros(c, np.float32) if beta is None else beta.astype(np.float32)
            w = layer.weight
            bias = layer.bias if layer.bias is not None else np.zeros(c, np.float32)
            layer.weight = w * scale.reshape(-1, *([1] * (w.ndim - 1)))
            layer.bias = (bias - mean.astype(np.float32)) * scale + shift
            layer.weights = float(w.size + c)
            layer.fused.append("batch_norm")
            layer.out_tensor = node.output[0]
            layer.foldable = False
            self._own(node, layer)
            return
        c = self.shape(node.output[0])[1]
        layer = self.new_layer(node, "norm", "batch_norm", [x], out_el, 2 * c, own_module=True)
        if mean is not None and var is not None:  # inference BN = per-channel scale and shift
            scale = (np.ones(c, np.float32) if gamma is None else gamma.astype(np.float32)) / \
                np.sqrt(var.astype(np.float32) + np.float32(eps))
            shift = (np.zeros(c, np.float32) if beta is None else beta.astype(np.float32)) - mean * scale
            layer.params = [scale.astype(np.float32), shift.astype(np.float32)]

    def _fusible(self, node, op: str, x: str, out_el: int) -> None:
        name = fused_name(op)
        layer = self.producer_layer(x)
        if layer is not None:
            self.fuse(node, layer, name)
            return
        if self.owner[x] in self.input_names.values() and op in SHAPE_OPS:
            for o in node.output:
                if o:
                    self.owner[o] = self.owner[x]  # a view of the raw input: transparent
            return
        macs = 0 if op in SHAPE_OPS else out_el
        params = self._params(node)
        layer = self.new_layer(node, name, name, [x], macs, sum(p.size for p in params))
        layer.params = params
