"""The maxload family's exact max-load (throughput) program
(``splitopt/families/maxload/milp_throughput.py``, ``formulations/maxload_throughput.md``).

* The other symmetry breakings and no bound cuts against an independent brute force (all
  assignments of colour classes to all devices by name, filtered by ``check_placement``,
  valued by ``max_load``; the default program against the family's brute force runs in
  ``tests/test_contracts.py``).
* Shipped throughput graphs that solve in seconds: optimal, rule-abiding, better than the
  human experts, the same optimum from every symmetry breaking.
* Infeasible instances name the binding limit; a time-limited run is FEASIBLE with a gap;
  the CLI writes a placement that ``splitopt evaluate`` (and ``dnnp-eval``) reads back.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from splitopt.backends.cpsat import run_model
from splitopt.cli import app as main_app
from splitopt.core.errors import UnknownSolver
from splitopt.core.options import SolveOptions
from splitopt.core.result import Status
from splitopt.families.maxload.cpsat_throughput import to_cpsat
from splitopt.families.maxload.evaluate import check_placement, max_load
from splitopt.families.maxload.instance import parse_peer_instance as parse_dnnp
from splitopt.families.maxload.instance import read_peer_instance as load_dnnp
from splitopt.families.maxload.plan import MaxloadPlacement as DnnpPlacement
from splitopt.families.maxload.peer_data import data_root
from splitopt.families.maxload.plan import load_expert
from splitopt.families.maxload.milp_throughput import build_milp_throughput, decode_plan
from splitopt.solve import solve

ROOT = data_root()
needs_data = pytest.mark.skipif(not ROOT.is_dir(), reason=f"peer data not found at {ROOT}")


# ----- brute force -------------------------------------------------------------------
def brute_force(inst) -> float | None:
    """The smallest max-load over every rule-abiding placement (None: there is none).
    Enumerates each colour class (and each node without one) on each device by name:
    no symmetry is used, no program is built."""
    devices = list(inst.fpgas) + list(inst.cpus)
    units = list(inst.colour_classes.values()) + [(n.id,) for n in inst.nodes if n.color_class is None]
    best = None
    for combo in itertools.product(devices, repeat=len(units)):
        p = DnnpPlacement({v: d for ids, d in zip(units, combo) for v in ids})
        if check_placement(inst, p):
            continue
        value = max_load(inst, p)[0]
        best = value if best is None else min(best, value)
    return best


def _node(i, cpu, fpga, size, cc=None, ok=1, bw=0):
    n = {"id": i, "supportedOnFpga": ok, "cpuLatency": cpu, "fpgaLatency": fpga, "isBackwardNode": bw,
         "size": size, "name": f"n{i}"}
    if cc is not None:
        n["colorClass"] = cc
    return n


ms = st.integers(0, 2000).map(lambda x: x / 100)  # 0 .. 20 ms in steps of 0.01


@st.composite
def peer_instances(draw):
    """A small instance in the peer file format. Inference: 1-6 forward nodes, some of
    them sharing a colour class. Training: 1-3 forward nodes, each with a backward node
    of its class (backward edges mirror the forward ones, reversed), sometimes a
    backward node with no class, and forward -> backward edges."""
    training = draw(st.booleans())
    n_fwd = draw(st.integers(1, 3 if training else 6))
    k = draw(st.integers(1, 2))
    l = draw(st.integers(0, 1)) if k == 2 else 1  # at most 3 devices; accelerator-only can be infeasible
    nodes, edges = [], []
    for i in range(n_fwd):
        cc = draw(st.sampled_from([None, None, 100, 101])) if not training else i
        ok = draw(st.sampled_from([1, 1, 1, 1, 0]))
        nodes.append(_node(i, draw(ms), draw(ms), draw(st.integers(0, 60)), cc=cc, ok=ok))
    fwd_edges = [(u, v) for u in range(n_fwd) for v in range(u + 1, n_fwd) if draw(st.integers(0, 2)) == 0]
    edges += fwd_edges
    if training:
        back = {i: n_fwd + i for i in range(n_fwd)}
        for i in range(n_fwd):
            nodes.append(_node(back[i], draw(ms), draw(ms), draw(st.integers(0, 30)), cc=i, bw=1))
        edges += [(back[v], back[u]) for u, v in fwd_edges]
        last = n_fwd - 1
        edges.append((last, back[last]))  # the loss: last forward node feeds its gradient
        if draw(st.booleans()):  # a backward node with no forward partner
            orphan = 2 * n_fwd
            nodes.append(_node(orphan, draw(ms), draw(ms), draw(st.integers(0, 30)), bw=1))
            edges.append((back[0], orphan))
    cost = {u: draw(ms) / 4 for u in {u for u, _ in edges}}
    data = {
        "maxSizePerFPGA": draw(st.integers(40, 160)),
        "maxFPGAs": k,
        "maxCPUs": l,
        "nodes": nodes,
        "edges": [{"sourceId": u, "destId": v, "cost": cost[u]} for u, v in edges],
    }
    return parse_dnnp(data, name="random")


def solve_with_program(inst, symmetry: str, cuts: bool) -> tuple[float, DnnpPlacement]:
    """CP-SAT on the max-load program built with another symmetry breaking / cut choice."""
    lp = build_milp_throughput(inst, None, symmetry=symmetry, cuts=cuts).model
    model, xs, unit, tol = to_cpsat(lp)
    raw = run_model(model, SolveOptions(threads=2), presolve=False)
    assert raw.status is Status.OPTIMAL, raw.message
    placement = decode_plan(inst, lp, [float(raw.values[x.Index()]) for x in xs])
    assert abs(max_load(inst, placement)[0] - raw.objective * unit) <= 2 * tol + 1e-9
    return max_load(inst, placement)[0], placement


@settings(max_examples=40)
@given(peer_instances(), st.sampled_from(["first", "load", "none"]), st.booleans())
def test_every_symmetry_breaking_and_no_cuts_match_brute_force(inst, symmetry, cuts):
    expected = brute_force(inst)
    if expected is None:
        return
    value, placement = solve_with_program(inst, symmetry, cuts)
    assert check_placement(inst, placement) == []
    assert math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)


# ----- hand-made instances -----------------------------------------------------------
def _build(nodes, edges, k=2, l=1, mem=100):
    return parse_dnnp({"maxSizePerFPGA": mem, "maxFPGAs": k, "maxCPUs": l, "nodes": nodes,
                       "edges": [{"sourceId": u, "destId": v, "cost": c} for u, v, c in edges]}, name="hand")


def test_chain_optimum_by_hand():
    # chain 1 -> 2 -> 3, fpga ms 4, 4, 4, cpu ms 40 each, out costs 0.5, 0.5; k = 2, l = 1
    # one fpga holds two nodes: 8 + 0.5 (out or in) = 8.5; the other holds one: 4 + 0.5 (+0.5
    # if it is the middle node). Best: {1, 2} | {3} or {1} | {2, 3} -> 8.5 (all on one: 12;
    # {1, 3} | {2} is not contiguous)
    inst = _build([_node(1, 40, 4, 1), _node(2, 40, 4, 1), _node(3, 40, 4, 1)], [(1, 2, 0.5), (2, 3, 0.5)])
    for solver in ("cpsat", "milp-highs", "milp-cbc"):
        r = solve(inst, solver)
        assert r.status is Status.OPTIMAL and math.isclose(r.objective, 8.5, rel_tol=1e-9), solver
        groups = sorted(sorted(ids) for ids in r.plan.nodes_on.values())
        assert groups in ([[1], [2, 3]], [[1, 2], [3]]), groups


def test_contiguity_is_enforced_not_just_checked():
    # 1 -> 2 -> 3, free transfers, one accelerator and one core; 1 and 3 take 5 ms on the
    # accelerator and 100 on the core, 2 takes 200 and 1. Non-contiguous {1, 3} | {2} would
    # give 10 ms. Contiguous: all on fpga0 210; {1} | {2, 3} and {1, 2} | {3} (cores last):
    # max(5, 101) = 101 or max(205, 100); {3} on fpga0, {1, 2} on cpu0: 101 -> optimum 101
    inst = _build([_node(1, 100, 5, 1), _node(2, 1, 200, 1), _node(3, 100, 5, 1)], [(1, 2, 0.0), (2, 3, 0.0)],
                  k=1, l=1)
    r = solve(inst)
    assert r.status is Status.OPTIMAL and check_placement(inst, r.plan) == []
    assert math.isclose(r.objective, brute_force(inst), rel_tol=1e-9)
    assert math.isclose(r.objective, 101.0)
    assert r.plan.device[2] == "cpu0" and r.plan.device[1] != r.plan.device[3]


def test_infeasible_memory_under_contiguity_names_the_limit():
    # no CPU; chain a(50) -> b(60) -> c(50), two accelerators of 100 bytes: {a, b} and {b, c}
    # exceed 100, {a, c} | {b} is not contiguous, so nothing fits, though 160 <= 2 x 100
    inst = _build([_node(1, 1, 1, 50), _node(2, 1, 1, 60), _node(3, 1, 1, 50)], [(1, 2, 1.0), (2, 3, 1.0)],
                  k=2, l=0, mem=100)
    assert brute_force(inst) is None
    for solver in ("cpsat", "milp-highs", "milp-cbc"):
        r = solve(inst, solver)
        assert r.status is Status.INFEASIBLE and r.plan is None, solver
        assert "maxSizePerFPGA=100 bytes" in r.message and "maxCPUs=0" in r.message, r.message
    # a bigger accelerator memory makes {a, b} | {c} fit
    assert solve(_build([_node(1, 1, 1, 50), _node(2, 1, 1, 60), _node(3, 1, 1, 50)],
                        [(1, 2, 1.0), (2, 3, 1.0)], k=2, l=0, mem=110)).status is Status.OPTIMAL


def test_infeasible_without_solving_names_node_and_limit():
    too_big = _build([_node(1, 1, 1, 500), _node(2, 1, 1, 5)], [(1, 2, 1.0)], k=3, l=0, mem=100)
    r = solve(too_big)
    assert r.status is Status.INFEASIBLE
    assert r.message == "infeasible: maxSizePerFPGA: node 1 needs 500 bytes > 100 and maxCPUs=0"
    unsupported = _build([_node(1, 1, 1, 5), _node(2, 1, 1, 5, ok=0)], [(1, 2, 1.0)], k=3, l=0)
    r = solve(unsupported, "milp-cbc")
    assert r.status is Status.INFEASIBLE and "supportedOnFpga: node 2" in r.message
    total = _build([_node(i, 1, 1, 60) for i in range(4)], [], k=2, l=0, mem=100)
    assert "all nodes need 240 bytes > maxFPGAs x maxSizePerFPGA" in solve(total).message


def test_unknown_solver():
    inst = _build([_node(1, 1, 1, 1)], [])
    with pytest.raises(UnknownSolver, match="unknown solver 'gurobi'"):
        solve(inst, "gurobi")


def test_symmetry_breaking_cuts_solutions_not_optima():
    # four equal independent nodes on three accelerators: every labelling is optimal
    # without symmetry breaking; with "first", fpga0 holds the first node in group order
    inst = _build([_node(i, 100, 1, 1) for i in range(4)], [], k=3, l=1)
    value, placement = solve_with_program(inst, "first", True)
    assert math.isclose(value, 2.0)
    assert placement.device[0] == "fpga0"
    lp_first = build_milp_throughput(inst, None, symmetry="first").model
    lp_none = build_milp_throughput(inst, None, symmetry="none").model
    assert len(lp_first.rows) > len(lp_none.rows)


# ----- shipped instances -------------------------------------------------------------
EXPERT_MAX_LOAD = {  # tests/test_dnnp.py: the human experts' max-load, ms
    "bert24_inference": 20.083953125,
    "bert24_training": 49.40490625,
    "gnmt_inference": 46.208451171875,
}


@needs_data
@pytest.mark.parametrize("name", ["LayerGraphs/bert24_inference", "LayerGraphs/bert24_training",
                                  "LayerGraphs/gnmt_inference", "OperatorGraphs/bert_l-3_inference"])
def test_shipped_small_instances_solve_to_optimality(name):
    inst = load_dnnp(ROOT / f"throughput-inputs/{name}.json")
    r = solve(inst, "cpsat", time_limit=60)
    assert r.status is Status.OPTIMAL, r.message
    assert check_placement(inst, r.plan) == []
    assert max_load(inst, r.plan)[0] == r.objective
    assert r.gap <= 1e-6 and r.bound <= r.objective
    expert = EXPERT_MAX_LOAD.get(name.split("/")[1])
    if expert is not None:
        assert r.objective < expert
        model = name.split("/")[1].split("_")[0]
        p = load_expert(inst, ROOT / f"human-experts/{model}_inference_expert.json")
        assert math.isclose(max_load(inst, p)[0], expert, rel_tol=1e-12)


@needs_data
def test_bert24_same_optimum_with_every_symmetry_breaking_and_with_highs():
    inst = load_dnnp(ROOT / "throughput-inputs/LayerGraphs/bert24_inference.json")
    values = [solve_with_program(inst, s, True)[0] for s in ("first", "load", "none")]
    assert max(values) - min(values) <= 1e-7
    values = [solve(inst, "cpsat", time_limit=60)]
    assert values[0].status is Status.OPTIMAL
    highs = solve(inst, "milp-highs", time_limit=5)
    assert highs.status in (Status.OPTIMAL, Status.FEASIBLE)
    # HiGHS's bound never passes CP-SAT's optimum, its plan never beats it
    assert highs.bound <= values[0].objective + 1e-6
    assert highs.objective >= values[0].objective - 1e-6


@needs_data
def test_time_limited_run_is_feasible_with_a_gap():
    inst = load_dnnp(ROOT / "throughput-inputs/LayerGraphs/inceptionv3_training.json")
    # proving its optimum takes CP-SAT 25-100 s here; within 2 s it may or may not have a
    # placement of its own (else the plan it started from comes back: the better of all
    # nodes on cpu0 and the hint baselines' plans, group-moves here; each meets every rule)
    r = solve(inst, "cpsat", time_limit=2.0)
    assert r.status is Status.FEASIBLE, (r.status, r.message)
    assert r.gap is not None and r.gap > 0 and r.bound < r.objective
    assert check_placement(inst, r.plan) == []
    assert r.objective == max_load(inst, r.plan)[0]
    hinted = solve(inst, "group-moves").objective
    assert r.objective <= hinted + 1e-9  # never worse than a baseline it was hinted with
    if "returning the start plan" in r.message:
        assert r.objective == hinted
    cbc = solve(load_dnnp(ROOT / "throughput-inputs/LayerGraphs/gnmt_inference.json"), "milp-cbc", time_limit=2)
    assert cbc.status is not Status.OPTIMAL or cbc.total_s < 2 * 0.98
    assert cbc.total_s <= 2 * 1.1 + 1
    if cbc.status is Status.FEASIBLE and cbc.bound is not None:  # no bound if CBC was killed in its root LP
        assert cbc.gap is not None and 0 <= cbc.bound <= cbc.objective


# ----- the command line --------------------------------------------------------------
@needs_data
def test_cli_writes_a_placement_evaluate_and_dnnp_eval_read(tmp_path):
    runner = CliRunner()
    f = ROOT / "throughput-inputs/LayerGraphs/bert24_inference.json"
    out = tmp_path / "placement.json"
    res = runner.invoke(main_app, ["solve", str(f), "--json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "OPTIMAL" and data["solver"] == "auto" and data["problem"] == "maxload"
    ev = runner.invoke(main_app, ["dnnp-eval", str(f), str(out)])
    assert ev.exit_code == 0, ev.output
    evaluated = json.loads(ev.stdout)
    assert evaluated["violations"] == [] and evaluated["max_load_ms"] == data["objective_ms"]
    ev = runner.invoke(main_app, ["evaluate", str(f), str(out), "--json"])
    assert ev.exit_code == 0, ev.output
    assert json.loads(ev.stdout)["metrics"]["max_load_ms"] == data["objective_ms"]
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [
        _node(1, 40, 4, 1), _node(2, 40, 4, 1), _node(3, 40, 4, 1)], "edges": [
        {"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 2, "destId": 3, "cost": 0.5}]}))
    for command in ("solve", "dnnp-solve"):
        for solver in ("milp-highs", "milp-cbc"):
            text = runner.invoke(main_app, [command, str(small), "--solver", solver, "--time-limit", "30"])
            assert text.exit_code == 0, text.output
            assert "OPTIMAL" in text.stdout and "Max-load 8.500000 ms" in text.stdout, text.stdout


def test_cli_exit_codes(tmp_path):
    runner = CliRunner()
    f = tmp_path / "inf.json"
    f.write_text(json.dumps({"maxSizePerFPGA": 10, "maxFPGAs": 1, "maxCPUs": 0,
                             "nodes": [_node(1, 1, 1, 50)], "edges": []}))
    res = runner.invoke(main_app, ["solve", str(f)])
    assert res.exit_code == 4 and "INFEASIBLE" in res.stdout and "maxSizePerFPGA" in res.stdout
    res = runner.invoke(main_app, ["solve", str(f), "--solver", "gurobi"])
    assert res.exit_code == 2 and "unknown solver 'gurobi'" in res.stderr
    res = runner.invoke(main_app, ["solve", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "cannot read file" in res.stderr


@needs_data
def test_solve_accepts_a_peer_file_directly():
    f = ROOT / "throughput-inputs/LayerGraphs/bert24_inference.json"
    res = CliRunner().invoke(main_app, ["solve", str(f), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "OPTIMAL" and data["objective_ms"] == pytest.approx(17.7899, abs=1e-4)
