"""Partition ``mesh`` plans (:mod:`splitopt.families.mesh`): one part per *stage*.

A layer may run on any device, parallel branches on different devices, and a device may
run layers both before and after another device's. *Stages*: the layers are walked in a
topological order that follows the plan (:func:`mesh_layer_order`: the evaluator's
schedule start order when the plan carries task orders, else the execution order); each
joins an existing stage of its device unless that would close a cycle among the stages
(a stage that reaches, through other stages, a stage holding one of the layer's inputs),
else it opens a new stage (:func:`mesh_stages`). This is cutting the walk at every
device change and merging the cuts wherever safe: a device gets one stage when no path
of the layer graph leaves it and comes back (as long as other devices' stages do not
force more); a ping-pong A -> B -> A gives A two stages. The stages run in a topological
order of the stage graph. Each device keeps its own tensors; a part returns the outputs
of its layers that other stages read or other devices need, and the model outputs it
computes.

*Crossings*: the raw input is produced on the source ``settings.edge``; a tensor is sent
from its producer's device to every other device that reads it, and a final output (a
layer no layer reads) to the sink ``settings.cloud`` when ``settings.mesh.deliver_outputs``
(the default); each (tensor, destination device) once, at ``Instance.sent_bits(t,
cloud_bits)`` (mesh plans run in float). :class:`splitopt.torch.split_model.Crossing`
groups them per ordered device pair. How they are compared with the mesh evaluator:
:mod:`splitopt.torch.split_compare`.
"""

from __future__ import annotations

import heapq
import math
from typing import Mapping, Sequence

import torch

from splitopt.core.errors import SplitoptError
from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.part_builder import PartBuilder, PartContext, model_outputs
from splitopt.torch.split_model import Crossing, Part, SplitModel, sent_bits, tensor_elements


def partition_mesh(capture: Capture, plan, inst, order: list[str], example_input: torch.Tensor, reference_bits: int,
                    wbits: dict[str, int], abits: dict[str, int], ranges: dict[str, tuple[float, float]],
                    quantized: bool) -> SplitModel:
    """Mesh plans, already checked against the capture
    (:func:`splitopt.torch.partition.partition` does): stages (:func:`mesh_stages`) as
    parts, crossings per device pair. ``order``: the devices (without an instance the
    first one produces the raw input); ``wbits``/``abits``/``ranges``/``quantized`` as
    for :func:`splitopt.torch.partition_sequential.partition_sequential` (mesh plans run in
    float)."""
    names = [l.name for l in capture.layers]
    device = {n: plan.device[n] for n in names}
    if inst is not None:
        from splitopt.families.mesh.data import mesh_options

        source = inst.settings.edge
        sink = inst.settings.cloud if mesh_options(inst).deliver_outputs else None
    else:
        source, sink = order[0], None
    preds, _ = layer_graph(capture)
    stages = mesh_stages(mesh_layer_order(capture, plan, inst), device, preds)
    stage_of = {n: k for k, (_, layers) in enumerate(stages) for n in layers}
    part_device = [d for d, _ in stages]
    ctx = PartContext(capture, plan, order, stage_of, reference_bits, ranges, part_device=part_device,
                      wbits=wbits, abits=abits)
    dests = mesh_destinations(capture, device, source, sink)
    crossings = mesh_crossings(capture, abits, inst, order, device, source, dests)
    output_names, out_at = model_outputs(ctx)
    _, readers = layer_graph(capture)

    parts = []
    for k in range(len(stages)):
        wanted = [l for l in capture.layers if stage_of[l.name] == k
                  and (dests[l.name] or any(stage_of[r] != k for r in readers[l.name]))]
        pairs = [(l.name, ctx.nodes[l.out_node]) for l in wanted]
        pairs += [(name, a) for home, name, a in out_at if home == k and name not in {p[0] for p in pairs}]
        part = PartBuilder(ctx, k).build(pairs)
        part.sends = tuple((n, b) for n in part.outputs if n in dests for b in dests[n])
        parts.append(part)
    output_devices = []
    for name in output_names:
        if name == INPUT_NAME:
            output_devices.append(source)
        else:
            home = next(h for h, n, _ in out_at if n == name)
            output_devices.append(part_device[home])
    check_mesh_flow(parts, crossings, output_names, source, device)
    return SplitModel(capture, plan, order, parts, crossings, tuple(output_names), example_input, quantized, ranges,
                      kind="mesh", inst=inst, source=source, sink=sink, input_sends=dests[INPUT_NAME],
                      output_devices=output_devices)


def check_mesh_flow(parts: list[Part], crossings: list[Crossing], output_names: Sequence[str], source: str,
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


def as_mesh_plan(plan):
    """``plan`` itself when it is a mesh plan (device map and task orders), else a mesh
    plan with its device map and the default order."""
    from splitopt.families.mesh.plan import MeshPlan

    return plan if hasattr(plan, "order") else MeshPlan(dict(plan.device))


def layer_graph(cap: Capture) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
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
    starts them in (:func:`splitopt.families.mesh.evaluate.evaluate`, ties by capture
    position) when the plan carries task orders and an instance is given, else the
    capture's execution order (which is the instance's). Always a topological order of
    the layer graph."""
    names = [l.name for l in cap.layers]
    pos = {n: i for i, n in enumerate(names)}
    rank = dict(pos)
    if inst is not None and getattr(plan, "order", None):
        from splitopt.families.mesh.evaluate import evaluate as mesh_evaluate

        starts = {t.label: t.start_ms for t in mesh_evaluate(inst, plan).schedule if t.kind == "compute"}
        ranked = sorted(names, key=lambda n: (starts.get(n, math.inf), pos[n]))
        rank = {n: i for i, n in enumerate(ranked)}
    preds, readers = layer_graph(cap)
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


def mesh_destinations(cap: Capture, device: Mapping[str, str], source: str, sink: str | None) -> dict[str, list[str]]:
    """Tensor -> devices other than its producer's that need it: its readers' devices, and
    the sink for a layer no layer reads (a final output) when outputs are delivered; in
    reader order. The raw input is produced on ``source``."""
    _, readers = layer_graph(cap)
    out: dict[str, list[str]] = {}
    for t, rs in readers.items():
        a = source if t == INPUT_NAME else device[t]
        dests = [device[r] for r in rs]
        if t != INPUT_NAME and not rs and sink is not None:
            dests.append(sink)
        out[t] = [b for b in dict.fromkeys(dests) if b != a]
    return out


def mesh_crossings(cap: Capture, abits: Mapping[str, int], inst, order: list[str], device: Mapping[str, str],
                    source: str, dests: Mapping[str, list[str]]) -> list[Crossing]:
    """One Crossing per ordered device pair ``(a, b)`` that carries something: every
    tensor produced on ``a`` and needed on ``b``, each once (in tensor order: raw input,
    then capture order); pairs sorted by the devices' positions in ``order``."""
    elements = tensor_elements(cap)
    pairs: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
    for t in [INPUT_NAME] + [l.name for l in cap.layers]:
        a = source if t == INPUT_NAME else device[t]
        for b in dests[t]:
            pairs.setdefault((a, b), []).append((t, elements[t], sent_bits(t, cap, abits, inst)))
    index = {d: i for i, d in enumerate(order)}
    ordered = sorted(pairs.items(), key=lambda kv: (index[kv[0][0]], index[kv[0][1]]))
    return [Crossing(a, b, tuple(ts)) for (a, b), ts in ordered]

