"""The loading MILP (``formulations/loading_balance.md``, "MILP") as a ``LinearProgram``
in ms, for the MILP backends: staircase variables ``u[i][b]`` (block ``b`` lies in child
slot ``>= i``), per-slot load times (big-M rows per child count when the storage slowdown
depends on it), and, for ``latency`` with fewer threads than slots, thread assignment and
disjunctive order variables with big-M rows (``M = H_load``: every load one after
another). A solution meets the rows to the solvers' tolerances: hence the stated
tolerance ``MILP_EPS * (2 K H_load + 2 K + 1) + MILP_DUAL_TOL * (2 K + 1) H`` ms (the absolute
feasibility error of each of the 2 K + 1 rows counts even where every time is tiny)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from splitopt.core.options import check_build_deadline
from splitopt.core.program import LinearProgram, Program
from splitopt.families.loading.cpsat import horizon_ms
from splitopt.families.loading.data import LoadingData, data
from splitopt.families.loading.evaluate import evaluate
from splitopt.families.loading.plan import LoadingPlan, canonical_threads, plan_from_starts
from splitopt.families.loading.settings import LoadingInstance

if TYPE_CHECKING:
    import numpy as np

#: MILP: integrality / feasibility tolerance assumed for the objective tolerance
MILP_EPS = 1e-6
#: MILP: the dual (optimality) tolerance of the LP solves, for the bound
MILP_DUAL_TOL = 1e-7


def build_milp(inst: LoadingInstance, start: LoadingPlan | None = None) -> Program:
    """The program of the formulation's "MILP", its parts in order: the staircase, the
    loads, and the balance or latency objective with its rows; ``start`` (a plan of at
    most ``K`` children, or None) is its hint."""
    d = data(inst)
    counts = list(d.child_counts())
    lp = LinearProgram()
    if not counts:  # no allowed child count: an infeasible program says so
        never = lp.var("no_child_count", binary=False, lb=0.0, ub=0.0)
        lp.add({never: 1.0}, ">=", 1.0, name="children.min")
        return Program(kind="linear", model=lp, decode=lambda values: None, stats={"no_child_count": True})
    v = staircase_variables(inst, d, lp, counts)
    staircase_rows(d, lp, v, counts)
    load_rows(d, lp, v, counts)
    if v.latency:
        latency_rows(d, lp, v)
    else:
        balance_objective(lp, v)
    hint = None
    if start is not None and start.k <= v.K:
        hint = encode_plan(inst, lp, v, start)
    K, H, H_load = v.K, v.H, v.H_load
    # the critical chain crosses at most K order rows (big-M H_load, binaries off by MILP_EPS)
    # and 2K + 1 rows in ms met to the feasibility tolerance
    tol = MILP_EPS * (2 * K * H_load + 2 * K + 1.0) + MILP_DUAL_TOL * (2 * K + 1) * H
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(d, lp, v, values), tolerance_ms=tol,
                   hint=hint, encode=lambda plan: encode_plan(inst, lp, v, plan),
                   # the bound: the LP's dual tolerance on an objective of at most 2H
                   bound_tolerance_ms=MILP_DUAL_TOL * 2 * H,
                   stats={"variables": len(lp.variables), "rows": len(lp.rows)})


@dataclass
class LoadingVariables:
    """The program's variables as the steps add them: the staircase ``u[i][b]`` (block b in
    a slot >= i; ``u[0]`` is all ones, ``u[K]`` all zeros: constants without variables, so
    ``u[0]`` is empty and there is no ``u[K]``), the load of each
    slot, and the objective's (``heaviest``, or ``begin``, ``done``, threads ``w`` and
    orders). ``N`` blocks, ``K`` slots (the most children), ``T`` threads; ``H`` the
    horizon and ``H_load`` every load one after another (ms, the big-M of the order rows)."""

    N: int
    K: int
    T: int
    H: float
    H_load: float
    latency: bool
    u: list[list[int]]
    load: list[int] = field(default_factory=list)
    heaviest: int | None = None
    begin: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    w: dict[tuple[int, int], int] = field(default_factory=dict)
    order: dict[tuple[int, int], int] = field(default_factory=dict)

    @property
    def continuous(self) -> dict:
        """A time variable's bounds: [0, H_load] ms."""
        return dict(binary=False, lb=0.0, ub=self.H_load, implied_integer=False, unit="ms")

    def slot_sum(self, i: int, weights: Sequence[float] | np.ndarray) -> tuple[dict[int, float], float]:
        """``sum_b weights[b] * (u[i][b] - u[i+1][b])`` as (coefficients, constant)."""
        u = self.u
        coeffs: dict[int, float] = {}
        const = 0.0
        for b in range(self.N):
            w = float(weights[b])
            if w == 0.0:
                continue
            if i == 0:
                const += w
            else:
                coeffs[u[i][b]] = coeffs.get(u[i][b], 0.0) + w
            if i + 1 < self.K:
                coeffs[u[i + 1][b]] = coeffs.get(u[i + 1][b], 0.0) - w
        return coeffs, const

    def active(self, i: int) -> tuple[dict[int, float], float]:
        """Slot i holds a block: ``u[i][N-1]`` (1 for slot 0)."""
        return ({}, 1.0) if i == 0 else ({self.u[i][self.N - 1]: 1.0}, 0.0)


def staircase_variables(inst: LoadingInstance, d: LoadingData, lp: LinearProgram, counts: list[int]) -> LoadingVariables:
    """The staircase ``u[i][b]`` of slots 1 .. K-1."""
    N, K = d.n, max(counts)
    # every load one after another: no load starts or lasts longer (the big-M of the order rows)
    H_load = K * d.fixed_ms + max(d.slowdown(k) for k in counts) * float(d.read_prefix[-1])
    u: list[list[int]] = [[]] + [[lp.var(f"u[{i},{b}]") for b in range(N)] for i in range(1, K)]
    return LoadingVariables(N, K, d.threads, horizon_ms(d, counts), H_load, inst.objective == "latency", u)


def staircase_rows(d: LoadingData, lp: LinearProgram, v: LoadingVariables, counts: list[int]) -> None:
    """The staircase's rows: block 0 in slot 0, each slot contiguous and nested in the one
    before, an active slot holds a block, the trainable tail in the last child, and at
    least ``children.min`` children."""
    u, N, K = v.u, v.N, v.K
    for i in range(1, K):
        check_build_deadline()  # O(N) rows per slot: the budget includes building
        lp.add({u[i][0]: 1.0}, "==", 0.0, name=f"first_block_in_slot0[{i}]")
        for b in range(N - 1):
            lp.add({u[i][b]: 1.0, u[i][b + 1]: -1.0}, "<=", 0.0, name=f"contiguous[{i},{b}]")
        if i + 1 < K:
            for b in range(N):
                lp.add({u[i + 1][b]: 1.0, u[i][b]: -1.0}, "<=", 0.0, name=f"nested[{i},{b}]")
        # an active slot holds a block: sum_b (u[i][b] - u[i+1][b]) >= u[i][N-1]
        coeffs, const = v.slot_sum(i, [1.0] * N)
        coeffs[u[i][N - 1]] = coeffs.get(u[i][N - 1], 0.0) - 1.0
        lp.add(coeffs, ">=", -const, name=f"nonempty[{i}]")
        # the trainable tail: block N - m lies in the same slot as the last block
        if d.last_start_max < N - 1:
            lp.add({u[i][d.last_start_max]: 1.0, u[i][N - 1]: -1.0}, ">=", 0.0, name=f"trainable_tail[{i}]")
    k_low = min(counts)
    if k_low > 1:
        lp.add({u[k_low - 1][N - 1]: 1.0}, "==", 1.0, name="children.min")


def load_rows(d: LoadingData, lp: LinearProgram, v: LoadingVariables, counts: list[int]) -> None:
    """Loads: ``load_i >= F a_i + sigma(k) read_i - M_k (1 - y_k)`` with ``y_k = a_{k-1} -
    a_k`` (one row without big-M when the slowdown does not depend on k)."""
    sigmas = {k: d.slowdown(k) for k in counts}
    single = len(set(sigmas.values())) == 1
    for i in range(v.K):
        dl = lp.var(f"load[{i}]", **v.continuous)
        v.load.append(dl)
        read, read_const = v.slot_sum(i, d.read_ms)
        act, act_const = v.active(i)
        ks = [k for k in counts if k > i]
        for k in ks:
            # load_i >= F * active_i + sigma_k * read_i  - M (1 - y_k),  y_k = active_{k-1} - active_k
            row = {dl: 1.0}
            for var, c in act.items():
                row[var] = row.get(var, 0.0) - d.fixed_ms * c
            for var, c in read.items():
                row[var] = row.get(var, 0.0) - sigmas[k] * c
            rhs = d.fixed_ms * act_const + sigmas[k] * read_const
            if not single:
                big = d.fixed_ms + sigmas[k] * float(d.read_prefix[-1])
                y_coeffs, y_const = exactly_k(v.u, k, v.K, v.N)
                for var, c in y_coeffs.items():
                    row[var] = row.get(var, 0.0) - big * c
                rhs += big * (y_const - 1.0)
            lp.add(row, ">=", rhs, kind="time", name=f"load[{i},k={k}]")
            if single:
                break


def balance_objective(lp: LinearProgram, v: LoadingVariables) -> None:
    """Balance: minimise ``h >= load_i``."""
    heaviest = v.heaviest = lp.var("heaviest_load", **v.continuous)
    for i in range(v.K):
        lp.add({heaviest: 1.0, v.load[i]: -1.0}, ">=", 0.0, kind="time", name=f"heaviest[{i}]")
    lp.add_objective(heaviest, 1.0)
    lp.meta.update(u=v.u, heaviest=heaviest)


def latency_rows(d: LoadingData, lp: LinearProgram, v: LoadingVariables) -> None:
    """Latency: the load starts and inference ends, the threads and orders where fewer
    threads than slots (:func:`thread_rows`), ``E_i >= begin_i + load_i + P_i``, ``E_i >=
    E_{i-1} + P_i``; minimise ``E_{K-1}``."""
    K = v.K
    v.begin = [lp.var(f"load_start[{i}]", **v.continuous) for i in range(K)]
    v.done = [lp.var(f"infer_end[{i}]", binary=False, lb=0.0, ub=2 * v.H, implied_integer=False, unit="ms")
              for i in range(K)]
    if v.T < K:
        thread_rows(lp, v)
    begin, done, load = v.begin, v.done, v.load
    infer_rows = [v.slot_sum(i, d.infer_ms) for i in range(K)]
    for i in range(K):
        coeffs, const = infer_rows[i]
        row = {done[i]: 1.0, begin[i]: -1.0, load[i]: -1.0}
        for var, c in coeffs.items():
            row[var] = row.get(var, 0.0) - c
        lp.add(row, ">=", const, kind="time", name=f"after_load[{i}]")
        if i:
            row = {done[i]: 1.0, done[i - 1]: -1.0}
            for var, c in coeffs.items():
                row[var] = row.get(var, 0.0) - c
            lp.add(row, ">=", const, kind="time", name=f"after_previous[{i}]")
    lp.add_objective(done[K - 1], 1.0)
    lp.meta.update(u=v.u, begin=begin, done=done, w=v.w, order=v.order)


def thread_rows(lp: LinearProgram, v: LoadingVariables) -> None:
    """Threads ``w[i][t]`` (one per active slot, threads numbered by their smallest child)
    and orders ``o[i][j]`` (i before j on a shared thread): ``begin_j >= begin_i + load_i -
    H_load (3 - w_it - w_jt - o_ij)``."""
    K, w, order, begin, load = v.K, v.w, v.order, v.begin, v.load
    lanes = min(v.T, K)
    for i in range(K):
        for t in range(min(i + 1, lanes)):  # symmetry: threads numbered by their smallest child
            w[(i, t)] = lp.var(f"thread[{i},{t}]")
        act, act_const = v.active(i)
        row = {w[(i, t)]: 1.0 for t in range(min(i + 1, lanes))}
        for var, c in act.items():
            row[var] = row.get(var, 0.0) - c
        lp.add(row, "==", act_const, name=f"one_thread[{i}]")
    for i in range(K):
        for j in range(i + 1, K):
            order[(i, j)] = lp.var(f"before[{i},{j}]")
    for i in range(K):
        for j in range(K):
            if i == j:
                continue
            for t in range(lanes):
                if (i, t) not in w or (j, t) not in w:
                    continue
                # same thread t, i before j  =>  start_j >= start_i + load_i
                if i < j:
                    o_coeffs, o_const = {order[(i, j)]: 1.0}, 0.0
                else:
                    o_coeffs, o_const = {order[(j, i)]: -1.0}, 1.0
                big = v.H_load
                row = {begin[j]: 1.0, begin[i]: -1.0, load[i]: -1.0, w[(i, t)]: -big, w[(j, t)]: -big}
                for var, c in o_coeffs.items():
                    row[var] = row.get(var, 0.0) - big * c
                lp.add(row, ">=", -big * (3.0 - o_const), kind="time", name=f"order[{i},{j},{t}]")


def decode_plan(d: LoadingData, lp: LinearProgram, v: LoadingVariables, values) -> LoadingPlan:
    """The children's first blocks from the staircase and, where fewer threads than slots,
    each thread's children in the order they begin."""
    u, N, K, T = v.u, v.N, v.K, v.T
    starts = [0]
    for i in range(1, K):
        if values[u[i][N - 1]] > 0.5:
            starts.append(next(b for b in range(N) if values[u[i][b]] > 0.5))
    if not v.latency or T >= K:
        return plan_from_starts(d, starts) if not v.latency else LoadingPlan(
            tuple(starts), canonical_threads([[i] for i in range(len(starts))]))
    lanes = min(T, K)
    lanes_of: dict[int, list[int]] = {}
    for i in range(len(starts)):
        t = max((t for t in range(lanes) if (i, t) in lp.meta["w"]), key=lambda t: values[lp.meta["w"][(i, t)]])
        lanes_of.setdefault(t, []).append(i)
    lists = [sorted(kids, key=lambda i: (values[lp.meta["begin"][i]], i)) for kids in lanes_of.values()]
    return LoadingPlan(tuple(starts), canonical_threads(lists))


def encode_plan(inst: LoadingInstance, lp: LinearProgram, v: LoadingVariables, plan: LoadingPlan) -> list[float]:
    """The program's variable values for ``plan``: the staircase, and the times of its
    evaluation."""
    u, N, K = v.u, v.N, v.K
    values = [0.0] * len(lp.variables)
    for i in range(1, K):
        for b in range(N):
            values[u[i][b]] = 1.0 if i < plan.k and b >= plan.starts[i] else 0.0
    m = evaluate(inst, plan)
    for c in m.children:
        values[v.load[c.index]] = c.load_ms
    if not v.latency:
        values[lp.meta["heaviest"]] = m.heaviest_load_ms
        return values
    for c in m.children:
        values[lp.meta["begin"][c.index]] = c.load_start_ms
        values[lp.meta["done"][c.index]] = c.infer_end_ms
    for i in range(plan.k, K):
        values[lp.meta["done"][i]] = m.first_response_ms
    if v.T < K:
        # threads numbered by their smallest child: thread t then holds only children >= t
        for t, kids in enumerate(sorted(plan.threads, key=min)):
            for pos, i in enumerate(kids):
                values[lp.meta["w"][(i, t)]] = 1.0
                for j in kids[pos + 1:]:
                    if i < j:
                        values[lp.meta["order"][(i, j)]] = 1.0
    return values


def exactly_k(u: list[list[int]], k: int, K: int, N: int) -> tuple[dict[int, float], float]:
    """y_k = active_{k-1} - active_k (exactly k children) as (coefficients, constant)."""
    coeffs: dict[int, float] = {}
    const = 0.0
    if k - 1 == 0:
        const += 1.0
    else:
        coeffs[u[k - 1][N - 1]] = 1.0
    if k < K:
        coeffs[u[k][N - 1]] = coeffs.get(u[k][N - 1], 0.0) - 1.0
    return coeffs, const
