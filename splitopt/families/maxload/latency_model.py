"""The latency model on group -> device maps (``where``, see
``splitopt.families.maxload.cores``), shared by the latency programs: which transfers
each accelerator pays, the schedule of the blocks (any durations: ms, integer units,
potentials), lower bounds on finish times and an upper bound on any latency. The
evaluator (``splitopt.families.maxload.evaluate.latency``) stays the only judge of a
placement; these functions build and encode the programs
(``formulations/maxload_models.md``, "Latency program")."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.families.maxload.cores import CPU, may_use_accelerator
from splitopt.families.maxload.data import Groups
from splitopt.families.maxload.instance import MaxloadInstance


def crossing(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int]) -> dict[int, set[int]]:
    """Accelerator -> the nodes whose outgoing cost it pays: In(a) and Out(a) of
    formulations/maxload_models.md (disjoint; each node once)."""
    out: dict[int, set[int]] = {}
    for u in inst.topo_order:
        a_u = where[gr.of[u]]
        for v in inst.successors[u]:
            a_v = where[gr.of[v]]
            if a_u != a_v:
                if a_u != CPU:
                    out.setdefault(a_u, set()).add(u)
                if a_v != CPU:
                    out.setdefault(a_v, set()).add(u)
    return out


def block_schedule(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int], cpu_time: Mapping[int, Any],
                   acc_work: Mapping[int, Any], zero: Any = 0.0) -> tuple[dict[int, Any], dict[int, Any], dict[int, Any]]:
    """(finish time of every node, start and end of every used accelerator) when a CPU
    node v takes ``cpu_time[v]`` and accelerator a's call takes ``acc_work[a]`` (the
    latency model of formulations/maxload_models.md). InvalidPlan when the blocks wait on
    each other in a cycle (a non-convex accelerator set is such a cycle)."""
    block = {v: ("a", where[gr.of[v]]) if where[gr.of[v]] != CPU else ("n", v) for v in inst.node_by_id}
    inputs: dict[tuple[str, int], set[int]] = {b: set() for b in block.values()}
    succ: dict[tuple[str, int], set[tuple[str, int]]] = {b: set() for b in block.values()}
    for e in inst.edges:
        bu, bv = block[e.source], block[e.target]
        if bu != bv:
            inputs[bv].add(e.source)
            succ[bu].add(bv)
    indegree = {b: 0 for b in inputs}
    for b in succ:
        for c in succ[b]:
            indegree[c] += 1
    members: dict[tuple[str, int], list[int]] = {}
    for v, b in block.items():
        members.setdefault(b, []).append(v)
    ready = sorted(b for b, d in indegree.items() if d == 0)
    finish: dict[tuple[str, int], Any] = {}
    start: dict[int, Any] = {}
    end: dict[int, Any] = {}
    node_finish: dict[int, Any] = {}
    while ready:
        b = ready.pop()
        begin = max((node_finish[u] for u in inputs[b]), default=zero)
        if b[0] == "a":
            start[b[1]] = begin
            finish[b] = end[b[1]] = begin + acc_work[b[1]]
        else:
            finish[b] = begin + cpu_time[b[1]]
        for v in members[b]:
            node_finish[v] = finish[b]
        for c in sorted(succ[b]):
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if len(finish) != len(indegree):
        stuck = sorted({f"fpga{b[1]}" for b, d in indegree.items() if d > 0 and b[0] == "a"})
        raise InvalidPlan(f"accelerator calls wait on each other in a cycle ({', '.join(stuck)})")
    return node_finish, start, end


def accelerator_work(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int], compute: Mapping[int, Any],
                     cost: Mapping[int, Any], add: Callable[[list], Any] = math.fsum) -> dict[int, Any]:
    """Accelerator -> its call's duration: its nodes' ``compute`` plus the ``cost`` of
    every node whose output crosses its boundary (``add`` sums them)."""
    on: dict[int, list[int]] = {}
    for v in inst.topo_order:
        if where[gr.of[v]] != CPU:
            on.setdefault(where[gr.of[v]], []).append(v)
    paid = crossing(inst, gr, where)
    return {a: add([add([cost[u] for u in sorted(paid.get(a, ()))]), add([compute[v] for v in ids])])
            for a, ids in on.items()}


def longest_min_path(inst: MaxloadInstance, gr: Groups, cpu_time: Mapping[int, Any], acc_time: Mapping[int, Any],
                     zero: Any = 0.0) -> dict[int, Any]:
    """Node -> the longest path ending at it when each node takes its smallest allowed
    time: a lower bound on its finish time in every valid placement (a path's nodes on
    one accelerator form one segment of it, and the call takes at least their sum)."""
    cpu_ok = inst.max_cpus >= 1
    low: dict[int, Any] = {}
    for v in inst.topo_order:
        options = [cpu_time[v]] if cpu_ok else []
        if may_use_accelerator(inst, gr, gr.of[v]):
            options.append(acc_time[v])
        own = min(options) if options else zero
        low[v] = max((low[u] for u in inst.predecessors[v]), default=zero) + own
    return low


def sum_bound_ms(inst: MaxloadInstance) -> float:
    """U (ms): no placement whose latency is defined has a latency above it. The latency
    is one chain of blocks, at most the sum of all block durations: every node once (at
    most max(cpuLatency, fpgaLatency)) plus each outgoing cost c(u) once per accelerator
    that pays it (its own, as Out, and each accelerator holding a successor, as In: at
    most min(k, outdeg(u) + 1)). Widened by 1e-9 relative for rounding."""
    k = len(inst.fpgas)
    total = math.fsum([math.fsum(max(n.cpu_ms, n.fpga_ms) for n in inst.nodes),
                       math.fsum(inst.out_cost[u] * min(k, len(inst.successors[u]) + 1) for u in inst.node_by_id)])
    return total * (1 + 1e-9) + 1e-9


def transfer_sources(inst: MaxloadInstance, gr: Groups) -> list[tuple[int, list[int]]]:
    """(u, successor groups other than u's) for every node with a positive outgoing cost
    and a successor outside its group: the only transfers that cost time."""
    out = []
    for u in inst.topo_order:
        hs = sorted({gr.of[v] for v in inst.successors[u]} - {gr.of[u]})
        if inst.out_cost[u] > 0 and hs:
            out.append((u, hs))
    return out


def entering_pairs(inst: MaxloadInstance, gr: Groups) -> list[tuple[int, int]]:
    """(u, h): node u feeds group h (a successor of u is in h, and h is not u's group)."""
    return [(u, h) for u in inst.topo_order for h in sorted({gr.of[v] for v in inst.successors[u]} - {gr.of[u]})]


def where_from_values(x: Mapping[tuple[int, int], Any], c: Mapping[int, Any],
                      value: Callable[[Any], float]) -> dict[int, int]:
    """Group -> the device of its largest placement variable (``value(var)``): x[g, a]
    for accelerator a, c[g] for the CPU."""
    where: dict[int, int] = {}
    best: dict[int, float] = {}
    for (g, a), var in x.items():
        if g not in where or value(var) > best[g]:
            where[g], best[g] = a, value(var)
    for g, var in c.items():
        if g not in where or value(var) > best[g]:
            where[g], best[g] = CPU, value(var)
    return where
