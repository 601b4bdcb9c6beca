"""The loading CP-SAT model (``formulations/loading_balance.md``, "CP-SAT"): child slots
``0 .. K-1`` (``K``: the largest allowed child count) with boundary variables ``c_0 = 0 <=
c_1 <= ... <= c_K = N``, one Boolean per allowed child count, prefix sums read through
element constraints, optional load intervals on a cumulative of capacity ``T`` (identical
threads: any set of intervals that never overlaps more than ``T`` deep is a schedule on
``T`` threads), and the inference chain. Times are integers in units of ``unit`` ms
(``TIME_UNITS`` units over the serial horizon), with the rounding tolerance stated in the
formulation."""

from __future__ import annotations

import math

from splitopt.core.instance import Instance
from splitopt.core.options import BuildDeadlinePassed, check_build_deadline
from splitopt.core.program import Program
from splitopt.families.loading.bound import first_child_bound, packed_bound
from splitopt.families.loading.counts import Staircase, relaxation_bound
from splitopt.families.loading.data import LoadingData, data
from splitopt.families.loading.evaluate import evaluate
from splitopt.families.loading.partition import min_max_partition
from splitopt.families.loading.plan import LoadingPlan, canonical_threads, plan_from_starts

#: the serial horizon (every load one after another, then every inference) is resolved
#: into this many integer units
TIME_UNITS = 2**24


def horizon_ms(d: LoadingData, counts: list[int]) -> float:
    """Every child's load one after another, then every inference: no plan takes longer."""
    return max(counts) * d.fixed_ms + max(d.slowdown(k) for k in counts) * float(d.read_prefix[-1]) + d.total_infer_ms


def out_of_build_time() -> bool:
    """Whether the build's budget is spent (stops a bisection early; its bound stays valid)."""
    try:
        check_build_deadline()
    except BuildDeadlinePassed:
        return True
    return False


def count_bound(d: LoadingData, k: int) -> float:
    """A lower bound (ms) on the first response of every plan with exactly ``k`` children:
    for ``k <= T`` the optimum itself (every child on its own thread: the min-max partition
    of ``partition.py``, minus its tolerance); otherwise the staircase relaxation bound of
    ``counts.py``, bisected up from the larger of ``F + sigma r_0 + I`` (inference starts
    after the first child is loaded) and ``(k F + sigma R) / T`` (every load ends before the
    response)."""
    if k <= d.threads:
        return min_max_partition(d, k, with_inference=True).bound
    st = Staircase(d, k)
    low = max(first_child_bound(d, d.slowdown(k)), packed_bound(d, k))
    return relaxation_bound(st, low, max(low, st.horizon), out_of_build_time)


def build_cpsat(inst: Instance, start: LoadingPlan | None) -> Program:
    from ortools.sat.python import cp_model

    d = data(inst)
    counts = list(d.child_counts())
    model = cp_model.CpModel()
    if not counts:  # no allowed child count: an infeasible model says so
        model.AddBoolOr([])
        return Program(kind="cpsat", model=model, decode=lambda values: None, stats={"no_child_count": True})
    latency = inst.objective == "latency"
    N, K = d.n, max(counts)
    unit = max(horizon_ms(d, counts) / TIME_UNITS, 1e-12)
    H = TIME_UNITS + 4 * K + 4

    def q(ms: float) -> int:
        return int(round(ms / unit))

    # rounding: a load is off by at most 1.5 units (fixed cost, two prefix sums), a child's
    # inference by 1; the first response adds at most K loads and K inferences
    tol = (2.5 * K + 1.0) * unit if latency else 2.0 * unit

    sigmas = sorted({d.slowdown(k) for k in counts})
    prefix = {s: [q(s * float(v)) for v in d.read_prefix] for s in sigmas}
    infer = [q(float(v)) for v in d.infer_prefix]
    fixed = q(d.fixed_ms)

    y = {k: model.NewBoolVar(f"k={k}") for k in counts}
    model.AddExactlyOne(y.values())
    active = [model.NewConstant(1)] + [model.NewBoolVar(f"active[{i}]") for i in range(1, K)]
    for i in range(1, K):
        model.Add(active[i] == sum(y[k] for k in counts if k > i))
    c = [model.NewConstant(0)] + [model.NewIntVar(0, N, f"c[{i}]") for i in range(1, K)] + [model.NewConstant(N)]
    for i in range(K):
        model.Add(c[i + 1] >= c[i])
        model.Add(c[i + 1] >= c[i] + 1).OnlyEnforceIf(active[i])
        if i > 0:
            model.Add(c[i] == N).OnlyEnforceIf(active[i].Not())
    for k in counts:  # the last child holds the trainable tail
        model.Add(c[k - 1] <= d.last_start_max).OnlyEnforceIf(y[k])

    # staircase: u[i][b] = 1 iff block b lies in slot >= i (b >= c_i). A prefix sum at c_i is then
    # linear in u (sum of the increments of the blocks before c_i), which gives CP-SAT's LP a
    # much stronger relaxation than element constraints (measured: formulations/loading_balance.md)
    u = [None] + [[model.NewBoolVar(f"u[{i},{b}]") for b in range(N)] for i in range(1, K)]
    for i in range(1, K):
        check_build_deadline()  # O(N) constraints per slot: the budget includes building
        model.Add(u[i][0] == 0)
        for b in range(N - 1):
            model.AddImplication(u[i][b], u[i][b + 1])
            if i + 1 < K:
                model.AddImplication(u[i + 1][b], u[i][b])
        model.Add(c[i] == N - sum(u[i]))

    def element(array: list[int], i: int, name: str):
        """array[c_i] as a linear expression of the staircase."""
        if i == 0:
            return array[0]
        if i == K:
            return array[N]
        check_build_deadline()
        return array[N] - sum((array[b + 1] - array[b]) * u[i][b] for b in range(N) if array[b + 1] != array[b])

    at_infer = [element(infer, i, f"I[c{i}]") for i in range(K + 1)]
    at_read = {s: [element(prefix[s], i, f"R{j}[c{i}]") for i in range(K + 1)] for j, s in enumerate(sigmas)}
    load = []
    for i in range(K):
        dl = model.NewIntVar(0, H, f"load[{i}]")
        for k in counts:
            if k > i:
                s = d.slowdown(k)
                model.Add(dl == fixed + at_read[s][i + 1] - at_read[s][i]).OnlyEnforceIf(y[k])
        if i > 0:
            model.Add(dl == 0).OnlyEnforceIf(active[i].Not())
        load.append(dl)

    if latency:
        lanes = min(d.threads, K)
        # x[i][t]: thread t loads child i. Each thread loads its children in index order: on
        # one thread, child j > i loaded just before i can swap with it without raising the
        # first response (formulations/loading_balance.md, "Load order on a thread")
        x = [[model.NewBoolVar(f"thread[{i},{t}]") for t in range(lanes)] for i in range(K)]
        done = [model.NewIntVar(0, H, f"load_end[{i}]") for i in range(K)]
        for i in range(K):
            model.Add(sum(x[i]) == 1).OnlyEnforceIf(active[i])
            model.Add(sum(x[i]) == 0).OnlyEnforceIf(active[i].Not())
            model.Add(done[i] >= load[i])
            model.Add(done[i] == 0).OnlyEnforceIf(active[i].Not())
            for t in range(1, lanes):  # symmetry: threads numbered by their smallest child
                if i < t:
                    model.Add(x[i][t] == 0)
                else:
                    model.AddBoolOr([x[j][t - 1] for j in range(i)]).OnlyEnforceIf(x[i][t])
            if lanes < K:
                for j in range(i):
                    for t in range(lanes):
                        model.Add(done[i] >= done[j] + load[i]).OnlyEnforceIf([x[j][t], x[i][t]])
        ie = []
        for i in range(K):
            st = model.NewIntVar(0, 2 * H, f"infer_start[{i}]")
            model.Add(st >= done[i])
            if i:
                model.Add(st >= ie[i - 1])
            end = model.NewIntVar(0, 2 * H, f"infer_end[{i}]")
            model.Add(end == st + at_infer[i + 1] - at_infer[i])
            ie.append(end)
        response = ie[-1]
        for i in range(K):  # redundant: after child i is loaded, the rest of the inference runs
            model.Add(response >= done[i] + infer[N] - at_infer[i])
        # redundant (fluid): children 0..i are all loaded only after their summed load time over
        # T threads, and then at least the inference from child i's first block on remains
        for i in range(K):
            model.Add(d.threads * response >= sum(load[: i + 1]) + d.threads * (infer[N] - at_infer[i]))
        # redundant: per child count, a bound in ms (exact for k <= T: partition-search)
        floor = {k: max(0, math.floor((count_bound(d, k) - tol) / unit)) for k in counts}
        model.Add(response >= sum(floor[k] * y[k] for k in counts))
        if start is not None:  # no worse than the start plan (whose model value is within tol of it)
            upper = evaluate(inst, start).first_response_ms
            model.Add(response <= math.ceil((upper + tol) / unit) + 1)
        model.Minimize(response)
    else:
        heaviest = model.NewIntVar(0, H, "heaviest_load")
        for dl in load:
            model.Add(heaviest >= dl)
        model.Minimize(heaviest)

    if start is not None and start.k in y and start.starts[-1] <= d.last_start_max:
        for k in counts:
            model.AddHint(y[k], k == start.k)
        bounds = list(start.starts) + [N] * (K + 1 - start.k)
        for i in range(1, K):
            model.AddHint(c[i], bounds[i])
        if latency:
            lane_of = {i: t for t, kids in enumerate(sorted(start.threads, key=min)) for i in kids}
            for i in range(K):
                for t in range(lanes):
                    model.AddHint(x[i][t], lane_of.get(i) == t)

    def decode(values) -> LoadingPlan:
        value = values.__getitem__
        k = next(k for k in counts if value(y[k].Index()) > 0.5)
        cuts = [0] + [int(value(c[i].Index())) for i in range(1, k)]
        if not latency:
            return plan_from_starts(d, cuts)
        if lanes >= K:  # no thread is shared: every child loads from time 0
            return LoadingPlan(tuple(cuts), canonical_threads([[i] for i in range(k)]))
        by_thread: dict[int, list[int]] = {}
        for i in range(k):
            by_thread.setdefault(next(t for t in range(lanes) if value(x[i][t].Index()) > 0.5), []).append(i)
        return LoadingPlan(tuple(cuts), canonical_threads(list(by_thread.values())))

    # presolve off: it expands every element constraint into one literal per block (measured
    # on 1,000 blocks x 16 slots: 20-60 s of presolve; without it the same models solve in 5-20 s)
    return Program(kind="cpsat", model=model, decode=decode, unit_ms=unit, tolerance_ms=tol, presolve=False,
                   stats={"time_unit_ms": unit, "slots": K, "slowdown_classes": len(sigmas), "blocks": N})

