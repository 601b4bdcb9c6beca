"""Baseline ``intervals``: the best max-load placement whose devices each hold one
interval of an order of the colour groups, by dynamic programming, over a few orders
(:func:`group_orders`: group order, ``data.py``, and execution orders that keep a
colour class where its operators run), the best plan kept.

Every interval ``[i, j)`` gets two costs (ms): on an accelerator its compute plus
incoming and outgoing transfers (``evaluate.fpga_transfers``: built up incrementally as
``j`` grows), infinite where it breaks the memory cap (bytes), holds a group that may
not run on an accelerator, or where its forward nodes are not convex (possible where a
colour group's forward nodes are not consecutive in topological order, e.g. on operator
graphs); on a CPU core its CPU time, infinite where not convex. Then

    best[j][a][c] = min over i < j of max(best[i][a-1][c], acc(i, j)),
                                      max(best[i][a][c-1], cpu(i, j))

with ``a <= k`` accelerator and ``c <= l`` core segments (devices left empty cost
nothing). O(n^2 k l) for n groups (vectorised over ``i`` with numpy), O(n (V + E))
for the costs, two n x n tables of floats (refused beyond ``MAX_GROUPS`` groups). The DP's own sums are only used to choose; the plan is judged by the
family's evaluator like every other.

Written here: the min-max partition of a sequence into k parts is textbook (linear
partition), but with two kinds of part, transfer costs that depend on both ends and
excluded (non-convex) intervals no library offers it.
"""

from __future__ import annotations

import math
from typing import Callable

from splitopt.core.errors import NotApplicable
from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement
from splitopt.families.maxload.reach import reach_of

#: the most colour groups the DP takes (its tables hold 2 n^2 floats: 64 MB here)
MAX_GROUPS = 2000


def group_orders(inst: MaxloadInstance, gr: Groups) -> list[tuple[int, ...]]:
    """The orders of the colour groups the DP cuts into intervals: group order (first
    node in the lexicographic topological order, which puts every source first: on
    operator graphs a weight tensor, alone in the file's order, opens a colour class
    whose operator runs much later), and the groups by first node in an "as late as
    possible" topological order (each node just before its first consumer), which keeps
    such a class next to its operator."""
    position = {v: i for i, v in enumerate(inst.topo_order)}
    # latest slot: a sink keeps its position, any other node one before its first consumer
    latest: dict[int, int] = {}
    for v in reversed(inst.topo_order):
        latest[v] = min((latest[w] - 1 for w in inst.successors[v]), default=position[v])
    late = sorted(inst.topo_order, key=lambda v: (latest[v], position[v]))  # topological: latest grows along edges
    first: dict[int, int] = {}
    for i, v in enumerate(late):
        first.setdefault(gr.of[v], i)
    n = len(gr.members)
    orders = [tuple(range(n))]
    candidates = [tuple(sorted(range(n), key=lambda g: first[g]))]
    if inst.is_training:
        # by the forward nodes only: a group at its first forward node (as late as
        # possible), a group of backward nodes only next to the nearest such group
        key: dict[int, float] = {}
        slot = {v: i for i, v in enumerate(late)}
        for g, members in enumerate(gr.members):
            fwd = [slot[v] for v in members if v in inst.forward_ids]
            if fwd:
                key[g] = min(fwd)
        frontier = sorted(key)
        while frontier and len(key) < n:
            found: dict[int, float] = {}
            for g in frontier:
                for v in gr.members[g]:
                    for w in inst.successors[v] + inst.predecessors[v]:
                        h = gr.of[w]
                        if h not in key:
                            found[h] = min(found.get(h, math.inf), key[g])
            key.update(found)
            frontier = sorted(found)
        candidates.append(tuple(sorted(range(n), key=lambda g: (key.get(g, math.inf), first[g]))))
    for order in candidates:
        if order not in orders:
            orders.append(order)
    return orders


def execution_order(inst: MaxloadInstance, gr: Groups) -> tuple[int, ...]:
    """The groups in the order they run: the last order of :func:`group_orders` (as late
    as possible; on training graphs by the forward nodes)."""
    return group_orders(inst, gr)[-1]


def interval_costs(inst: MaxloadInstance, gr: Groups, order: tuple[int, ...] | None = None,
                   out_of_time: Callable[[], bool] | None = None):
    """(acc, cpu): n x (n + 1) numpy arrays, ``acc[i, j]`` / ``cpu[i, j]`` the load (ms)
    of the groups at positions ``i .. j-1`` of ``order`` (default: group order) on one
    accelerator / one core, ``inf`` where not allowed (see the module docstring; entries
    with ``j <= i`` are ``inf``). NotApplicable when ``out_of_time()`` turns true."""
    import numpy as np

    n = len(gr.members)
    order = tuple(range(n)) if order is None else order
    reach = reach_of(inst, gr)
    acc = np.full((n, n + 1), np.inf)
    cpu = np.full((n, n + 1), np.inf)
    outdeg = {v: len(inst.successors[v]) for v in inst.node_by_id}
    cost = inst.out_cost
    fpga_ms = [gr.fpga_ms(inst, g) for g in range(n)]
    cpu_ms = [gr.cpu_ms(inst, g) for g in range(n)]
    size = [gr.size(inst, g) for g in range(n)]
    ok = [gr.fpga_ok(inst, g) for g in range(n)]
    cap = inst.max_size_per_fpga
    for i in range(n):
        if out_of_time is not None and out_of_time():
            raise NotApplicable("intervals: the time limit ran out")
        inside: set[int] = set()
        count: dict[int, int] = {}  # node -> its successors inside
        t_in = t_out = 0.0
        compute = cpu_sum = mem = 0.0
        fpga_fine = True
        s = d = a = 0
        for j in range(i, n):
            g = order[j]
            for v in gr.members[g]:
                c = count.get(v, 0)
                if c > 0:
                    t_in -= cost[v]
                if c < outdeg[v]:
                    t_out += cost[v]
                inside.add(v)
                for u in inst.predecessors[v]:
                    cu = count.get(u, 0) + 1
                    count[u] = cu
                    if u in inside:
                        if cu == outdeg[u]:
                            t_out -= cost[u]
                    elif cu == 1:
                        t_in += cost[u]
            compute += fpga_ms[g]
            cpu_sum += cpu_ms[g]
            mem += size[g]
            fpga_fine = fpga_fine and ok[g]
            s |= reach.fwd[g]
            d |= reach.gdesc[g]
            a |= reach.ganc[g]
            if d & a & ~s:
                continue
            cpu[i, j + 1] = cpu_sum
            if fpga_fine and mem <= cap:
                acc[i, j + 1] = compute + max(0.0, t_in) + max(0.0, t_out)
    return acc, cpu


def interval_placement(inst: MaxloadInstance,
                       out_of_time: Callable[[], bool] | None = None) -> MaxloadPlacement | None:
    """The placement of the module docstring, the better (by the evaluator's max-load) of
    the DP's plans over each order of :func:`group_orders`; None where no interval plan
    meets the rules the DP knows (memory, accelerator support, device counts,
    convexity). NotApplicable when ``out_of_time()`` turns true."""
    from splitopt.families.maxload.evaluate import max_load

    gr = groups_of(inst)
    if len(gr.members) > MAX_GROUPS:
        raise NotApplicable(f"intervals: {len(gr.members)} colour groups, more than the DP takes ({MAX_GROUPS})")
    best, value = None, math.inf
    for order in group_orders(inst, gr):
        plan = interval_plan_for_order(inst, gr, order, out_of_time)
        if plan is not None:
            load = max_load(inst, plan)[0]
            if load < value:
                best, value = plan, load
    return best


def interval_plan_for_order(inst: MaxloadInstance, gr: Groups, order: tuple[int, ...],
                            out_of_time: Callable[[], bool] | None = None) -> MaxloadPlacement | None:
    """The min max-load plan whose devices each hold one interval of the group ``order``
    (the module docstring's DP); None where no such plan meets the rules."""
    import numpy as np

    n = len(gr.members)
    k, l = len(inst.fpgas), len(inst.cpus)
    if n == 0:
        return MaxloadPlacement({})
    acc, cpu = interval_costs(inst, gr, order, out_of_time)
    # best[a][c][j]: groups 0..j-1 on a accelerator and c core intervals; choice for the plan
    best = np.full((k + 1, l + 1, n + 1), np.inf)
    best[0, 0, 0] = 0.0
    back: dict[tuple[int, int, int], tuple[int, str]] = {}
    for j in range(1, n + 1):
        for a in range(k + 1):
            for c in range(l + 1):
                value, arg = math.inf, None
                if a > 0:
                    cand = np.maximum(best[a - 1, c, :j], acc[:j, j])
                    i = int(np.argmin(cand))
                    if cand[i] < value:
                        value, arg = float(cand[i]), (i, "fpga")
                if c > 0:
                    cand = np.maximum(best[a, c - 1, :j], cpu[:j, j])
                    i = int(np.argmin(cand))
                    if cand[i] < value:
                        value, arg = float(cand[i]), (i, "cpu")
                if arg is not None and math.isfinite(value):
                    best[a, c, j] = value
                    back[(a, c, j)] = arg
    end = best[:, :, n]
    if not np.isfinite(end).any():
        return None
    a, c = (int(x) for x in np.unravel_index(int(np.argmin(end)), end.shape))
    where = [""] * n
    j = n
    while j > 0:
        i, kind = back[(a, c, j)]
        if kind == "fpga":
            a -= 1
            name = f"fpga{a}"
        else:
            c -= 1
            name = f"cpu{c}"
        for p in range(i, j):
            where[order[p]] = name
        j = i
    return MaxloadPlacement({v: where[gr.of[v]] for v in inst.node_by_id}, source="intervals")
