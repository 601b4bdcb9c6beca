"""``ideal-dp``, the exact max-load DP over the ideals of the forward DAG
(splitopt/families/maxload/ideal_dp.py; formulations/maxload_throughput.md,
"Ideal-enumeration DP").

* On many small random instances: where it applies, its value and plan equal brute force
  over every rule-abiding placement (the plan re-checked by the family's evaluator);
  where it declines, the reason holds (a colour group with no forward node, or two
  contiguous devices that can wait on each other). In ``acyclic_only`` mode it equals
  brute force over the placements whose device quotient is acyclic, on every instance
  without free groups.
* A hand-made instance where a cyclic wait is strictly better: the DP declines, and the
  method (the acyclic DP's plan handed to CP-SAT, ``certify.py``) finds the cyclic optimum.
  On the random instances where the DP declines for a cyclic wait, the method equals
  brute force.
* The peer graphs (skipped without ../shared): the exact method on the bert24 graphs
  equals CP-SAT; the acyclic mode equals CP-SAT's optimum on the small-lattice graphs,
  and the method proves it.
* Caps, the time limit, ``auto``'s choice and the imports.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from splitopt.backends.auto import exact_backend_for
from splitopt.core.errors import NotApplicable
from splitopt.core.options import BuildDeadlinePassed, SolveOptions
from splitopt.core.result import Status
from splitopt.families.maxload import methods
from splitopt.families.maxload.methods import IDEAL_DP_RTOL
from splitopt.families.maxload.enumerate import enumerate_plans
from splitopt.families.maxload.evaluate import check_placement, evaluate, max_load
from splitopt.families.maxload.ideal_dp import cyclic_wait, ideal_lattice, solve_ideal_dp
from splitopt.families.maxload.instance import parse_peer_instance, read_peer_instance
from splitopt.families.maxload.peer_data import data_root
from splitopt.families.registry import family
from splitopt.solve import solve

ROOT = data_root()
needs_data = pytest.mark.skipif(not ROOT.is_dir(), reason=f"peer data not found at {ROOT}")
TOL = 1e-9


def node(i, cpu=0.0, fpga=0.0, size=0.0, cc=None, ok=1, bw=0):
    n = {"id": i, "supportedOnFpga": ok, "cpuLatency": cpu, "fpgaLatency": fpga, "isBackwardNode": bw,
         "size": size, "name": f"n{i}"}
    if cc is not None:
        n["colorClass"] = cc
    return n


def instance(nodes, edges, k=2, l=1, mem=100.0):
    return parse_peer_instance({"maxSizePerFPGA": mem, "maxFPGAs": k, "maxCPUs": l, "nodes": nodes,
                                "edges": [{"sourceId": u, "destId": v, "cost": c} for u, v, c in edges]},
                               name="hand")


def random_instance(seed: int):
    """4-7 forward nodes (some sharing a colour class, some not allowed on an
    accelerator), random forward edges, training half the time (a backward partner per
    forward class, reversed edges, the loss edge), 1-2 accelerators and 0-1 cores,
    memory often binding. Wider than the family's own random instances, so that both
    chains and graphs with cyclic waits occur."""
    rng = random.Random(seed)
    n = rng.randint(4, 7)
    training = rng.random() < 0.5
    ms = lambda: rng.randint(0, 2000) / 100  # noqa: E731
    nodes, edges = [], []
    for i in range(n):
        cc = rng.choice([None, None, None, 100, 101]) if rng.random() < 0.6 or training else None
        if training and cc is None:
            cc = 200 + i
        nodes.append(node(i, ms(), ms(), rng.randint(0, 50), cc=cc, ok=rng.choice([1, 1, 1, 1, 0])))
    p = rng.choice([0.2, 0.35, 0.5])
    fwd = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p]
    edges += fwd
    if training:
        classes = sorted({nd["colorClass"] for nd in nodes})
        back = {}
        for c in classes[:3]:
            back[c] = len(nodes)
            nodes.append(node(len(nodes), ms(), ms(), rng.randint(0, 30), cc=c, bw=1))
        for u, v in fwd:
            cu, cv = nodes[u]["colorClass"], nodes[v]["colorClass"]
            if cu in back and cv in back and back[cv] > back[cu]:  # backward ids decrease: acyclic
                edges.append((back[cv], back[cu]))
        if back:
            edges.append((n - 1, back[max(back)]))
    cost = {u: rng.randint(0, 400) / 100 for u, _ in edges}
    k = rng.randint(1, 2)
    l = rng.randint(0, 1) if k == 2 else 1
    return instance(nodes, [(u, v, cost[u]) for u, v in dict.fromkeys(edges)], k=k, l=l, mem=rng.randint(40, 160))


def acyclic_quotient(inst, plan) -> bool:
    """Whether the devices, joined by the forward edges between them, form a DAG."""
    dev = plan.device
    fwd = inst.forward_ids
    succ: dict[str, set[str]] = {d: set() for d in set(dev.values())}
    for e in inst.edges:
        if e.source in fwd and e.target in fwd and dev[e.source] != dev[e.target]:
            succ[dev[e.source]].add(dev[e.target])
    state: dict[str, int] = {}

    def cyclic(d):
        state[d] = 1
        for w in succ[d]:
            if state.get(w) == 1 or (w not in state and cyclic(w)):
                return True
        state[d] = 2
        return False

    return not any(d not in state and cyclic(d) for d in succ)


def brute(inst, acyclic=False):
    values = [max_load(inst, p)[0] for p in enumerate_plans(inst, 10**6)
              if not acyclic or acyclic_quotient(inst, p)]
    return min(values) if values else None


def assert_plan(inst, res, expected):
    assert res.finished
    if expected is None:
        assert res.plan is None
        return
    assert res.plan is not None
    assert not check_placement(inst, res.plan), check_placement(inst, res.plan)
    m = evaluate(inst, res.plan)
    assert m.feasible
    assert abs(m.max_load_ms - expected) <= TOL * max(1.0, expected)
    assert abs(res.value_ms - expected) <= TOL * max(1.0, expected)


def assert_solve_matches_brute_force(res, ref, rtol):
    """A ``solve`` result against brute force's optimum ``ref`` (None: infeasible)."""
    if ref is None:
        assert res.status is Status.INFEASIBLE
        return
    assert res.status is Status.OPTIMAL, res.message
    assert res.metrics.feasible
    assert abs(res.objective - ref) <= rtol * max(1.0, ref)


# ----- random instances ---------------------------------------------------------------
@pytest.mark.parametrize("seed", range(150))
def test_exact_where_it_applies_and_declines_for_a_reason(seed):
    inst = random_instance(seed)
    ref = brute(inst)
    try:
        res = solve_ideal_dp(inst)
    except NotApplicable as e:
        msg = str(e)
        free = any(all(inst.node_by_id[v].is_backward for v in ids)
                   for ids in [*inst.colour_classes.values(), *[(n.id,) for n in inst.nodes if n.color_class is None]])
        assert ("no forward node" in msg and free) or ("wait on each other" in msg and cyclic_wait(inst)), msg
        return
    assert_plan(inst, res, ref)


@pytest.mark.parametrize("seed", range(150))
def test_acyclic_mode_equals_brute_force_over_acyclic_placements(seed):
    inst = random_instance(seed)
    try:
        res = solve_ideal_dp(inst, acyclic_only=True)
    except NotApplicable as e:
        assert "no forward node" in str(e)
        return
    assert_plan(inst, res, brute(inst, acyclic=True))
    if res.plan is not None:
        assert acyclic_quotient(inst, res.plan)


def test_random_instances_exercise_both_outcomes():
    """The random instances above hit the DP (chains and wider graphs), the cyclic-wait
    decline and infeasible accelerator-only instances, so the tests mean something."""
    applied = cyclic = infeasible = 0
    for seed in range(150):
        inst = random_instance(seed)
        try:
            res = solve_ideal_dp(inst)
        except NotApplicable as e:
            cyclic += "wait on each other" in str(e)
            continue
        applied += 1
        infeasible += res.plan is None
    assert applied >= 40 and cyclic >= 10 and infeasible >= 1, (applied, cyclic, infeasible)


@pytest.mark.parametrize("seed", range(150))
def test_method_certifies_or_beats_the_acyclic_optimum_where_the_dp_declines(seed):
    """Where the DP declines for a possible cyclic wait, ``ideal-dp`` hands the acyclic
    optimum to CP-SAT asked for a better placement (``certify.py``): OPTIMAL with brute
    force's value (within its stated tolerance), whether the acyclic plan is the optimum
    or a cyclic one beats it; INFEASIBLE exactly where brute force finds nothing."""
    inst = random_instance(seed)
    try:
        solve_ideal_dp(inst)
        return  # the DP applies: the tests above
    except NotApplicable as e:
        if "wait on each other" not in str(e):
            return
    ref = brute(inst)
    res = solve(inst, "ideal-dp", threads=1)
    assert_solve_matches_brute_force(res, ref, IDEAL_DP_RTOL)
    if ref is not None:
        assert res.bound <= ref + TOL
        assert res.extra["acyclic_only"] is True


@pytest.mark.parametrize("seed", range(60))
def test_family_random_instances_through_solve(seed):
    """The family's own random instances (throughput), through ``solve``: OPTIMAL and the
    brute-force value, INFEASIBLE exactly when brute force finds nothing."""
    inst = family("maxload").random_instance(seed).with_objective("throughput")
    try:
        res = solve(inst, "ideal-dp")
    except NotApplicable:
        return
    assert_solve_matches_brute_force(res, brute(inst), IDEAL_DP_RTOL if res.extra.get("acyclic_only") else TOL)


# ----- the cyclic wait ------------------------------------------------------------------
def cyclic_wait_instance():
    """Two chains 0 -> 1 and 2 -> 3, two accelerators holding two nodes each (sizes 1,
    memory 2), no core, no transfer cost; accelerator ms 2, 1, 1, 0.
    Acyclic splits: {0,1}{2,3} -> 3, {0,2}{1,3} -> 3. The split {0,3}{1,2} (both sets
    convex: no path between 0 and 3, nor between 1 and 2) -> 2, but its devices wait on
    each other (0 -> 1 one way, 2 -> 3 the other)."""
    nodes = [node(0, fpga=2, size=1), node(1, fpga=1, size=1), node(2, fpga=1, size=1), node(3, fpga=0, size=1)]
    return instance(nodes, [(0, 1, 0.0), (2, 3, 0.0)], k=2, l=0, mem=2)


def test_a_cyclic_wait_can_be_strictly_better_and_the_method_finds_it():
    inst = cyclic_wait_instance()
    assert brute(inst) == 2.0
    assert brute(inst, acyclic=True) == 3.0
    assert solve_ideal_dp(inst, acyclic_only=True).value_ms == 3.0
    assert cyclic_wait(inst) == ((0, 1), (2, 3))
    with pytest.raises(NotApplicable, match="wait on each other"):
        solve_ideal_dp(inst)
    res = solve(inst, "ideal-dp")  # the acyclic plan (3 ms), beaten by CP-SAT's cyclic one
    assert res.status is Status.OPTIMAL and res.objective == pytest.approx(2.0)
    assert "better than the acyclic optimum" in res.message
    assert not acyclic_quotient(inst, res.plan)


def test_backward_only_colour_class_is_declined():
    nodes = [node(0, fpga=1), node(1, fpga=1, bw=1, cc=7), node(2, fpga=1, bw=1, cc=7)]
    inst = instance(nodes, [(0, 1, 1.0), (1, 2, 1.0)])
    with pytest.raises(NotApplicable, match="no forward node"):
        solve_ideal_dp(inst)


def test_colour_class_split_by_the_order_stays_together():
    """Class {0, 2} with 0 -> 1 -> 2: every ideal holds both or neither, so the class's
    device holds node 1 too (contiguity), and the plan is the brute-force optimum."""
    nodes = [node(0, 5, 1, 10, cc=3), node(1, 5, 9, 10), node(2, 5, 1, 10, cc=3), node(3, 5, 4, 10)]
    inst = instance(nodes, [(0, 1, 0.5), (1, 2, 0.5), (2, 3, 0.5)], k=2, l=1, mem=100)
    assert_plan(inst, solve_ideal_dp(inst), brute(inst))


# ----- caps and limits ------------------------------------------------------------------
def chain_instance(n=6):
    nodes = [node(i, cpu=3, fpga=1, size=1) for i in range(n)]
    return instance(nodes, [(i, i + 1, 0.1) for i in range(n - 1)], k=2, l=1)


def test_more_ideals_than_the_cap_is_not_applicable():
    inst = chain_instance(6)  # 7 ideals
    assert ideal_lattice(inst, cap=7).count == 7
    with pytest.raises(NotApplicable, match="more than 6"):
        solve_ideal_dp(inst, cap=6)
    wide = instance([node(i, cpu=1, fpga=1) for i in range(14)], [])  # 14 isolated nodes: 2**14 ideals
    with pytest.raises(NotApplicable, match="ideals"):
        solve_ideal_dp(wide)


def test_time_limit_returns_feasible_all_on_cpu():
    inst = chain_instance(6)
    assert not solve_ideal_dp(inst, out_of_time=lambda: True).finished
    out = methods.ideal_dp(inst, SolveOptions(time_limit_s=1e-9))
    assert out.status is Status.FEASIBLE and set(out.plan.device.values()) == {"cpu0"}
    no_cpu = instance([node(0, fpga=1), node(1, fpga=1)], [(0, 1, 0.0)], k=2, l=0)
    out = methods.ideal_dp(no_cpu, SolveOptions(time_limit_s=1e-9))
    assert out.status is Status.NO_SOLUTION_FOUND


def test_the_time_limit_stops_the_cyclic_wait_search(monkeypatch):
    """The search for cyclic waits checks the caller's time limit every 64 visits (here a
    limit that has always passed): ``ideal-dp`` then returns the all-on-cpu plan instead
    of searching on, and keeps nothing of the stopped search with the instance."""
    import splitopt.families.maxload.ideal_dp as ideal_dp_module

    def passed():
        raise BuildDeadlinePassed()

    inst = chain_instance(200)
    monkeypatch.setattr(ideal_dp_module, "check_build_deadline", passed)
    out = methods.ideal_dp(inst, SolveOptions(time_limit_s=60))
    assert out.status is Status.FEASIBLE and "time limit" in out.message
    assert set(out.plan.device.values()) == {"cpu0"}
    monkeypatch.undo()
    assert methods.ideal_dp(inst, SolveOptions()).status is Status.OPTIMAL


def test_latency_objective_is_not_applicable():
    inst = chain_instance(4).with_objective("latency")
    with pytest.raises(NotApplicable, match="throughput"):
        methods.ideal_dp(inst, SolveOptions())
    assert family("maxload").exact_method(inst) is None


def test_auto_picks_ideal_dp_only_where_it_applies():
    fam = family("maxload")
    assert fam.exact_method(chain_instance(6)) == "ideal-dp"
    assert exact_backend_for(fam, chain_instance(6)) == "ideal-dp"
    assert fam.exact_method(cyclic_wait_instance()) == "ideal-dp"  # the DP over acyclic orders, then CP-SAT
    free = instance([node(0, fpga=1), node(1, fpga=1, bw=1, cc=7), node(2, fpga=1, bw=1, cc=7)],
                    [(0, 1, 1.0), (1, 2, 1.0)])
    assert fam.exact_method(free) is None
    res = solve(chain_instance(6))
    assert res.status is Status.OPTIMAL and abs(res.objective - brute(chain_instance(6))) <= TOL


def test_ideal_dp_solve_imports_no_ortools_or_pandas(tmp_path):
    path = tmp_path / "chain.json"
    inst = chain_instance(6)
    path.write_text(json.dumps({"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1,
                                "nodes": [node(n.id, n.cpu_ms, n.fpga_ms, n.size_bytes) for n in inst.nodes],
                                "edges": [{"sourceId": e.source, "destId": e.target, "cost": e.cost_ms}
                                          for e in inst.edges]}))
    code = ("import sys; from splitopt.families.maxload.instance import read_peer_instance; "
            "from splitopt.solve import solve; "
            f"r = solve(read_peer_instance({str(path)!r}), 'ideal-dp'); assert r.status.value == 'OPTIMAL'; "
            "print(sorted(m for m in ('ortools', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ----- the peer graphs --------------------------------------------------------------------
def peer(name):
    return read_peer_instance(ROOT / "throughput-inputs" / name)


@needs_data
@pytest.mark.parametrize("name", ["LayerGraphs/bert24_inference.json", "LayerGraphs/bert24_training.json"])
def test_peer_exact_equals_cpsat(name):
    """bert24: no placement waits in a cycle (the search proves it), so ``auto`` runs
    ``ideal-dp``, and it finds CP-SAT's optimum."""
    inst = peer(name)
    assert cyclic_wait(inst) is None
    assert family("maxload").exact_method(inst) == "ideal-dp"
    dp = solve(inst, "ideal-dp")
    cp = solve(inst, "cpsat")
    assert dp.status is Status.OPTIMAL and cp.status is Status.OPTIMAL
    assert abs(dp.objective - cp.objective) <= 1e-6 * cp.objective
    assert dp.metrics.feasible


@needs_data
@pytest.mark.parametrize("name", ["LayerGraphs/resnet50_inference.json", "OperatorGraphs/bert_l-3_inference.json",
                                  "OperatorGraphs/resnet50_inference.json"])
def test_peer_acyclic_mode_equals_cpsat_and_the_method_proves_it(name):
    """On these graphs two devices can wait on each other: the DP declines; the DP over
    the acyclic placements (the peer's model) still finds CP-SAT's optimum, and
    ``ideal-dp`` (what ``auto`` runs) proves it with CP-SAT asked for a better one."""
    inst = peer(name)
    with pytest.raises(NotApplicable, match="wait on each other"):
        solve_ideal_dp(inst)
    assert family("maxload").exact_method(inst) == "ideal-dp"
    res = solve_ideal_dp(inst, acyclic_only=True)
    cp = solve(inst, "cpsat")
    assert cp.status is Status.OPTIMAL
    assert evaluate(inst, res.plan).feasible
    assert abs(evaluate(inst, res.plan).max_load_ms - cp.objective) <= 1e-6 * cp.objective
    method = solve(inst, "ideal-dp")
    assert method.status is Status.OPTIMAL and "acyclic optimum" in method.message
    assert abs(method.objective - cp.objective) <= 1e-6 * cp.objective


@needs_data
@pytest.mark.parametrize("name", ["OperatorGraphs/bert_l-3_training.json", "OperatorGraphs/resnet50_training.json"])
def test_peer_training_operator_graphs_declined_for_free_backward_classes(name):
    with pytest.raises(NotApplicable, match="no forward node"):
        solve(peer(name), "ideal-dp")


@needs_data
def test_peer_large_lattice_declined():
    with pytest.raises(NotApplicable, match="ideals"):
        solve_ideal_dp(peer("LayerGraphs/gnmt_inference.json"), acyclic_only=True)


# ----- the cyclic-wait test is complete on small graphs ----------------------------------
def set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for p in set_partitions(rest):
        for i in range(len(p)):
            yield p[:i] + [[first] + p[i]] + p[i + 1:]
        yield [[first]] + p


def test_cyclic_wait_finds_a_cycle_of_four_devices():
    """Four chains a_i -> b_i: the devices {b_3, a_0}, {b_0, a_1}, {b_1, a_2}, {b_2, a_3} wait
    on each other around a cycle of four, which the search for cycles of at least four
    edges finds; with three devices only, it cannot exist."""
    nodes = [node(i) for i in range(8)]
    chains = [(2 * i, 2 * i + 1, 0.0) for i in range(4)]
    found = cyclic_wait(instance(nodes, chains, k=4, l=0), shortest=4)
    assert found is not None and found != () and len(found) == 4, found
    assert cyclic_wait(instance(nodes, chains, k=3, l=0), shortest=4) is None


def convex_placements(inst, classes):
    """Every placement of the nodes on distinct accelerators, one per block of a partition
    into convex unions of colour classes."""
    from splitopt.families.maxload.evaluate import convexity_witness
    from splitopt.families.maxload.plan import MaxloadPlacement

    ids = frozenset(inst.node_by_id)
    for parts in set_partitions(sorted(ids)):
        sets = [frozenset(s) for s in parts]
        if any(len({classes[v] for v in s} & {classes[v] for v in ids - s}) for s in sets):
            continue
        if any(convexity_witness(inst, s) is not None for s in sets):
            continue
        yield MaxloadPlacement({v: f"fpga{i}" for i, s in enumerate(sets) for v in s})


def long_quotient_cycle(inst, plan, length: int) -> bool:
    """Whether the devices' quotient (forward edges) has a simple cycle of ``length`` or more
    devices."""
    import networkx as nx

    dev = plan.device
    fwd = inst.forward_ids
    q = nx.DiGraph()
    q.add_edges_from((dev[e.source], dev[e.target]) for e in inst.edges
                     if e.source in fwd and e.target in fwd and dev[e.source] != dev[e.target])
    return any(len(c) >= length for c in nx.simple_cycles(q))


@pytest.mark.parametrize("seed", range(4))
def test_cyclic_wait_finds_exactly_the_cyclic_placements(seed):
    """On random DAGs of 4-6 forward nodes with random colour classes: some partition into
    convex unions of colour classes has devices that wait on each other in a cycle (of any
    length) exactly when ``cyclic_wait`` finds edges around a cycle (the equivalence the
    method's exactness rests on, proved in its docstring)."""
    from splitopt.families.maxload.evaluate import convexity_witness
    from splitopt.families.maxload.plan import MaxloadPlacement

    rng = random.Random(1000 + seed)
    cyclic_seen = 0
    long_seen = {3: 0, 4: 0}
    for _ in range(150):
        n = rng.randint(4, 6)
        p = rng.random()
        classes = [rng.randrange(n - 1) if rng.random() < 0.4 else 100 + i for i in range(n)]
        nodes = [node(i, cc=classes[i]) for i in range(n)]
        edges = [(i, j, 0.0) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
        inst = instance(nodes, edges, k=n, l=0)
        ids = frozenset(range(n))
        has_cycle = False
        for parts in set_partitions(list(range(n))):
            sets = [frozenset(s) for s in parts]
            if any(len({classes[v] for v in s} & {classes[v] for v in ids - s}) for s in sets):
                continue  # a class split across devices
            if any(convexity_witness(inst, s) is not None for s in sets):
                continue
            plan = MaxloadPlacement({v: f"fpga{i}" for i, s in enumerate(sets) for v in s})
            if not acyclic_quotient(inst, plan):
                has_cycle = True
                break
        cyclic_seen += has_cycle
        found = cyclic_wait(inst)
        assert found != (), (n, edges, classes)  # no budget trouble at this size
        assert (found is not None) == has_cycle, (n, edges, classes, found)
        # the same per length: a simple cycle of L or more devices exactly when the search for
        # cycles of at least L edges finds one (this exercises its pruning past two edges)
        for length in (3, 4):
            long_cycle = has_cycle and any(long_quotient_cycle(inst, plan, length)
                                           for plan in convex_placements(inst, classes))
            long_found = cyclic_wait(inst, shortest=length)
            assert long_found != (), (n, edges, classes)
            assert (long_found is not None) == long_cycle, (length, n, edges, classes, long_found)
            long_seen[length] += long_cycle
    assert cyclic_seen >= 10 and long_seen[3] >= 2, (cyclic_seen, long_seen)
