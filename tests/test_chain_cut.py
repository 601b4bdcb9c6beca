"""The chain family's minimum cut (``splitopt/families/chain/cut.py``, ``chain-cut``), the
linear-time peak-memory walk of its evaluator and the swept memory rows of its program,
each against brute force or a direct restatement on random DAG x chain instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitopt.core.program import row_violations
from splitopt.core.result import Status
from splitopt.families.chain import milp as chain_program
from splitopt.families.chain.bound import chain_lower_bound
from splitopt.families.chain.cut import cut_refusal, min_weighted_stages
from splitopt.families.chain.data import chain_tensors
from splitopt.families.chain.enumerate import enumerate_plans
from splitopt.families.chain.evaluate import evaluate
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.registry import family
from splitopt.solve import solve
from splitopt.families.chain.examples import first_chain_instance_for, random_chain_instance, random_chain_plan

SMALL = dict(seed=st.integers(0, 10_000), n=st.integers(1, 7), m=st.integers(2, 4), linear=st.booleans())


def weighted(metrics, weights) -> float:
    return sum(w * d.stage_ms for w, d in zip(weights, metrics.devices))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL, draw=st.integers(0, 3))
def test_min_cut_is_the_least_weighted_sum_of_stage_times(seed, n, m, linear, draw):
    """For latency weights (all 1) and random weights >= 0 (some zero), the cut's bound
    is at most every monotone placement's weighted stage sum, and its plan attains the
    least of them (memory ignored)."""
    inst = random_chain_instance(seed, n, m, linear=linear)
    rng = np.random.default_rng([seed, draw])
    weights = np.ones(m) if draw == 0 else rng.uniform(0, 1, m) * (rng.random(m) < 0.8)
    cut = min_weighted_stages(inst, weights)
    best = min(weighted(evaluate(inst, p), weights) for p in enumerate_plans(inst, 10 ** 6))
    found = weighted(evaluate(inst, plan_from_indices(
        inst, {layer.name: p for layer, p in zip(inst.layers, cut.labels)})), weights)
    assert cut.bound_ms <= best * (1 + 1e-12) + 1e-12
    assert found == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert found <= cut.bound_ms + cut.slack_ms + 1e-9 * max(1.0, found)


def occupied(inst, plan) -> np.ndarray:
    """(tensors, devices): 1 where a tensor occupies a device (producer's to farthest
    reader's position, the evaluator's definition), by hand."""
    tensors = chain_tensors(inst)
    pos = {name: inst.settings.chain.index(d) for name, d in plan.device.items()}
    out = np.zeros((len(tensors.names), len(inst.settings.chain)))
    for i, t in enumerate(tensors.names):
        src = 0 if tensors.producer[t] is None else pos[t]
        far = max([pos[c] for c in tensors.consumers[t]], default=src)
        out[i, src:far + 1] = 1.0
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL, draw=st.integers(0, 3))
def test_min_cut_with_occupancy_costs_is_the_least_priced_sum(seed, n, m, linear, draw):
    """With a random cost per tensor and device it occupies (a price of its activation
    bytes; some zero), and random per-layer penalties: the cut is the least total over
    every placement, by enumeration."""
    inst = random_chain_instance(seed, n, m, linear=linear)
    rng = np.random.default_rng([seed, draw, 7])
    weights = np.ones(m) if draw == 0 else rng.uniform(0, 1, m)
    occupancy = rng.uniform(0, 5, (len(chain_tensors(inst).names), m)) * (rng.random((len(chain_tensors(inst).names), m)) < 0.7)
    penalty = rng.uniform(0, 2, (n, m)) * (draw % 2)

    def total(plan) -> float:
        pos = {name: inst.settings.chain.index(d) for name, d in plan.device.items()}
        return (weighted(evaluate(inst, plan), weights) + sum(penalty[i, pos[l.name]] for i, l in enumerate(inst.layers))
                + float((occupancy * occupied(inst, plan)).sum()))

    cut = min_weighted_stages(inst, weights, penalty, occupancy)
    best = min(total(p) for p in enumerate_plans(inst, 10 ** 6))
    found = total(plan_from_indices(inst, {layer.name: p for layer, p in zip(inst.layers, cut.labels)}))
    assert cut.bound_ms <= best * (1 + 1e-12) + 1e-12
    assert found == pytest.approx(best, rel=1e-9, abs=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL)
def test_chain_cut_is_the_optimum_or_a_bound(seed, n, m, linear):
    inst = random_chain_instance(seed, n, m, objective="latency", linear=linear)
    ref = solve(inst, "brute-force")
    res = solve(inst, "chain-cut")
    if res.status is Status.OPTIMAL:
        assert ref.status is Status.OPTIMAL
        assert res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    else:
        assert res.status is Status.NO_SOLUTION_FOUND and "memory" in res.message
        assert not res.metrics.feasible
        if ref.status is Status.OPTIMAL:
            assert res.bound <= ref.objective * (1 + 1e-12) + 1e-12
    fam = family("chain")
    assert (fam.exact_method(inst) == "chain-cut") == (res.status is Status.OPTIMAL)
    if ref.status is Status.OPTIMAL:
        assert chain_lower_bound(inst) <= ref.objective * (1 + 1e-12) + 1e-12


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL)
def test_throughput_bound_never_exceeds_the_optimum(seed, n, m, linear):
    inst = random_chain_instance(seed, n, m, objective="throughput", linear=linear)
    ref = solve(inst, "brute-force")
    if ref.status is Status.OPTIMAL:
        assert chain_lower_bound(inst) <= ref.objective * (1 + 1e-12) + 1e-12
    # throughput: the branch and bound where the cut's graph applies, else CP-SAT
    expected = "chain-bb" if cut_refusal(inst) is None else None
    assert family("chain").exact_method(inst) == expected


def test_chain_cut_refuses_throughput():
    inst = random_chain_instance(3, 5, 3, objective="throughput")
    with pytest.raises(Exception, match="latency"):
        solve(inst, "chain-cut")


def test_auto_solves_a_memory_free_instance_with_the_cut():
    inst = first_chain_instance_for("chain-cut", 300, 6, "latency", seeds=range(20))
    if inst is None:
        pytest.fail("no random 300-layer instance whose cut meets memory")
    res = solve(inst, time_limit=60)
    assert res.status is Status.OPTIMAL
    assert res.extra.get("exact_backend") == "chain-cut"
    assert res.objective == pytest.approx(solve(inst, "chain-cut").objective, rel=1e-12)


def naive_peaks(inst, plan):
    """The evaluator's peak activation bytes per device, restated step by step."""
    tensors = chain_tensors(inst)
    index = {name: i for i, name in enumerate(inst.settings.chain)}
    dev = {n: index[d] for n, d in plan.device.items()}
    src = {t: 0 if tensors.producer[t] is None else dev[t] for t in tensors.names}
    far = {t: max([dev[c] for c in tensors.consumers[t]], default=src[t]) for t in tensors.names}
    M = len(inst.settings.chain)
    peak, step = [0.0] * M, [None] * M
    for k, layer in enumerate(inst.layers):
        held = [0.0] * M
        for t in tensors.names:
            if tensors.first_step[t] <= k <= tensors.last_step[t]:
                for d in range(src[t], far[t] + 1):
                    held[d] += tensors.held_bytes[t]
        for d in range(M):
            if held[d] > peak[d]:
                peak[d], step[d] = held[d], layer.name
    return peak, step


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), m=st.integers(2, 5))
def test_peak_memory_walk_matches_the_step_by_step_sum(seed, n, m):
    inst = random_chain_instance(seed, n, m)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        plan = random_chain_plan(inst, rng)
        metrics = evaluate(inst, plan)
        peak, step = naive_peaks(inst, plan)
        assert [d.peak_activation_bytes for d in metrics.devices] == peak
        assert [d.peak_step for d in metrics.devices] == step


@pytest.fixture
def sweep_everything(monkeypatch):
    """Every tensor through the swept running sum (SWEEP_AFTER = 0 or 1)."""
    def set_to(value):
        monkeypatch.setattr(chain_program, "SWEEP_AFTER", value)
    return set_to


@pytest.mark.parametrize("after", [0, 1])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 12), m=st.integers(2, 4))
def test_swept_memory_rows_match_the_evaluator(sweep_everything, after, seed, n, m):
    sweep_everything(after)
    inst = random_chain_instance(seed, n, m)
    program = chain_program.build_milp(inst, None)
    lp = program.model
    rng = np.random.default_rng(seed)
    for _ in range(5):
        plan = random_chain_plan(inst, rng)
        metrics = evaluate(inst, plan)
        values = program.encode(plan)
        assert lp.evaluate_objective(values) == pytest.approx(metrics.objective_ms, rel=1e-9, abs=1e-12)
        violated = row_violations(lp, values, tol=1e-6)
        assert (not violated) == metrics.feasible, (violated, metrics.violations)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), m=st.integers(2, 4))
def test_swept_program_optimum_matches_brute_force(sweep_everything, seed, n, m):
    sweep_everything(0)
    inst = random_chain_instance(seed, n, m)
    ref = solve(inst, "brute-force")
    res = solve(inst, "cpsat")
    assert res.status is ref.status
    if ref.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(ref.objective, rel=1e-6, abs=1e-9)


def test_pricing_the_step_rows_raises_the_lagrangian_bound():
    """Pricing the overflowing steps' weights and activations (as well as the weights
    alone) is never below the weights-only bound by more than Kelley's tolerance on
    random memory-bound chains, above it on some, and below the brute-force optimum."""
    from splitopt.families.chain.lagrange import priced_cuts

    raised = 0
    for seed in range(40):
        inst = random_chain_instance(seed, 6, 3, objective="latency")
        steps, weights_only = priced_cuts(inst), priced_cuts(inst, price_steps=False)
        ref = solve(inst, "brute-force")
        if ref.status is Status.OPTIMAL:
            assert steps.bound_ms <= ref.objective * (1 + 1e-9) + 1e-12, seed
        assert steps.bound_ms >= weights_only.bound_ms * (1 - 1e-6) - 1e-9, seed
        raised += steps.bound_ms > weights_only.bound_ms * (1 + 1e-6) + 1e-9
    assert raised >= 3, raised


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL, objective=st.sampled_from(["latency", "throughput"]))
def test_lagrangian_bound_and_plan(seed, n, m, linear, objective):
    """The priced cuts' bound never exceeds the brute-force optimum, and their best plan
    meets every limit with the objective it claims."""
    from splitopt.families.chain.lagrange import lagrange

    inst = random_chain_instance(seed, n, m, objective=objective, linear=linear)
    result = lagrange(inst)
    ref = solve(inst, "brute-force")
    if result is None:
        return
    if ref.status is Status.OPTIMAL:
        assert result.bound_ms <= ref.objective * (1 + 1e-9) + 1e-12
    else:
        assert result.plan is None
    if result.plan is not None:
        metrics = evaluate(inst, result.plan)
        assert metrics.feasible and metrics.objective_ms == result.plan_objective_ms
        assert ref.status is Status.OPTIMAL and metrics.objective_ms >= ref.objective * (1 - 1e-9)
