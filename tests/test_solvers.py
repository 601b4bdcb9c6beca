"""Exact backends on hand-computed instances: optimum values, the skip across the cut,
status and gap reporting, infeasibility diagnosis, model export."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from splitopt import Status, evaluate, parse_instance
from splitopt.solve import solve
from splitopt.testing.contracts import EXACT_BACKENDS
from splitopt.families.edge_cloud.examples import random_instance
from splitopt.backends.cbc import parse_cbc_log
from splitopt.families.edge_cloud.plan import edge_layers

DATA = Path(__file__).parent / "data"
EXACT = list(EXACT_BACKENDS)

# Hand numbers for tests/data/toy.json (Eyeriss edge: 34e9 MAC/s, 1e9 B/s off-chip,
# 192 KiB buffer so nothing spills; TPU cloud: 96e12 MAC/s, 13e9 B/s; 3 Mbit/s uplink).
MS_PER_BYTE = 8000 / 3e6


def edge_ms(macs, weights, wbits):
    return 1000 * (macs / 34e9 + weights * wbits / 8 / 1e9)


def cloud_ms(macs, weights):
    return 1000 * (macs / 96e12 + weights * 16 / 8 / 13e9)


@pytest.fixture
def toy_data():
    return json.loads((DATA / "toy.json").read_text())


@pytest.mark.parametrize("solver", EXACT)
def test_float_split_optimum_is_edge_only(toy_data, solver):
    inst = parse_instance(toy_data).with_settings(problem="split")
    # closed edge sets: {}, {a}, {a,b}, {a,b,c}; a and b: 1e6 MACs, 1000 weights; c: an add with 0 MACs
    a_e, a_c = edge_ms(1e6, 1000, 16), cloud_ms(1e6, 1000)
    cloud_only = 192 * MS_PER_BYTE + 2 * a_c
    only_a = a_e + 1024 * MS_PER_BYTE + a_c            # a's 512 elements at 16 bits sent
    a_and_b = 2 * a_e + (1024 + 256) * MS_PER_BYTE     # a (read by c on the cloud) and b sent
    edge_only = 2 * a_e
    best = min(cloud_only, only_a, a_and_b, edge_only)
    assert best == edge_only
    res = solve(inst, solver)
    assert res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(edge_only, rel=1e-9)
    assert edge_layers(inst, res.plan) == ["a", "b", "c"]
    assert res.gap is not None and res.gap <= 1e-8


@pytest.mark.parametrize("solver", EXACT)
def test_skip_tensor_sent_once_when_it_crosses_the_cut(toy_data, solver):
    data = copy.deepcopy(toy_data)
    data["graph"]["layers"][2]["macs"] = 1e9  # c is now expensive on the edge (29.4 ms)
    data["graph"]["layers"][1]["latency_ms"] = {"tpu": 5.0}  # measured: b is slow on the cloud
    data["settings"].update(error_budget=1.0, edge_memory_bytes=1e6)
    # {a}: a_e + 128 B sent + 5 ms for b  >  {a, b}: 2 a_e + 160 B sent (a once, though b and c read it)
    inst = parse_instance(data)
    res = solve(inst, solver)
    assert res.status is Status.OPTIMAL
    # a and b on the edge at 2-bit activations; a is read by b (edge) and c (cloud): sent once
    assert edge_layers(inst, res.plan) == ["a", "b"]
    assert res.plan.activation_bits["a"] == 2 and res.plan.activation_bits["b"] == 2
    assert [t for t, _ in res.metrics.sent_tensors] == ["a", "b"]
    assert res.metrics.transmitted_bytes == pytest.approx(512 * 2 / 8 + 128 * 2 / 8)
    expected = 2 * edge_ms(1e6, 1000, 2) + 160 * MS_PER_BYTE + 1000 * (1e9 / 96e12)
    assert res.objective == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("solver", EXACT)
def test_exact_backends_agree_on_toy_variants(toy_data, solver):
    inst = parse_instance(toy_data)
    reference = solve(inst, "milp-cbc").objective
    assert solve(inst, solver).objective == pytest.approx(reference, rel=1e-7)
    tight = inst.with_settings(edge_memory_bytes=600, error_budget=0.3)
    # a alone at (2, 2): 250 B weights + 192 B input + 128 B output = 570 B; error 0.1 + 0.2 = 0.3, exactly the budget
    res = solve(tight, solver)
    assert res.status is Status.OPTIMAL
    assert edge_layers(tight, res.plan) == ["a"]
    assert res.metrics.error == pytest.approx(0.3)


@pytest.mark.parametrize("solver", EXACT)
def test_zero_error_budget_allows_only_cloud_only(toy_data, solver):
    inst = parse_instance(toy_data).with_settings(error_budget=0.0)
    res = solve(inst, solver)
    assert res.status is Status.OPTIMAL
    assert edge_layers(inst, res.plan) == []
    assert res.metrics.error == 0.0


@pytest.mark.parametrize("solver", EXACT)
def test_infeasible_names_the_binding_budget(toy_data, solver):
    inst = parse_instance(toy_data)
    res = solve(inst.with_settings(edge_required=["c"], error_budget=1e-4), solver)
    assert res.status is Status.INFEASIBLE and res.plan is None
    assert "error budget" in res.message and "minimum achievable" in res.message
    res = solve(inst.with_settings(edge_required=["a"], edge_memory_bytes=100), solver)
    assert res.status is Status.INFEASIBLE
    assert "edge memory limit 100 B" in res.message


def test_float_baseline_on_split_bits_runs_the_float_problem(toy_data):
    inst = parse_instance(toy_data)
    res = solve(inst, "neurosurgeon")
    assert res.problem == "split"


def test_cbc_log_parser_reads_time_limit_and_bound():
    text = (
        "Result - Stopped on time limit\n\nObjective value:                12.50000000\n"
        "Lower bound:                    11.000\nGap:                            0.12\n"
    )
    info = parse_cbc_log(text)
    assert info == {"result": "Stopped on time limit", "objective": 12.5, "bound": 11.0}


@pytest.mark.parametrize("solver", EXACT)
def test_time_limited_run_returns_a_plan_with_status_and_gap(solver):
    inst = random_instance(seed=3, n_layers=300, problem="split_bits", bit_widths=(2, 4, 6, 8),
                                     edge_required=False)
    res = solve(inst, solver, time_limit=0.2)
    # stopped early or not, there is always a plan: at worst the start plan (cloud-only)
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE), res.message
    assert evaluate(inst, res.plan).feasible
    if res.status is Status.OPTIMAL:
        assert res.gap <= 1e-5
    elif res.bound is not None:
        assert res.bound <= res.objective + 1e-9 and 0 <= res.gap


@pytest.mark.parametrize("solver,suffix", [("milp-cbc", ".lp"), ("milp-highs", ".mps"), ("cpsat", ".txt")])
def test_export_model(toy_data, tmp_path, solver, suffix):
    inst = parse_instance(toy_data)
    path = tmp_path / f"model{suffix}"
    solve(inst, solver, export_path=path)
    text = path.read_text()
    assert len(text) > 100
    # layer a's activation-bit selector and its edge variable appear by name
    assert ("v_a_a2" in text) or ("v[a,a2]" in text)
    assert ("e_a_" in text) or ("e[a]" in text)


def test_bit_choice_encoding_per_layer(toy_data):
    from splitopt.families.edge_cloud.milp import build_milp

    inst = parse_instance(toy_data)
    enc = build_milp(inst, None).model.meta["encoding"]
    # analytical latencies are separable; c is weightless, so only its activation bits matter
    assert enc == {"a": "separable", "b": "separable", "c": "activation"}
    data = copy.deepcopy(toy_data)
    data["graph"]["layers"][0]["latency_ms"] = {  # w8a8 costs more than w8 + a8 alone: not separable
        "eyeriss": {f"w{w}a{a}": w + a + (5.0 if (w, a) == (8, 8) else 0.0) for w in (2, 4, 6, 8, 16) for a in (2, 4, 6, 8, 16)}
    }
    inst = parse_instance(data)
    assert build_milp(inst, None).model.meta["encoding"]["a"] == "pairs"
    assert build_milp(inst.with_settings(problem="split"), None).model.meta["encoding"]["a"] == "single"
    for solver in EXACT:  # both encodings in one model, same optimum
        assert solve(inst, solver).objective == pytest.approx(solve(inst, "milp-cbc").objective, rel=1e-7)


@pytest.mark.parametrize("threads", [1, 2])
def test_cbc_solves_googlenet_split_bits_with_any_thread_count(threads):
    """CBC's repeatable parallel mode (-threads 102) crashed with SIGSEGV on this program;
    splitopt runs CBC on one thread whatever --threads says."""
    from splitopt.api import load_instance

    inst = load_instance(Path(__file__).parent.parent / "instances" / "googlenet_eyeriss.json")
    res = solve(inst, "milp-cbc", threads=threads)
    assert res.status is Status.OPTIMAL, res.message
    assert res.objective == pytest.approx(179.9637, abs=1e-3)


def test_cbc_does_not_prune_the_optimum_with_its_own_cutoff_increment():
    """Left to choose its cutoff increment, CBC stopped at 2.176014 ms on this multiview
    instance (optimum 2.176007, its root LP) and called it optimal with that bound."""
    from splitopt.testing.generators import random_family_instance

    inst = random_family_instance("multiview", 22820)
    res = solve(inst, "milp-cbc")
    best = solve(inst, "brute-force")
    assert res.status is Status.OPTIMAL and res.bound <= best.objective * (1 + 1e-9)
    assert res.objective == pytest.approx(best.objective, rel=1e-9)
