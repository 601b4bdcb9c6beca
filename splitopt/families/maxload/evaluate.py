"""The maxload family's evaluator: the placement rules (``check_placement``) and the two
objectives of the peer benchmark, max-load (``max_load``, the time per sample of a
pipeline: the "throughput" objective) and single-sample ``latency``, evaluated exactly as
``formulations/maxload_models.md`` states. Times in ms, sizes in bytes."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.core.metrics import FamilyMetrics
from splitopt.core.schedule import Task
from splitopt.families.maxload.contiguity import contiguity_graph
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement, device_key, device_kind, validate_placement


def _fmt_ids(ids: Iterable[int], limit: int = 6) -> str:
    ids = sorted(ids)
    head = ", ".join(map(str, ids[:limit]))
    return "{" + head + (f", ... ({len(ids)} nodes)" if len(ids) > limit else "") + "}"


def _bfs(adj: Mapping[int, Iterable[int]], starts: Iterable[int], allowed: frozenset[int]) -> dict[int, int | None]:
    """Nodes reachable from ``starts`` through ``allowed`` nodes, with a parent pointer."""
    parent: dict[int, int | None] = {s: None for s in starts}
    queue = deque(parent)
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v in allowed and v not in parent:
                parent[v] = u
                queue.append(v)
    return parent


def _path(parent: Mapping[int, int | None], end: int) -> list[int]:
    out = [end]
    while parent[out[-1]] is not None:
        out.append(parent[out[-1]])  # type: ignore[arg-type]
    return out[::-1]


def convexity_witness(inst: MaxloadInstance, ids: frozenset[int], among: frozenset[int] | None = None) -> list[int] | None:
    """None if ``ids`` is convex in the DAG induced on ``among`` (default: all nodes),
    else a path ``a -> ... -> w -> ... -> b`` with a, b in ids and w not. Linear time:
    w is outside ids, reachable from ids and reaching ids."""
    among = frozenset(inst.node_by_id) if among is None else among
    ids = ids & among
    if len(ids) < 2:
        return None
    # leave the set: start from the outside successors of its nodes
    first = {v: u for u in ids for v in inst.successors[u] if v in among and v not in ids}
    outside = among - ids
    down = _bfs(inst.successors, first, outside)
    back = {u: v for v in ids for u in inst.predecessors[v] if u in down}
    if not back:
        return None
    w, b = next(iter(sorted(back.items())))
    path = _path(down, w)
    return [first[path[0]]] + path + [b]


def check_placement(inst: MaxloadInstance, placement: MaxloadPlacement, contiguous: bool = True) -> list[str]:
    """Broken placement rules, one line each (empty list: the placement is valid).

    Rules (README of the peer data): a node with supportedOnFpga false is on a CPU; a
    colour class is on one device; on each FPGA the sizes sum to at most maxSizePerFPGA;
    at most k FPGAs and l CPUs are used, named fpga0..fpga{k-1}, cpu0..cpu{l-1};
    with ``contiguous``, the forward nodes of each device (CPUs included, as the paper's
    IP does by default) form a convex set of the forward DAG, under the instance's
    contiguity rule (``contiguity.py``: with "authors", the artificial forward nodes of
    colour groups without a forward node count too, in the forward DAG extended by the
    artificial edges). A placement that does not place every node exactly once is an
    InvalidPlan, not a violation."""
    validate_placement(inst, placement)
    out: list[str] = []
    dev = placement.device
    for n in inst.nodes:
        if not n.on_fpga_ok and dev[n.id].startswith("fpga"):
            out.append(f"node {n.id} ({n.name}) is on {dev[n.id]} but supportedOnFpga is false")
    for cc, members in sorted(inst.colour_classes.items()):
        devs: dict[str, list[int]] = {}
        for nid in members:
            devs.setdefault(dev[nid], []).append(nid)
        if len(devs) > 1:
            parts = "; ".join(f"{d} {_fmt_ids(v)}" for d, v in sorted(devs.items(), key=lambda kv: device_key(kv[0])))
            out.append(f"colour class {cc} is split across devices: {parts}")
    for d, ids in placement.nodes_on.items():
        kind, _ = device_kind(d)
        if kind == "fpga":
            size = sum(inst.node_by_id[i].size_bytes for i in ids)
            if size > inst.max_size_per_fpga:
                out.append(
                    f"{d} memory {size:.6g} bytes exceeds maxSizePerFPGA {inst.max_size_per_fpga:.6g} "
                    f"(by {size - inst.max_size_per_fpga:.6g})"
                )
    for kind, limit, key in (("fpga", inst.max_fpgas, "maxFPGAs"), ("cpu", inst.max_cpus, "maxCPUs")):
        used = [d for d in placement.nodes_on if d.startswith(kind)]
        if len(used) > limit:
            out.append(f"{len(used)} {kind.upper()}s used ({', '.join(used)}), more than {key}={limit}")
        else:
            for d in used:
                if device_kind(d)[1] >= limit:
                    out.append(f"{d} does not exist: {key}={limit} allows {kind}0..{kind}{limit - 1}")
    if contiguous:
        cg = contiguity_graph(inst)
        for d, ids in placement.nodes_on.items():
            path = cg.witness(ids)
            if path is not None:
                via = ", ".join(f"{cg.label(x)} on {dev[cg.host[x]]}" for x in path[1:-1])
                note = ""
                if any(x in cg.artificial for x in path):
                    note = " (contiguity 'authors': fwd[v] is the artificial forward node of v's colour group)"
                out.append(
                    f"{d} is not contiguous: path {' -> '.join(cg.label(x) for x in path)} leaves its forward nodes "
                    f"and comes back (via {via}){note}"
                )
    return out


# ----- objectives --------------------------------------------------------------------
def _all_devices(inst: MaxloadInstance, placement: MaxloadPlacement) -> list[str]:
    names = set(inst.fpgas) | set(inst.cpus) | set(placement.nodes_on)
    return sorted(names, key=device_key)


def fpga_transfers(inst: MaxloadInstance, ids: frozenset[int]) -> tuple[float, float]:
    """(incoming, outgoing) communication of an accelerator holding ``ids``: each outside
    node with a successor inside pays its outgoing cost once, each inside node with a
    successor outside pays its outgoing cost once."""
    incoming = {u for v in ids for u in inst.predecessors[v] if u not in ids}
    outgoing = {u for u in ids if any(v not in ids for v in inst.successors[u])}
    return (
        math.fsum(inst.out_cost[u] for u in sorted(incoming)),
        math.fsum(inst.out_cost[u] for u in sorted(outgoing)),
    )


def max_load(inst: MaxloadInstance, placement: MaxloadPlacement) -> tuple[float, dict[str, float]]:
    """Throughput objective (time per sample of the pipeline, ms) and every device's load.

    FPGA load = sum of its nodes' fpgaLatency + incoming + outgoing transfers
    (:func:`fpga_transfers`); CPU load = sum of its nodes' cpuLatency, no communication.
    Forward and backward nodes both count (the objective is max over devices of forward
    + backward load). Devices fpga0..fpga{k-1} and cpu0..cpu{l-1} are always reported
    (0.0 when empty), plus any other device the placement uses. The rules are not
    checked here: see check_placement."""
    validate_placement(inst, placement)
    loads: dict[str, float] = {}
    on = placement.nodes_on
    for d in _all_devices(inst, placement):
        ids = on.get(d, frozenset())
        if d.startswith("fpga"):
            cin, cout = fpga_transfers(inst, ids)
            loads[d] = math.fsum([math.fsum(inst.node_by_id[i].fpga_ms for i in sorted(ids)), cin, cout])
        else:
            loads[d] = math.fsum(inst.node_by_id[i].cpu_ms for i in sorted(ids))
    return (max(loads.values(), default=0.0), loads)


def latency(inst: MaxloadInstance, placement: MaxloadPlacement) -> float:
    """Single-sample latency (ms) of ``placement``; see :func:`latency_schedule`."""
    return latency_schedule(inst, placement)[0]


def latency_schedule(inst: MaxloadInstance, placement: MaxloadPlacement) -> tuple[float, list[Task]]:
    """Single-sample latency (ms): when the last node finishes.

    * Each accelerator's node set is one block (one "call"). It starts when every
      outside node with an edge into it has finished, then runs, back to back and not
      overlapped: all its incoming transfers (each outside source node's outgoing cost
      once), all its nodes' fpgaLatency, all its outgoing transfers (each inside node
      with an outside successor, once). Every node of the block finishes at the block's
      end: its outputs are usable only after the whole call, transfers included.
    * A CPU node starts when all its predecessors have finished and takes its
      cpuLatency; CPUs pay no communication; the CPU index and maxCPUs are ignored (as
      many cores as the graph is wide, as in the paper's latency IP and evaluator).
    * An FPGA -> FPGA edge pays the source's cost on both (out to CPU memory, then in).
    * The blocks must be orderable: each accelerator set convex and the graph with each
      accelerator contracted to one node acyclic. Otherwise the latency is undefined
      and this raises InvalidPlan naming the devices (check_placement's contiguity
      rule covers convexity of forward nodes; the mutual-dependency case is only
      caught here).
    The rules (memory, colours, device counts) are not checked: see check_placement."""
    validate_placement(inst, placement)
    dev = placement.device
    block = {nid: (d if d.startswith("fpga") else f"n{nid}") for nid, d in dev.items()}
    on = placement.nodes_on
    for d, ids in on.items():
        if d.startswith("fpga"):
            path = convexity_witness(inst, ids)
            if path is not None:
                raise InvalidPlan(
                    f"latency: {d} is not convex (path {' -> '.join(map(str, path))} leaves and re-enters it); "
                    "its subgraph cannot run as one call"
                )
    # the blocks' graph, ordered by the standard library's graphlib (networkx costs more to
    # import than a small solve takes)
    from graphlib import CycleError, TopologicalSorter

    preds: dict[str, set[str]] = {b: set() for b in sorted(set(block.values()))}
    edges = {(block[e.source], block[e.target]) for e in inst.edges if block[e.source] != block[e.target]}
    for u, v in edges:
        preds[v].add(u)
    try:
        order = list(TopologicalSorter(preds).static_order())
    except CycleError as err:
        cyc = list(err.args[1][:-1])
        if (cyc[0], cyc[1 % len(cyc)]) not in edges:  # name it in the direction data flows
            cyc.reverse()
        names = [dev[int(b[1:])] + f"(node {b[1:]})" if b.startswith("n") else b for b in cyc]
        raise InvalidPlan(
            f"latency: accelerator subgraphs wait on each other in a cycle: {' -> '.join(names + names[:1])}"
        ) from None
    finish: dict[str, float] = {}
    tasks: list[Task] = []
    for b in order:
        ready = max((finish[p] for p in preds[b]), default=0.0)
        if b.startswith("fpga"):
            ids = on[b]
            cin, cout = fpga_transfers(inst, ids)
            compute = math.fsum(inst.node_by_id[i].fpga_ms for i in sorted(ids))
            finish[b] = ready + math.fsum([cin, compute, cout])
            for kind, label, start, end in (("transfer", "in", ready, ready + cin),
                                            ("compute", f"{len(ids)} nodes", ready + cin, ready + cin + compute),
                                            ("transfer", "out", ready + cin + compute, finish[b])):
                if end > start:
                    tasks.append(Task(b, kind, label, start, end))
        else:
            node = inst.node_by_id[int(b[1:])]
            finish[b] = ready + node.cpu_ms
            if node.cpu_ms > 0:
                tasks.append(Task("cpu", "compute", f"node {node.id}", ready, finish[b]))
    return max(finish.values(), default=0.0), tasks


@dataclass(frozen=True)
class MaxloadMetrics(FamilyMetrics):
    """What a placement costs. ``max_load_ms``: the largest device load (the throughput
    objective); ``loads_ms``: every device's load; ``latency_ms``: the single-sample
    latency, None where it is undefined for the placement (non-convex or mutually waiting
    accelerator sets, see ``latency``); ``objective``: which one the instance minimises.
    ``violations``: broken placement rules, and for the latency objective an undefined
    latency."""

    objective: str
    max_load_ms: float
    loads_ms: Mapping[str, float]
    latency_ms: float | None
    transfer_ms: Mapping[str, float] = field(default_factory=dict)
    schedule: tuple[Task, ...] = ()

    @property
    def objective_ms(self) -> float:
        """What the programs minimise (ms): the max-load or the latency (infinite when
        the latency is undefined)."""
        if self.objective == "latency":
            return self.latency_ms if self.latency_ms is not None else math.inf
        return self.max_load_ms

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "objective_ms": self.objective_ms, "max_load_ms": self.max_load_ms,
                "loads_ms": dict(self.loads_ms), "transfer_ms": dict(self.transfer_ms), "latency_ms": self.latency_ms,
                "schedule": [t.to_dict() for t in self.schedule], **self.verdict()}

    def breakdown(self) -> list[tuple[str, float, float]]:
        """Per device with a load: (device, compute ms, transfer ms)."""
        return [(d, load - self.transfer_ms.get(d, 0.0), self.transfer_ms.get(d, 0.0))
                for d, load in self.loads_ms.items() if load > 0]


def evaluate(inst: MaxloadInstance, placement: MaxloadPlacement) -> MaxloadMetrics:
    """Both objectives and the broken rules of ``placement``; InvalidPlan if it does not
    place every node exactly once on a well-named device."""
    violations = check_placement(inst, placement)
    value, loads = max_load(inst, placement)
    transfers = {}
    for d, ids in placement.nodes_on.items():
        if d.startswith("fpga"):
            transfers[d] = math.fsum(fpga_transfers(inst, ids))
    try:
        lat, tasks = latency_schedule(inst, placement)
    except InvalidPlan as e:
        lat, tasks = None, []
        if inst.objective == "latency":
            violations.append(str(e))
    return MaxloadMetrics(inst.objective, value, loads, lat, transfers, tuple(tasks), violations=tuple(violations))
