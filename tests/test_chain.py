"""The chain family (problem "chain", JMSNAS Eq. 1 on a DAG): hand-computed evaluator
cases, the program against the evaluator on random plans, every exact backend against
brute force on random DAG x chain instances, baselines, bad input and infeasibility."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from splitopt.families.chain.methods import is_chain_graph
from splitopt.families.chain.evaluate import evaluate
from splitopt.families.chain.plan import plan_from_indices
from splitopt.core.errors import InvalidInstance, InvalidPlan, NotApplicable
from splitopt.api import parse_instance
from splitopt.core.result import Status
from splitopt.solve import solve
from splitopt.families.chain.milp import build_milp
from splitopt.core.program import row_violations
from splitopt.families.chain.examples import random_chain_instance, random_chain_plan

EXACT = ["milp-cbc", "milp-highs", "cpsat"]


def three_device_data(skip: bool = True) -> dict:
    """x (1000 B) -> a -> b -> c, and c also reads a when ``skip``; ue -> sbs -> cloud."""
    compute_only = {"offchip_bytes_per_s": None, "onchip_bytes": 1e3, "bit_widths": [8, 16]}
    return {
        "format": "splitopt-instance/1",
        "name": "three",
        "graph": {
            "inputs": [{"name": "x", "shape": [1000], "bits": 8}],
            "layers": [
                {"name": "a", "op": "conv", "inputs": ["x"], "macs": 1e6, "weights": 100, "output_shape": [500]},
                {"name": "b", "op": "conv", "inputs": ["a"], "macs": 1e7, "weights": 1000, "output_shape": [100]},
                {"name": "c", "op": "conv", "inputs": ["b", "a"] if skip else ["b"], "macs": 1e7, "weights": 0,
                 "output_shape": [10]},
            ],
        },
        "devices": [
            {"name": "ue", "mac_per_s": 1e9, "memory_bytes": 1e6, **compute_only},
            {"name": "sbs", "mac_per_s": 1e10, "memory_bytes": 1e6, **compute_only},
            {"name": "cloud", "mac_per_s": 1e11, "memory_bytes": 1e9, **compute_only},
        ],
        "links": [
            {"source": "ue", "target": "sbs", "bandwidth_bits_per_s": 8e6},
            {"source": "sbs", "target": "cloud", "bandwidth_bits_per_s": 80e6, "latency_ms": 1.0},
        ],
        "settings": {"problem": "chain", "chain": ["ue", "sbs", "cloud"], "cloud_bits": 16},
    }


def spread_plan(inst):
    return plan_from_indices(inst, {"a": 0, "b": 1, "c": 2})


# ----- the evaluator by hand ----------------------------------------------------------------

def test_eq1_on_a_linear_graph():
    inst = parse_instance(three_device_data(skip=False))
    m = evaluate(inst, spread_plan(inst))
    # compute: a 1e6/1e9 s = 1 ms on ue, b 1e7/1e10 = 1 ms on sbs, c 1e7/1e11 = 0.1 ms on cloud
    # link ue->sbs: a's 500 x 16 bits = 1000 B at 1 MB/s = 1 ms; sbs->cloud: b's 200 B at 10 MB/s + 1 ms
    assert [d.compute_ms for d in m.devices] == pytest.approx([1.0, 1.0, 0.1])
    assert [d.send_ms for d in m.devices] == pytest.approx([1.0, 1.02, 0.0])
    assert m.latency_ms == pytest.approx(1 + 1 + 1 + 1.02 + 0.1)
    assert m.bottleneck_ms == pytest.approx(2.02) and m.bottleneck_device == "sbs"
    assert [t.resource for t in m.schedule] == ["ue", "ue->sbs", "sbs", "sbs->cloud", "cloud"]
    assert m.schedule[-1].end_ms == pytest.approx(m.latency_ms)


def test_skip_tensor_crosses_every_link_to_its_farthest_consumer_once():
    inst = parse_instance(three_device_data(skip=True))
    m = evaluate(inst, spread_plan(inst))
    assert m.devices[0].sent_tensors == ("a",)
    assert set(m.devices[1].sent_tensors) == {"a", "b"}  # a is forwarded by sbs, b produced there
    assert m.devices[1].sent_bytes == pytest.approx(1200)
    assert m.devices[1].send_ms == pytest.approx(1.0 + 1200 * 8 / 80e6 * 1000)
    assert m.latency_ms == pytest.approx(1 + 1 + 1 + 1.12 + 0.1)


def test_memory_walk_by_hand():
    inst = parse_instance(three_device_data(skip=True))
    m = evaluate(inst, spread_plan(inst))
    # live sets by step: a: {x, a}; b: {a, b}; c: {a, b, c}. x occupies ue only, a all three
    # devices, b sbs and cloud, c the cloud.
    ue, sbs, cloud = m.devices
    assert (ue.weight_bytes, ue.peak_activation_bytes, ue.peak_step) == (200, 2000, "a")
    assert (sbs.weight_bytes, sbs.peak_activation_bytes, sbs.peak_step) == (2000, 1200, "b")
    assert (cloud.weight_bytes, cloud.peak_activation_bytes, cloud.peak_step) == (0, 1220, "c")
    assert m.feasible
    data = three_device_data(skip=True)
    data["devices"][1]["memory_bytes"] = 3199
    tight = parse_instance(data)
    m = evaluate(tight, spread_plan(tight))
    assert m.violations == (
        "device 'sbs' memory 3,200 B (weights 2,000 + activations 1,200 at step 'b') exceeds its limit 3,199 B",
    )


def test_all_on_cloud_forwards_the_raw_input_over_every_link():
    inst = parse_instance(three_device_data())
    m = evaluate(inst, plan_from_indices(inst, {"a": 2, "b": 2, "c": 2}))
    assert [d.sent_tensors for d in m.devices] == [("x",), ("x",), ()]
    assert m.latency_ms == pytest.approx(1.0 + 1.0 + 0.1 + 0.01 + 0.1 + 0.1)


def test_throughput_objective_minimises_the_bottleneck():
    data = three_device_data()
    data["settings"]["objective"] = "throughput"
    inst = parse_instance(data)
    res = solve(inst, "cpsat")
    ref = solve(inst, "chain-brute-force")
    assert res.objective == pytest.approx(ref.objective, rel=1e-9)
    assert res.objective == pytest.approx(res.metrics.bottleneck_ms)
    assert res.metrics.bottleneck_ms <= evaluate(inst, spread_plan(inst)).bottleneck_ms


# ----- the program against the evaluator -------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 7), m=st.integers(2, 4), linear=st.booleans())
def test_program_objective_and_rows_match_the_evaluator(seed, n, m, linear):
    inst = random_chain_instance(seed, n, m, linear=linear)
    program = build_milp(inst, None)
    lp = program.model
    rng = np.random.default_rng(seed)
    for _ in range(5):
        plan = random_chain_plan(inst, rng)
        metrics = evaluate(inst, plan)
        values = program.encode(plan)
        assert lp.evaluate_objective(values) == pytest.approx(metrics.objective_ms, rel=1e-9, abs=1e-12)
        violated = row_violations(lp, values, tol=1e-6)
        assert (not violated) == metrics.feasible, (violated, metrics.violations)


# ----- every exact backend against brute force ---------------------------------------------------

@pytest.mark.parametrize("solver", EXACT + ["chain-dp"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), m=st.integers(2, 4), linear=st.booleans())
def test_exact_backends_match_brute_force(solver, seed, n, m, linear):
    if solver == "chain-dp":
        linear = True
    inst = random_chain_instance(seed, n, m, linear=linear)
    ref = solve(inst, "chain-brute-force")
    res = solve(inst, solver)
    assert res.status is ref.status
    if ref.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-9)
        assert res.metrics.feasible
        assert res.gap is not None and res.gap <= 1e-6
    else:
        assert "memory" in res.message


@pytest.mark.parametrize("baseline", ["chain-scan", "best-single-device"])
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), m=st.integers(2, 4))
def test_baselines_never_beat_the_optimum(baseline, seed, n, m):
    inst = random_chain_instance(seed, n, m)
    ref = solve(inst, "chain-brute-force")
    res = solve(inst, baseline)
    if res.status is Status.FEASIBLE and ref.status is Status.OPTIMAL:
        assert res.objective >= ref.objective * (1 - 1e-9)
    if ref.status is Status.INFEASIBLE:
        assert res.status is not Status.FEASIBLE


def test_chain_dp_refuses_a_dag_and_accepts_a_chain():
    assert is_chain_graph(parse_instance(three_device_data(skip=False))) is None
    assert is_chain_graph(parse_instance(three_device_data(skip=True))) == "b"  # a has two readers
    with pytest.raises(NotApplicable, match="not a chain"):
        solve(parse_instance(three_device_data(skip=True)), "chain-dp")


def test_scan_is_greedy_and_can_miss_the_optimum():
    """A case where the best first split assumes the rest runs on the next device, but
    the optimum skips it: the scan keeps its early choice."""
    worst = 0.0
    for seed in range(40):
        inst = random_chain_instance(seed, 6, 3, objective="latency")
        ref = solve(inst, "chain-brute-force")
        res = solve(inst, "chain-scan")
        if ref.status is Status.OPTIMAL and res.status is Status.FEASIBLE:
            worst = max(worst, res.objective / ref.objective)
    assert worst > 1.0 + 1e-6


# ----- bad input and infeasibility -----------------------------------------------------------------

def rejects(data, *fragments):
    with pytest.raises(InvalidInstance) as info:
        parse_instance(data)
    msg = str(info.value)
    assert "\n" not in msg
    for fragment in fragments:
        assert fragment in msg, msg


def test_bad_chain_instances_name_the_element():
    data = three_device_data()
    data["links"].pop(0)
    rejects(data, "instance.links", "no link from 'ue' to 'sbs'")
    data = three_device_data()
    data["links"].append({"source": "cloud", "target": "ue", "bandwidth_bits_per_s": 1e6})
    rejects(data, "instance.links[2]", "'cloud' -> 'ue'", "cycle")
    data = three_device_data()
    data["settings"]["chain"] = ["ue", "mbs", "cloud"]
    rejects(data, "instance.settings.chain[1]", "unknown device 'mbs'")
    data = three_device_data()
    data["settings"]["chain"] = ["ue"]
    rejects(data, "instance.settings.chain")
    data = three_device_data()
    data["graph"]["layers"][1]["weights"] = 1e9
    rejects(data, "instance.graph.layers[1]", "layer 'b' fits on no chain device")
    data = three_device_data()
    data["settings"]["objective"] = "fastest"
    rejects(data, "instance.settings.objective")
    data = three_device_data()
    data["links"][0]["bus"] = "nowhere"
    rejects(data, "instance.links[0].bus", "unknown bus 'nowhere'")


def test_bad_chain_plans_name_the_layer():
    inst = parse_instance(three_device_data())
    with pytest.raises(InvalidPlan, match="its input 'a' runs on 'cloud', later in the chain"):
        evaluate(inst, plan_from_indices(inst, {"a": 2, "b": 1, "c": 2}))
    from splitopt.families.chain.plan import plan_from_dict

    with pytest.raises(InvalidPlan, match=r"plan.layers.b.device: 'tpu' is not a device of settings.chain"):
        plan_from_dict(inst, {"layers": {"a": {"device": "ue"}, "b": {"device": "tpu"}, "c": {"device": "cloud"}}})
    with pytest.raises(InvalidPlan, match="plan.layers: layer 'c' is missing"):
        plan_from_dict(inst, {"layers": {"a": {"device": "ue"}, "b": {"device": "ue"}}})


@pytest.mark.parametrize("solver", EXACT + ["chain-dp", "chain-brute-force"])
def test_infeasible_names_the_binding_memory(solver):
    data = three_device_data(skip=False)
    data["devices"][0]["memory_bytes"] = 999  # the 1000 B input arrives at ue
    res = solve(parse_instance(data), solver)
    assert res.status is Status.INFEASIBLE
    assert res.message.startswith("infeasible: the raw input (1,000 B) does not fit the memory of the first chain device 'ue'")


def test_time_limited_run_returns_a_plan_with_a_bound():
    inst = random_chain_instance(3, 60, 5, objective="latency")
    res = solve(inst, "cpsat", time_limit=1.0)
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert res.bound is not None and res.bound <= res.objective * (1 + 1e-9)
    assert res.metrics.feasible
    # a limit shorter than building the program: the start plan, at once and honestly
    quick = solve(random_chain_instance(4, 60, 5, objective="latency"), "cpsat", time_limit=1e-6)
    assert quick.status is Status.FEASIBLE and quick.metrics.feasible
    assert "time limit ran out while building the program" in quick.message and quick.bound is None


# ----- CLI -------------------------------------------------------------------------------------------

def test_cli_solves_a_chain_and_prints_the_devices(tmp_path):
    from splitopt.cli import app

    path = tmp_path / "three.json"
    path.write_text(json.dumps(three_device_data()))
    out = CliRunner().invoke(app, ["solve", str(path), "--solver", "cpsat"])
    assert out.exit_code == 0, out.output
    assert "Chain ue -> sbs -> cloud" in out.output and "Bottleneck" in out.output
    out = CliRunner().invoke(app, ["solve", str(path), "--json", "-o", str(tmp_path / "plan.json")])
    data = json.loads(out.stdout)
    assert data["status"] == "OPTIMAL"
    assert [d["device"] for d in data["metrics"]["devices"]] == ["ue", "sbs", "cloud"]
    again = CliRunner().invoke(app, ["evaluate", str(path), str(tmp_path / "plan.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["metrics"]["latency_ms"] == pytest.approx(data["objective_ms"])


def test_round_trip_of_a_chain_instance():
    from splitopt.core.instance_io import to_dict

    inst = parse_instance(three_device_data())
    assert parse_instance(copy.deepcopy(to_dict(inst))) == inst


def test_cli_draws_the_schedule_and_the_breakdown(tmp_path):
    from splitopt.cli import app

    path = tmp_path / "three.json"
    path.write_text(json.dumps(three_device_data()))
    gantt, bars = tmp_path / "gantt.png", tmp_path / "bars.png"
    out = CliRunner().invoke(app, ["solve", str(path), "--solver", "cpsat", "--gantt", str(gantt),
                                   "--breakdown", str(bars)])
    assert out.exit_code == 0, out.output
    assert gantt.stat().st_size > 1000 and bars.stat().st_size > 1000
    edge_cloud = Path(__file__).parent.parent / "instances" / "splitnets_mobilenetv2_sensor.json"
    # --gantt draws an edge/cloud plan's timeline (tests/test_plots.py); --breakdown has no schedule to use
    out = CliRunner().invoke(app, ["solve", str(edge_cloud), "--breakdown", str(tmp_path / "no.png")])
    assert out.exit_code == 2 and "no multi-device schedule" in out.output


def test_cli_refuses_edge_cloud_commands_on_a_chain(tmp_path):
    from splitopt.cli import app

    path = tmp_path / "three.json"
    path.write_text(json.dumps(three_device_data()))
    out = CliRunner().invoke(app, ["pareto", str(path)])
    assert out.exit_code == 2 and "problem 'chain' has no Pareto front; fronts are defined for split, split_bits (latency / error); multiview (latency / accuracy); separable (latency / bytes)" in out.output
    out = CliRunner().invoke(app, ["solve", str(path), "--problem", "split"])
    assert out.exit_code == 2 and "--problem split: applies to edge_cloud instances (split, split_bits), not to problem 'chain'" in out.output
    out = CliRunner().invoke(app, ["solve", str(path), "--solver", "neurosurgeon"])
    assert out.exit_code == 2 and "does not handle problem 'chain'" in out.output


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_segments_dp_past_its_deadline_stops_without_a_plan(objective):
    """A DP has no partial answer: past the deadline ``segments-dp`` stops and says so."""
    import time

    from splitopt.core.options import SolveOptions
    from splitopt.families.chain.methods import segments_dp

    inst = random_chain_instance(1, 30, 3, objective=objective)
    out = segments_dp(inst, SolveOptions(deadline=time.monotonic() - 1))
    assert out.status is Status.NO_SOLUTION_FOUND and out.plan is None
    assert out.extra["stopped_by"] == "time limit" and "time limit stopped the DP" in out.message
    assert segments_dp(inst, SolveOptions()).status is Status.FEASIBLE


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["latency", "throughput"]))
def test_segments_dp_is_the_best_contiguous_split_on_any_dag(seed, objective):
    """On random DAGs (skips included) ``segments-dp`` equals the best of every cut tuple
    of the file order, by the evaluator, with memory ignored; and never beats the
    brute-force optimum over all placements."""
    import itertools

    from splitopt.core.options import SolveOptions
    from splitopt.families.chain.methods import segments_plan, segments_dp

    inst = random_chain_instance(seed, 5, 3, objective=objective)
    out = segments_dp(inst, SolveOptions())
    got = evaluate(inst, out.plan).objective_ms
    assert got == pytest.approx(out.objective, rel=1e-9, abs=1e-12)
    n, m = len(inst.layers), len(inst.settings.chain)
    best = min(evaluate(inst, segments_plan(inst, list(c))).objective_ms
               for c in itertools.combinations_with_replacement(range(n + 1), m - 1))
    assert got == pytest.approx(best, rel=1e-9, abs=1e-12)
    ref = solve(inst, "brute-force")
    if ref.status is Status.OPTIMAL and evaluate(inst, out.plan).feasible:
        assert got >= ref.objective * (1 - 1e-9) - 1e-12


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), ties=st.booleans(), sorted_g=st.booleans())
def test_bottleneck_step_equals_the_pairwise_minimum(seed, n, ties, sorted_g):
    """The throughput DP's blocked step (``O(N^1.5)``, several blocks from 65 entries on)
    gives, for every end ``b``, ``min_{a <= b} max(g[a], c[b] - P[a])`` as the pairwise
    loop does, and an ``a <= b`` that attains it; unreachable ``a`` (``g`` infinite),
    ties and zero-compute runs included."""
    from splitopt.families.chain.methods import bottleneck_step

    rng = np.random.default_rng(seed)
    g = rng.random(n) * 10
    g = np.sort(g) if sorted_g else g
    g[rng.random(n) < 0.2] = np.inf
    steps = rng.random(n - 1) * 3 * (rng.random(n - 1) < 0.8)
    if ties:
        g, steps = np.round(g, 1), np.round(steps, 1)
    P = np.concatenate([[0.0], np.cumsum(steps)])
    c = P + np.round(rng.random(n) * 5, 1)
    f, arg = bottleneck_step(g, P, c)
    for b in range(n):
        want = np.maximum(g[:b + 1], c[b] - P[:b + 1]).min()
        assert f[b] == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert 0 <= arg[b] <= b
        assert max(g[arg[b]], c[b] - P[arg[b]]) == pytest.approx(want, rel=1e-12, abs=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["latency", "throughput"]))
def test_start_plan_is_no_worse_than_the_contiguous_split_that_fits(seed, objective):
    """The chain's start plan (what every exact backend starts from) is never worse than
    ``segments-dp``'s plan where that plan meets the memory limits."""
    from splitopt.families.chain.methods import contiguous_split_plan
    from splitopt.families.chain.start import start_plan

    inst = random_chain_instance(seed, 12, 4, objective=objective)
    contiguous = evaluate(inst, contiguous_split_plan(inst))
    start = evaluate(inst, start_plan(inst))
    if contiguous.feasible:
        assert start.feasible
        assert start.objective_ms <= contiguous.objective_ms
