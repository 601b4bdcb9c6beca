"""The maxload search aids: forward-reachability bitsets (``reach``), the ``intervals``
DP baseline, the ``group-moves`` local search and the throughput search space's repair.

* the bitset convexity test agrees with the evaluator's ``convexity_witness``;
* the DP is optimal among interval plans of its order (brute force over cuts of the
  order and device kinds), on small random instances (hypothesis);
* the baselines' plans meet every rule, group-moves never worsens intervals, and the
  moves' incremental loads are the evaluator's;
* every decoded genome is a valid placement, the repair leaves every plan that meets the
  rules unchanged (several runs per device included), and on the peer data the seeds
  survive the repair.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitopt.core.options import SolveOptions
from splitopt.families.maxload.evaluate import check_placement, convexity_witness, evaluate, max_load
from splitopt.families.maxload.examples import random_maxload_data
from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import parse_peer_instance, read_peer_instance
from splitopt.families.maxload.intervals import interval_plan_for_order, group_orders, interval_placement
from splitopt.families.maxload.methods import group_moves, intervals
from splitopt.families.maxload.moves import LoadState, improve
from splitopt.families.maxload.peer_data import data_root
from splitopt.families.maxload.plan import MaxloadPlacement
from splitopt.families.maxload.reach import reach_of
from splitopt.families.maxload.space import maxload_space

ROOT = data_root()
needs_data = pytest.mark.skipif(not ROOT.is_dir(), reason=f"peer data not found at {ROOT}")


def random_dag_data(seed: int, n_max: int = 7) -> dict:
    """A small peer file with a random DAG: 2..n_max nodes, colour classes (some spanning
    far apart nodes), a few backward nodes and unsupported nodes, 1-3 accelerators, 0-1
    cores, memory often binding. Times in ms, sizes in bytes."""
    rng = random.Random(seed)
    n = rng.randint(2, n_max)
    nodes = []
    for i in range(n):
        node = {"id": i, "supportedOnFpga": int(rng.random() < 0.9), "cpuLatency": rng.randint(0, 3000) / 100,
                "fpgaLatency": rng.randint(0, 1000) / 100, "isBackwardNode": int(i >= n - 2 and rng.random() < 0.4),
                "size": rng.randint(0, 50), "name": f"n{i}"}
        if rng.random() < 0.4:
            node["colorClass"] = rng.randint(0, 2)
        nodes.append(node)
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.35]
    cost = {u: rng.randint(0, 400) / 100 for u, _ in edges}
    l = rng.randint(0, 1)
    k = rng.randint(1, 3) if l else rng.randint(2, 3)
    return {"maxSizePerFPGA": rng.randint(30, 200), "maxFPGAs": k, "maxCPUs": l, "nodes": nodes,
            "edges": [{"sourceId": u, "destId": v, "cost": cost[u]} for u, v in edges]}


def instance(seed: int, kind: int):
    data = random_dag_data(seed) if kind == 0 else random_maxload_data(seed)
    return parse_peer_instance(data, name=f"random-{kind}-{seed}")


def interval_brute_force(inst, order) -> float | None:
    """Min max-load over plans whose devices are intervals of ``order`` and that meet
    every rule: every cut of the order, every kind per segment."""
    n, k, l = len(order), len(inst.fpgas), len(inst.cpus)
    gr = groups_of(inst)
    best = None
    for cuts in itertools.product((0, 1), repeat=max(0, n - 1)):
        segments, start = [], 0
        for i, c in enumerate(cuts, 1):
            if c:
                segments.append(order[start:i])
                start = i
        segments.append(order[start:])
        for kinds in itertools.product("fc", repeat=len(segments)):
            if kinds.count("f") > k or kinds.count("c") > l:
                continue
            where, nf, nc = {}, 0, 0
            for seg, kind in zip(segments, kinds):
                name = f"fpga{nf}" if kind == "f" else f"cpu{nc}"
                nf, nc = nf + (kind == "f"), nc + (kind == "c")
                for g in seg:
                    where[g] = name
            plan = MaxloadPlacement({v: where[gr.of[v]] for v in inst.node_by_id})
            if not check_placement(inst, plan):
                value = max_load(inst, plan)[0]
                best = value if best is None else min(best, value)
    return best


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 1))
def test_bitset_convexity_agrees_with_the_evaluator(seed, kind):
    inst = instance(seed, kind)
    gr = groups_of(inst)
    reach = reach_of(inst, gr)
    rng = random.Random(seed)
    for _ in range(10):
        chosen = [g for g in range(len(gr.members)) if rng.random() < 0.5]
        ids = frozenset(v for g in chosen for v in gr.members[g])
        assert reach.convex(chosen) == (convexity_witness(inst, ids, inst.forward_ids) is None)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 1))
def test_the_dp_is_optimal_among_interval_plans(seed, kind):
    inst = instance(seed, kind)
    gr = groups_of(inst)
    for order in group_orders(inst, gr):
        assert sorted(order) == list(range(len(gr.members)))
        plan = interval_plan_for_order(inst, gr, order)
        expected = interval_brute_force(inst, order)
        if expected is None:
            assert plan is None
            continue
        assert plan is not None and not check_placement(inst, plan)
        assert math.isclose(max_load(inst, plan)[0], expected, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 1))
def test_baselines_meet_every_rule_and_moves_never_worsen(seed, kind):
    inst = instance(seed, kind)
    start = interval_placement(inst)
    if start is None:
        return
    moved = improve(inst, start)
    assert not check_placement(inst, start) and not check_placement(inst, moved)
    assert max_load(inst, moved)[0] <= max_load(inst, start)[0] * (1 + 1e-9)
    for method in (intervals, group_moves):
        assert not evaluate(inst, method(inst, SolveOptions()).plan).violations


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 1))
def test_incremental_loads_are_the_evaluators(seed, kind):
    inst = instance(seed, kind)
    gr = groups_of(inst)
    names = list(inst.fpgas) + list(inst.cpus)
    rng = random.Random(seed)
    state = LoadState(inst, gr, [rng.randrange(len(names)) for _ in gr.members])
    for _ in range(8):
        g, b = rng.randrange(len(gr.members)), rng.randrange(len(names))
        if b != state.where[g]:
            a = state.where[g]
            after = state.loads_after(g, b)
            state.move(g, b)
            assert math.isclose(state.load(a), after[0], abs_tol=1e-9)
            assert math.isclose(state.load(b), after[1], abs_tol=1e-9)
        loads = max_load(inst, state.placement())[1]
        for d, name in enumerate(names):
            assert math.isclose(state.load(d), loads[name], rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 1))
def test_every_decoded_genome_is_a_placement_and_valid_plans_are_kept(seed, kind):
    inst = instance(seed, kind)
    space = maxload_space(inst)
    assert space.meta["represents_every_feasible_plan"]
    rng = random.Random(seed)
    for _ in range(20):
        genome = space.sample(rng)
        repaired = space.repair(dict(genome))
        space.check(repaired)
        plan = space.to_plan(repaired)
        evaluate(inst, plan)  # InvalidPlan here: a malformed decoding
        if not check_placement(inst, plan):
            assert space.decode(space.from_plan(plan)).key() == plan.key()
        # a plan meeting every rule is left as it is
    for plan in (interval_placement(inst),):
        if plan is not None:
            assert space.decode(space.from_plan(plan)).key() == plan.key()


@needs_data
def test_a_multi_run_plan_survives_the_repair_and_the_baselines_reach_the_optimum():
    # bert_l-3_inference: optimum 27.9186 ms (CP-SAT); fpga0 holds several stretches of the order
    inst = read_peer_instance(ROOT / "throughput-inputs" / "OperatorGraphs" / "bert_l-3_inference.json")
    plan = group_moves(inst, SolveOptions()).plan
    metrics = evaluate(inst, plan)
    assert metrics.feasible and metrics.max_load_ms <= 27.9186 * 1.05
    space = maxload_space(inst)
    assert space.decode(space.from_plan(plan)).key() == plan.key()
