"""The maxload family's start plan (the plan a time-limited solve falls back on): every
node on cpu0 for the throughput objective; for the latency objective the better of that
and a greedy that fills accelerators with consecutive blocks of groups, which also sets
the latency programs' upper bound and CP-SAT's horizon, and is hinted to CP-SAT."""

from __future__ import annotations

import math

from splitopt.core.errors import InvalidPlan
from splitopt.families.maxload.contiguity import contiguity_graph
from splitopt.families.maxload.cores import CPU, may_use_accelerator, placement_of
from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.evaluate import check_placement, latency
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.methods import all_on_cpu_placement
from splitopt.families.maxload.plan import MaxloadPlacement


def start_plan(inst: MaxloadInstance) -> MaxloadPlacement | None:
    """Throughput: every node on cpu0 (it keeps either contiguity rule). Latency: the
    better of that and a greedy that fills accelerators with consecutive blocks
    (:func:`start_placement`, once per instance); every node on cpu0 under contiguity
    "authors" where it differs from "splitopt" (the greedy keeps splitopt's rule only)."""
    if inst.objective == "latency" and not contiguity_graph(inst).binds:
        return inst.derived(("maxload", "latency-start"), lambda: start_placement(inst, groups_of(inst))[0])
    return all_on_cpu_placement(inst)


def group_blocks(inst: MaxloadInstance, gr: Groups) -> list[list[int]]:
    """The groups cut into blocks that no path leaves and re-enters (the strongly
    connected components of the graph of groups), in a topological order: consecutive
    blocks of this order form a convex node set, and consecutive runs of it wait on
    each other only forwards."""
    import networkx as nx

    q = nx.DiGraph()
    q.add_nodes_from(range(len(gr.members)))
    q.add_edges_from((gr.of[e.source], gr.of[e.target]) for e in inst.edges if gr.of[e.source] != gr.of[e.target])
    c = nx.condensation(q)
    order = nx.lexicographical_topological_sort(c, key=lambda b: min(c.nodes[b]["members"]))
    return [sorted(c.nodes[b]["members"]) for b in order]


def greedy_where(inst: MaxloadInstance, gr: Groups) -> dict[int, int] | None:
    """Fill accelerators with consecutive blocks of :func:`group_blocks` up to
    maxSizePerFPGA; a block that fits no accelerator (or comes after the last one) goes
    to the CPU, where it closes the open accelerator. None when a block fits nowhere."""
    where: dict[int, int] = {}
    acc, used, open_ = -1, 0.0, False
    k = len(inst.fpgas)
    for block in group_blocks(inst, gr):
        size = math.fsum(gr.size(inst, g) for g in block)
        fits = all(may_use_accelerator(inst, gr, g) for g in block) and size <= inst.max_size_per_fpga
        if fits and open_ and used + size <= inst.max_size_per_fpga:
            used += size
        elif fits and acc + 1 < k:
            acc, used, open_ = acc + 1, size, True
        elif inst.max_cpus >= 1:
            open_ = False
            where.update({g: CPU for g in block})
            continue
        else:
            return None
        where.update({g: acc for g in block})
    return where


def start_placement(inst: MaxloadInstance, gr: Groups) -> tuple[MaxloadPlacement | None, float | None]:
    """A valid placement and its latency (ms), or (None, None): the better of all nodes on
    the CPU (when maxCPUs >= 1) and :func:`greedy_where` (all nodes on the CPU first on a
    tie). Every candidate is checked by ``check_placement`` and valued by ``latency``."""
    candidates: list[dict[int, int]] = []
    if inst.max_cpus >= 1:
        candidates.append({g: CPU for g in range(len(gr.members))})
    greedy = greedy_where(inst, gr)
    if greedy is not None:
        candidates.append(greedy)
    best: tuple[MaxloadPlacement | None, float | None] = (None, None)
    for where in candidates:
        p = placement_of(inst, gr, where)
        if p is None or check_placement(inst, p):
            continue
        try:
            value = latency(inst, p)
        except InvalidPlan:
            continue
        if best[1] is None or value < best[1]:
            best = (p, value)
    return best
