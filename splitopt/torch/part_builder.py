"""Build one part of a split model: a fresh ``torch.fx`` graph holding some layers of the
exported program, with placeholders for what it receives and outputs for what it sends.

The module is exported once (:func:`splitopt.torch.capture.capture`, ``torch.export``
ATen graph); every captured layer lists the exported nodes that compute it
(``CapturedLayer.nodes``). A :class:`PartContext` says which part computes each layer
(``dev``: layer -> part index) and on which device each part runs; a
:class:`PartBuilder` builds part ``m``: a fresh fx graph holding, in the exported graph's
order, the nodes of its layers. A node argument is resolved as

* a node of a layer of the same part: the local copy;
* the raw input or the output node of a layer of an earlier part: a placeholder of the
  part, named by the tensor (``input`` or the layer name), *received*;
* a parameter, buffer or constant: an attribute of the part (only those its nodes read);
* a node of no layer (``pad``, split pieces, views of the raw input, nodes computed from
  constants only such as masks and position ids): copied into the part, its own
  arguments resolved the same way (such nodes are recomputed in every part that reads
  them; they are cheap and carry no weights).

A part returns the tensors it is asked for (by layer name; :func:`model_outputs` names
the model outputs and the part that can compute each).

Quantized layers (weight or activation bits below the reference precision, which runs
in float): the part computes the layer with its weights quantize-dequantized by
:func:`splitopt.torch.quant_error.quantize_weight` (conv/linear: the batch-norm-folded
weight per output channel, the conv/linear node is rewritten to use the folded weight
and bias and the batch norm is dropped; other parameter tensors, e.g. layer-norm affine,
per tensor; an unfoldable batch norm: its per-channel scale and shift per tensor) and
its output quantize-dequantized by ``quantize_activation`` with the min/max range
calibrated on the float model (:func:`splitopt.torch.transmission.calibrate`). The
evaluator's error model is the sum of these per-tensor errors;
:func:`splitopt.torch.quant_error.relative_mse` measures the real end-to-end output
error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export.graph_signature import InputKind

from splitopt.core.errors import InvalidModel, InvalidPlan, SplitoptError
from splitopt.torch.capture import BATCH_NORM, CONV, INPUT_NAME, Capture, CapturedLayer, node_arg, op_name
from splitopt.torch.quant_error import quantize_activation, quantize_weight
from splitopt.torch.split_model import Part


@dataclass
class PartContext:
    """What every part of one partition shares: the capture and its exported program
    (``program``; ``nodes`` by name, ``node_layer`` node -> layer, ``layer`` by name,
    ``consts`` the parameter/buffer/constant tensors by placeholder name, ``param_nodes``
    those that are parameters, ``user_input`` the raw input's placeholder), the plan,
    ``dev`` (layer -> index of the part computing it), ``part_device`` (device of each
    part, in run order; default: one part per device of ``order``), the reference
    precision ``reference_bits`` (bits at or above which a layer runs in float), per
    layer weight and activation bits ``wbits``/``abits`` and the calibrated float output
    range ``ranges`` (layer -> (min, max)) of every layer whose output is quantized."""

    capture: Capture
    plan: Any
    order: list[str]
    dev: dict[str, int]
    reference_bits: int
    ranges: dict[str, tuple[float, float]]
    program: Any = None
    nodes: dict[str, torch.fx.Node] = field(default_factory=dict)
    node_layer: dict[str, str] = field(default_factory=dict)
    layer: dict[str, CapturedLayer] = field(default_factory=dict)
    consts: dict[str, torch.Tensor] = field(default_factory=dict)
    param_nodes: set[str] = field(default_factory=set)
    user_input: str = ""
    #: device of each part (run order); default: one part per device of ``order``
    part_device: list[str] = field(default_factory=list)
    wbits: dict[str, int] = field(default_factory=dict)  # layer -> weight bits (reference bits: float)
    abits: dict[str, int] = field(default_factory=dict)  # layer -> activation bits

    def __post_init__(self) -> None:
        if not self.part_device:
            self.part_device = list(self.order)
        ep = self.capture.program
        self.program = ep
        self.nodes = {n.name: n for n in ep.graph.nodes}
        self.layer = {l.name: l for l in self.capture.layers}
        self.node_layer = {n: l.name for l in self.capture.layers for n in l.nodes}
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        for spec, node in zip(ep.graph_signature.input_specs, placeholders):
            if spec.kind == InputKind.USER_INPUT:
                self.user_input = node.name
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                t = ep.state_dict.get(spec.target)
                self.consts[node.name] = ep.constants[spec.target] if t is None else t
                if spec.kind == InputKind.PARAMETER:
                    self.param_nodes.add(node.name)
            else:
                raise InvalidModel(f"exported input '{node.name}' of kind {spec.kind.name} is not supported")

    def home(self, node: torch.fx.Node) -> int:
        """Part index where a model-output node can be computed: its layer's device, or
        for a node of no layer the latest part among its data ancestors (0 if none)."""
        if node.name in self.node_layer:
            return self.dev[self.node_layer[node.name]]
        if node.op != "call_function":
            return 0
        deps: list[int] = [0]
        torch.fx.map_arg((node.args, node.kwargs), lambda a: deps.append(self.home(a)))
        return max(deps)


def model_outputs(ctx: PartContext) -> tuple[list[str], list[tuple[int, str, torch.fx.Node]]]:
    """The model outputs (the exported graph's output node arguments): their names (a
    layer's name, ``input``, or ``output:i`` for a node of no layer) and, for those not
    the raw input, ``(part index where computed, name, node)``."""
    out_node = next(n for n in ctx.program.graph.nodes if n.op == "output")
    out_args = [a for a in torch.fx.node.map_aggregate(out_node.args[0], lambda a: a)] \
        if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]
    output_names: list[str] = []
    out_at: list[tuple[int, str, torch.fx.Node]] = []
    by_out = {l.out_node: l.name for l in ctx.capture.layers}
    for i, a in enumerate(out_args):
        if not isinstance(a, torch.fx.Node):
            raise InvalidModel(f"module output {i} is not a tensor computed by the graph")
        if a.name == ctx.user_input:
            output_names.append(INPUT_NAME)
            continue
        name = by_out.get(a.name, f"output:{i}")
        output_names.append(name)
        out_at.append((ctx.home(a), name, a))
    return output_names, out_at


def _ident(name: str) -> str:
    """``name`` as a Python identifier (fx placeholder and attribute names)."""
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"t_{s}"


class PartBuilder:
    """Builds part ``m`` of ``ctx`` (see the module docstring): :meth:`build` copies the
    part's layers into a fresh fx graph and returns the :class:`Part`."""

    def __init__(self, ctx: PartContext, m: int):
        self.ctx = ctx
        self.m = m
        self.graph = torch.fx.Graph()
        self.env: dict[str, torch.fx.Node] = {}
        self.attrs: dict[str, torch.Tensor] = {}
        self.inputs: list[str] = []
        self.placeholders: list[torch.fx.Node] = []

    def _attr(self, name: str, value: torch.Tensor) -> torch.fx.Node:
        name = _ident(name)
        self.attrs[name] = value
        return self.graph.get_attr(name)

    def _placeholder(self, tensor: str) -> torch.fx.Node:
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        if first is None:
            node = self.graph.placeholder(_ident(tensor))
        else:
            with self.graph.inserting_before(first):
                node = self.graph.placeholder(_ident(tensor))
        self.inputs.append(tensor)
        return node

    def resolve(self, a: torch.fx.Node) -> torch.fx.Node:
        """The node of this part's graph standing for exported node ``a`` (a local copy,
        a placeholder, an attribute or a recomputed node of no layer); raises InvalidPlan
        when ``a`` is computed by a later part."""
        ctx = self.ctx
        if a.name in self.env:
            return self.env[a.name]
        if a.name == ctx.user_input:
            node = self._placeholder(INPUT_NAME)
        elif a.name in ctx.consts:
            node = self._attr(a.name, ctx.consts[a.name])
        elif a.name in ctx.node_layer:
            owner = ctx.layer[ctx.node_layer[a.name]]
            where = ctx.dev[owner.name]
            if where == self.m:
                raise SplitoptError(f"partition: node '{a.name}' of layer '{owner.name}' is read before it is computed")
            if where > self.m:
                raise InvalidPlan(f"plan.layers.{owner.name}: its output is read on device "
                                  f"'{ctx.part_device[self.m]}', earlier than '{ctx.part_device[where]}' where it runs")
            if a.name != owner.out_node:
                raise InvalidModel(f"node '{a.name}' inside layer '{owner.name}' is read by another layer; "
                                   "the partition can only send layer outputs")
            node = self._placeholder(owner.name)
        elif a.op == "call_function":  # a node of no layer: recompute it here
            node = self.graph.node_copy(a, self.resolve)
        else:
            raise SplitoptError(f"partition: cannot place exported node '{a.name}' ({a.op})")
        self.env[a.name] = node
        return node

    def copy_layer(self, layer: CapturedLayer) -> None:
        """Copy the exported nodes of ``layer`` into the graph, quantizing its weights and
        output when its bits are below the reference precision."""
        ctx = self.ctx
        wb, ab = ctx.wbits[layer.name], ctx.abits[layer.name]
        quant_w = wb < ctx.reference_bits and (layer.weight is not None or layer.params)
        subst: dict[str, torch.fx.Node] = {}
        nodes = [ctx.nodes[n] for n in layer.nodes]
        main = nodes[0]
        folded_bn = None
        rewrite_main = False
        if quant_w:
            if layer.weight is not None:
                rewrite_main = True
                folded_bn = next((n for n in nodes[1:] if op_name(n) in BATCH_NORM), None)
            # other parameter tensors read by the layer: quantized per tensor
            skip = set()
            for n in (main, folded_bn) if rewrite_main else ():  # replaced by the folded weight and bias
                if n is not None:
                    torch.fx.map_arg((n.args, n.kwargs), lambda a: skip.add(a.name))
            bn_main = op_name(main) in BATCH_NORM and not rewrite_main
            for n in nodes:
                if n is main and bn_main:
                    continue
                def sub(a: torch.fx.Node) -> None:
                    if a.name in ctx.param_nodes and a.name not in skip and a.name not in subst:
                        subst[a.name] = self._attr(f"{layer.name}_{a.name}_w{wb}",
                                                   quantize_weight(ctx.consts[a.name], wb, per_channel=False))
                torch.fx.map_arg((n.args, n.kwargs), sub)
        transform = lambda a: subst[a.name] if a.name in subst else self.resolve(a)  # noqa: E731
        for n in nodes:
            if folded_bn is not None and n is folded_bn:  # the conv/linear now holds the folded BN
                if not isinstance(n.meta.get("val"), (tuple, list)):
                    self.env[n.name] = self.env[main.name]
                continue
            if folded_bn is not None and op_name(n) == "getitem" and n.args[0] is folded_bn:
                if n.args[1] != 0:
                    raise InvalidModel(f"layer '{layer.name}': output {n.args[1]} of its batch norm is used")
                self.env[n.name] = self.env[main.name]
                continue
            new = self.graph.node_copy(n, transform)
            if n is main and rewrite_main:
                self._rewrite_weight(new, layer, wb)
            elif n is main and quant_w and op_name(n) in BATCH_NORM and len(layer.params) >= 2:
                self._rewrite_batch_norm(new, n, layer, wb)
            self.env[n.name] = new
            if n.name == layer.out_node and ab < ctx.reference_bits:
                lo, hi = ctx.ranges[layer.name]
                self.env[n.name] = self.graph.call_function(quantize_activation, (new, ab, lo, hi))

    def _rewrite_weight(self, new: torch.fx.Node, layer: CapturedLayer, wb: int) -> None:
        """Make a conv/linear node use the quantized folded weight and the folded bias."""
        name = op_name(new)
        weight = layer.weight
        assert weight is not None  # called only for a layer that holds its folded weight (rewrite_main)
        wq = quantize_weight(weight, wb).to(weight.dtype)
        bias = layer.bias
        args = list(new.args)
        with self.graph.inserting_before(new):
            w_node = self._attr(f"{layer.name}_weight_w{wb}", wq if name in CONV | {"linear"} else wq.t().contiguous())
            b_node = self._attr(f"{layer.name}_bias", bias) if bias is not None else None
        if name in CONV or name == "linear":
            args += [None] * (3 - len(args))
            args[1], args[2] = w_node, b_node
            new.kwargs = {k: v for k, v in new.kwargs.items() if k not in ("weight", "bias")}
        elif name == "addmm":
            args[0], args[2] = b_node, w_node
        elif name == "mm":
            if bias is not None:
                raise InvalidModel(f"layer '{layer.name}': cannot quantize an mm layer with a folded bias")
            args[1] = w_node
        else:
            raise InvalidModel(f"layer '{layer.name}': cannot quantize the weight of op '{name}'")
        new.args = tuple(args)

    def _rewrite_batch_norm(self, new: torch.fx.Node, old: torch.fx.Node, layer: CapturedLayer, wb: int) -> None:
        """An unfoldable batch norm y = x * scale + shift with scale and shift quantized
        per tensor: weight' = q(scale) * sqrt(var + eps), bias' = q(shift) + mean * q(scale)."""
        ctx = self.ctx
        mean = ctx.consts[node_arg(old, "running_mean").name]
        var = ctx.consts[node_arg(old, "running_var").name]
        eps = float(node_arg(old, "eps", 1e-5))
        qs = quantize_weight(layer.params[0], wb, per_channel=False)
        qb = quantize_weight(layer.params[1], wb, per_channel=False)
        args = list(new.args)
        with self.graph.inserting_before(new):
            args[1] = self._attr(f"{layer.name}_bn_weight_w{wb}", qs * torch.sqrt(var + eps))
            args[2] = self._attr(f"{layer.name}_bn_bias_w{wb}", qb + mean * qs)
        new.args = tuple(args)

    def build(self, outputs: list[tuple[str, torch.fx.Node]]) -> Part:
        """The part computing its layers and returning ``outputs`` ((tensor name, exported
        node) pairs, in order); dead nodes are removed."""
        ctx = self.ctx
        mine = [l for l in ctx.capture.layers if ctx.dev[l.name] == self.m]
        mine_nodes = {n for l in mine for n in l.nodes}
        for node in ctx.program.graph.nodes:  # layers in the exported graph's order
            if node.name in mine_nodes and node.name not in self.env:
                layer = ctx.layer[ctx.node_layer[node.name]]
                self.copy_layer(layer)
        out_nodes = [self.resolve(node) for _, node in outputs]
        self.graph.output(tuple(out_nodes))
        self.graph.eliminate_dead_code()
        gm = torch.fx.GraphModule(self.attrs, self.graph, class_name=f"Part{self.m}_{_ident(ctx.part_device[self.m])}")
        return Part(ctx.part_device[self.m], tuple(l.name for l in mine), tuple(self.inputs),
                    tuple(n for n, _ in outputs), gm)
