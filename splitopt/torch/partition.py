"""Cut a captured module by a plan into runnable ``torch.fx.GraphModule`` parts and run
them in sequence, handing tensors from device to device.

Supported plans: two-tier (``split``, ``split_bits``) and ``chain`` plans (one part per
device) and ``mesh`` plans (one part per *stage*; a device may have several), by
:func:`partition`. Multiview plans (``multiview``):
:func:`splitopt.torch.partition_multiview.partition_multiview`; ``partition`` raises
NotApplicable for them.

How the graph is cut. The module is exported once (:func:`splitopt.torch.capture.capture`,
``torch.export`` ATen graph); every captured layer lists the exported nodes that compute
it (``CapturedLayer.nodes``). Two-tier and chain plans: the devices are ordered
(two-tier: edge then cloud; chain: ``settings.chain``; otherwise the order in which the
layers first use them) and every device gets one *part*. Mesh plans: the parts are the
stages of :func:`mesh_stages` (below). A part is a fresh fx graph holding, in the
exported graph's order, the nodes of its layers. A node argument is resolved as

* a node of a layer of the same part: the local copy;
* the raw input or the output node of a layer of an earlier part: a placeholder of the
  part, named by the tensor (``input`` or the layer name), *received* (mesh: from the
  device's own store when the layer ran on the same device, else sent to it);
* a parameter, buffer or constant: an attribute of the part (only those its nodes read);
* a node of no layer (``pad``, split pieces, views of the raw input, nodes computed from
  constants only such as masks and position ids): copied into the part, its own
  arguments resolved the same way (such nodes are recomputed in every part that reads
  them; they are cheap and carry no weights).

A part returns the outputs of its layers that later parts read or other devices need
(by layer name) and the model output when it produces it. Two-tier and chain: which
tensors cross each boundary ``m -> m+1`` follows the evaluators: every tensor produced
on a device <= m and read by a layer on a device > m, each once per boundary (a tensor
read two devices further is forwarded, crossing both boundaries); the raw input is
produced on the first device. Per sample a tensor costs ``elements * bits / 8`` bytes,
``bits`` = ``Instance.sent_bits`` of the producing layer's activation bits (the raw input
at its own bits).

Mesh plans (problem ``mesh``, :mod:`splitopt.mesh`): a layer may run on any device,
parallel branches on different devices, and a device may run layers both before and
after another device's. *Stages*: the layers are walked in a topological order that
follows the plan (:func:`mesh_layer_order`: the evaluator's schedule start order when
the plan carries task orders, else the execution order); each joins an existing stage of
its device unless that would close a cycle among the stages (a stage that reaches, through
other stages, a stage holding one of the layer's inputs), else it opens a new stage. This
is cutting the walk at every device change and merging the cuts wherever safe: a device
gets one stage when no path of the layer graph leaves it and comes back (as long as other
devices' stages do not force more); a ping-pong A -> B -> A gives A two stages. The
stages run in a topological order of the stage graph. Each device keeps its own tensors.
*Crossings*: the raw input is produced on the source ``settings.edge``; a tensor is sent
from its producer's device to every other device that reads it, and a final output (a
layer no layer reads) to the sink ``settings.cloud`` when ``settings.mesh.deliver_outputs``
(the default); each (tensor, destination device) once, at ``Instance.sent_bits(t,
cloud_bits)`` (mesh plans run in float). :class:`Crossing` groups them per ordered device
pair. Comparison with the mesh evaluator, like with like: (1) per device pair, the
bytes of the (tensor, destination) pairs the evaluator's ``MeshData.destinations`` and
``sent_bytes`` give (:func:`evaluator_mesh_crossings`); (2) per link, the evaluator
charges every hop of a tensor's route, once per link of the union of its routes
(multicast tree): :meth:`SplitModel.link_bytes` routes each crossing's tensors over the
instance's routes (``MeshData.route``) the same way and must equal ``metrics.links``
bytes (:func:`evaluator_link_bytes`). A tensor sent two hops thus counts once in (1) and
twice in (2).

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
tensor, bits) -> tensor`` on every tensor crossing a boundary (once per boundary; mesh:
once per (tensor, destination device)) and hands the result to the later devices; the
producing device keeps using its own copy. Default: identity for float plans; for
quantized plans, pack/unpack by :mod:`splitopt.torch.packing` at the sent bits with the
calibrated range (the raw input is passed unchanged: its bits describe the sensor data,
which the evaluator counts as exact).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.export.graph_signature import InputKind

from splitopt.core.errors import InvalidModel, InvalidPlan, SplitoptError
from splitopt.torch.capture import BATCH_NORM, CONV, INPUT_NAME, Capture, CapturedLayer, op_name
from splitopt.torch.quant_error import quantize_activation, quantize_weight, run_layers

Transmit = Callable[[str, torch.Tensor, int], torch.Tensor]

#: bits at or above which a layer runs in float (the evaluator's reference precision)
DEFAULT_REFERENCE_BITS = 16


@dataclass(frozen=True)
class Crossing:
    """The tensors sent from device ``source`` to device ``target``, each ``(name,
    elements per sample, bits per element)``. Two-tier and chain plans: the boundary
    between consecutive devices (forwarded tensors included); mesh plans: an ordered
    device pair, each tensor once per destination device however many hops its route
    takes (see :meth:`SplitModel.link_bytes` for the per-link view)."""

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
    """What one device runs (mesh plans: one stage; a device may have several parts).
    ``module`` takes the tensors named by ``inputs`` (in order) and returns a tuple of
    the tensors named by ``outputs``; None when the device runs no layer (it may still
    forward tensors). ``sends``: mesh plans, the ``(tensor, destination device)`` pairs
    sent once the part has run."""

    device: str
    layers: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    module: torch.fx.GraphModule | None
    sends: tuple[tuple[str, str], ...] = ()


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
    """The parts of a partitioned module and how to run them (see module docstring).

    ``kind``: ``"sequential"`` (two-tier and chain: one part per device in device order,
    crossing ``m`` after part ``m``) or ``"mesh"`` (parts are stages in run order; each
    device keeps its own tensors; ``source`` produces the raw input, final outputs are
    delivered to ``sink`` when it is set)."""

    def __init__(self, capture: Capture, plan, devices: Sequence[str], parts: list[Part],
                 crossings: list[Crossing], output_names: tuple[str, ...], example_input: torch.Tensor,
                 quantized: bool, ranges: Mapping[str, tuple[float, float]], *, kind: str = "sequential",
                 inst=None, source: str | None = None, sink: str | None = None,
                 input_sends: Sequence[str] = (), output_devices: Sequence[str] = ()):
        self.capture = capture
        self.plan = plan
        self.devices = tuple(devices)
        self.parts = parts
        self.crossings = crossings
        self.output_names = output_names
        self.example_input = example_input
        self.quantized = quantized
        self.ranges = dict(ranges)  # layer -> calibrated (lo, hi) of its float output
        self.kind = kind
        self.inst = inst
        self.source = source if source is not None else (self.devices[0] if self.devices else None)
        self.sink = sink
        self.input_sends = tuple(input_sends)  # mesh: devices the raw input is sent to at the start
        self.output_devices = tuple(output_devices)  # mesh: device producing each model output
        self.last_run = RunStats()

    @property
    def sent_bytes(self) -> list[float]:
        """Bytes per sample per crossing (two-tier/chain: each boundary device m -> m+1;
        mesh: each device pair), from the shapes."""
        return [c.bytes for c in self.crossings]

    @property
    def transmitted_bytes(self) -> float:
        """Bytes per sample over all crossings (mesh: each (tensor, destination) once)."""
        return sum(self.sent_bytes)

    def link_bytes(self) -> dict[str, float]:
        """Mesh plans: bytes per sample over each link ``"u->v"`` of the instance when every
        (tensor, destination) of the crossings travels along the instance's route
        (``splitopt.mesh.MeshData.route``) and a tensor crosses each link of the union of
        its routes once (multicast), which is what the mesh evaluator charges. Links that
        carry nothing are listed with 0. NotApplicable for other plans or without an
        instance."""
        from splitopt.core.errors import NotApplicable

        if self.kind != "mesh" or self.inst is None:
            raise NotApplicable("partition: link bytes need a mesh plan partitioned with its instance")
        from splitopt.families.mesh.evaluate import MeshData

        data = MeshData(self.inst)
        out = {f"{u}->{v}": 0.0 for u, v in data.pairs}
        trees: dict[str, tuple[float, set[tuple[str, str]]]] = {}
        for c in self.crossings:
            for name, elements, bits in c.tensors:
                links = trees.setdefault(name, (elements * bits / 8.0, set()))[1]
                links.update(data.route(c.source, c.target))
        for size, links in trees.values():
            for u, v in links:
                out[f"{u}->{v}"] += size
        return out

    def default_transmit(self) -> Transmit:
        """Identity for float plans; pack/unpack at the sent bits for quantized plans."""
        if not self.quantized:
            return identity_transmit
        return packing_transmit(self.ranges)

    def _check_input(self, x: torch.Tensor) -> None:
        want = tuple(self.example_input.shape[1:])
        if x.dim() != self.example_input.dim() or tuple(x.shape[1:]) != want:
            raise InvalidModel(f"input shape {tuple(x.shape)} does not match the captured input shape "
                               f"(n, {', '.join(map(str, want))})")

    def run(self, x: torch.Tensor, transmit: Transmit | None = None) -> torch.Tensor:
        """Run the parts in order on ``x`` (shape (n, *example shape[1:])), one sample at a
        time (the exported graph has batch 1); returns the outputs stacked on dim 0 (a
        tuple if the module returns several tensors)."""
        self._check_input(x)
        hook = self.default_transmit() if transmit is None else transmit
        if self.kind == "mesh":
            return self._run_mesh(x, hook)
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
        return _stack(outs, len(self.output_names))

    def _run_mesh(self, x: torch.Tensor, hook: Transmit) -> torch.Tensor:
        """Mesh plans: every device has its own store; after a part runs, each tensor it
        sends goes through ``hook`` once per destination device (the producer keeps its
        own copy); a model output is read on the sink when it was delivered there."""
        index = {(c.source, c.target): k for k, c in enumerate(self.crossings)}
        bits = {(c.source, c.target, n): b for c in self.crossings for n, _, b in c.tensors}
        stats = RunStats(samples=x.shape[0], part_seconds=[0.0] * len(self.parts),
                         crossing_bytes=[0.0] * len(self.crossings))
        outs: list[tuple[torch.Tensor, ...]] = []

        def send(stores, measured, name: str, a: str, b: str) -> None:
            t = stores[a][name]
            k = index[(a, b)]
            nbits = bits[(a, b, name)]
            measured[k] += t.numel() * nbits / 8.0
            stores[b][name] = hook(name, t, nbits)

        with torch.no_grad():
            for i in range(x.shape[0]):
                stores: dict[str, dict[str, torch.Tensor]] = {d: {} for d in self.devices}
                measured = [0.0] * len(self.crossings)
                stores[self.source][INPUT_NAME] = x[i:i + 1]
                for b in self.input_sends:
                    send(stores, measured, INPUT_NAME, self.source, b)
                for m, part in enumerate(self.parts):
                    store = stores[part.device]
                    if part.module is not None:
                        t0 = time.perf_counter()
                        result = part.module(*[store[n] for n in part.inputs])
                        stats.part_seconds[m] += time.perf_counter() - t0
                        store.update(zip(part.outputs, result))
                    for name, b in part.sends:
                        send(stores, measured, name, part.device, b)
                stats.crossing_bytes = measured
                row = []
                for n, d in zip(self.output_names, self.output_devices):
                    delivered = self.sink is not None and n in stores[self.sink]
                    row.append(stores[self.sink][n] if delivered else stores[d][n])
                outs.append(tuple(row))
        self.last_run = stats
        return _stack(outs, len(self.output_names))

    def summary(self) -> list[dict[str, Any]]:
        """Per part: device, layer count, first/last layer, received and sent tensors."""
        rows = []
        for m, p in enumerate(self.parts):
            if self.kind == "mesh":
                size = {(c.source, c.target, n): e * b / 8.0 for c in self.crossings for n, e, b in c.tensors}
                sent = [f"{n}->{b}" for n, b in p.sends]
                sent_bytes = sum(size[(p.device, b, n)] for n, b in p.sends)
            else:
                c = self.crossings[m] if m < len(self.crossings) else None
                sent, sent_bytes = (list(c.names), c.bytes) if c else ([], 0.0)
            rows.append({"device": p.device, "layers": len(p.layers),
                         "first_layer": p.layers[0] if p.layers else None,
                         "last_layer": p.layers[-1] if p.layers else None,
                         "inputs": list(p.inputs), "outputs": list(p.outputs),
                         "sent_tensors": sent, "sent_bytes": sent_bytes})
        return rows


def _stack(outs: list[tuple[torch.Tensor, ...]], k: int):
    cat = tuple(torch.cat([o[j] for o in outs], dim=0) for j in range(k))
    return cat[0] if len(cat) == 1 else cat


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
    """:func:`splitopt.torch.capture.capture`, with a failing ``torch.export`` or an example input that does not
    fit the module reported as one-line InvalidModel, torch's own failure output held
    back (:func:`splitopt.torch.user_model.capture_checked`, as ``profile`` does)."""
    from splitopt.torch.user_model import capture_checked

    return capture_checked(module, example_input, rename=rename, input_bits=input_bits)


def is_mesh(plan, inst=None) -> bool:
    """Whether ``plan`` is partitioned as a mesh plan: the instance's problem is ``mesh``,
    or, without an instance, the plan is a :class:`splitopt.mesh.MeshPlan`."""
    if inst is not None:
        return inst.settings.problem == "mesh"
    from splitopt.families.mesh.evaluate import MeshPlan

    return isinstance(plan, MeshPlan)


def device_order(plan, inst=None, devices: Sequence[str] | None = None, layer_names: Sequence[str] = ()) -> list[str]:
    """Devices in execution order: ``devices`` if given; two-tier instances: edge, cloud;
    chain instances: ``settings.chain``; mesh instances: ``instance.devices`` (for mesh
    plans the order only names the devices: parts run in the order of the stages);
    otherwise the order of first use by the layers."""
    if devices is not None:
        return list(devices)
    if inst is not None and inst.problem in ("split", "split_bits"):
        return [inst.settings.edge, inst.settings.cloud]
    if inst is not None and inst.settings.chain:
        return list(inst.settings.chain)
    if inst is not None and inst.settings.problem == "mesh":
        return [d.name for d in inst.devices]
    order: list[str] = []
    for n in layer_names:
        if n in plan.device and plan.device[n] not in order:
            order.append(plan.device[n])
    return order


def _check_against(cap: Capture, example_input: torch.Tensor, plan, inst, order: list[str], mesh: bool = False) -> None:
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
    if mesh:  # any device may read from any other: the stages order the parts
        return
    index = {d: i for i, d in enumerate(order)}
    for layer in cap.layers:
        for src in layer.inputs:
            if src != INPUT_NAME and index[plan.device[src]] > index[plan.device[layer.name]]:
                raise InvalidPlan(f"plan.layers.{layer.name}: runs on '{plan.device[layer.name]}' but its input "
                                  f"'{src}' runs on '{plan.device[src]}', later in {order}")


def _plan_bits(plan, names: Sequence[str], reference_bits: int, mesh: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Per layer (weight bits, activation bits): the plan's; mesh plans (and plans without
    bit-widths) run every layer at the reference precision, i.e. in float."""
    if mesh or not hasattr(plan, "weight_bits") or not hasattr(plan, "activation_bits"):
        return {n: reference_bits for n in names}, {n: reference_bits for n in names}
    return ({n: int(plan.weight_bits[n]) for n in names}, {n: int(plan.activation_bits[n]) for n in names})


def _sent_bits(name: str, cap: Capture, abits: Mapping[str, int], inst) -> int:
    if name == INPUT_NAME:
        return int(inst.inputs[0].bits if inst is not None else cap.graph_input["bits"])
    bits = int(abits[name])
    return int(inst.sent_bits(name, bits)) if inst is not None else bits


def _crossings(cap: Capture, abits: Mapping[str, int], inst, order: list[str], dev: Mapping[str, int]) -> list[Crossing]:
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
        sent = tuple((n, elements[n], _sent_bits(n, cap, abits, inst)) for n in names if src[n] <= m < far[n])
        out.append(Crossing(order[m], order[m + 1], sent))
    return out


# ----- mesh plans: stages and crossings ------------------------------------------------------

def _layer_graph(cap: Capture) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(predecessor layers, reader layers) of every layer / tensor (the raw input
    included among the tensors), each once, in capture order."""
    preds = {l.name: [s for s in dict.fromkeys(l.inputs) if s != INPUT_NAME] for l in cap.layers}
    readers: dict[str, list[str]] = {INPUT_NAME: [], **{l.name: [] for l in cap.layers}}
    for l in cap.layers:
        for s in dict.fromkeys(l.inputs):
            readers[s].append(l.name)
    return preds, readers


def mesh_layer_order(cap: Capture, plan, inst=None) -> list[str]:
    """The layers in the order the stages are walked: the order the evaluator's schedule
    starts them in (``splitopt.mesh.evaluate``, ties by capture position) when the plan
    carries task orders and an instance is given, else the capture's execution order
    (which is the instance's). Always a topological order of the layer graph."""
    import heapq

    names = [l.name for l in cap.layers]
    pos = {n: i for i, n in enumerate(names)}
    rank = dict(pos)
    if inst is not None and getattr(plan, "order", None):
        from splitopt.families.mesh.evaluate import evaluate as mesh_evaluate

        starts = {t.label: t.start_ms for t in mesh_evaluate(inst, plan).schedule if t.kind == "compute"}
        ranked = sorted(names, key=lambda n: (starts.get(n, math.inf), pos[n]))
        rank = {n: i for i, n in enumerate(ranked)}
    preds, readers = _layer_graph(cap)
    indegree = {n: len(preds[n]) for n in names}
    heap = [(rank[n], n) for n in names if indegree[n] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, n = heapq.heappop(heap)
        out.append(n)
        for r in readers[n]:
            indegree[r] -= 1
            if indegree[r] == 0:
                heapq.heappush(heap, (rank[r], r))
    return out


def mesh_stages(order: Sequence[str], device: Mapping[str, str],
                preds: Mapping[str, Sequence[str]]) -> list[tuple[str, list[str]]]:
    """Group layers (``order``: a topological order) into stages ``(device, layers)``,
    returned in run order, so that every stage reads only tensors of earlier stages (or
    of itself) and each device has few stages.

    Walking ``order``, a layer joins an existing stage of its device when that keeps the
    stage graph acyclic, i.e. when the stage does not already reach (through other
    stages) a stage holding one of the layer's inputs; else it starts a new stage. Among
    the stages it may join it takes the one holding most of its inputs, then the latest.
    Cutting the walk at every device change and merging the cuts is a special case; a
    device gets one stage whenever no path of the layer graph leaves the device and
    comes back (other devices' stages permitting: two devices may each have to be split
    when their layers feed each other crosswise). Stages are then run in a topological
    order of the stage graph, ties by the position of their first layer in ``order``."""
    import heapq

    stage_of: dict[str, int] = {}
    stage_dev: list[str] = []
    members: list[list[str]] = []
    reach: list[int] = []  # bit set of the stages each stage reaches (itself excluded)
    by_device: dict[str, list[int]] = {}
    for n in order:
        d = device[n]
        pred_stages = {stage_of[p] for p in preds[n]}
        best, best_key = None, None
        for c in by_device.get(d, ()):
            if any(x != c and reach[c] >> x & 1 for x in pred_stages):
                continue  # joining c would close a cycle c -> ... -> x -> c
            key = (sum(1 for p in preds[n] if stage_of[p] == c), c)
            if best_key is None or key > best_key:
                best, best_key = c, key
        if best is None:
            best = len(stage_dev)
            stage_dev.append(d)
            members.append([])
            reach.append(0)
            by_device.setdefault(d, []).append(best)
        members[best].append(n)
        stage_of[n] = best
        for x in pred_stages - {best}:  # new edge x -> best: whoever reaches x now reaches best
            gain = (1 << best) | reach[best]
            for y in range(len(reach)):
                if y == x or reach[y] >> x & 1:
                    reach[y] |= gain
    # run order: topological order of the stage graph
    rank = {n: i for i, n in enumerate(order)}
    succ: dict[int, set[int]] = {c: set() for c in range(len(stage_dev))}
    indegree = [0] * len(stage_dev)
    for n in order:
        for p in preds[n]:
            a, b = stage_of[p], stage_of[n]
            if a != b and b not in succ[a]:
                succ[a].add(b)
                indegree[b] += 1
    heap = [(rank[members[c][0]], c) for c in range(len(stage_dev)) if indegree[c] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, c = heapq.heappop(heap)
        out.append((stage_dev[c], members[c]))
        for b in succ[c]:
            indegree[b] -= 1
            if indegree[b] == 0:
                heapq.heappush(heap, (rank[members[b][0]], b))
    if len(out) != len(stage_dev):  # cannot happen: every join keeps the stage graph acyclic
        raise SplitoptError("partition: the mesh stages form a cycle")
    return out


def _mesh_destinations(cap: Capture, device: Mapping[str, str], source: str, sink: str | None) -> dict[str, list[str]]:
    """Tensor -> devices other than its producer's that need it: its readers' devices, and
    the sink for a layer no layer reads (a final output) when outputs are delivered; in
    reader order. The raw input is produced on ``source``."""
    _, readers = _layer_graph(cap)
    out: dict[str, list[str]] = {}
    for t, rs in readers.items():
        a = source if t == INPUT_NAME else device[t]
        dests = [device[r] for r in rs]
        if t != INPUT_NAME and not rs and sink is not None:
            dests.append(sink)
        out[t] = [b for b in dict.fromkeys(dests) if b != a]
    return out


def _mesh_crossings(cap: Capture, abits: Mapping[str, int], inst, order: list[str], device: Mapping[str, str],
                    source: str, dests: Mapping[str, list[str]]) -> list[Crossing]:
    """One Crossing per ordered device pair ``(a, b)`` that carries something: every
    tensor produced on ``a`` and needed on ``b``, each once (in tensor order: raw input,
    then capture order); pairs sorted by the devices' positions in ``order``."""
    elements = {INPUT_NAME: math.prod(cap.graph_input["shape"])}
    elements.update({l.name: math.prod(l.output_shape) for l in cap.layers})
    pairs: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
    for t in [INPUT_NAME] + [l.name for l in cap.layers]:
        a = source if t == INPUT_NAME else device[t]
        for b in dests[t]:
            pairs.setdefault((a, b), []).append((t, elements[t], _sent_bits(t, cap, abits, inst)))
    index = {d: i for i, d in enumerate(order)}
    ordered = sorted(pairs.items(), key=lambda kv: (index[kv[0][0]], index[kv[0][1]]))
    return [Crossing(a, b, tuple(ts)) for (a, b), ts in ordered]


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
        gm = torch.fx.GraphModule(self.attrs, self.graph, class_name=f"Part{self.m}_{_ident(ctx.part_device[self.m])}")
        return Part(ctx.part_device[self.m], tuple(l.name for l in mine), tuple(self.inputs),
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
    """Cut ``module`` by ``plan`` into runnable parts (see module docstring): one part per
    device for two-tier and chain plans, one part per stage for mesh plans.

    ``inst``: the instance the plan was made for (its layer names must equal the
    capture's, its input shape the example's; it fixes the device order, the sent bits,
    the reference precision ``cloud_bits`` and, for mesh plans, the source, the sink and
    the routes). ``capture``: a capture of ``module`` on ``example_input`` (made here,
    with ``rename``, when None). ``devices``: device order when there is no instance
    (mesh plans: the first device produces the raw input). ``calibration``: inputs
    (n, ...) whose float min/max set the activation ranges of quantized layers (default:
    the example input). Raises InvalidModel (untraceable module, wrong input shape,
    instance mismatch), InvalidPlan (unknown, missing or misplaced layer, unroutable mesh
    plan) or NotApplicable (multiview instances:
    :func:`splitopt.torch.partition_multiview.partition_multiview`), each one
    line."""
    from splitopt.core.errors import NotApplicable

    if inst is not None and inst.settings.problem not in ("split", "split_bits", "chain", "mesh"):
        raise NotApplicable(f"partition: problem '{inst.settings.problem}' is not supported by partition "
                            "(two-tier, chain and mesh plans; multiview plans: splitopt.torch.partition_multiview)")
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
    mesh = is_mesh(plan, inst)
    names = [l.name for l in capture.layers]
    order = device_order(plan, inst, devices, names)
    _check_against(capture, example_input, plan, inst, order, mesh=mesh)
    if mesh and inst is not None:
        from splitopt.families.mesh.evaluate import check_plan as check_mesh_plan

        check_mesh_plan(inst, _as_mesh_plan(plan))
    if reference_bits is None:
        reference_bits = int(inst.settings.cloud_bits) if inst is not None else DEFAULT_REFERENCE_BITS
    wbits, abits = _plan_bits(plan, names, reference_bits, mesh)
    quantized = any(min(wbits[n], abits[n]) < reference_bits for n in names)
    needs_ranges = any(abits[n] < reference_bits for n in names)
    ranges: dict[str, tuple[float, float]] = {}
    if quantized:
        ranges = calibrate(capture, example_input if calibration is None else calibration)
        if needs_ranges:
            missing = [n for n in names if abits[n] < reference_bits and n not in ranges]
            if missing:
                raise InvalidPlan(f"plan.layers.{missing[0]}.activation_bits: the layer's output is not a float "
                                  "tensor and cannot be quantized")
    if mesh:
        return _partition_mesh(capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges,
                               quantized)
    index = {d: i for i, d in enumerate(order)}
    dev = {n: index[plan.device[n]] for n in names}
    ctx = _Context(capture, plan, order, dev, reference_bits, ranges, wbits=wbits, abits=abits)
    crossings = _crossings(capture, abits, inst, order, dev)
    output_names, out_at = _model_outputs(ctx)

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
    return SplitModel(capture, plan, order, parts, crossings, tuple(output_names), example_input, quantized, ranges,
                      inst=inst)


def _model_outputs(ctx: "_Context") -> tuple[list[str], list[tuple[int, str, torch.fx.Node]]]:
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


def _partition_mesh(capture: Capture, plan, inst, order: list[str], example_input: torch.Tensor, reference_bits: int,
                    wbits: dict[str, int], abits: dict[str, int], ranges: dict[str, tuple[float, float]],
                    quantized: bool) -> SplitModel:
    """Mesh plans: stages (:func:`mesh_stages`) as parts, crossings per device pair."""
    names = [l.name for l in capture.layers]
    device = {n: plan.device[n] for n in names}
    if inst is not None:
        from splitopt.families.mesh.data import mesh_options

        source = inst.settings.edge
        sink = inst.settings.cloud if mesh_options(inst).deliver_outputs else None
    else:
        source, sink = order[0], None
    preds, _ = _layer_graph(capture)
    stages = mesh_stages(mesh_layer_order(capture, plan, inst), device, preds)
    stage_of = {n: k for k, (_, layers) in enumerate(stages) for n in layers}
    part_device = [d for d, _ in stages]
    ctx = _Context(capture, plan, order, stage_of, reference_bits, ranges, part_device=part_device,
                   wbits=wbits, abits=abits)
    dests = _mesh_destinations(capture, device, source, sink)
    crossings = _mesh_crossings(capture, abits, inst, order, device, source, dests)
    output_names, out_at = _model_outputs(ctx)
    _, readers = _layer_graph(capture)

    parts = []
    for k, (d, layers) in enumerate(stages):
        wanted = [l for l in capture.layers if stage_of[l.name] == k
                  and (dests[l.name] or any(stage_of[r] != k for r in readers[l.name]))]
        pairs = [(l.name, ctx.nodes[l.out_node]) for l in wanted]
        pairs += [(name, a) for home, name, a in out_at if home == k and name not in {p[0] for p in pairs}]
        part = _PartBuilder(ctx, k).build(pairs)
        part.sends = tuple((n, b) for n in part.outputs if n in dests for b in dests[n])
        parts.append(part)
    output_devices = []
    for name in output_names:
        if name == INPUT_NAME:
            output_devices.append(source)
        else:
            home = next(h for h, n, _ in out_at if n == name)
            output_devices.append(part_device[home])
    _check_flow_mesh(parts, crossings, output_names, source, device)
    return SplitModel(capture, plan, order, parts, crossings, tuple(output_names), example_input, quantized, ranges,
                      kind="mesh", inst=inst, source=source, sink=sink, input_sends=dests[INPUT_NAME],
                      output_devices=output_devices)


def _check_flow_mesh(parts: list[Part], crossings: list[Crossing], output_names: Sequence[str], source: str,
                     device: Mapping[str, str]) -> None:
    """Mesh plans: every tensor a part receives was produced by an earlier part (the raw
    input: on the source) and, when produced on another device, is in the crossing from
    that device to the part's; raises SplitoptError naming the first that is not."""
    sent = {(c.source, c.target): set(c.names) for c in crossings}
    produced_at: dict[str, int] = {INPUT_NAME: -1}
    for m, p in enumerate(parts):
        for n in p.inputs:
            src = produced_at.get(n)
            if src is None:
                raise SplitoptError(f"partition: part {m} on '{p.device}' reads '{n}', which no earlier part produces")
            a = source if n == INPUT_NAME else device[n]
            if a != p.device and n not in sent.get((a, p.device), ()):
                raise SplitoptError(f"partition: part {m} on '{p.device}' reads '{n}', but it is not sent "
                                    f"from '{a}' to '{p.device}'")
        for n in p.outputs:
            produced_at.setdefault(n, m)
    for n in output_names:
        if n not in produced_at:
            raise SplitoptError(f"partition: no part produces the model output '{n}'")


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
    """Bytes per sample per crossing as ``splitopt.evaluate`` counts them: two-tier
    ``[metrics.transmitted_bytes]``; chain ``metrics.devices[m].sent_bytes`` for every
    device but the last; mesh the bytes of :func:`evaluator_mesh_crossings` (per device
    pair, in the order of :class:`SplitModel`'s mesh crossings). Raises NotApplicable for
    other families."""
    from splitopt.core.errors import NotApplicable
    from splitopt.api import evaluate

    if inst.settings.problem == "mesh":
        return [b for _, _, b in evaluator_mesh_crossings(inst, plan)]
    metrics = evaluate(inst, plan)
    if inst.problem in ("split", "split_bits"):
        return [float(metrics.transmitted_bytes)]
    if inst.settings.problem == "chain":
        return [float(d.sent_bytes) for d in metrics.devices[:-1]]
    raise NotApplicable(f"partition: problem '{inst.settings.problem}' is not supported (two-tier, chain and mesh)")


def evaluator_mesh_crossings(inst, plan) -> list[tuple[str, str, float]]:
    """Mesh plans: ``(producer device, destination device, bytes per sample)`` for every
    device pair, from the data the mesh evaluator schedules its transfers with
    (``MeshData.destinations``: a tensor's readers' devices and, for final outputs, the
    sink; ``MeshData.sent_bytes``): each (tensor, destination) once, whatever the route;
    pairs sorted by the devices' positions in ``instance.devices``."""
    from splitopt.families.mesh.evaluate import MeshData, check_plan as check_mesh_plan

    data = MeshData(inst)
    plan = _as_mesh_plan(plan)
    check_mesh_plan(inst, plan, data=data)
    pairs: dict[tuple[str, str], float] = {}
    for t in data.tensors:
        a = data.producer_device(plan.device, t)
        for b in data.destinations(plan.device, t):
            pairs[(a, b)] = pairs.get((a, b), 0.0) + data.sent_bytes[t]
    return [(a, b, v) for (a, b), v in sorted(pairs.items(), key=lambda kv: (data.dev_index[kv[0][0]],
                                                                             data.dev_index[kv[0][1]]))]


def evaluator_link_bytes(inst, plan) -> dict[str, float]:
    """Mesh plans: bytes per sample over each link ``"u->v"`` as :func:`splitopt.mesh.evaluate`
    charges them (``metrics.links``: every hop of every tensor's multicast tree)."""
    from splitopt.families.mesh.evaluate import evaluate as mesh_evaluate

    return {l.link: float(l.bytes) for l in mesh_evaluate(inst, _as_mesh_plan(plan)).links}


def _as_mesh_plan(plan):
    """``plan`` itself when it is a mesh plan (device map and task orders), else a mesh
    plan with its device map and the default order."""
    from splitopt.families.mesh.evaluate import MeshPlan

    return plan if hasattr(plan, "order") else MeshPlan(dict(plan.device))


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def compare(split: SplitModel, module: torch.nn.Module, inputs: torch.Tensor, inst=None,
            transmit: Transmit | None = None) -> dict[str, Any]:
    """Run ``split`` and the unsplit ``module`` on ``inputs`` and report (JSON-ready):
    per part its device, layers, received/sent tensors and seconds (summed over the
    samples); per crossing the tensors and bytes per sample (from the shapes, measured on
    the real tensors, and the evaluator's when ``inst`` is given); for mesh plans with an
    instance also per link the bytes of the crossings routed as the instance routes them
    and the evaluator's (``links``); ``max_abs_diff`` and ``relative_mse`` of the split
    output against the unsplit one; ``ok``: bytes equal the evaluator's (relative 1e-9;
    mesh: per device pair and per link, and the same pairs) and, for float plans,
    ``max_abs_diff <= FLOAT_ATOL``."""
    with torch.no_grad():
        ref = module.eval()(inputs)
    out = split.run(inputs, transmit)
    ref_t = ref if isinstance(ref, torch.Tensor) else ref[0]
    out_t = out if isinstance(out, torch.Tensor) else out[0]
    diff = float((out_t.double() - ref_t.double()).abs().max()) if out_t.numel() else 0.0
    mesh = split.kind == "mesh"
    evaluator: dict[tuple[str, str], float] | list[float] | None = None
    if inst is not None:
        evaluator = ({(a, b): v for a, b, v in evaluator_mesh_crossings(inst, split.plan)} if mesh
                     else evaluator_sent_bytes(inst, split.plan))
    crossings = []
    bytes_ok = True
    for m, c in enumerate(split.crossings):
        row = {"source": c.source, "target": c.target,
               "tensors": [{"tensor": n, "elements": e, "bits": b, "bytes": e * b / 8.0} for n, e, b in c.tensors],
               "bytes": c.bytes, "measured_bytes": split.last_run.crossing_bytes[m]}
        if evaluator is not None:
            row["evaluator_bytes"] = evaluator.get((c.source, c.target), 0.0) if mesh else evaluator[m]
            bytes_ok &= _close(c.bytes, row["evaluator_bytes"])
        bytes_ok &= _close(c.bytes, split.last_run.crossing_bytes[m])
        crossings.append(row)
    report: dict[str, Any] = {}
    if mesh and evaluator is not None:
        bytes_ok &= set(evaluator) == {(c.source, c.target) for c in split.crossings}
        ours, theirs = split.link_bytes(), evaluator_link_bytes(inst, split.plan)
        links = [{"link": k, "bytes": ours.get(k, 0.0), "evaluator_bytes": theirs.get(k, 0.0)}
                 for k in dict.fromkeys([*theirs, *ours])]
        bytes_ok &= all(_close(l["bytes"], l["evaluator_bytes"]) for l in links)
        report["links"] = links
        report["link_bytes"] = sum(ours.values())
    parts = [{"device": p.device, "layers": list(p.layers), "inputs": list(p.inputs), "outputs": list(p.outputs),
              "sends": [list(s) for s in p.sends], "seconds": split.last_run.part_seconds[m]}
             for m, p in enumerate(split.parts)]
    float_ok = split.quantized or diff <= FLOAT_ATOL
    return {"samples": int(inputs.shape[0]), "quantized": split.quantized, "kind": split.kind, "parts": parts,
            "crossings": crossings, "transmitted_bytes": split.transmitted_bytes, **report,
            "max_abs_diff": diff, "relative_mse": relative_mse(out_t, ref_t), "float_atol": FLOAT_ATOL,
            "bytes_match": bool(bytes_ok), "ok": bool(bytes_ok and float_ok)}
