"""Turn an ``nn.Module`` into splitopt's fused layer graph.

The module is exported with ``torch.export.export(module.eval(), (x,), strict=False)`` and
the ATen graph is walked in its (topological) node order. Shapes come from every node's
``meta["val"]``; the batch size is 1 and the leading batch dimension is dropped from the
recorded shapes (``[2048, 7, 7]``, ``[1000]``).

Inference graph optimisations (AUTO-SPLIT Fig. 4b):

* **batch-norm folding**: a batch norm whose input is the raw output of a conv/linear
  node read by nothing else is folded into it; the folded layer has a bias, so its
  ``weights`` count is weight elements + output channels. The folded weight
  ``W * gamma / sqrt(var + eps)`` is kept for the quantization-error tables.
* **producer fusion**: unary activations, elementwise ops with a constant (scalar,
  parameter or buffer), dropout, identity and shape-only ops (view, reshape, flatten,
  clone, contiguous, permute, ...) are fused into the layer that produces their input
  when that tensor has no other consumer; the fused op names are listed in ``fused``
  and the layer's output becomes the fused op's output. On a tensor with several
  consumers they become layers of their own (shape-only ops on the graph input are
  transparent).
* ``pad`` is fused into its *consumer* (it is the consumer's padding): the consumer reads
  the unpadded tensor and lists ``pad`` in ``fused``. Multi-output views (split, chunk,
  unbind) are transparent: their consumers read the whole tensor.

Layers kept: conv (``conv``, ``dwconv`` when groups == in_channels > 1), linear/addmm/mm
with a constant weight (``linear``), products of two computed tensors (``matmul``),
add/sub and mul/div of two computed tensors (``add``/``mul``), cat/stack (``concat``),
max/avg/adaptive pooling and mean/amax (``pool``), softmax (``softmax``), layer/group/rms
norm and unfoldable batch norm (``norm``), fused attention (``attention``), table lookups
(``embedding``: the table counts as its weights, quantized per tensor; a table tied to
another layer's weight, as GPT-2's token embedding and output head, is counted in both; a
lookup whose indices are constants, as GPT-2's position embedding for a fixed input
shape, is a constant and counts nothing).
An unknown op with computed inputs becomes a layer named after the ATen op with one MAC
per output element (and a warning).

MACs per sample: conv = out_elements * (in_channels / groups) * kh * kw; linear =
out_elements * in_features; matmul = out_elements * K; attention = heads * L * S * (E + Ev); pooling = out_elements * window
(global/adaptive pool and mean: input elements); add/mul/softmax/norm, embedding (one
gathered element each) and other elementwise layers = out_elements; concat and shape-only layers = 0. ``weights`` counts
weight and bias elements (after folding) plus the elements of parameters read by fused
elementwise ops. Parameters, buffers and constants are never layer inputs.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.export.graph_signature import InputKind

INPUT_NAME = "input"

CONV = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution"}
LINEAR = {"linear", "addmm", "mm"}
MATMUL = {"bmm", "matmul", "baddbmm"}
ADD = {"add", "sub", "rsub"}
MUL = {"mul", "div"}
CAT = {"cat", "concat", "concatenate", "stack"}
WINDOW_POOL = {"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d"}
ADAPTIVE_POOL = {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "_adaptive_avg_pool2d"}
REDUCE = {"mean", "amax", "sum"}
SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax"}
ATTENTION = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_attention_math"}
NORM = {"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm"}
EMBEDDING = {"embedding", "embedding_bag"}
BATCH_NORM = {"batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm", "_batch_norm_impl_index"}
SHAPE = {
    "view", "reshape", "flatten", "_unsafe_view", "clone", "contiguous", "squeeze", "unsqueeze",
    "permute", "transpose", "t", "expand", "detach", "alias", "identity", "dropout",
    "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "lift_fresh_copy", "to",
    "_to_copy", "type_as", "unflatten", "select", "slice", "narrow",
}
SPLIT = {"split", "split_with_sizes", "chunk", "unbind", "tensor_split"}  # multi-output views
UNARY = {
    "relu", "relu6", "hardtanh", "gelu", "silu", "sigmoid", "tanh", "hardswish", "hardsigmoid",
    "leaky_relu", "elu", "selu", "celu", "mish", "softplus", "clamp", "clamp_min", "clamp_max",
    "neg", "exp", "log", "sqrt", "rsqrt", "abs", "pow", "square", "erf",
}
PAD = {"pad", "constant_pad_nd", "reflection_pad2d", "replication_pad2d"}
# binary ops that, with one constant operand, are fused as "elementwise by constant"
ELEMENTWISE = ADD | MUL | {"maximum", "minimum", "where", "masked_fill"}


def op_name(node: torch.fx.Node) -> str:
    """ATen op name without overload and in-place suffix (``add_.Tensor`` -> ``add``)."""
    target = node.target
    packet = getattr(target, "_overloadpacket", None)
    name = packet.__name__ if packet is not None else getattr(target, "__name__", str(target))
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name


def node_arg(node: torch.fx.Node, name: str, default: Any = None) -> Any:
    """Argument ``name`` of an ATen call node, by schema position or keyword."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return node.kwargs.get(name, default)
    for i, a in enumerate(schema.arguments):
        if a.name == name:
            if i < len(node.args):
                return node.args[i]
            if name in node.kwargs:
                return node.kwargs[name]
            return a.default_value if a.has_default_value() else default
    return default


def arg_node(node: torch.fx.Node, index: int) -> torch.fx.Node:
    """Positional argument ``index`` of ``node``, which the op needs to be a node of the
    graph (a tensor); ValueError otherwise."""
    a = node.args[index]
    if not isinstance(a, torch.fx.Node):
        raise ValueError(f"capture: argument {index} of '{node.name}' ({op_name(node)}) is not a graph tensor")
    return a


def _shape(val: Any) -> tuple[int, ...]:
    if isinstance(val, (tuple, list)):
        val = val[0]
    return tuple(int(d) for d in val.shape)


def _drop_batch(shape: tuple[int, ...]) -> list[int]:
    """Shape without the leading batch dimension (batch size 1); a scalar becomes [1]."""
    out = list(shape[1:]) if len(shape) > 1 and shape[0] == 1 else list(shape)
    return out or [1]


@dataclass
class CapturedLayer:
    """One fused layer while capturing. ``out_node``: fx node holding its (post-fusion)
    output; ``weight``/``bias``: the folded weight and bias tensors (conv/linear);
    ``nodes``: the names of the exported graph's call nodes that compute the layer (its
    own op, the folded batch norm, the fused producer ops and the ``getitem`` outputs of
    these), in graph order. Transparent nodes (``pad``, split pieces, views of the raw
    input) and nodes computed from constants only belong to no layer."""

    name: str
    op: str
    inputs: list[str]
    macs: float
    weights: float
    out_node: str
    module_path: str
    fused: list[str] = field(default_factory=list)
    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    params: list[torch.Tensor] = field(default_factory=list)  # other weight tensors (norm affine, fused scales)
    output_shape: list[int] = field(default_factory=list)
    foldable: bool = False  # raw conv/linear output, BN may still be folded in
    nodes: list[str] = field(default_factory=list)  # exported-graph nodes computing it, in graph order

    def to_dict(self) -> dict[str, Any]:
        """The instance JSON form (schema ``$defs/layer``)."""
        out: dict[str, Any] = {
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "macs": float(self.macs),
            "weights": float(self.weights),
            "output_shape": list(self.output_shape),
        }
        if self.fused:
            out["fused"] = list(self.fused)
        return out


@dataclass
class Capture:
    """The captured graph plus what the quantization-error code needs: the exported
    program and, per layer, its output node and folded weight."""

    program: Any  # torch.export.ExportedProgram
    graph_input: dict[str, Any]
    layers: list[CapturedLayer]

    def layer_dicts(self) -> list[dict[str, Any]]:
        return [layer.to_dict() for layer in self.layers]

    def graph_dict(self) -> dict[str, Any]:
        """``{"inputs": [...], "layers": [...]}``, the instance's ``graph`` field."""
        return {"inputs": [dict(self.graph_input)], "layers": self.layer_dicts()}

    @property
    def total_macs(self) -> float:
        return sum(layer.macs for layer in self.layers)

    @property
    def total_weights(self) -> float:
        return sum(layer.weights for layer in self.layers)


def capture_layers(module: torch.nn.Module, example_input: torch.Tensor, rename: Callable[[str], str] | None = None,
                   input_bits: int = 8) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(layer dicts, graph-input dict)`` of ``module`` on ``example_input`` (batch 1)."""
    cap = capture(module, example_input, rename=rename, input_bits=input_bits)
    return cap.layer_dicts(), dict(cap.graph_input)


def capture(module: torch.nn.Module, example_input: torch.Tensor, rename: Callable[[str], str] | None = None,
            input_bits: int = 8) -> Capture:
    """Export ``module`` and build its fused layer graph (see module docstring).

    ``module`` may also be a ``torch.export.ExportedProgram`` (e.g. loaded from a
    ``.pt2`` file): walked as it is when its input shape is static and that of
    ``example_input``, else its ``.module()`` is exported again on ``example_input``;
    a module made by ``ExportedProgram.module()`` (which refuses ``eval()``) is exported
    as it is.

    ``rename`` maps a default layer name (``<module path>`` or ``<module path>.<op>``)
    to a shorter readable one; clashes get ``_1``, ``_2`` suffixes."""
    if example_input.shape[0] != 1:
        raise ValueError(f"capture expects batch size 1, got input shape {tuple(example_input.shape)}")
    if isinstance(module, torch.export.ExportedProgram):
        if _static_input_shape(module) == tuple(example_input.shape):
            return _Walker(module, rename, input_bits).run()  # a saved program: walked as it is
        module = module.module()  # dynamic or other shapes: exported again on the example input
    module = eval_mode(module)
    with torch.no_grad():
        program = torch.export.export(module, (example_input,), strict=False)
    return _Walker(program, rename, input_bits).run()


def eval_mode(module: torch.nn.Module) -> torch.nn.Module:
    """``module.eval()``; a module made by ``ExportedProgram.module()`` refuses ``eval()``
    (torch: "Calling eval() is not supported yet") and runs the graph it was exported
    with, in the mode it was exported in (batch norms as exported, e.g. in inference
    form): it is returned as it is."""
    try:
        return module.eval()
    except NotImplementedError:
        return module


def _static_input_shape(program) -> tuple[int, ...] | None:
    """The shape of the exported program's single tensor user input, None when it has
    symbolic dimensions or not exactly one tensor input."""
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    users = [node for spec, node in zip(program.graph_signature.input_specs, placeholders)
             if spec.kind == InputKind.USER_INPUT]
    if len(users) != 1 or not isinstance(users[0].meta.get("val"), torch.Tensor):
        return None
    dims = users[0].meta["val"].shape
    return tuple(int(d) for d in dims) if all(isinstance(d, int) for d in dims) else None


def load_exported(path: str) -> tuple[Any, torch.Tensor | None]:
    """``(ExportedProgram, example input or None)`` of a program saved by
    ``torch.export.save`` (a ``.pt2`` file): the example is the first of the saved
    example inputs when it is a tensor, else a zero tensor of the input's static shape
    and dtype, else None (dynamic shapes: the caller gives one). ValueError (one line)
    for a file that is no saved program."""
    try:
        program = torch.export.load(path)
    except Exception as e:  # noqa: BLE001 - any unreadable file
        first = next((l.strip() for l in str(e).splitlines() if l.strip()), "")
        raise ValueError(f"'{path}' is not a program saved by torch.export.save: {type(e).__name__}"
                         f"{': ' + first if first else ''}") from e
    example = None
    saved = getattr(program, "example_inputs", None)
    if saved and saved[0] and isinstance(saved[0][0], torch.Tensor):
        example = saved[0][0]
    else:
        shape = _static_input_shape(program)
        if shape is not None:
            placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
            val = next(node.meta["val"] for spec, node in zip(program.graph_signature.input_specs, placeholders)
                       if spec.kind == InputKind.USER_INPUT)
            example = torch.zeros(shape, dtype=val.dtype)
    return program, example


class _Walker:
    def __init__(self, program: torch.export.ExportedProgram, rename: Callable[[str], str] | None,
                 input_bits: int) -> None:
        self.program = program
        self.rename = rename
        self.input_bits = input_bits
        self.const: dict[str, torch.Tensor | None] = {}  # constant node -> value (None: unknown)
        self.param_nodes: set[str] = set()  # placeholders of parameters (counted as weights)
        self.owner: dict[str, str] = {}  # data node -> tensor name (graph input or layer)
        self.pending: dict[str, list[str]] = {}  # pad node -> ops fused into its consumer
        self.layers: list[CapturedLayer] = []
        self.by_name: dict[str, CapturedLayer] = {}
        self.names: set[str] = {INPUT_NAME}
        self.user_input: str | None = None

    # ----- helpers -----------------------------------------------------------------------
    def is_data(self, a: Any) -> bool:
        return isinstance(a, torch.fx.Node) and a.name in self.owner

    def data_args(self, node: torch.fx.Node) -> list[torch.fx.Node]:
        out: list[torch.fx.Node] = []
        torch.fx.map_arg((node.args, node.kwargs), lambda a: out.append(a) if self.is_data(a) else None)
        return list(dict.fromkeys(out))

    def const_args(self, node: torch.fx.Node) -> list[torch.fx.Node]:
        out: list[torch.fx.Node] = []
        torch.fx.map_arg((node.args, node.kwargs), lambda a: out.append(a) if a.name in self.const else None)
        return list(dict.fromkeys(out))

    def value(self, a: Any) -> Any:
        return self.const.get(a.name) if isinstance(a, torch.fx.Node) else a

    def producer_layer(self, x: torch.fx.Node) -> CapturedLayer | None:
        """The layer x can be fused into: x is that layer's current output and x has no
        other consumer."""
        owner = self.owner.get(x.name)
        layer = self.by_name.get(owner) if owner else None
        if layer is None or layer.out_node != x.name or len(x.users) != 1:
            return None
        return layer

    def fresh_name(self, node: torch.fx.Node, kind: str, own_module: bool) -> tuple[str, str]:
        """A unique layer name from the innermost module path of ``node`` (+ ``.kind``
        unless the node is that module's own op), passed through ``rename``."""
        stack = node.meta.get("nn_module_stack") or {}
        path = ""
        if stack:
            path = re.sub(r"^L\['self'\]\.?", "", str(list(stack.values())[-1][0]))
        if not own_module or not path:
            base = f"{path}.{kind}" if path else kind
        else:
            base = path
        if self.rename is not None:
            base = self.rename(base)
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name, path

    def new_layer(self, node: torch.fx.Node, op: str, kind: str, inputs: list[torch.fx.Node], macs: float,
                  weights: float = 0.0, own_module: bool = False) -> CapturedLayer:
        name, path = self.fresh_name(node, kind, own_module)
        fused: list[str] = []
        for a in inputs:
            fused.extend(self.pending.get(a.name, []))
        layer = CapturedLayer(
            name=name, op=op, inputs=list(dict.fromkeys(self.owner[a.name] for a in inputs)),
            macs=float(macs), weights=float(weights), out_node=node.name, module_path=path, fused=fused,
        )
        self.layers.append(layer)
        self.by_name[name] = layer
        self.owner[node.name] = name
        layer.nodes.append(node.name)
        return layer

    def fuse(self, node: torch.fx.Node, layer: CapturedLayer, name: str) -> None:
        layer.fused.append(name)
        layer.out_node = node.name
        params = self._params(node)
        layer.params.extend(params)
        layer.weights += float(sum(p.numel() for p in params))
        layer.foldable = False
        self.owner[node.name] = layer.name
        layer.nodes.append(node.name)

    # ----- main loop -----------------------------------------------------------------------
    def run(self) -> Capture:
        ep = self.program
        sig = ep.graph_signature
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        for spec, node in zip(sig.input_specs, placeholders):
            if spec.kind == InputKind.USER_INPUT:
                if self.user_input is not None:
                    raise ValueError("capture supports a single tensor input")
                self.user_input = node.name
                self.owner[node.name] = INPUT_NAME
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                t = ep.state_dict.get(spec.target)
                if t is None:
                    t = ep.constants.get(spec.target)
                self.const[node.name] = t
                if spec.kind == InputKind.PARAMETER:
                    self.param_nodes.add(node.name)
            else:
                self.const[node.name] = ep.constants.get(spec.target) if spec.target else None
        for node in ep.graph.nodes:
            if node.op == "get_attr":
                self.const[node.name] = None
            elif node.op == "call_function":
                self.visit(node)
        node_by_name = {n.name: n for n in ep.graph.nodes}
        shape = _shape(node_by_name[self.user_input].meta["val"])
        for layer in self.layers:
            layer.output_shape = _drop_batch(_shape(node_by_name[layer.out_node].meta["val"]))
        graph_input = {"name": INPUT_NAME, "shape": _drop_batch(shape), "bits": self.input_bits}
        return Capture(program=ep, graph_input=graph_input, layers=self.layers)

    def visit(self, node: torch.fx.Node) -> None:
        data = self.data_args(node)
        if not data:  # computed from parameters/constants only
            self.const[node.name] = self._eval_const(node)
            return
        name = op_name(node)
        val = node.meta.get("val")
        if name == "getitem":  # an output of a multi-output op: the same tensor for the graph
            src, idx = arg_node(node, 0), node.args[1]
            layer = self.by_name.get(self.owner[src.name])
            self.owner[node.name] = self.owner[src.name]
            if layer is not None and src.name in layer.nodes:
                layer.nodes.append(node.name)
            if idx == 0 and layer is not None and layer.out_node == src.name:
                layer.out_node = node.name
            return
        if name in SPLIT:  # consumers of the pieces read the whole tensor
            self.owner[node.name] = self.owner[data[0].name]
            self.pending[node.name] = list(self.pending.get(data[0].name, []))
            return
        if isinstance(val, (tuple, list)):  # multi-output ops: the first output is the data
            if not (val and isinstance(val[0], torch.Tensor)):
                return
        elif not isinstance(val, torch.Tensor):  # symbolic sizes, None, ...
            return
        out_el = math.prod(_shape(val))
        x = data[0]

        if name in CONV:
            self._conv(node, x, out_el)
        elif name in LINEAR and len(data) == 1:
            self._linear(node, name, x, out_el)
        elif name in LINEAR | MATMUL:
            a = arg_node(node, 1 if name in {"addmm", "baddbmm"} else 0)
            inner = _shape(a.meta["val"])[-1]  # the summed dimension K
            self.new_layer(node, "matmul", "matmul", data, out_el * inner)
        elif name in ATTENTION:  # softmax(Q K^T) V: L*S*E + L*S*Ev MACs per head
            q, key = _shape(arg_node(node, 0).meta["val"]), _shape(arg_node(node, 1).meta["val"])
            v = _shape(arg_node(node, 2).meta["val"])
            macs = math.prod(q[:-1]) * key[-2] * (q[-1] + v[-1])
            self.new_layer(node, "attention", "attention", data, macs)
        elif name in BATCH_NORM:
            self._batch_norm(node, x, out_el)
        elif name in CAT:
            self.new_layer(node, "concat", "concat", data, 0)
        elif name in WINDOW_POOL:
            k = node_arg(node, "kernel_size")
            window = math.prod(k) if isinstance(k, (list, tuple)) else k
            if isinstance(k, (list, tuple)) and len(k) == 1:
                window = k[0] ** (len(_shape(val)) - 2)
            self.new_layer(node, "pool", "pool", [x], out_el * window, own_module=True)
        elif name in ADAPTIVE_POOL:
            in_shape, out_shape = _shape(x.meta["val"]), _shape(val)
            nsp = len(out_shape) - 2
            window = math.prod(math.ceil(i / o) for i, o in zip(in_shape[-nsp:], out_shape[-nsp:]))
            self.new_layer(node, "pool", "pool", [x], out_el * window, own_module=True)
        elif name in REDUCE:
            self.new_layer(node, "pool", name, [x], math.prod(_shape(x.meta["val"])))
        elif name in SOFTMAX:
            self.new_layer(node, "softmax", "softmax", [x], out_el, own_module=True)
        elif name in NORM:
            params = [t.detach() for t in (self.value(node_arg(node, "weight")), self.value(node_arg(node, "bias")))
                      if isinstance(t, torch.Tensor)]
            layer = self.new_layer(node, "norm", "norm", [x], out_el, sum(p.numel() for p in params), own_module=True)
            layer.params = params
        elif name in EMBEDDING:  # a table lookup: the table is the layer's weights
            table = self.value(node.args[0])
            params = [table.detach()] if isinstance(table, torch.Tensor) else []
            layer = self.new_layer(node, "embedding", name, data, out_el, sum(p.numel() for p in params))
            layer.params = params
        elif name in PAD:
            self.owner[node.name] = self.owner[x.name]
            self.pending[node.name] = self.pending.get(x.name, []) + [name]
        elif name in ELEMENTWISE and len(data) >= 2:
            op = "add" if name in ADD else "mul" if name in MUL else name
            self.new_layer(node, op, op, data, out_el)
        elif name in SHAPE or name in UNARY or name in ELEMENTWISE:
            self._fusible(node, name, x, out_el)
        else:
            warnings.warn(f"capture: unknown op '{name}' ({node.target}) kept as a layer with one MAC per output element")
            self.new_layer(node, name, name, data, out_el)

    def _eval_const(self, node: torch.fx.Node) -> torch.Tensor | None:
        target = node.target
        if isinstance(target, str):  # a method or attribute name, not a function to call
            return None
        args = torch.fx.map_arg((node.args, node.kwargs), lambda a: self.const.get(a.name))
        try:
            with torch.no_grad():
                return target(*args[0], **args[1])
        except Exception:
            return None

    def _params(self, node: torch.fx.Node) -> list[torch.Tensor]:
        """Parameter tensors read by an elementwise op (e.g. a layer-scale gamma)."""
        values = [self.const[c.name] for c in self.const_args(node) if c.name in self.param_nodes]
        return [v.detach() for v in values if isinstance(v, torch.Tensor)]

    def _conv(self, node: torch.fx.Node, x: torch.fx.Node, out_el: int) -> None:
        w = self.value(node_arg(node, "weight"))
        b = self.value(node_arg(node, "bias"))
        groups = int(node_arg(node, "groups", 1))
        in_ch = _shape(x.meta["val"])[1]
        macs = out_el * math.prod(w.shape[1:])
        op = "dwconv" if groups == in_ch and groups > 1 else "conv"
        layer = self.new_layer(node, op, op, [x], macs, w.numel() + (b.numel() if b is not None else 0), own_module=True)
        layer.weight, layer.bias, layer.foldable = w.detach(), (b.detach() if b is not None else None), True

    def _linear(self, node: torch.fx.Node, name: str, x: torch.fx.Node, out_el: int) -> None:
        if name == "linear":
            w = self.value(node_arg(node, "weight"))
            b = self.value(node_arg(node, "bias"))
        elif name == "addmm":
            b, w = self.value(node.args[0]), self.value(node.args[2])
            w = w.t() if w is not None else None
        else:  # mm(x, W^T)
            b, w = None, self.value(node.args[1])
            w = w.t() if w is not None else None
        if w is None:
            raise ValueError(f"capture: cannot read the weight of '{node.name}'")
        macs = out_el * w.shape[1]
        layer = self.new_layer(node, "linear", "linear", [x], macs, w.numel() + (b.numel() if b is not None else 0), own_module=True)
        layer.weight, layer.bias, layer.foldable = w.detach(), (b.detach() if b is not None else None), True

    def _batch_norm(self, node: torch.fx.Node, x: torch.fx.Node, out_el: int) -> None:
        gamma, beta = self.value(node_arg(node, "weight")), self.value(node_arg(node, "bias"))
        mean, var = self.value(node_arg(node, "running_mean")), self.value(node_arg(node, "running_var"))
        eps = float(node_arg(node, "eps", 1e-5))
        layer = self.producer_layer(x)
        if layer is not None and layer.foldable and mean is not None and var is not None:
            c = mean.numel()
            scale = (torch.ones(c) if gamma is None else gamma.detach()) / torch.sqrt(var.detach() + eps)
            shift = torch.zeros(c) if beta is None else beta.detach()
            w = layer.weight
            assert w is not None  # a foldable layer is a raw conv/linear, which holds its weight
            bias = layer.bias if layer.bias is not None else torch.zeros(c)
            layer.weight = w * scale.reshape(-1, *([1] * (w.dim() - 1)))
            layer.bias = (bias - mean.detach()) * scale + shift
            layer.weights = float(w.numel() + c)
            layer.fused.append("batch_norm")
            layer.out_node = node.name
            layer.foldable = False
            self.owner[node.name] = layer.name
            layer.nodes.append(node.name)
            return
        c = _shape(node.meta["val"])[1]
        layer = self.new_layer(node, "norm", "batch_norm", [x], out_el, 2 * c, own_module=True)
        if mean is not None and var is not None:  # inference BN = per-channel scale and shift
            scale = (torch.ones(c) if gamma is None else gamma.detach()) / torch.sqrt(var.detach() + eps)
            shift = (torch.zeros(c) if beta is None else beta.detach()) - mean.detach() * scale
            layer.params = [scale, shift]

    def _fusible(self, node: torch.fx.Node, name: str, x: torch.fx.Node, out_el: int) -> None:
        layer = self.producer_layer(x)
        if layer is not None:
            self.fuse(node, layer, name)
            return
        if self.owner[x.name] == INPUT_NAME and name in SHAPE:
            self.owner[node.name] = INPUT_NAME  # a view of the raw input: transparent
            return
        macs = 0 if name in SHAPE else out_el
        params = self._params(node)
        layer = self.new_layer(node, name, name, [x], macs, sum(p.numel() for p in params))
        layer.params = params
