"""``llm-dp`` where the error budget binds (``splitopt/families/llm/budget.py``): the
Lagrangian bound and the search that closes its gap against brute force (every plan) and
against the path program beyond brute force, under every objective, chains and rings, pins;
its pieces against their definitions; the time limit; a budget no plan meets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from splitopt.core.options import SolveOptions
from splitopt.core.result import Status
from splitopt.families.llm import budget
from splitopt.families.llm.data import data
from splitopt.families.llm.enumerate import enumerate_plans
from splitopt.families.llm.evaluate import evaluate
from splitopt.families.llm.examples import random_data
from splitopt.families.llm.methods import llm_dp_within_budget
from splitopt.families.registry import family
from splitopt.solve import solve

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
OBJECTIVES = st.sampled_from(["ttft", "token_latency", "throughput"])


def binding(seed: int, objective: str, share: float, devices: int | None = None):
    """A random instance whose error budget lies ``share`` of the way from the least error
    of any plan to the error of the fastest plan at the lowest widths (so that it binds
    wherever those differ); None where the instance has no plan or no width below 16."""
    fam = family("llm")
    inst = fam.instance_from_data(random_data(seed, devices=devices)).with_settings(objective=objective,
                                                                                    error_budget=None)
    fam.prepare(inst)
    d = data(inst)
    if d.error.max() == 0.0 and not any(w < 16 for w in d.widths):
        return None
    with_errors = inst.with_settings(error_budget=1e9)  # the error tables are built where a budget is set
    fam.prepare(with_errors)
    dd = data(with_errors)
    t = budget.budget_tables(dd, dd.decode_ms, dd.link_decode_ms, 1e9)
    least, fast = budget.lagrangian_plan(t, math.inf, None), budget.lagrangian_plan(t, 0.0, None)
    if least is None or fast is None:
        return None
    low, high = least.plan.error, fast.plan.error
    inst = inst.with_settings(error_budget=low + share * max(0.0, high - low))
    fam.prepare(inst)
    return inst


@given(seed=SEEDS, objective=OBJECTIVES, share=st.floats(0.0, 1.0))
@example(seed=4312, objective="throughput", share=0.8803271782909662)  # one device beats a ring with a slow return
@settings(max_examples=150, deadline=None)
def test_the_budgeted_program_is_the_brute_force_optimum(seed, objective, share):
    inst = binding(seed, objective, share)
    if inst is None:
        return
    ref = solve(inst, "brute-force")
    res = solve(inst, "llm-dp")
    assert res.status is ref.status, (res.message, ref.message)
    if ref.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
        assert res.metrics.feasible and res.metrics.error <= inst.settings.error_budget * (1 + 1e-9) + 1e-12


@given(seed=SEEDS, objective=OBJECTIVES, share=st.floats(0.0, 1.0))
@settings(max_examples=6, deadline=None)
def test_the_budgeted_program_and_the_path_program_agree_beyond_brute_force(seed, objective, share):
    """Four devices (too many plans to enumerate): the same optimum as the path program."""
    inst = binding(seed, objective, share, devices=4)
    if inst is None:
        return
    dp_res, milp_res = solve(inst, "llm-dp"), solve(inst, "milp-highs", time_limit=120)
    assert dp_res.status is milp_res.status
    if dp_res.status is Status.OPTIMAL:
        assert dp_res.objective == pytest.approx(milp_res.objective, rel=1e-6)


def test_subset_min_is_the_least_over_subsets():
    rng = np.random.default_rng(1)
    R = rng.uniform(0, 10, size=(16, 3))
    out = budget.subset_min(R)
    for M in range(16):
        subsets = [U for U in range(16) if U & M == U]
        assert np.allclose(out[M], R[subsets].min(axis=0))


@given(rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 1), st.integers(0, 4),
                                st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=40),
       ring=st.booleans(), resources=st.sampled_from([1, 2]))
@settings(max_examples=200, deadline=None)
def test_undominated_keeps_each_state_s_pareto_labels(rows, ring, resources):
    """A label some other label of its state (``first`` counts only in a ring) beats on time
    and every amount is dropped where there is one resource, and may be kept where there are
    two (a bounded window); every label of the Pareto set is kept once (equal labels: one),
    and every dropped label is beaten or equalled by a kept one; on small integer grids, so
    ties occur."""
    first, used, last, time, *amounts = (np.array(c, dtype=np.int64) for c in zip(*rows))
    amount = np.stack(amounts[:resources], axis=1).astype(float)
    n = len(rows)
    z = np.zeros(n, dtype=np.int64)
    labels = budget.Labels(time.astype(float), amount, first, used, last, z, z, z - 1, z.astype(float))
    kept = budget.undominated(labels, ring).tolist()
    assert len(kept) == len(set(kept))

    def state(i):
        return (first[i] if ring else 0, used[i], last[i])

    def point(i):
        return (int(time[i]), *map(int, amount[i]))

    def beats(j, i):
        return state(j) == state(i) and all(x <= y for x, y in zip(point(j), point(i)))

    for key in {state(i) for i in range(n)}:
        rows_of = [i for i in range(n) if state(i) == key]
        front = {point(i) for i in rows_of if not any(beats(j, i) and point(j) != point(i) for j in rows_of)}
        kept_points = [point(i) for i in kept if state(i) == key]
        assert front <= set(kept_points)
        if resources == 1:
            assert sorted(kept_points) == sorted(front)
    for i in set(range(n)) - set(kept):
        assert any(beats(j, i) for j in kept)


def test_completion_bounds_are_the_least_completion():
    """``H[U, e, b]`` is the least cost of running ``[b, n)`` on unused devices after ``e``,
    checked against every sequence of devices and ranges on a random instance."""
    inst = family("llm").instance_from_data(random_data(7, devices=3))
    family("llm").prepare(inst)
    d = data(inst)
    t = budget.budget_tables(d, d.decode_ms, d.link_decode_ms, 1.0)
    cost = t.time.min(axis=0)
    H = budget.completion_bounds(t, cost, None)
    D, n = t.D, t.n
    for U in range(1, 1 << D):
        for e in range(D):
            for b in range(1, n):
                free = [x for x in range(D) if not U >> x & 1]
                best = math.inf
                for k in range(1, len(free) + 1):
                    for order in itertools.permutations(free, k):
                        for cuts in itertools.combinations(range(b + 1, n), k - 1):
                            ends = (b, *cuts, n)
                            total, prev = 0.0, e
                            for x, a, c in zip(order, ends, ends[1:]):
                                total += t.link[a, prev, x] + cost[x, a, c]
                                prev = x
                            best = min(best, total)
                assert H[U, e, b] == pytest.approx(best) or (math.isinf(best) and math.isinf(H[U, e, b]))


def test_a_budget_no_plan_meets_is_infeasible_naming_the_least_error():
    inst = binding(3, "token_latency", 0.0)
    assert inst is not None
    d = data(inst)
    run = budget.lagrangian_plan(budget.budget_tables(d, d.decode_ms, d.link_decode_ms, 1.0), math.inf, None)
    assert run is not None
    least = run.plan
    assert least.error > 0
    tight = inst.with_settings(error_budget=least.error * 0.5)
    family("llm").prepare(tight)
    res = solve(tight, "llm-dp")
    assert res.status is Status.INFEASIBLE
    assert "error budget" in res.message and f"{least.error:.6g}" in res.message


@pytest.mark.parametrize("objective", ["ttft", "token_latency", "throughput"])
@pytest.mark.parametrize("calls", [1, 3, 12, 40])
def test_a_stop_returns_the_incumbent_with_a_valid_bound(objective, calls):
    """Stopped after a few checks of the clock: no wrong OPTIMAL, any plan meets the budget
    and the bound lies below its value and the optimum."""
    inst = None
    for seed in range(40):
        inst = binding(seed, objective, 0.5, devices=4)
        if inst is not None and solve(inst, "llm-dp").status is Status.OPTIMAL:
            break
    assert inst is not None
    optimum = solve(inst, "llm-dp").objective
    asked = itertools.count()
    options = SolveOptions()
    object.__setattr__(options, "out_of_time", lambda: next(asked) >= calls)  # a clock that runs out after `calls`
    out = llm_dp_within_budget(inst, options)
    assert out.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NO_SOLUTION_FOUND)
    if out.plan is not None:
        m = evaluate(inst, out.plan)
        assert m.feasible
        assert out.bound <= m.objective_ms * (1 + 1e-9) and out.bound <= optimum * (1 + 1e-9)
    if out.status is Status.OPTIMAL:
        assert out.objective == pytest.approx(optimum, rel=1e-9)


def test_enumeration_is_the_reference():
    """The brute force the tests compare with sees plans of mixed widths."""
    mixed = 0
    for seed in range(20):
        inst = binding(seed, "ttft", 0.5)
        if inst is not None:
            widths = {tuple(s.bits for s in p.stages) for p in enumerate_plans(inst, 100_000)}
            mixed += any(len(set(w)) > 1 for w in widths)
    assert mixed >= 5
