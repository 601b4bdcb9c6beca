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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from splitopt.core.options import BuildDeadlinePassed, check_build_deadline
from splitopt.core.program import Program
from splitopt.families.loading.bound import first_child_bound, packed_bound
from splitopt.families.loading.counts import Staircase, relaxation_bound
from splitopt.families.loading.data import LoadingData, data
from splitopt.families.loading.evaluate import evaluate
from splitopt.families.loading.partition import min_max_partition
from splitopt.families.loading.plan import LoadingPlan, canonical_threads, plan_from_starts
from splitopt.families.loading.settings import LoadingInstance

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel, IntVar

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


def build_cpsat(inst: LoadingInstance, start: LoadingPlan | None) -> Program:
    """The model of the formulation's "CP-SAT", its parts in order: the child counts and
    boundaries, the staircase, the loads, and the balance or latency objective with its
    rows; ``start`` (a plan or None) bounds the latency and is the hint."""
    from ortools.sat.python import cp_model

    d = data(inst)
    counts = list(d.child_counts())
    model = cp_model.CpModel()
    if not counts:  # no allowed child count: an infeasible model says so
        model.add_bool_or([])
        return Program(kind="cpsat", model=model, decode=lambda values: None, stats={"no_child_count": True})
    v = integer_times(inst, d, counts)
    count_variables(d, model, v, counts)
    staircase(d, model, v)
    load_variables(d, model, v, counts)
    if v.latency:
        latency_objective(inst, d, model, v, counts, start)
    else:
        heaviest = model.new_int_var(0, v.H, "heaviest_load")
        for dl in v.load:
            model.add(heaviest >= dl)
        model.minimize(heaviest)
    if start is not None and start.k in v.y and start.starts[-1] <= d.last_start_max:
        hint(d, model, v, counts, start)
    # presolve off: it expands every element constraint into one literal per block (measured
    # on 1,000 blocks x 16 slots: 20-60 s of presolve; without it the same models solve in 5-20 s)
    return Program(kind="cpsat", model=model, decode=lambda values: decode_plan(d, v, counts, values), unit_ms=v.unit,
                   tolerance_ms=v.tol, presolve=False,
                   stats={"time_unit_ms": v.unit, "slots": v.K, "slowdown_classes": len(v.sigmas), "blocks": v.N})


@dataclass
class LoadingModel:
    """The model's integer data and variables as the steps add them. Times in units of
    ``unit`` ms (``TIME_UNITS`` over the serial horizon; ``H`` the horizon in units) with
    the rounding tolerance ``tol`` (ms); ``prefix[sigma]``, ``infer`` and ``fixed``: the
    scaled read prefix sums per slowdown, the inference prefix sums and the fixed cost per
    child. Then ``y[k]`` (exactly k children), ``active[i]``, the boundaries ``c[i]``, the
    staircase ``u``, the prefix sums at the boundaries, each slot's ``load``, and for the
    latency the threads ``x`` and load ends ``done``."""

    N: int
    K: int
    latency: bool
    unit: float
    H: int
    tol: float
    sigmas: list[float]
    prefix: dict[float, list[int]]
    infer: list[int]
    fixed: int
    y: dict[int, IntVar] = field(default_factory=dict)
    active: list[IntVar] = field(default_factory=list)
    c: list[IntVar] = field(default_factory=list)
    u: list[list[IntVar]] = field(default_factory=list)
    at_infer: list = field(default_factory=list)
    at_read: dict = field(default_factory=dict)
    load: list[IntVar] = field(default_factory=list)
    lanes: int = 0
    x: list[list[IntVar]] = field(default_factory=list)
    done: list[IntVar] = field(default_factory=list)


def integer_times(inst: LoadingInstance, d: LoadingData, counts: list[int]) -> LoadingModel:
    """The time unit, the horizon in units, the tolerance, and the data in units."""
    latency = inst.objective == "latency"
    N, K = d.n, max(counts)
    unit = max(horizon_ms(d, counts) / TIME_UNITS, 1e-12)

    def q(ms: float) -> int:
        return int(round(ms / unit))

    # rounding: a load is off by at most 1.5 units (fixed cost, two prefix sums), a child's
    # inference by 1; the first response adds at most K loads and K inferences
    tol = (2.5 * K + 1.0) * unit if latency else 2.0 * unit
    sigmas = sorted({d.slowdown(k) for k in counts})
    prefix = {s: [q(s * float(val)) for val in d.read_prefix] for s in sigmas}
    return LoadingModel(N, K, latency, unit, TIME_UNITS + 4 * K + 4, tol, sigmas, prefix,
                        [q(float(val)) for val in d.infer_prefix], q(d.fixed_ms))


def count_variables(d: LoadingData, model: CpModel, v: LoadingModel, counts: list[int]) -> None:
    """``y_k`` (exactly one allowed count), ``active[i]`` (slot i holds a child) and the
    boundaries ``c_0 = 0 <= c_1 <= ... <= c_K = N`` (inactive slots start at N, active ones
    hold a block); the last child holds the trainable tail."""
    N, K = v.N, v.K
    y = v.y = {k: model.new_bool_var(f"k={k}") for k in counts}
    model.add_exactly_one(y.values())
    active = v.active = [model.new_constant(1)] + [model.new_bool_var(f"active[{i}]") for i in range(1, K)]
    for i in range(1, K):
        model.add(active[i] == sum(y[k] for k in counts if k > i))
    c = v.c = [model.new_constant(0)] + [model.new_int_var(0, N, f"c[{i}]") for i in range(1, K)] + [model.new_constant(N)]
    for i in range(K):
        model.add(c[i + 1] >= c[i])
        model.add(c[i + 1] >= c[i] + 1).only_enforce_if(active[i])
        if i > 0:
            model.add(c[i] == N).only_enforce_if(active[i].negated())
    for k in counts:  # the last child holds the trainable tail
        model.add(c[k - 1] <= d.last_start_max).only_enforce_if(y[k])


def staircase(d: LoadingData, model: CpModel, v: LoadingModel) -> None:
    """The staircase: ``u[i][b] = 1`` iff block b lies in slot >= i (b >= c_i), monotone in
    b and nested in i, ``c_i = N - sum_b u[i][b]``. A prefix sum at c_i is then linear in u
    (sum of the increments of the blocks before c_i), which gives CP-SAT's LP a much
    stronger relaxation than element constraints (measured: the formulation)."""
    N, K = v.N, v.K
    # slot 0 holds every block from block 0 on: u[0] is constant, without variables (empty)
    u: list[list[IntVar]] = [[]] + [[model.new_bool_var(f"u[{i},{b}]") for b in range(N)] for i in range(1, K)]
    v.u = u
    for i in range(1, K):
        check_build_deadline()  # O(N) constraints per slot: the budget includes building
        model.add(u[i][0] == 0)
        for b in range(N - 1):
            model.add_implication(u[i][b], u[i][b + 1])
            if i + 1 < K:
                model.add_implication(u[i + 1][b], u[i][b])
        model.add(v.c[i] == N - sum(u[i]))


def load_variables(d: LoadingData, model: CpModel, v: LoadingModel, counts: list[int]) -> None:
    """The prefix sums at the boundaries, and each slot's load: ``y_k => load_i = F +
    sigma(k)-scaled prefix difference`` (0 for an inactive slot)."""
    N, K, u = v.N, v.K, v.u

    def element(array: list[int], i: int):
        """array[c_i] as a linear expression of the staircase."""
        if i == 0:
            return array[0]
        if i == K:
            return array[N]
        check_build_deadline()
        return array[N] - sum((array[b + 1] - array[b]) * u[i][b] for b in range(N) if array[b + 1] != array[b])

    v.at_infer = [element(v.infer, i) for i in range(K + 1)]
    v.at_read = {s: [element(v.prefix[s], i) for i in range(K + 1)] for s in v.sigmas}
    for i in range(K):
        dl = model.new_int_var(0, v.H, f"load[{i}]")
        for k in counts:
            if k > i:
                s = d.slowdown(k)
                model.add(dl == v.fixed + v.at_read[s][i + 1] - v.at_read[s][i]).only_enforce_if(v.y[k])
        if i > 0:
            model.add(dl == 0).only_enforce_if(v.active[i].negated())
        v.load.append(dl)


def latency_objective(inst: LoadingInstance, d: LoadingData, model: CpModel, v: LoadingModel, counts: list[int],
                      start: LoadingPlan | None) -> None:
    """Latency: the threads and load ends (:func:`thread_rows`), the inference chain
    ``S_i >= C_i``, ``S_i >= E_{i-1}``, ``E_i = S_i + P_i``, the redundant rows
    (:func:`redundant_rows`), at most the start plan's value; minimise ``E_{K-1}``."""
    K, H = v.K, v.H
    thread_rows(d, model, v)
    ie: list[IntVar] = []
    for i in range(K):
        st = model.new_int_var(0, 2 * H, f"infer_start[{i}]")
        model.add(st >= v.done[i])
        if i:
            model.add(st >= ie[i - 1])
        end = model.new_int_var(0, 2 * H, f"infer_end[{i}]")
        model.add(end == st + v.at_infer[i + 1] - v.at_infer[i])
        ie.append(end)
    response = ie[-1]
    redundant_rows(d, model, v, counts, response)
    if start is not None:  # no worse than the start plan (whose model value is within tol of it)
        upper = evaluate(inst, start).first_response_ms
        model.add(response <= math.ceil((upper + v.tol) / v.unit) + 1)
    model.minimize(response)


def thread_rows(d: LoadingData, model: CpModel, v: LoadingModel) -> None:
    """Thread Booleans ``x[i][t]`` (thread t loads child i; one per active slot; threads
    numbered by their smallest child) and load ends ``C_i >= load_i``, ``x[j][t] and x[i][t]
    => C_i >= C_j + load_i`` for j < i: each thread loads its children in index order (on
    one thread, child j > i loaded just before i can swap with it without raising the first
    response: the formulation's "Load order on a thread")."""
    K, active, load = v.K, v.active, v.load
    lanes = v.lanes = min(d.threads, K)
    x = v.x = [[model.new_bool_var(f"thread[{i},{t}]") for t in range(lanes)] for i in range(K)]
    done = v.done = [model.new_int_var(0, v.H, f"load_end[{i}]") for i in range(K)]
    for i in range(K):
        model.add(sum(x[i]) == 1).only_enforce_if(active[i])
        model.add(sum(x[i]) == 0).only_enforce_if(active[i].negated())
        model.add(done[i] >= load[i])
        model.add(done[i] == 0).only_enforce_if(active[i].negated())
        for t in range(1, lanes):  # symmetry: threads numbered by their smallest child
            if i < t:
                model.add(x[i][t] == 0)
            else:
                model.add_bool_or([x[j][t - 1] for j in range(i)]).only_enforce_if(x[i][t])
        if lanes < K:
            for j in range(i):
                for t in range(lanes):
                    model.add(done[i] >= done[j] + load[i]).only_enforce_if([x[j][t], x[i][t]])


def redundant_rows(d: LoadingData, model: CpModel, v: LoadingModel, counts: list[int], response: Any) -> None:
    """The redundant rows: after child i is loaded the rest of the inference runs; children
    0..i are all loaded only after their summed load over T threads (fluid); per child
    count a bound in ms (exact for k <= T: partition-search; :func:`count_bound`)."""
    N, K, infer = v.N, v.K, v.infer
    for i in range(K):
        model.add(response >= v.done[i] + infer[N] - v.at_infer[i])
    for i in range(K):
        model.add(d.threads * response >= sum(v.load[: i + 1]) + d.threads * (infer[N] - v.at_infer[i]))
    floor = {k: max(0, math.floor((count_bound(d, k) - v.tol) / v.unit)) for k in counts}
    model.add(response >= sum(floor[k] * v.y[k] for k in counts))


def hint(d: LoadingData, model: CpModel, v: LoadingModel, counts: list[int], start: LoadingPlan) -> None:
    """The start plan's count, boundaries and threads as the model's hint."""
    for k in counts:
        model.add_hint(v.y[k], k == start.k)
    bounds = list(start.starts) + [v.N] * (v.K + 1 - start.k)
    for i in range(1, v.K):
        model.add_hint(v.c[i], bounds[i])
    if v.latency:
        lane_of = {i: t for t, kids in enumerate(sorted(start.threads, key=min)) for i in kids}
        for i in range(v.K):
            for t in range(v.lanes):
                model.add_hint(v.x[i][t], lane_of.get(i) == t)


def decode_plan(d: LoadingData, v: LoadingModel, counts: list[int], values) -> LoadingPlan:
    """The count, the children's first blocks and, where threads are shared, each thread's
    children."""
    value = values.__getitem__
    k = next(k for k in counts if value(v.y[k].index) > 0.5)
    cuts = [0] + [int(value(v.c[i].index)) for i in range(1, k)]
    if not v.latency:
        return plan_from_starts(d, cuts)
    if v.lanes >= v.K:  # no thread is shared: every child loads from time 0
        return LoadingPlan(tuple(cuts), canonical_threads([[i] for i in range(k)]))
    by_thread: dict[int, list[int]] = {}
    for i in range(k):
        by_thread.setdefault(next(t for t in range(v.lanes) if value(v.x[i][t].index) > 0.5), []).append(i)
    return LoadingPlan(tuple(cuts), canonical_threads(list(by_thread.values())))
