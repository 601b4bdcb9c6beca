"""The chain family's branch and bound (``splitopt/families/chain/branch.py``, ``chain-bb``)
and the label bounds of the layered cut it branches with, against brute force on random
DAG x chain instances (memory limits that bind, latency and throughput)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitopt.core.layered_cut import LabelBoundsConflict
from splitopt.core.result import Status
from splitopt.families.chain.branch import OPTIMAL_RTOL, Box
from splitopt.families.chain.cut import min_weighted_stages
from splitopt.families.chain.enumerate import enumerate_plans
from splitopt.families.chain.evaluate import evaluate
from splitopt.solve import solve
from splitopt.families.chain.examples import first_chain_instance_for, random_chain_instance

SMALL = dict(seed=st.integers(0, 10_000), n=st.integers(1, 7), m=st.integers(2, 4), linear=st.booleans())


def small_optima(count: int):
    """(instance, brute force's answer) for the random 7-layer, 3-device latency instances
    of seeds ``0 .. count-1`` that brute force solves to OPTIMAL."""
    for seed in range(count):
        inst = random_chain_instance(seed, 7, 3, objective="latency")
        ref = solve(inst, "brute-force")
        if ref.status is Status.OPTIMAL:
            yield seed, inst, ref


def positions(inst, plan) -> np.ndarray:
    return np.array([inst.settings.chain.index(plan.device[layer.name]) for layer in inst.layers])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL, objective=st.sampled_from(["latency", "throughput"]))
def test_branch_and_bound_matches_brute_force(seed, n, m, linear, objective):
    """OPTIMAL with brute force's value (within its stated tolerance) and a bound at most
    the optimum, or INFEASIBLE where brute force finds no plan that meets the limits."""
    inst = random_chain_instance(seed, n, m, objective=objective, linear=linear)
    ref = solve(inst, "brute-force")
    res = solve(inst, "chain-bb")
    if ref.status is Status.INFEASIBLE:
        assert res.status is Status.INFEASIBLE and "memory" in res.message, (res.status, res.message)
        return
    assert res.status is Status.OPTIMAL, (res.status, res.message)
    assert res.metrics.feasible
    assert res.objective <= ref.objective * (1 + OPTIMAL_RTOL) + 1e-12
    assert res.objective >= ref.objective * (1 - 1e-9) - 1e-12
    assert res.bound <= ref.objective * (1 + 1e-9) + 1e-12


def test_branching_is_needed_and_closes_the_gap():
    """On memory-bound random instances where the root's Lagrangian bound lies below the
    optimum, the search branches (more than one node) and still ends at the brute-force
    optimum: the branching path is exercised, not only the root."""
    from splitopt.families.chain.lagrange import priced_cuts

    branched = 0
    for seed, inst, ref in small_optima(60):
        root = priced_cuts(inst).bound_ms
        res = solve(inst, "chain-bb")
        assert res.status is Status.OPTIMAL and res.objective <= ref.objective * (1 + OPTIMAL_RTOL) + 1e-12
        if root < ref.objective * (1 - 1e-3):
            assert res.extra["nodes"] > 1, seed
            branched += 1
    assert branched >= 3, branched


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL, draw=st.integers(0, 10_000))
def test_cut_within_position_bounds_is_the_least_placement_in_the_box(seed, n, m, linear, draw):
    """Random per-layer position bounds: the cut with them as label bounds finds the least
    sum of stage times over the placements inside, by enumeration; where the box holds no
    placement, the cut says so (``LabelBoundsConflict``) and ``Box.tighten`` finds it
    empty; tightening keeps every placement inside."""
    inst = random_chain_instance(seed, n, m, linear=linear)
    rng = np.random.default_rng(draw)
    lo = rng.integers(0, m, n)
    hi = np.maximum(lo, rng.integers(0, m, n)) if draw % 4 else rng.integers(0, m, n)
    plans = list(enumerate_plans(inst, 10 ** 6))

    def inside(a, b):
        return [p for p in plans if np.all(positions(inst, p) >= a) and np.all(positions(inst, p) <= b)]

    before = inside(lo, hi)
    tight_lo, tight_hi = lo.copy(), hi.copy()
    box = Box(inst)
    nonempty = all([box.tighten(tight_lo, tight_hi, layer) for layer in range(n)])
    if not before:
        assert not nonempty or n == 0
        if n and np.all(lo <= hi):
            with pytest.raises(LabelBoundsConflict):
                min_weighted_stages(inst, positions=(lo, hi))
        return
    assert nonempty and len(inside(tight_lo, tight_hi)) == len(before)
    cut = min_weighted_stages(inst, positions=(lo, hi))
    best = min(sum(d.stage_ms for d in evaluate(inst, p).devices) for p in before)
    assert np.all(np.asarray(cut.labels) >= lo) and np.all(np.asarray(cut.labels) <= hi)
    assert cut.bound_ms <= best * (1 + 1e-12) + 1e-12
    assert cut.bound_ms + cut.slack_ms >= best * (1 - 1e-9) - 1e-12


def test_box_tightening_is_the_dag_closure():
    """After tightening, every data edge has input's least <= reader's least and input's
    largest <= reader's largest: the box of the monotone placements inside the original."""
    for seed in range(30):
        inst = random_chain_instance(seed, 12, 4)
        rng = np.random.default_rng(seed)
        box = Box(inst)
        lo, hi = np.zeros(12, dtype=np.int64), np.full(12, 3, dtype=np.int64)
        for _ in range(3):
            layer = int(rng.integers(0, 12))
            if rng.random() < 0.5:
                lo[layer] = max(lo[layer], int(rng.integers(0, 4)))
            else:
                hi[layer] = min(hi[layer], int(rng.integers(0, 4)))
            if not box.tighten(lo, hi, layer):
                break
        else:
            index = {layer.name: i for i, layer in enumerate(inst.layers)}
            for reader, layer in enumerate(inst.layers):
                for t in layer.inputs:
                    if t in index:
                        assert lo[index[t]] <= lo[reader] and hi[index[t]] <= hi[reader]


def test_a_time_limited_branch_and_bound_keeps_the_budget_and_its_gap_is_honest():
    """A 1,000-layer memory-bound chain (the root bound is far below the optimum): a 2 s
    limit ends near 2 s with a plan that meets the limits and a bound below it."""
    inst = random_chain_instance(4, 1000, 8, objective="latency")
    t0 = time.monotonic()
    res = solve(inst, "chain-bb", time_limit=2.0)
    elapsed = time.monotonic() - t0
    assert elapsed <= 2.0 * 1.1 + 1.0, elapsed
    assert res.status is Status.FEASIBLE and res.metrics.feasible, res.message
    assert res.bound is not None and res.bound < res.objective
    assert res.extra["interrupted"] is True


def test_ctrl_c_returns_the_incumbent(monkeypatch):
    """Ctrl-C inside the search (here: at the tenth cut) returns the best plan so far,
    FEASIBLE, with the bound of the open nodes."""
    from splitopt.families.chain import lagrange

    inst = random_chain_instance(4, 300, 8, objective="latency")
    original = lagrange.PricedCuts.solve
    calls = {"n": 0}

    def solve_cut(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(lagrange.PricedCuts, "solve", solve_cut)
    res = solve(inst, "chain-bb")
    assert res.status is Status.FEASIBLE and res.metrics.feasible, res.message
    assert res.extra.get("ctrl_c") is True
    assert res.bound is None or res.bound <= res.objective


def test_auto_runs_the_branch_and_bound_where_memory_binds():
    """The latency objective where the memory-free cut breaks a limit: ``auto``'s exact
    method is ``chain-bb``, which proves the optimum of a 300-layer random instance."""
    inst = first_chain_instance_for("chain-bb", 300, 6, "latency")
    if inst is None:
        pytest.fail("no random 300-layer instance whose memory-free cut breaks a limit")
    res = solve(inst, time_limit=60)
    assert res.extra.get("exact_backend") == "chain-bb"
    assert res.status is Status.OPTIMAL, res.message
    assert res.objective == pytest.approx(solve(inst, "chain-bb").objective, rel=1e-6)


def test_auto_runs_an_anytime_method_once_for_the_whole_budget():
    """``chain-bb`` is anytime (it keeps its plan and bound): ``auto`` runs it once, for
    the whole limit, not a probe, a search and a second run from scratch; the answer keeps
    the limit."""
    inst = random_chain_instance(4, 300, 8, objective="latency")
    res = solve(inst, time_limit=60)
    assert res.extra["exact_backend"] == "chain-bb" and res.status is Status.OPTIMAL, res.message
    assert "search" not in res.extra and "exact" not in res.extra  # proved in its one run
    big = random_chain_instance(4, 1000, 8, objective="latency")
    t0 = time.monotonic()
    res = solve(big, time_limit=4.0)
    elapsed = time.monotonic() - t0
    assert elapsed <= 4.0 * 1.1 + 1.0, elapsed
    assert res.status is Status.FEASIBLE and res.metrics.feasible, res.message
    assert res.extra["probe"]["s"] >= 4.0 - 0.5  # the one exact run had the limit
    assert "search" not in res.extra and "exact" not in res.extra
    assert res.bound is not None and res.bound <= res.objective
    assert res.extra["returned"] == "exact plan" and res.message.endswith("returning the exact plan"), res.message


def test_no_plan_fits_is_proven_without_enumerating():
    """A 300-layer instance whose devices cannot hold the model: without an incumbent a box
    closes once its bound exceeds every plan's objective (the horizon), so INFEASIBLE comes
    from the root (before: the search ran to its time limit, NO_SOLUTION_FOUND); CP-SAT
    agrees."""
    inst = random_chain_instance(9, 300, 8, objective="latency")
    res = solve(inst, "chain-bb", time_limit=30)
    assert res.status is Status.INFEASIBLE and "memory" in res.message, (res.status, res.message)
    assert res.extra["nodes"] <= 5
    assert solve(inst, "cpsat", time_limit=60).status is Status.INFEASIBLE


def test_branching_prefers_the_layers_that_fill_a_device():
    """Where a memory row can bind, a layer's weight in the choice of branching variable
    grows with the bytes it brings to its device (weights, the activations it produces);
    without memory limits that bind, every layer weighs 1."""
    from splitopt.families.chain.branch import branching_weights
    from splitopt.families.chain.lagrange import PricedCuts

    cuts = PricedCuts(random_chain_instance(4, 300, 8, objective="latency"))
    assert cuts.priced or cuts.step_priced
    weight = branching_weights(cuts)
    made = np.zeros(len(weight))
    np.add.at(made, cuts.producer[cuts.producer >= 0], cuts.held[cuts.producer >= 0])
    brought = cuts.weight_bytes + made
    order = np.argsort(brought)
    assert np.all(np.diff(weight[order]) >= -1e-12) and weight.min() >= 1.0 and weight.max() > 1.5
    for seed in range(40):
        free = PricedCuts(random_chain_instance(seed, 50, 4, objective="latency"))
        if not free.priced and not free.step_priced:
            assert np.all(branching_weights(free) == 1.0)
            break
    else:
        pytest.fail("no random instance without a memory row that can bind")


def test_same_instance_same_plan_and_the_command_line(tmp_path):
    """Deterministic: two runs give the same plan; ``splitopt solve FILE --solver
    chain-bb --json`` reports the same OPTIMAL value."""
    import json
    import subprocess
    import sys

    from splitopt.families.chain.examples import random_chain_data

    data = random_chain_data(1, 300, 6, objective="latency")
    inst = random_chain_instance(1, 300, 6, objective="latency")
    first, again = solve(inst, "chain-bb"), solve(inst, "chain-bb")
    assert first.status is Status.OPTIMAL and first.plan == again.plan
    path = tmp_path / "chain300.json"
    path.write_text(json.dumps(data))
    out = subprocess.run([sys.executable, "-m", "splitopt", "solve", str(path), "--solver", "chain-bb", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    result = json.loads(out.stdout)
    assert result["status"] == "OPTIMAL" and result["objective_ms"] == pytest.approx(first.objective, rel=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**SMALL, objective=st.sampled_from(["latency", "throughput"]), draw=st.integers(0, 10_000))
def test_a_cut_line_restates_the_evaluator(seed, n, m, linear, objective, draw):
    """A priced cut's line (stage times, memory verdict, objective, step rows), computed
    with numpy from the positions, equals the evaluator's numbers for its plan."""
    from splitopt.families.chain.evaluate import activation_profile_arrays
    from splitopt.families.chain.lagrange import PricedCuts

    inst = random_chain_instance(seed, n, m, objective=objective, linear=linear)
    if not inst.layers:
        return
    cuts = PricedCuts(inst)
    rng = np.random.default_rng(draw)
    mu = rng.uniform(0, 1e-3, m) * (rng.random(m) < 0.5)
    lam = rng.dirichlet(np.ones(m)) if objective == "throughput" else np.ones(m)
    _, line = cuts.solve(lam, mu, [], np.zeros(0))
    metrics = evaluate(inst, line.plan(inst))
    assert line.stages == pytest.approx([d.stage_ms for d in metrics.devices], rel=1e-12, abs=1e-12)
    assert line.feasible == metrics.feasible
    assert line.objective_ms == pytest.approx(metrics.objective_ms, rel=1e-12, abs=1e-12)
    profile = activation_profile_arrays(inst, line.src, line.far)
    for device in range(m):
        step = int(rng.integers(0, n))
        expected = metrics.devices[device].weight_bytes + profile[device, step] - metrics.devices[device].memory_limit
        assert line.step_row(cuts, device, step) == pytest.approx(expected, rel=1e-12, abs=1e-6)


def test_progress_reports_incumbents_falling_and_bounds_rising_within_the_answer(monkeypatch):
    """``chain-bb`` reports its incumbents and its least open bound as they improve (the
    progress line of long solves): each incumbent below the last, each bound above it,
    every bound at most the optimum, and the last incumbent the plan returned (the raw
    reports, before the progress line keeps only improvements)."""
    from splitopt.core import progress

    checked = 0
    for _, inst, ref in small_optima(40):
        incumbents, bounds = [], []

        def heard(incumbent_ms=None, bound_ms=None):
            if incumbent_ms is not None:
                incumbents.append(incumbent_ms)
            if bound_ms is not None:
                bounds.append(bound_ms)

        monkeypatch.setattr(progress, "report", heard)
        res = solve(inst, "chain-bb")
        monkeypatch.undo()
        assert res.status is Status.OPTIMAL
        assert incumbents and incumbents[-1] == pytest.approx(res.objective, rel=1e-12)
        assert all(later < earlier for earlier, later in zip(incumbents, incumbents[1:])), incumbents
        assert all(later > earlier for earlier, later in zip(bounds, bounds[1:])), bounds
        assert all(b <= ref.objective * (1 + 1e-9) + 1e-12 for b in bounds)
        checked += bool(bounds)
    assert checked >= 5, checked
