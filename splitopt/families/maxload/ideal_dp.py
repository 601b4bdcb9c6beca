"""Exact ``ideal-dp`` for the maxload throughput (max-load) objective: dynamic
programming over the ideals (downsets) of the forward DAG, for instances whose ideal
lattice is small (``formulations/maxload_throughput.md``, "Ideal-enumeration DP").

* **Units.** Every colour group (``data.py``) must hold a forward node (else
  ``NotApplicable``: under contiguity "splitopt" backward-only classes and backward nodes
  without a class go anywhere, which no chain of ideals represents; under "authors" they
  hold their artificial forward node, and the forward DAG is the contiguity graph of
  ``contiguity.py``, artificial edges included). The groups, joined by the forward edges
  between them, are contracted to the strongly connected components of that group graph:
  the units. A node's unit is its group's.
* **Ideals.** The downsets of the unit DAG (equivalently: the downsets of the forward DAG
  that split no colour class), enumerated breadth first by size, at most ``cap`` of them
  (``MAX_IDEALS``; more: ``NotApplicable``, so ``auto`` runs CP-SAT).
* **DP.** ``best[J][a][c]`` (ms) = the least max-load of a placement of the units of
  ideal ``J`` on ``a`` accelerators and ``c`` cores, each device one nonempty difference
  ``J' \\ I'`` of nested ideals of a chain ``∅ = I_0 ⊂ I_1 ⊂ … ⊂ J``:
  ``best[J][a][c] = min over ideals I ⊂ J of max(best[I][a-1][c], acc(J \\ I)),
  max(best[I][a][c-1], cpu(J \\ I))``. ``acc`` (ms) is the accelerator load (compute plus
  every transfer, infinite over the memory cap in bytes or with a node that may not run
  there), ``cpu`` (ms) the core load.
* **Exactness.** A chain of ideals gives every placement whose devices can be ordered so
  that each prefix is a downset (the device quotient is acyclic); splitopt's contiguity
  rule (each device's forward nodes convex) also allows convex sets that wait on each
  other in a cycle. :func:`cyclic_wait` looks for forward edges around a cycle whose
  joining sets are disjoint convex unions of groups, which exist exactly when some
  placement waits in a cycle (proved there); where they exist, or the search runs out of
  its budget, the DP is not exact, and ``ideal-dp`` runs it over acyclic device orders
  only (``acyclic_only``, the peer DP's model) and hands its plan to CP-SAT to prove or
  beat (``certify.py``).

Written here rather than taken from a library: ideal (downset) enumeration of a DAG
with a DP on top is a research-code technique (the peer's ``dp.cpp``); no well-kept
Python package enumerates the ideals of a DAG, let alone with colour classes and these
transfer costs. numpy vectorises the inner loop over the sub-ideals ``I`` of each ``J``.
No ortools or pandas is imported (``certify.py`` imports them where it runs).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from splitopt.core.errors import NotApplicable
from splitopt.core.options import check_build_deadline
from splitopt.core.toposort import least_first_order
from splitopt.families.maxload.contiguity import contiguity_graph, strong_components
from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement

#: the most ideals enumerated (beyond: NotApplicable). On the peer graphs the DP takes
#: 0.03 s at 39 ideals, 0.15 s at 240, 1 s at 1,400-1,900 and 5 s at 2,900 (2 shared cores;
#: benchmarks/results/maxload_peer_dp.md); its time grows with the square of the count
MAX_IDEALS = 5000
#: the most ideals for which ``auto`` prefers ``ideal-dp`` to CP-SAT (MaxloadFamily.exact_method):
#: at 2,900 ideals the DP took 5 s where CP-SAT took 8.5 s (bert_l-12 inference)
AUTO_MAX_IDEALS = 3000
#: sequences plus closures :func:`cyclic_wait` may visit and compute (beyond: NotApplicable,
#: as if a cycle existed). A count, not a time, so that the method applies or not whatever
#: the machine's load (``auto`` picks its backend by it: the same seed, the same plan); the
#: bert24 graphs need about 70,000 (0.13-0.25 s)
MAX_CYCLE_VISITS = 200_000


@dataclass(frozen=True)
class IdealLattice:
    """The ideals of the unit DAG of an instance.

    ``unit_nodes[u]``: node ids (forward and backward) of unit ``u``, units in a
    topological order; ``ideals``: a (m, U) bool matrix, one row per ideal, rows by
    nondecreasing size (row 0 the empty ideal, the last row all units)."""

    unit_nodes: tuple[tuple[int, ...], ...]
    unit_of: dict[int, int]
    ideals: np.ndarray

    @property
    def count(self) -> int:
        return int(self.ideals.shape[0])


def _unit_graph(inst: MaxloadInstance) -> tuple[tuple[tuple[int, ...], ...], dict[int, int], list[set[int]]]:
    """(node ids per unit in topological order, node -> unit, successor units of each
    unit); NotApplicable where a colour group has no forward node."""
    
    gr = groups_of(inst)
    cg = contiguity_graph(inst)
    gnodes = cg.group_nodes(gr)
    free = [m for m, nodes in zip(gr.members, gnodes) if not nodes]
    if free:
        v = free[0][0]
        raise NotApplicable(
            f"ideal-dp: {len(free)} colour group(s) have no forward node (e.g. node {v}, "
            f"{inst.node_by_id[v].name or 'unnamed'}); splitopt places them freely, which a chain of forward "
            "ideals does not represent: use cpsat (or contiguity 'authors', which holds them to contiguity)")
    n_groups = len(gr.members)
    gsucc: list[set[int]] = [set() for _ in range(n_groups)]
    for u in cg.nodes:
        for w in cg.succ[u]:
            if gr.of[cg.host[u]] != gr.of[cg.host[w]]:
                gsucc[gr.of[cg.host[u]]].add(gr.of[cg.host[w]])
    comp = strong_components(n_groups, gsucc)
    n_comp = max(comp, default=-1) + 1
    members: list[list[int]] = [[] for _ in range(n_comp)]
    for g in range(n_groups):
        members[comp[g]].append(g)
    csucc: list[set[int]] = [set() for _ in range(n_comp)]
    for g in range(n_groups):
        csucc[comp[g]].update(comp[h] for h in gsucc[g] if comp[h] != comp[g])
    # topological order of the components, ties by their first group: deterministic
    order = least_first_order(range(n_comp), dict(enumerate(csucc)), key=lambda c: members[c][0])
    index = {c: i for i, c in enumerate(order)}
    unit_nodes = tuple(tuple(v for g in members[c] for v in gr.members[g]) for c in order)
    unit_of = {v: u for u, ids in enumerate(unit_nodes) for v in ids}
    succ = [{index[d] for d in csucc[c]} for c in order]
    return unit_nodes, unit_of, succ


def enumerate_ideals(n_units: int, succ: list[set[int]], cap: int) -> list[int] | None:
    """The downsets of a DAG on units ``0..n_units-1`` (a topological order;
    ``succ[u]`` its successor units) as bit masks, by nondecreasing size; None when there
    are more than ``cap``."""
    npred = [0] * n_units
    for u in range(n_units):
        for w in succ[u]:
            npred[w] += 1
    pred_mask = [0] * n_units
    for u in range(n_units):
        for w in succ[u]:
            pred_mask[w] |= 1 << u
    start = tuple(u for u in range(n_units) if npred[u] == 0)
    out = [0]
    layer = {0: start}  # ideal -> units addable to it
    while layer:
        nxt: dict[int, tuple[int, ...]] = {}
        for ideal, addable in layer.items():
            for u in addable:
                j = ideal | (1 << u)
                if j in nxt:
                    continue
                more = [w for w in succ[u] if (pred_mask[w] & ~j) == 0]
                nxt[j] = tuple(sorted(set(addable) - {u} | set(more)))
        out.extend(nxt)
        if len(out) > cap:
            return None
        layer = nxt
    return out


def cyclic_wait(inst: MaxloadInstance, limit: int = MAX_CYCLE_VISITS,
                shortest: int = 2) -> tuple[tuple[int, int], ...] | None:
    """Forward edges ``e_1 .. e_k`` (``k >= 2``, each ``(tail, head)`` between colour
    groups) such that the closures ``S_i = cl{head(e_{i-1}), tail(e_i)}`` (indices mod
    ``k``; ``cl``: the least union of colour groups holding the nodes that is convex in
    the forward DAG) are pairwise disjoint; None where there are none; ``()`` where the
    search would visit and compute more than ``limit`` sequences and closures (treated as a
    cycle). ``shortest``: look for cycles of at least that many edges only (the same
    equivalence holds per length: tests use 3 and 4 to check the longer cycles' search).

    Such edges exist exactly when some placement's devices wait on each other in a cycle.
    If devices ``D_1 -> D_2 -> ... -> D_k -> D_1`` do (a simple cycle, ``e_i`` from ``D_i``
    to ``D_{i+1}``), ``S_i`` lies in ``D_i`` (it holds ``head(e_{i-1})`` and ``tail(e_i)``,
    and a device's forward nodes are convex and colour-closed), so the ``S_i`` are
    disjoint. Conversely the sets ``S_i``, with every other unit alone on a device, are
    such a placement (device counts aside: this only declines more). Depth-first, the
    cycle's edge of least index first (each cycle once per rotation), every partial
    sequence's sets disjoint, at most as many sets as devices (the shortest cycles first), a
    sequence dropped once every edge that could still end it has a closing set meeting its
    sets, and every (first edge, last edge, union of the sets) that closed no cycle
    remembered with the sets it still had room for."""
    cg = contiguity_graph(inst)
    nodes = list(cg.nodes)
    bit = {v: i for i, v in enumerate(nodes)}
    fsucc = {v: list(cg.succ[v]) for v in nodes}
    _, down, up = cg.reach_masks()
    gr = groups_of(inst)
    gof = {v: gr.of[cg.host[v]] for v in nodes}
    gmask: dict[int, int] = {}
    for v in nodes:
        gmask[gof[v]] = gmask.get(gof[v], 0) | (1 << bit[v])

    def members(mask: int):
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    hulls: dict[tuple[int, int], int] = {}
    visits = 0

    class Budget(Exception):
        pass

    def visit() -> None:
        """Count one sequence or closure against ``limit``; every 64, the caller's time
        limit (``check_build_deadline``: BuildDeadlinePassed, never a decline, so what
        ``auto`` picks does not depend on the load)."""
        nonlocal visits
        visits += 1
        if visits > limit:
            raise Budget
        if not visits % 64:
            check_build_deadline()

    def closure(x: int, y: int) -> int:
        """cl{x, y} as a bit mask over ``nodes``."""
        key = (x, y)
        if key not in hulls:
            visit()
            mask = (1 << bit[x]) | (1 << bit[y])
            while True:
                new = mask
                d = a = 0
                for i in members(mask):
                    v = nodes[i]
                    new |= gmask[gof[v]]
                    d |= down[v]
                    a |= up[v]
                new |= d & a
                if new == mask:
                    break
                mask = new
            hulls[key] = mask
        return hulls[key]

    edges = [(u, w) for u in nodes for w in fsucc[u] if gof[u] != gof[w]]

    # a cycle of waiting devices has at most as many sets as there are devices
    longest = len(inst.fpgas) + len(inst.cpus)
    fewest = max(2, shortest)
    # per (first edge, last edge): the next edges j > first and their sets cl{head(last), tail(j)}
    # that do not hold the first tail (it belongs to the closing set)
    nexts: dict[tuple[int, int], list[tuple[int, int]]] = {}
    # per first edge: the closing sets cl{head(j), tail(first)} of the edges j after it
    closings: dict[int, set[int]] = {}
    # (first edge, last edge, sets' union, length short of the fewest) -> the most sets still
    # allowed with which no cycle closed (the state: an edge already in the sequence has its
    # tail in the union, so any set that would take it again meets the union; the length
    # matters only while it is below ``fewest``, where it decides when a cycle may close)
    failed: dict[tuple[int, int, int, int], int] = {}

    def extend(first: int, seq: list[int], used: int, most: int) -> tuple[int, ...] | None:
        visit()
        last = seq[-1]
        tail1, head_last = edges[first][0], edges[last][1]
        if len(seq) >= fewest and closure(head_last, tail1) & used == 0:
            return tuple(seq)
        room = most - len(seq)
        state = (first, last, used, min(len(seq), fewest))
        if room <= 0 or failed.get(state, -1) >= room:
            return None
        # the cycle closes through some edge j (the last, or a later one) with cl{head(j),
        # tail(first)} clear of every set: the sets only grow, so none clear now: no cycle
        # (tested where two or more sets may still come: there it saves whole subtrees)
        if room >= 2 and first not in closings:
            closings[first] = {closure(edges[j][1], tail1) for j in range(first + 1, len(edges))}
        if room >= 2 and all(m & used for m in closings[first]):
            failed[state] = room
            return None
        if (first, last) not in nexts:
            # cl{head(last), tail(j)} holds tail(last) when tail(j) reaches tail(last), and
            # head(j) when head(j) reaches head(last): both sets would meet, so skip those
            # before computing any closure
            tail_last = edges[last][0]
            below_tail = up[tail_last] | (1 << bit[tail_last])
            below_head = up[head_last] | (1 << bit[head_last])
            cands = ((j, closure(head_last, edges[j][0])) for j in range(first + 1, len(edges))
                     if not (below_tail >> bit[edges[j][0]]) & 1 and not (below_head >> bit[edges[j][1]]) & 1)
            nexts[first, last] = [(j, m) for j, m in cands if not (m >> bit[tail1]) & 1]
        for j, m in nexts[first, last]:
            if m & used:
                continue
            found = extend(first, seq + [j], used | m, most)
            if found is not None:
                return found
        failed[state] = room
        return None

    try:
        # the shortest cycles first (most graphs that have one have a short one), then all
        # lengths at once: where there is none (bert24), one pass at the longest length
        # visits what passes at every length would, and passes at each length in turn took
        # twice as long
        for most in sorted({fewest, longest}) if fewest <= longest else ():
            for first in range(len(edges)):
                found = extend(first, [first], 0, most)
                if found is not None:
                    return tuple(edges[j] for j in found)
    except Budget:
        return ()
    return None


def ideal_lattice(inst: MaxloadInstance, cap: int = MAX_IDEALS, acyclic_only: bool = False) -> IdealLattice:
    """The instance's units and ideals (kept with the instance per ``cap``);
    NotApplicable where ideal enumeration is not exact for splitopt's rules or there are
    more than ``cap`` ideals (the reason says which). ``acyclic_only`` skips the test for
    devices that wait on each other (:func:`cyclic_wait`): the DP then solves the
    restricted model where the devices' quotient is acyclic (the peer DP's model, an
    upper bound on splitopt's optimum: ``ideal-dp`` then proves its plan optimal or beats
    it with CP-SAT, ``certify.py``)."""
    def build() -> IdealLattice | str:
        if inst.objective != "throughput":
            return f"ideal-dp: a max-load (throughput) method; the instance's objective is {inst.objective}"
        if not inst.nodes:
            return "ideal-dp: the instance has no node"
        try:
            unit_nodes, unit_of, succ = _unit_graph(inst)
        except NotApplicable as e:
            return str(e)
        masks = enumerate_ideals(len(unit_nodes), succ, limit)
        if masks is None:
            return (f"ideal-dp: the forward DAG ({len(unit_nodes)} units) has more than {limit:,} ideals: use cpsat")
        if not acyclic_only and len(inst.fpgas) + len(inst.cpus) >= 2:
            cycle = cyclic_wait(inst)
            if cycle == ():
                return ("ideal-dp: too many edge sequences (or too long) to rule out devices that wait on each other: "
                        "use cpsat")
            if cycle is not None:
                shown = ", ".join(f"{u} -> {w}" for u, w in cycle)
                return (f"ideal-dp: {len(cycle)} contiguous devices may wait on each other in a cycle (forward edges "
                        f"{shown}, each head with the next tail in disjoint convex unions of colour classes), "
                        "which splitopt allows and a chain of ideals does not represent: use cpsat")
        n_units = len(unit_nodes)
        mat = np.zeros((len(masks), n_units), dtype=bool)
        for r, m in enumerate(masks):
            s = bin(m)[2:][::-1]
            mat[r, :len(s)] = np.frombuffer(s.encode(), dtype=np.uint8) == ord("1")
        return IdealLattice(unit_nodes, unit_of, mat)

    limit = max(cap, MAX_IDEALS)  # enumerated once up to MAX_IDEALS, whatever the caller's cap
    out = inst.derived(("maxload", "ideal-lattice", limit, acyclic_only), build)
    if isinstance(out, str):
        raise NotApplicable(out)
    if out.count > cap:
        raise NotApplicable(f"ideal-dp: the forward DAG ({len(out.unit_nodes)} units) has {out.count:,} ideals, "
                            f"more than {cap:,}: use cpsat")
    return out


def ideal_dp_applies(inst: MaxloadInstance, cap: int = MAX_IDEALS, acyclic_only: bool = False) -> bool:
    """Whether :func:`solve_ideal_dp` runs on ``inst`` with this ``cap`` and
    ``acyclic_only`` (the lattice is built once and kept with the instance)."""
    try:
        ideal_lattice(inst, cap, acyclic_only)
    except NotApplicable:
        return False
    return True


@dataclass(frozen=True)
class IdealDpResult:
    """``value_ms``: the DP's least max-load (its own float sums: the evaluator's value
    of ``plan`` agrees to rounding); ``plan`` None where no placement meets the rules
    (``value_ms`` infinite); ``finished`` False where the time limit came first (then
    ``plan`` and ``value_ms`` are None)."""

    value_ms: float | None
    plan: MaxloadPlacement | None
    ideals: int
    pairs: int
    finished: bool


def solve_ideal_dp(inst: MaxloadInstance, out_of_time: Callable[[], bool] | None = None,
                   cap: int = MAX_IDEALS, acyclic_only: bool = False) -> IdealDpResult:
    """The least max-load placement (ms) by the DP of the module docstring;
    NotApplicable where it is not exact or too large (``acyclic_only``: see
    :func:`ideal_lattice`)."""
    lat = ideal_lattice(inst, cap, acyclic_only)
    M = lat.ideals
    m, n_units = M.shape
    nodes = inst.node_by_id
    kk, ll = len(inst.fpgas), len(inst.cpus)
    sizes = M.sum(axis=1)

    # per unit: accelerator and core compute (ms), size (bytes), nodes barred from accelerators
    def per_unit(f) -> np.ndarray:
        return np.array([math.fsum(f(nodes[v]) for v in ids) for ids in lat.unit_nodes], dtype=float)

    Mf = M.astype(float)
    acc_c = Mf @ per_unit(lambda n: n.fpga_ms)
    cpu_c = Mf @ per_unit(lambda n: n.cpu_ms)
    mem = Mf @ per_unit(lambda n: n.size_bytes)
    barred = Mf @ per_unit(lambda n: 0.0 if n.on_fpga_ok else 1.0)
    cap_bytes = inst.max_size_per_fpga

    # transfers: node u pays its outgoing cost c(u) to an accelerator holding X exactly
    # when its unit set alpha(u) (units of u and its successors) meets X and is not inside X
    rel, alpha_rows = [], []
    for v in inst.topo_order:
        alpha = {lat.unit_of[v]} | {lat.unit_of[w] for w in inst.successors[v]}
        if inst.out_cost[v] > 0 and len(alpha) >= 2:
            rel.append(v)
            alpha_rows.append(sorted(alpha))
    R = len(rel)
    A = np.zeros((n_units, R), dtype=np.int32)
    for j, units in enumerate(alpha_rows):
        A[units, j] = 1
    cost = np.array([inst.out_cost[v] for v in rel], dtype=float)
    asize = A.sum(axis=0)
    cnt = M.astype(np.int32) @ A  # (m, R): |alpha(u) ∩ ideal|
    bd = (cnt > 0) & (cnt < asize)  # alpha(u) split by the ideal
    bdc = bd.astype(float) @ cost

    # subset tests on packed bits
    words = -(-n_units // 64)
    packed = np.zeros((m, words * 8), dtype=np.uint8)
    packed[:, :-(-n_units // 8)] = np.packbits(M, axis=1, bitorder="little")
    P = packed.view(np.uint64)
    first_of_size = np.searchsorted(sizes, np.arange(n_units + 2))

    INF = math.inf
    best = np.full((m, kk + 1, ll + 1), INF)
    best[0, 0, 0] = 0.0
    par = np.full((m, kk + 1, ll + 1), -1, dtype=np.int64)  # sub-ideal index * 2 + (1: core)
    pairs = 0
    t_check = -math.inf
    for J in range(1, m):
        if out_of_time is not None and time.monotonic() - t_check > 0.05:
            t_check = -math.inf
            if out_of_time():
                return IdealDpResult(None, None, m, pairs, False)
        lim = first_of_size[sizes[J]]
        Is = np.flatnonzero(~(P[:lim] & ~P[J]).any(axis=1))
        pairs += len(Is)
        cols = np.flatnonzero(bd[J])
        D = cnt[np.ix_(Is, cols)]
        pay = (D < cnt[J, cols]).astype(float) - ((D > 0) & (D < asize[cols]))
        acc = acc_c[J] - acc_c[Is] + bdc[Is] + pay @ cost[cols]
        acc[(barred[J] - barred[Is] > 0.5) | (mem[J] - mem[Is] > cap_bytes)] = INF
        cpu = cpu_c[J] - cpu_c[Is]
        sub = best[Is]
        if kk:
            cand = np.maximum(sub[:, :-1, :], acc[:, None, None])
            arg = cand.argmin(axis=0)
            val = np.take_along_axis(cand, arg[None], axis=0)[0]
            best[J, 1:, :] = val
            par[J, 1:, :] = np.where(np.isfinite(val), Is[arg] * 2, -1)
        if ll:
            cand = np.maximum(sub[:, :, :-1], cpu[:, None, None])
            arg = cand.argmin(axis=0)
            val = np.take_along_axis(cand, arg[None], axis=0)[0]
            better = val < best[J, :, 1:]
            best[J, :, 1:] = np.where(better, val, best[J, :, 1:])
            par[J, :, 1:] = np.where(better & np.isfinite(val), Is[arg] * 2 + 1, par[J, :, 1:])

    final = best[m - 1]
    a, c = np.unravel_index(int(np.argmin(final)), final.shape)
    value = float(final[a, c])
    if not math.isfinite(value):
        return IdealDpResult(INF, None, m, pairs, True)
    device: dict[int, str] = {}
    J, n_acc, n_cpu = m - 1, 0, 0
    while J != 0:
        p = int(par[J, a, c])
        I, on_cpu = p // 2, p % 2
        if on_cpu:
            name, c, n_cpu = f"cpu{n_cpu}", c - 1, n_cpu + 1
        else:
            name, a, n_acc = f"fpga{n_acc}", a - 1, n_acc + 1
        for u in np.flatnonzero(M[J] & ~M[I]):
            for v in lat.unit_nodes[u]:
                device[v] = name
        J = I
    return IdealDpResult(value, MaxloadPlacement(device), m, pairs, True)
