"""Cut a captured module by a plan into one runnable ``torch.fx.GraphModule`` per device
and run the parts in sequence, handing tensors from device to device.

How the graph is cut. The module is exported once (:func:`splitopt.torch.capture.capture`,
``torch.export`` ATen graph); every captured layer lists the exported nodes that compute
it (``CapturedLayer.nodes``). The devices are ordered (two-tier: edge then cloud; chain:
``settings.chain``; otherwise the order in which the layers first use them) and every
device gets one *part*: a fresh fx graph holding, in the exported graph's order, the
nodes of the layers the plan puts on it. A node argument is resolved as

* a node of a layer on the same device: the local copy;
* the raw input or the output node of a layer on an earlier device: a placeholder of
  the part, named by the tensor (``input`` or the layer name), *received*;
* a parameter, buffer or constant: an attribute of the part (only those its nodes read);
* a node of no layer (``pad``, split pieces, views of the raw input, nodes computed from
  constants only such as masks and position ids): copied into the part, its own
  arguments resolved the same way (such nodes are recomputed in every part that reads
  them; they are cheap and carry no weights).

A part returns the outputs of its layers that later devices read (by layer name) and the
model output when it produces it. Which tensors cross each boundary ``m -> m+1`` follows
the evaluators: every tensor produced on a device <= m and read by a layer on a device
> m, each once per boundary (a tensor read two devices further is forwarded, crossing
both boundaries); the raw input is produced on the first device. Per sample a tensor
costs ``elements * bits / 8`` bytes, ``bits`` = ``Instance.sent_bits`` of the producing
layer's activation bits (the raw input at its own bits).

Quantized plans (a layer with weight or activation bits below the reference precision
``cloud_bits``, 16 by default, which runs in float): the part computes that layer with
its weights quantize-dequantized by :func:`splitopt.torch.quant_error.quantize_weight`
(conv/linear: the batch-norm-folded weight per output channel, the conv/linear node is
rewritten to use the folded weight and bias and the batch norm is dropped; other
parameter tensors, e.g. layer-norm affine, per tensor; an unfoldable batch norm: its
per-channel scale and shift per tensor) and its output quantize-dequantized by
``quantize_activation`` with the min/max range calibrated on the float model. The
evaluator's error model is the sum of these per-tensor errors; :func:`relative_mse`
measures the real end-to-end output error.

Transmission hook: ``SplitModel.run(x, transmit)`` calls ``transmit(tensor name,
tensor, bits) -> tensor`` on every tensor crossing a boundary (once per boundary) and
hands the result to the later devices; the producing device keeps using its own copy.
Default: identity for float plans; for quantized plans, pack/unpack by
:mod:`splitopt.torch.packing` at the sent bits with the calibrated range (the raw input
is passed unchanged: its bits describe the sensor data, which the evaluator counts as
exact).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.export.graph_signature import InputKind

from splitopt.errors import InvalidModel, InvalidPlan, SplitoptError
from splitopt.torch.capture import BATCH_NORM, CONV, INPUT_NAME, Capture, CapturedLayer, capture, op_name
from splitopt.torch.quant_error import quantize_activation, quantize_weight, run_layers

Transmit = Callable[[str, torch.Tensor, int], torch.Tensor]

#: bits at or above which a layer runs in float (the evaluator's reference precision)
DEFAULT_REFERENCE_BITS = 16


@dataclass(frozen=True)
class Crossing:
    """The tensors sent over boundary ``source -> target`` (consecutive devices), each
    ``(name, elements per sample, bits per element)``."""

    source: str
    target: str
    tensors: tuple[tuple[str, int, int], ...]

    @property
    def bytes(self) -> float:
        """Bytes per sample: sum of elements * bits / 8."""
        return sum(e * b / 8.0 for _, e, b in self.tensors)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _, _ in self.tensors)


@dataclass
class Part:
    """What one device runs. ``module`` takes the tensors named by ``inputs`` (in order)
    and returns a tuple of the tensors named by ``outputs``; None when the device runs
    no layer (it may still forward tensors)."""

    device: str
    layers: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    module: torch.fx.GraphModule | None


@dataclass
class RunStats:
    """Measured on the last :meth:`SplitModel.run`: seconds per part (summed over the
    samples) and bytes per sample per crossing (from the real tensors' element counts)."""

    samples: int = 0
    part_seconds: list[float] = field(default_factory=list)
    crossing_bytes: list[float] = field(default_factory=list)


def identity_transmit(name: str, tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """The default hook for float plans: the tensor arrives unchanged."""
    return tensor


class SplitModel:
    """The parts of a partitioned module and how to run them (see module docstring)."""

    def __init__(self, capture: Capture, plan, devices: Sequence[str], parts: list[Part],
                 crossings: list[Crossing], output_names: tuple[str, ...], example_input: torch.Tensor,
                 quantized: bool, ranges: Mapping[str, tuple[float, float]]):
        self.capture = capture
        self.plan = plan
        self.devices = tuple(devices)
        self.parts = parts
        self.crossings = crossings
        self.output_names = output_names
        self.example_input = example_input
        self.quantized = quantized
        self.ranges = dict(ranges)  # layer -> calibrated (lo, hi) of its float output
        self.last_run = RunStats()

    @property
    def sent_bytes(self) -> list[float]:
        """Bytes per sample over each boundary (device m -> m+1), from the shapes."""
        return [c.bytes for c in self.crossings]

    @property
    def transmitted_bytes(self) -> float:
        """Bytes per sample over all boundaries."""
        return sum(self.sent_bytes)

    def default_transmit(self) -> Transmit:
        """Identity for float plans; pack/unpack at the sent bits for quantized plans."""
        if not self.quantized:
            return identity_transmit
        return packing_transmit(self.ranges)

    def run(self, x: torch.Tensor, transmit: Transmit | None = None) -> torch.Tensor:
        """Run the parts in device order on ``x`` (shape (n, *example shape[1:])), one
        sample at a time (the exported graph has batch 1); returns the outputs stacked
        on dim 0 (a tuple if the module returns several tensors)."""
        want = tuple(self.example_input.shape[1:])
        if x.dim() != self.example_input.dim() or tuple(x.shape[1:]) != want:
            raise InvalidModel(f"input shape {tuple(x.shape)} does not match the captured input shape "
                               f"(n, {', '.join(map(str, want))})")
        hook = self.default_transmit() if transmit is None else transmit
        stats = RunStats(samples=x.shape[0], part_seconds=[0.0] * len(self.parts),
                         crossing_bytes=[0.0] * len(self.crossings))
        outs: list[tuple[torch.Tensor, ...]] = []
        with torch.no_grad():
            for i in range(x.shape[0]):
                store: dict[str, torch.Tensor] = {INPUT_NAME: x[i:i + 1]}
                for m, part in enumerate(self.parts):
                    if part.module is not None:
                        t0 = time.perf_counter()
                        result = part.module(*[store[n] for n in part.inputs])
                        stats.part_seconds[m] += time.perf_counter() - t0
                        store.update(zip(part.outputs, result))
                    if m < len(self.crossings):
                        measured = 0.0
                        for name, _, bits in self.crossings[m].tensors:
                            t = store[name]
                            measured += t.numel() * bits / 8.0
                            store[name] = hook(name, t, bits)
                        stats.crossing_bytes[m] = measured
                outs.append(tuple(store[n] for n in self.output_names))
        self.last_run = stats
        cat = tuple(torch.cat([o[k] for o in outs], dim=0) for k in range(len(self.output_names)))
        return cat[0] if len(cat) == 1 else cat

    def summary(self) -> list[dict[str, Any]]:
        """Per part: device, layer count, first/last layer, received and sent tensors."""
        rows = []
        for m, p in enumerate(self.parts):
            c = self.crossings[m] if m < len(self.crossings) else None
            rows.append({"device": p.device, "layers": len(p.layers),
                         "first_layer": p.layers[0] if p.layers else None,
                         "last_layer": p.layers[-1] if p.layers else None,
                         "inputs": list(p.inputs), "outputs": list(p.outputs),
                         "sent_tensors": list(c.names) if c else [], "sent_bytes": c.bytes if c else 0.0})
        return rows


def packing_transmit(ranges: Mapping[str, tuple[float, float]]) -> Transmit:
    """A hook that sends each layer tensor through :func:`splitopt.torch.packing.pack` /
    ``unpack`` at its sent bits, with the calibrated range of the layer when known (else
    the tensor's own min/max); the raw input passes unchanged."""
    from splitopt.torch.packing import pack, unpack

    def hook(name: str, tensor: torch.Tensor, bits: int) -> torch.Tensor:
        if name == INPUT_NAME:
            return tensor
        lo, hi = ranges.get(name, (None, None))
        if lo is not None:  # a tensor already quantized at this range stays in it
            lo, hi = min(lo, float(tensor.min())), max(hi, float(tensor.max()))
        return unpack(pack(tensor, bits, lo, hi)).to(tensor.dtype)

    return hook


def relative_mse(q: torch.Tensor, x: torch.Tensor) -> float:
    """``sum((q - x)^2) / sum(x^2)`` (dimensionless; 0 for an all-zero ``x``)."""
    den = float(x.double().pow(2).sum())
    return 0.0 if den == 0.0 else float((q.double() - x.double()).pow(2).sum()) / den


# ----- building ------------------------------------------------------------------------------

def capture_module(module: torch.nn.Module, example_input: torch.Tensor, rename=None, input_bits: int = 8) -> Capture:
    """:func:`capture`, with a failing ``torch.export`` reported as one-line InvalidModel
    naming the export error's first line."""
    try:
        return capture(module, example_input, rename=rename, input_bits=input_bits)
    except SplitoptError:
        raise
    except Exception as e:  # noqa: BLE001 - any export failure is reported as bad input
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise InvalidModel(f"module {type(module).__name__} cannot be exported by torch.export: "
                           f"{type(e).__name__}: {first}") from e


def device_order(plan, inst=None, devices: Sequence[str] | None = None, layer_names: Sequence[str] = ()) -> list[str]:
    """Devices in execution order: ``devices`` if given; two-tier instances: edge, cloud;
    chain instances: ``settings.chain``; otherwise the order of first use by the layers."""
    if devices is not None:
        return list(devices)
    if inst is not None and inst.is_two_tier:
        return [inst.settings.edge, inst.settings.cloud]
    if inst is not None and inst.settings.chain:
        return list(inst.settings.chain)
    order: list[str] = []
    for n in layer_names:
        if n in plan.device and plan.device[n] not in order:
            order.append(plan.device[n])
    return order


def _check_against(cap: Capture, example_input: torch.Tensor, plan, inst, order: list[str]) -> None:
    names = [l.name for l in cap.layers]
    known = set(names)
    if inst is not None:
        inst_names = [l.name for l in inst.layers]
        for n in inst_names:
            if n not in known:
                raise InvalidModel(f"instance '{inst.name}' layer '{n}' is not a layer of the captured module "
                                   f"(the module has {len(names)} layers, the instance {len(inst_names)})")
        for n in names:
            if n not in set(inst_names):
                raise InvalidModel(f"captured layer '{n}' is not in instance '{inst.name}'")
    for n in plan.device:
        if n not in known:
            raise InvalidPlan(f"plan.layers.{n}: the module has no layer '{n}'")
    for n in names:
        if n not in plan.device:
            raise InvalidPlan(f"plan.layers: layer '{n}' of the module is missing")
        if plan.device[n] not in order:
            raise InvalidPlan(f"plan.layers.{n}.device: '{plan.device[n]}' is not one of the devices {order}")
    index = {d: i for i, d in enumerate(order)}
    for layer in cap.layers:
        for src in layer.inputs:
            if src != INPUT_NAME and index[plan.device[src]] > index[plan.device[layer.name]]:
                raise InvalidPlan(f"plan.layers.{layer.name}: runs on '{plan.device[layer.name]}' but its input "
                                  f"'{src}' runs on '{plan.device[src]}', later in {order}")


def _sent_bits(name: str, cap: Capture, plan, inst) -> int:
    if name == INPUT_NAME:
        return int(inst.inputs[0].bits if inst is not None else cap.graph_input["bits"])
    bits = int(plan.activation_bits[name])
    return int(inst.sent_bits(name, bits)) if inst is not None else bits


def _crossings(cap: Capture, plan, inst, order: list[str]) -> list[Crossing]:
    index = {d: i for i, d in enumerate(order)}
    dev = {l.name: index[plan.device[l.name]] for l in cap.layers}
    elements = {INPUT_NAME: math.prod(cap.graph_input["shape"])}
    elements.update({l.name: math.prod(l.output_shape) for l in cap.layers})
    src = {INPUT_NAME: 0, **dev}
    far = dict(src)
    for layer in cap.layers:
        for s in layer.inputs:
            far[s] = max(far[s], dev[layer.name])
    names = [INPUT_NAME] + [l.name for l in cap.layers]
    out = []
    for m in range(len(order) - 1):
        sent = tuple((n, elements[n], _sent_bits(n, cap, plan, inst)) for n in names if src[n] <= m < far[n])
        out.append(Crossing(order[m], order[m + 1], sent))
    return out


def calibrate(cap: Capture, inputs: torch.Tensor) -> dict[str, tuple[float, float]]:
    """Per layer, (min, max) of its float output over ``inputs`` (shape (n, ...), run one
    at a time)."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}

    def record(name: str, t: torch.Tensor) -> None:
        if t.is_floating_point():
            lo[name] = min(lo.get(name, math.inf), float(t.min()))
            hi[name] = max(hi.get(name, -math.inf), float(t.max()))

    for i in range(inputs.shape[0]):
        run_layers(cap, inputs[i:i + 1], record)
    return {n: (lo[n], hi[n]) for n in lo}


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"t_{s}"


class _PartBuilder:
    """Builds one part's fx graph (see module docstring)."""

    def __init__(self, ctx: "_Context", m: int):
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
                                  f"'{ctx.order[self.m]}', earlier than '{ctx.order[where]}' where it runs")
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
        ctx = self.ctx
        wb, ab = int(ctx.plan.weight_bits[layer.name]), int(ctx.plan.activation_bits[layer.name])
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
        wq = quantize_weight(layer.weight, wb).to(layer.weight.dtype)
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
        from splitopt.torch.capture import _arg

        ctx = self.ctx
        mean = ctx.consts[_arg(old, "running_mean").name]
        var = ctx.consts[_arg(old, "running_var").name]
        eps = float(_arg(old, "eps", 1e-5))
        qs = quantize_weight(layer.params[0], wb, per_channel=False)
        qb = quantize_weight(layer.params[1], wb, per_channel=False)
        args = list(new.args)
        with self.graph.inserting_before(new):
            args[1] = self._attr(f"{layer.name}_bn_weight_w{wb}", qs * torch.sqrt(var + eps))
            args[2] = self._attr(f"{layer.name}_bn_bias_w{wb}", qb + mean * qs)
        new.args = tuple(args)

    def build(self, outputs: list[tuple[str, torch.fx.Node]]) -> Part:
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
        gm = torch.fx.GraphModule(self.attrs, self.graph, class_name=f"Part{self.m}_{_ident(ctx.order[self.m])}")
        return Part(ctx.order[self.m], tuple(l.name for l in mine), tuple(self.inputs),
                    tuple(n for n, _ in outputs), gm)


@dataclass
class _Context:
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

    def __post_init__(self) -> None:
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
        """Device index where a model-output node can be computed: its layer's device, or
        for a node of no layer the latest device among its data ancestors (0 if none)."""
        if node.name in self.node_layer:
            return self.dev[self.node_layer[node.name]]
        if node.op != "call_function":
            return 0
        deps: list[int] = [0]
        torch.fx.map_arg((node.args, node.kwargs), lambda a: deps.append(self.home(a)))
        return max(deps)


def partition(module: torch.nn.Module, example_input: torch.Tensor, plan, inst=None, *,
              capture: Capture | None = None, rename=None, devices: Sequence[str] | None = None,
              calibration: torch.Tensor | None = None, reference_bits: int | None = None) -> SplitModel:
    """Cut ``module`` by ``plan`` into one part per device (see module docstring).

    ``inst``: the instance the plan was made for (its layer names must equal the
    capture's, its input shape the example's; it fixes the device order, the sent bits
    and the reference precision ``cloud_bits``). ``capture``: a capture of ``module``
    on ``example_input`` (made here, with ``rename``, when None). ``devices``: device
    order when there is no instance. ``calibration``: inputs (n, ...) whose float
    min/max set the activation ranges of quantized layers (default: the example input).
    Raises InvalidModel (untraceable module, wrong input shape, instance mismatch) or
    InvalidPlan (unknown, missing or misplaced layer), each one line."""
    if inst is not None and len(inst.inputs) != 1:
        raise InvalidModel(f"instance '{inst.name}' has {len(inst.inputs)} graph inputs; partition supports one")
    if inst is not None and tuple(example_input.shape) != (1, *inst.inputs[0].shape):
        raise InvalidModel(f"example input shape {tuple(example_input.shape)} does not match instance "
                           f"'{inst.name}' input '{inst.inputs[0].name}' (expected {(1, *inst.inputs[0].shape)})")
    if example_input.dim() == 0 or example_input.shape[0] != 1:
        raise InvalidModel(f"example input shape {tuple(example_input.shape)}: expected batch size 1 (1, ...)")
    if capture is None:
        input_bits = int(inst.inputs[0].bits) if inst is not None else 8
        capture = capture_module(module, example_input, rename=rename, input_bits=input_bits)
    names = [l.name for l in capture.layers]
    order = device_order(plan, inst, devices, names)
    _check_against(capture, example_input, plan, inst, order)
    if reference_bits is None:
        reference_bits = int(inst.settings.cloud_bits) if inst is not None else DEFAULT_REFERENCE_BITS
    index = {d: i for i, d in enumerate(order)}
    dev = {n: index[plan.device[n]] for n in names}
    quantized = any(min(int(plan.weight_bits[n]), int(plan.activation_bits[n])) < reference_bits for n in names)
    needs_ranges = any(int(plan.activation_bits[n]) < reference_bits for n in names)
    ranges: dict[str, tuple[float, float]] = {}
    if quantized:
        ranges = calibrate(capture, example_input if calibration is None else calibration)
        if needs_ranges:
            missing = [n for n in names if int(plan.activation_bits[n]) < reference_bits and n not in ranges]
            if missing:
                raise InvalidPlan(f"plan.layers.{missing[0]}.activation_bits: the layer's output is not a float "
                                  "tensor and cannot be quantized")
    ctx = _Context(capture, plan, order, dev, reference_bits, ranges)
    crossings = _crossings(capture, plan, inst, order)

    # model outputs: the exported graph's output node arguments
    out_node = next(n for n in ctx.program.graph.nodes if n.op == "output")
    out_args = [a for a in torch.fx.node.map_aggregate(out_node.args[0], lambda a: a)] \
        if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]
    output_names: list[str] = []
    out_at: list[tuple[int, str, torch.fx.Node]] = []
    by_out = {l.out_node: l.name for l in capture.layers}
    for i, a in enumerate(out_args):
        if not isinstance(a, torch.fx.Node):
            raise InvalidModel(f"module output {i} is not a tensor computed by the graph")
        if a.name == ctx.user_input:
            output_names.append(INPUT_NAME)
            continue
        name = by_out.get(a.name, f"output:{i}")
        output_names.append(name)
        out_at.append((ctx.home(a), name, a))

    parts = []
    for m, d in enumerate(order):
        later = {n for c in crossings[m:m + 1] for n in c.names}
        outputs = [(l.out_node, l.name) for l in capture.layers if dev[l.name] == m and l.name in later]
        pairs = [(name, ctx.nodes[node]) for node, name in outputs]
        pairs += [(name, a) for home, name, a in out_at if home == m and name not in {p[0] for p in pairs}]
        if not any(dev[n] == m for n in names) and not pairs:
            parts.append(Part(d, (), (), (), None))
            continue
        parts.append(_PartBuilder(ctx, m).build(pairs))
    _check_flow(parts, crossings, output_names)
    return SplitModel(capture, plan, order, parts, crossings, tuple(output_names), example_input, quantized, ranges)


def _check_flow(parts: list[Part], crossings: list[Crossing], output_names: Sequence[str]) -> None:
    """Every tensor a part receives must have been produced on an earlier device and sent
    over every boundary in between (the evaluators' accounting); raises SplitoptError
    naming the first tensor the graph needs but the accounting does not send."""
    produced_at = {INPUT_NAME: 0}
    for m, p in enumerate(parts):
        for n in p.outputs:
            produced_at.setdefault(n, m)
    for m, p in enumerate(parts):
        for n in p.inputs:
            src = produced_at.get(n)
            if src is None or src > m:
                raise SplitoptError(f"partition: part '{p.device}' reads '{n}', which no earlier part produces")
            for k in range(src, m):
                if n not in crossings[k].names:
                    raise SplitoptError(f"partition: part '{p.device}' reads '{n}', but it is not sent over "
                                        f"{crossings[k].source} -> {crossings[k].target}")
    for n in output_names:
        if n not in produced_at:
            raise SplitoptError(f"partition: no part produces the model output '{n}'")


# ----- checking a split against the unsplit model and the evaluator ---------------------------

#: a float plan must reproduce the unsplit model's output within this max abs difference
FLOAT_ATOL = 1e-5


def evaluator_sent_bytes(inst, plan) -> list[float]:
    """Bytes per sample over each boundary as ``splitopt.evaluate`` counts them: two-tier
    ``[metrics.transmitted_bytes]``; chain ``metrics.devices[m].sent_bytes`` for every
    device but the last. Raises NotApplicable for other families."""
    from splitopt.errors import NotApplicable
    from splitopt.evaluator import evaluate

    metrics = evaluate(inst, plan)
    if inst.is_two_tier:
        return [float(metrics.transmitted_bytes)]
    if inst.settings.problem == "chain":
        return [float(d.sent_bytes) for d in metrics.devices[:-1]]
    raise NotApplicable(f"partition: problem '{inst.settings.problem}' is not supported (two-tier and chain only)")


def compare(split: SplitModel, module: torch.nn.Module, inputs: torch.Tensor, inst=None,
            transmit: Transmit | None = None) -> dict[str, Any]:
    """Run ``split`` and the unsplit ``module`` on ``inputs`` and report (JSON-ready):
    per part its device, layers, received/sent tensors and seconds (summed over the
    samples); per boundary the tensors and bytes per sample (from the shapes, measured on
    the real tensors, and the evaluator's when ``inst`` is given); ``max_abs_diff`` and
    ``relative_mse`` of the split output against the unsplit one; ``ok``: bytes equal
    the evaluator's (relative 1e-9) and, for float plans, ``max_abs_diff <= FLOAT_ATOL``."""
    with torch.no_grad():
        ref = module.eval()(inputs)
    out = split.run(inputs, transmit)
    ref_t = ref if isinstance(ref, torch.Tensor) else ref[0]
    out_t = out if isinstance(out, torch.Tensor) else out[0]
    diff = float((out_t.double() - ref_t.double()).abs().max()) if out_t.numel() else 0.0
    evaluator = evaluator_sent_bytes(inst, split.plan) if inst is not None else None
    crossings = []
    bytes_ok = True
    for m, c in enumerate(split.crossings):
        row = {"source": c.source, "target": c.target,
               "tensors": [{"tensor": n, "elements": e, "bits": b, "bytes": e * b / 8.0} for n, e, b in c.tensors],
               "bytes": c.bytes, "measured_bytes": split.last_run.crossing_bytes[m]}
        if evaluator is not None:
            row["evaluator_bytes"] = evaluator[m]
            bytes_ok &= math.isclose(c.bytes, evaluator[m], rel_tol=1e-9, abs_tol=1e-9)
        bytes_ok &= math.isclose(c.bytes, split.last_run.crossing_bytes[m], rel_tol=1e-9, abs_tol=1e-9)
        crossings.append(row)
    parts = [{"device": p.device, "layers": list(p.layers), "inputs": list(p.inputs), "outputs": list(p.outputs),
              "seconds": split.last_run.part_seconds[m]} for m, p in enumerate(split.parts)]
    float_ok = split.quantized or diff <= FLOAT_ATOL
    return {"samples": int(inputs.shape[0]), "quantized": split.quantized, "parts": parts, "crossings": crossings,
            "transmitted_bytes": split.transmitted_bytes, "max_abs_diff": diff,
            "relative_mse": relative_mse(out_t, ref_t), "float_atol": FLOAT_ATOL,
            "bytes_match": bool(bytes_ok), "ok": bool(bytes_ok and float_ok)}
