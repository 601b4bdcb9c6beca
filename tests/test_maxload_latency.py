"""The maxload family's LATENCY objective (splitopt/families/maxload/latency_*.py, cores.py;
formulations/maxload_models.md "Latency program").

The contract suites (tests/test_contracts.py) draw latency instances too: every exact
backend against brute force, the linear program at ``encode_plan(plan)`` against the
evaluator, plan round trips, same seed, search space. Here:

* the canonical enumeration (accelerators by first use, CPU cores by the family's
  choice) against every assignment of colour classes to every named device, and the
  core search against every core assignment;
* the native CP-SAT model: the rounded schedule of a placement is accepted and lies
  within the stated tolerance;
* hand-made cases: calls that would wait on each other (zero durations, where the time
  rows alone would allow them), non-convex accelerator sets, CPU contiguity with few
  cores, crosswise colour classes, infeasibility; one shipped graph, proven optimal;
* the command line on the shipped latency and throughput files.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitopt.backends.base import feasible_start_plan
from splitopt.backends.registry import get_backend
from splitopt.core.errors import InvalidPlan, NotApplicable, UnknownSolver
from splitopt.core.options import SolveOptions
from splitopt.core.program import Program, row_violations
from splitopt.core.result import Status
from splitopt.families.maxload.cores import CPU, cpu_cores, placement_of
from splitopt.families.maxload.enumerate import latency_placements
from splitopt.families.maxload.evaluate import check_placement, latency
from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import parse_peer_instance, read_peer_instance
from splitopt.families.maxload.cpsat_latency import cpsat_model
from splitopt.families.maxload.milp_latency import (build_milp_latency, decode_plan, encode_plan,
                                                  milp_tolerance_ms)
from splitopt.families.maxload.peer_data import data_root
from splitopt.families.maxload.plan import MaxloadPlacement
from splitopt.families.registry import family_of
from splitopt.solve import solve

ROOT = data_root()
needs_data = pytest.mark.skipif(not ROOT.is_dir(), reason=f"peer data not found at {ROOT}")
EXACT = ("cpsat", "milp-highs", "milp-cbc")


# ----- instances ---------------------------------------------------------------------
def _node(i, cpu, fpga, size, cc=None, ok=1, bw=0):
    n = {"id": i, "supportedOnFpga": ok, "cpuLatency": cpu, "fpgaLatency": fpga, "isBackwardNode": bw,
         "size": size, "name": f"n{i}"}
    if cc is not None:
        n["colorClass"] = cc
    return n


def _build(nodes, edges, k=2, l=1, mem=100):
    return parse_peer_instance({"maxSizePerFPGA": mem, "maxFPGAs": k, "maxCPUs": l, "nodes": nodes,
                                "edges": [{"sourceId": u, "destId": v, "cost": c} for u, v, c in edges]},
                               name="hand", objective="latency")


def _brute_force(inst):
    """The brute-force optimum (generic backend over the family's latency enumeration)."""
    res = solve(inst, "brute-force")
    return res.objective if res.status is Status.OPTIMAL else None


def _solves_to(inst, expected, solvers=EXACT):
    """Every exact backend proves ``expected`` (ms); returns the cpsat result."""
    out = None
    for solver in solvers:
        res = solve(inst, solver)
        assert res.status is Status.OPTIMAL and math.isclose(res.objective, expected, rel_tol=1e-9), \
            (solver, res.status, res.objective, res.message)
        assert check_placement(inst, res.plan) == [] and res.bound <= expected + 1e-12
        out = out or res
    return out


# times: zero often, else 0.01 .. 20 ms in steps of 0.01
ms = st.one_of(st.just(0.0), st.just(0.0), st.integers(1, 2000).map(lambda x: x / 100))


@st.composite
def latency_instances(draw, max_nodes=6, max_devices=None, classes=(None, None, None, 100, 101),
                      supported=(1, 1, 1, 1, 0)):
    """2..max_nodes nodes, a random DAG (edges i -> j, i < j: fan-out and fan-in), some
    nodes in colour classes (drawn from ``classes``), some unsupported on accelerators
    (``supported``), some backward, tight memory, maxFPGAs 1..3, maxCPUs 0..3, one
    outgoing cost per node (0 often)."""
    n = draw(st.integers(2, max_nodes))
    k = draw(st.integers(1, 3))
    l = draw(st.sampled_from([0, 1, 1, 2, 3]))
    if max_devices is not None:
        k = min(k, max_devices - 1)
        l = min(l, max_devices - k)
    nodes = []
    for i in range(n):
        cc = draw(st.sampled_from(classes))
        ok = draw(st.sampled_from(supported))
        bw = 1 if i >= 2 and draw(st.integers(0, 9)) == 0 else 0
        nodes.append(_node(i, draw(ms), draw(ms), draw(st.integers(0, 60)), cc=cc, ok=ok, bw=bw))
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if draw(st.integers(0, 2)) == 0]
    cost = {u: draw(ms) / 4 for u in {u for u, _ in edges}}
    return _build(nodes, [(u, v, cost[u]) for u, v in edges], k=k, l=l, mem=draw(st.integers(30, 160)))


# ----- the canonical enumeration and the core search -------------------------------------
def _signature(gr, placement):
    """Group -> accelerator index (renumbered by first group) or -1 for the CPU."""
    index, out = {}, []
    for members in gr.members:
        d = placement.device[members[0]]
        out.append(-1 if d.startswith("cpu") else index.setdefault(d, len(index)))
    return tuple(out)


@settings(max_examples=80)
@given(latency_instances(max_devices=4, classes=(None, 100, 100, 101, 101, 102), supported=(0, 1)))
def test_canonical_enumeration_matches_every_named_placement(inst):
    # every colour class (or lone node) on every device by name, filtered by the rules,
    # judged by latency: no symmetry, no core labels. The canonical enumeration must
    # yield exactly the same group -> device maps (cores aside) and the same optimum.
    gr = groups_of(inst)
    devices = list(inst.fpgas) + list(inst.cpus)
    if len(devices) ** len(gr.members) > 5000:
        return
    named, best = set(), None
    for combo in itertools.product(devices, repeat=len(gr.members)):
        p = MaxloadPlacement({v: d for ids, d in zip(gr.members, combo) for v in ids})
        if check_placement(inst, p):
            continue
        named.add(_signature(gr, p))
        try:
            value = latency(inst, p)
        except InvalidPlan:
            continue
        best = value if best is None else min(best, value)
    canonical = [_signature(gr, p) for p in latency_placements(inst)]
    assert len(canonical) == len(set(canonical))
    assert set(canonical) == named
    assert _brute_force(inst) == best


@settings(max_examples=80)
@given(latency_instances(classes=(None, None, 100, 100, 101), supported=(1,)), st.integers(1, 2),
       st.integers(0, 2**12))
def test_core_assignment_exists_exactly_when_found(inst, cores, accelerator_groups):
    # a few groups on one accelerator, the rest on the CPU: the core search finds a
    # rule-5 assignment to `cores` cores iff trying every assignment finds one, and the
    # least labels alone decide it when no colour class has two forward nodes
    inst = parse_peer_instance({"maxSizePerFPGA": 1e9, "maxFPGAs": 1, "maxCPUs": cores, "edges": [
        {"sourceId": e.source, "destId": e.target, "cost": e.cost_ms} for e in inst.edges], "nodes": [
        _node(n.id, n.cpu_ms, n.fpga_ms, n.size_bytes, cc=n.color_class, bw=int(n.is_backward)) for n in inst.nodes]},
        objective="latency")
    gr = groups_of(inst)
    where = {g: 0 if accelerator_groups >> g & 1 else CPU for g in range(len(gr.members))}
    cpu_groups = [g for g in where if where[g] == CPU]
    exists = False
    for combo in itertools.product(range(cores), repeat=len(cpu_groups)):
        device = {v: "fpga0" for g in where if where[g] == 0 for v in gr.members[g]}
        device.update({v: f"cpu{j}" for g, j in zip(cpu_groups, combo) for v in gr.members[g]})
        broken = check_placement(inst, MaxloadPlacement(device))
        if not [r for r in broken if r.startswith("cpu") and "contiguous" in r]:
            exists = True
            break
    found = placement_of(inst, gr, where, search=True)
    assert (found is not None) == exists
    if found is not None:
        assert not [r for r in check_placement(inst, found) if r.startswith("cpu") and "contiguous" in r]
    labels = cpu_cores(inst, gr, where)
    fwd = inst.forward_ids
    if labels is not None:
        assert exists
    elif all(sum(1 for v in m if v in fwd) < 2 for m in gr.members):
        assert not exists


# ----- the native CP-SAT model ---------------------------------------------------------
def _cpsat_accepts(cp, assignment):
    """Every constraint of the CP-SAT model holds at ``assignment`` (var -> value, all
    variables); returns the first broken one or None."""
    proto = cp.model.Proto()
    value = [None] * len(proto.variables)
    for var, x in assignment.items():
        value[var.Index()] = x
    assert None not in value, "assignment misses a variable"

    def lit(ref):
        return value[ref] == 1 if ref >= 0 else value[-ref - 1] == 0

    for j, var in enumerate(proto.variables):
        dom = list(var.domain)
        if not any(dom[q] <= value[j] <= dom[q + 1] for q in range(0, len(dom), 2)):
            return f"domain of {var.name}: {value[j]} not in {dom}"
    for j, ct in enumerate(proto.constraints):
        if not all(lit(r) for r in ct.enforcement_literal):
            continue
        if ct.has_linear():
            act = sum(q * (value[r] if r >= 0 else -value[-r - 1]) for r, q in zip(ct.linear.vars, ct.linear.coeffs))
            dom = list(ct.linear.domain)
            if not any(dom[q] <= act <= dom[q + 1] for q in range(0, len(dom), 2)):
                return f"constraint {j}: activity {act} not in {dom}"
        elif ct.has_bool_or():
            if not any(lit(r) for r in ct.bool_or.literals):
                return f"constraint {j}: clause false"
        elif ct.has_exactly_one():
            if sum(lit(r) for r in ct.exactly_one.literals) != 1:
                return f"constraint {j}: not exactly one"
        elif ct.has_bool_and():
            if not all(lit(r) for r in ct.bool_and.literals):
                return f"constraint {j}: implication false"
        else:
            return f"constraint {j}: unchecked kind"
    return None


def _same_up_to_cores(inst, q, p):
    """q meets every rule and equals p but for the names of the CPU cores."""
    def accelerators(x):
        return {v: d for v, d in x.device.items() if d.startswith("fpga")}
    return check_placement(inst, q) == [] and accelerators(q) == accelerators(p) and q.device.keys() == p.device.keys()


@settings(max_examples=60)
@given(latency_instances(), st.randoms(use_true_random=False))
def test_cpsat_model_holds_every_valid_placement_within_its_tolerance(inst, rnd):
    try:
        placements = list(latency_placements(inst, limit=5000))
    except NotApplicable:
        return
    valid = []
    for p in placements:
        try:
            valid.append((p, latency(inst, p)))
        except InvalidPlan:
            pass
    fam = family_of(inst)
    cp = cpsat_model(inst, fam.start_plan(inst))
    for p, value in rnd.sample(valid, min(6, len(valid))):
        assignment = cp.values_of(p)
        scaled = assignment[cp.objective] * cp.unit_ms
        assert value - 1e-12 <= scaled <= value + cp.tolerance_ms + 1e-12
        if assignment[cp.objective] <= cp.horizon:  # every placement no worse than the start plan
            assert _cpsat_accepts(cp, assignment) is None, _cpsat_accepts(cp, assignment)
            solution = [0] * len(cp.model.Proto().variables)
            for var, x in assignment.items():
                solution[var.Index()] = x
            assert _same_up_to_cores(inst, cp.decode(solution), p)


# ----- hand-made cases ---------------------------------------------------------------
def _mutual_wait(l):
    # a=1 -> c=3 and d=4 -> b=2; classes {1, 2} and {3, 4}; one class per accelerator at
    # most (120 bytes each, 150 per accelerator). {1, 2} | {3, 4} on two accelerators: each
    # call waits for the other. Zero accelerator times and zero costs: the time rows alone
    # accept that placement at latency 0.
    nodes = [_node(1, 5, 0, 60, cc=10), _node(2, 5, 0, 60, cc=10), _node(3, 5, 0, 60, cc=11),
             _node(4, 5, 0, 60, cc=11)]
    return _build(nodes, [(1, 3, 0.0), (4, 2, 0.0)], k=2, l=l, mem=150)


def test_calls_that_wait_on_each_other_are_never_returned():
    cyclic = MaxloadPlacement({1: "fpga0", 2: "fpga0", 3: "fpga1", 4: "fpga1"})
    inst = _mutual_wait(l=0)
    assert check_placement(inst, cyclic) == []  # every placement rule holds ...
    with pytest.raises(InvalidPlan, match="wait on each other"):
        latency(inst, cyclic)  # ... but the latency is undefined
    assert not family_of(inst).evaluate(inst, cyclic).feasible
    assert _brute_force(inst) is None
    for solver in EXACT:
        res = solve(inst, solver)
        assert res.status is Status.INFEASIBLE and res.plan is None, (solver, res.message)
        assert "do not wait on each other" in res.message and "maxCPUs=0" in res.message, res.message
    lp = build_milp_latency(inst, None).model
    assert row_violations(lp, encode_plan(inst, lp, cyclic))  # the program holds no such placement
    # with a core, one class goes there: 5 ms on the CPU, 0 on the accelerator, 5 ms: 10
    inst = _mutual_wait(l=1)
    assert _brute_force(inst) == 10.0
    res = _solves_to(inst, 10.0)
    assert {res.plan.device[1], res.plan.device[3]} & {"cpu0"}


def test_the_order_rows_are_what_excludes_zero_duration_cycles():
    # the same MILP without its acyclicity rows takes the cyclic placement at latency 0
    inst = _mutual_wait(l=1)
    highs = get_backend("milp-highs")

    def run(lp):
        return highs.run(Program(kind="linear", model=lp, decode=lambda values: None), SolveOptions(threads=2))

    lp = build_milp_latency(inst, None).model
    tol = milp_tolerance_ms(inst, lp)  # HiGHS may end a call 1e-6 ms before it starts
    full = run(lp)
    assert full.status is Status.OPTIMAL and abs(full.values[lp.meta["L"]] - 10.0) <= tol
    assert latency(inst, decode_plan(inst, lp, full.values)) == 10.0
    lp.rows = [r for r in lp.rows if r.kind != "order"]
    relaxed = run(lp)
    assert relaxed.status is Status.OPTIMAL and relaxed.values[lp.meta["L"]] <= tol
    with pytest.raises(InvalidPlan, match="wait on each other"):
        latency(inst, decode_plan(inst, lp, relaxed.values))


def test_non_convex_accelerator_set_with_zero_durations_is_excluded():
    # 1 -> 2 -> 3, class {1, 3}; 2 is unsupported on accelerators and takes 0 ms on the CPU.
    # {1, 3} on fpga0 and 2 on the CPU leaves and re-enters fpga0; with 0 ms accelerator
    # times and free transfers the time rows alone would allow it at 0 ms. All on the
    # CPU: 2 + 0 + 2 = 4 ms.
    inst = _build([_node(1, 2, 0, 1, cc=5), _node(2, 0, 0, 1, ok=0), _node(3, 2, 0, 1, cc=5)],
                  [(1, 2, 0.0), (2, 3, 0.0)], k=1, l=1)
    with pytest.raises(InvalidPlan, match="not convex"):
        latency(inst, MaxloadPlacement({1: "fpga0", 2: "cpu0", 3: "fpga0"}))
    assert _brute_force(inst) == 4.0
    res = _solves_to(inst, 4.0)
    assert set(res.plan.device.values()) == {"cpu0"}


def test_cpu_contiguity_needs_enough_cores():
    # 1 -> 2 -> 3; 1 and 3 only on the CPU (unsupported), 2 takes 100 ms there and 1 ms on
    # the accelerator. With one core {1, 3} must be convex, so 2 stays on it: 1+100+1 = 102.
    # With two cores 1 and 3 take a core each and 2 goes to the accelerator: 1+1+1 = 3.
    nodes = [_node(1, 1, 1, 1, ok=0), _node(2, 100, 1, 1), _node(3, 1, 1, 1, ok=0)]
    for cores, expected in ((1, 102.0), (2, 3.0)):
        inst = _build(nodes, [(1, 2, 0.0), (2, 3, 0.0)], k=1, l=cores)
        assert _brute_force(inst) == expected
        res = _solves_to(inst, expected)
        if cores == 2:
            assert res.plan.device[1] != res.plan.device[3]


def test_cpu_classes_that_reach_each_other_crosswise_need_their_own_cores():
    # a=1 -> w=2 -> b=3 and c=4 -> d=5; classes {1, 5} and {3, 4} only on the CPU, w takes
    # 100 ms there and 1 ms on the accelerator. {1, 5} on cpu0, {3, 4} on cpu1, w on fpga0
    # meets rule 5 (no path from 1 to 5 or from 4 to 3): 1 + 1 + 1 = 3 ms. Labels that
    # grow along every path cannot express it (label(3) > label(1) = label(5) >= label(4)
    # = label(3)), so with such classes the programs keep one core variable per class.
    nodes = [_node(1, 1, 1, 1, cc=10, ok=0), _node(2, 100, 1, 1), _node(3, 1, 1, 1, cc=11, ok=0),
             _node(4, 1, 1, 1, cc=11, ok=0), _node(5, 1, 1, 1, cc=10, ok=0)]
    edges = [(1, 2, 0.0), (2, 3, 0.0), (4, 5, 0.0)]
    for cores, expected in ((1, 102.0), (2, 3.0)):
        inst = _build(nodes, edges, k=1, l=cores)
        assert _brute_force(inst) == expected
        _solves_to(inst, expected)
    p = MaxloadPlacement({1: "cpu0", 5: "cpu0", 3: "cpu1", 4: "cpu1", 2: "fpga0"})
    assert check_placement(inst, p) == [] and latency(inst, p) == 3.0
    lp = build_milp_latency(inst, None).model
    assert lp.meta["cpu_rule"] == "cores"
    values = encode_plan(inst, lp, p)
    assert row_violations(lp, values) == [] and lp.evaluate_objective(values) == 3.0
    # the same accelerator/CPU split with both classes on one core breaks a core row
    both = MaxloadPlacement({**p.device, 3: "cpu0", 4: "cpu0"})
    assert check_placement(inst, both) and row_violations(lp, encode_plan(inst, lp, both))


def test_a_colour_class_around_an_accelerator_cannot_sit_on_the_cpu():
    # class {1, 3} around 2: on a core it would need 1 and 3 on one core with 2 elsewhere
    # in between: never convex, however many cores. So 2 joins the CPU (3 ms) or 1, 2, 3
    # all go to the accelerator (3 x 50 = 150 ms): 3 ms.
    nodes = [_node(1, 1, 50, 1, cc=7), _node(2, 1, 50, 1), _node(3, 1, 50, 1, cc=7)]
    inst = _build(nodes, [(1, 2, 0.0), (2, 3, 0.0)], k=2, l=5)
    assert _brute_force(inst) == 3.0
    _solves_to(inst, 3.0)
    bad = MaxloadPlacement({1: "cpu0", 2: "fpga0", 3: "cpu0"})
    assert any("not contiguous" in v for v in check_placement(inst, bad))


def test_hand_computed_fan_out_fan_in():
    # 1 -> {2, 3} -> 4, accelerators 2 ms per node, cores 10 ms per node, costs 0.5 ms,
    # each accelerator holds two nodes (memory). {1, 2} | {3, 4}: fpga0 runs 1, 2 and sends
    # 1 and 2 out (4 + 1 = 5); fpga1 waits for it, takes in 1 and 2, runs 3, 4 (5 + 1 + 4 =
    # 10). Best found by brute force, checked by hand here: 10 ms; all on one core: 30.
    nodes = [_node(i, 10, 2, 50) for i in (1, 2, 3, 4)]
    inst = _build(nodes, [(1, 2, 0.5), (1, 3, 0.5), (2, 4, 0.5), (3, 4, 0.5)], k=2, l=1, mem=100)
    assert latency(inst, MaxloadPlacement({1: "fpga0", 2: "fpga0", 3: "fpga1", 4: "fpga1"})) == 10.0
    assert _brute_force(inst) == 10.0
    _solves_to(inst, 10.0)


def test_infeasible_memory_without_cpu():
    # no CPU; chain a(50) -> b(60) -> c(50), two accelerators of 100 bytes: {a, b} and {b, c}
    # exceed 100, {a, c} | {b} is not convex: nothing fits, though 160 <= 2 x 100
    inst = _build([_node(1, 1, 1, 50), _node(2, 1, 1, 60), _node(3, 1, 1, 50)], [(1, 2, 1.0), (2, 3, 1.0)],
                  k=2, l=0, mem=100)
    assert list(latency_placements(inst)) == []
    for solver in EXACT:
        res = solve(inst, solver)
        assert res.status is Status.INFEASIBLE and res.plan is None, solver
        assert "maxSizePerFPGA=100 bytes" in res.message and "maxCPUs=0" in res.message, res.message
    unsupported = _build([_node(1, 1, 1, 5), _node(2, 1, 1, 5, ok=0)], [(1, 2, 1.0)], k=3, l=0)
    res = solve(unsupported, "cpsat")
    assert res.status is Status.INFEASIBLE and "node 2" in res.message and "maxCPUs=0" in res.message


def test_empty_graph_unknown_solver_and_enumeration_limit():
    empty = parse_peer_instance({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1, "nodes": [], "edges": []},
                                objective="latency")
    for solver in EXACT + ("brute-force",):
        res = solve(empty, solver)
        assert (res.status, res.plan, res.objective) == (Status.OPTIMAL, MaxloadPlacement({}), 0.0), solver
    inst = _build([_node(i, 1, 1, 1) for i in range(6)], [], k=3, l=1)
    with pytest.raises(UnknownSolver, match="gurobi"):
        solve(inst, "gurobi")
    with pytest.raises(NotApplicable, match="too many"):
        next(family_of(inst).enumerate_plans(inst, 10))


def test_encode_breaks_a_row_for_what_the_program_cannot_hold():
    inst = _build([_node(1, 1, 1, 500), _node(2, 1, 1, 5, ok=0)], [(1, 2, 1.0)], k=2, l=1, mem=100)
    lp = build_milp_latency(inst, None).model
    # node 1 is too large for an accelerator: no variable says so, its assign row is unmet
    too_large = MaxloadPlacement({1: "fpga0", 2: "cpu0"})
    assert check_placement(inst, too_large)
    assert any(name.startswith("assign") for name in row_violations(lp, encode_plan(inst, lp, too_large)))
    three = _build([_node(i, 1, 1, 1) for i in range(3)], [], k=2)
    lp = build_milp_latency(three, None).model
    over = MaxloadPlacement({0: "fpga0", 1: "fpga1", 2: "fpga2"})
    assert check_placement(three, over) and row_violations(lp, encode_plan(three, lp, over))
    split = _build([_node(1, 1, 1, 1, cc=3), _node(2, 1, 1, 1, cc=3)], [(1, 2, 1.0)], k=2)
    with pytest.raises(InvalidPlan, match="several devices"):
        encode_plan(split, build_milp_latency(split, None).model, MaxloadPlacement({1: "fpga0", 2: "cpu0"}))


def test_start_plan_is_valid_no_worse_than_all_cpu_and_the_fallback():
    # greedy: {1, 2} on fpga0 (memory), 3 on fpga1: 2 + 2 + 0.5 + (0.5 + 2) = 7 ms; all
    # on the CPU: 30 ms
    nodes = [_node(i, 10, 2, 50) for i in (1, 2, 3)]
    inst = _build(nodes, [(1, 2, 0.5), (2, 3, 0.5)], k=2, l=1, mem=100)
    fam = family_of(inst)
    start = fam.start_plan(inst)
    metrics = fam.evaluate(inst, start)
    assert metrics.feasible and metrics.objective_ms == 7.0
    assert fam.start_plan(inst.with_objective("throughput")) == MaxloadPlacement({1: "cpu0", 2: "cpu0", 3: "cpu0"})
    assert feasible_start_plan(fam, inst) == start  # what a stopped solve falls back on


# ----- a shipped graph ---------------------------------------------------------------
@needs_data
def test_bert24_latency_is_proven_optimal():
    inst = read_peer_instance(ROOT / "latency-inputs/LayerGraphs/bert24_inference.json")
    assert inst.objective == "latency"
    res = solve(inst, "cpsat", time_limit=120)
    assert res.status is Status.OPTIMAL, res.message
    assert check_placement(inst, res.plan) == [] and latency(inst, res.plan) == res.objective
    program = family_of(inst).build_program(inst, "cpsat", family_of(inst).start_plan(inst))
    assert res.objective - program.tolerance_ms - 1e-12 <= res.bound <= res.objective
    all_cpu = latency(inst, MaxloadPlacement({v: "cpu0" for v in inst.node_by_id}))
    assert res.objective < all_cpu
    # a time-limited MILP comes back FEASIBLE (HiGHS finds no plan of its own in 2 s: the
    # start plan), never better than the proven optimum, never worse than the start plan
    milp = solve(inst, "milp-highs", time_limit=2)
    assert milp.status is Status.FEASIBLE, milp.message
    assert milp.objective >= res.objective - 1e-9
    assert milp.bound is None or milp.bound <= res.objective + 1e-9  # none when HiGHS is stopped in its presolve
    assert milp.objective <= latency(inst, family_of(inst).start_plan(inst))


# ----- the command line ----------------------------------------------------------------
def _cli(*args):
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "splitopt", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@needs_data
def test_cli_solves_the_objective_of_the_file_or_the_one_asked_for():
    bert = ROOT / "latency-inputs/LayerGraphs/bert24_inference.json"
    out = _cli("solve", bert, "--time-limit", "120")
    assert "OPTIMAL" in out and "objective: latency" in out and "Latency 100.218500 ms" in out, out
    data = json.loads(_cli("solve", bert, "--objective", "throughput", "--json"))
    assert data["status"] == "OPTIMAL" and data["metrics"]["objective"] == "throughput"
    assert data["objective_ms"] == data["metrics"]["max_load_ms"]
    data = json.loads(_cli("solve", ROOT / "throughput-inputs/LayerGraphs/bert24_inference.json",
                           "--objective", "latency", "--json", "--time-limit", "120"))
    assert data["status"] == "OPTIMAL" and data["metrics"]["objective"] == "latency"
    assert data["objective_ms"] == data["metrics"]["latency_ms"]
