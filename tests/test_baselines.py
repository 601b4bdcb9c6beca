"""The published baselines (splitopt/baselines): hand-computed cases, the min-cut against
an enumeration of every closed edge set, AUTO-SPLIT's guarantees, and plan validity.

Instances are built here. Most layers carry measured latencies (``latency_ms``) so the
numbers can be checked by hand; the uplink runs at 8 Mbit/s, so 1,000 bytes take 1 ms.
"""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from splitopt import NotApplicable, Status, evaluate, parse_instance
from splitopt.backends.registry import get_backend
from splitopt.core import presets
from splitopt.families.edge_cloud.baselines.auto_split import (activation_bits, candidates, cut_bytes, cut_bytes_all,
                                                              lagrangian_choice, potential_splits)
from splitopt.families.edge_cloud.baselines.neurosurgeon import chain_scan
from splitopt.families.edge_cloud.baselines.qdmp import min_cut
from splitopt.families.edge_cloud.plan import check_plan
from splitopt.families.registry import family
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.plan import edge_layers, uniform_plan

OPTS = SolveOptions()
EDGE_CLOUD = family("edge_cloud")


def method(name: str, inst):
    """Run the edge/cloud method ``name`` as a backend (its own output, before the
    generic layer evaluates it)."""
    return get_backend(name, EDGE_CLOUD).solve(EDGE_CLOUD, inst, OPTS)
BW = 8e6  # bits/s: 1,000 bytes = 1 ms


def layer(name, inputs, out, edge=1.0, cloud=5.0, weights=0.0, werr=None, aerr=None):
    """A layer with ``out`` output elements and measured latencies (ms): a number, or a
    dict keyed 'w<b>a<b>' for the edge."""
    d = {
        "name": name, "op": "conv", "inputs": list(inputs), "macs": 0.0, "weights": float(weights),
        "output_shape": [out], "latency_ms": {"eyeriss": edge, "tpu": cloud},
    }
    if werr:
        d["weight_error"] = {str(b): v for b, v in werr.items()}
    if aerr:
        d["activation_error"] = {str(b): v for b, v in aerr.items()}
    return d


def make(layers, *, x=1000, x_bits=8, problem="split", memory=1e9, error_budget=None,
         bit_widths=(2, 4, 8, 16), link_latency=0.0, transmit_bits=None):
    return parse_instance({
        "format": "splitopt-instance/1",
        "name": "t",
        "graph": {"inputs": [{"name": "x", "shape": [x], "bits": x_bits}], "layers": layers},
        "devices": [presets.eyeriss_edge(), presets.tpu_cloud()],
        "links": [{"source": "eyeriss", "target": "tpu", "bandwidth_bits_per_s": BW, "latency_ms": link_latency}],
        "settings": {
            "problem": problem, "edge": "eyeriss", "cloud": "tpu", "edge_memory_bytes": memory,
            "error_budget": error_budget, "bit_widths": list(bit_widths), "cloud_bits": 16,
            "transmit_bits": transmit_bits,
        },
    })


def edge_set(inst, plan):
    return set(edge_layers(inst, plan))


# ----- Neurosurgeon vs min-cut on a skip connection --------------------------------------------
def skip_dag(memory=1e9):
    """x (30 ms) -> a (10 ms out) -> b -> c -> d -> e, with the skip a -> d.

    Edge ms a, b, c = 1, d = 8, e = 50; cloud ms 5 each; b, c, d outputs 0.2 ms.
    True latencies of the prefixes k: 55, 31, 27.2, 23.2, 16.2, 61; chain estimates for
    k = 2, 3 miss a's output (10 ms): 17.2, 13.2."""
    return make([
        layer("a", ["x"], 5000),
        layer("b", ["a"], 100),
        layer("c", ["b"], 100),
        layer("d", ["c", "a"], 100, edge=8.0),
        layer("e", ["d"], 10, edge=50.0),
    ], x=30000, memory=memory)


def test_neurosurgeon_chain_estimate_picks_worse_split_than_min_cut():
    inst = skip_dag()
    est = [c.estimate_ms for c in chain_scan(inst)]
    assert est == pytest.approx([55.0, 31.0, 17.2, 13.2, 16.2, 61.0])

    ns = method("neurosurgeon", inst)
    assert ns.status is Status.FEASIBLE and ns.objective is None and ns.bound is None
    assert edge_set(inst, ns.plan) == {"a", "b", "c"}
    assert ns.extra["estimate_ms"] == pytest.approx(13.2)
    m = evaluate(inst, ns.plan)
    assert m.total_ms == pytest.approx(23.2)  # a's output crosses the cut too
    assert dict(m.sent_tensors) == pytest.approx({"a": 10000.0, "c": 200.0})

    qd = method("qdmp", inst)
    assert qd.status is Status.FEASIBLE and qd.bound is None
    assert edge_set(inst, qd.plan) == {"a", "b", "c", "d"}
    assert qd.extra["cut_value_ms"] == pytest.approx(16.2)
    assert qd.objective == pytest.approx(16.2)
    assert evaluate(inst, qd.plan).total_ms == pytest.approx(16.2)


def test_neurosurgeon_chain_memory_misses_a_live_skip_tensor():
    """a, b, c outputs 10,000 B each, d reads c and a. Chain memory of k = 4 is 20,000 B
    (max in + out); the evaluator holds a, b and c at once: 30,000 B > 25,000 B."""
    inst = make([
        layer("a", ["x"], 5000),
        layer("b", ["a"], 5000),
        layer("c", ["b"], 5000),
        layer("d", ["c", "a"], 10),
    ], memory=25000)
    scan = chain_scan(inst)
    assert [c.memory_bytes for c in scan] == pytest.approx([0, 11000, 20000, 20000, 20000])
    ns = method("neurosurgeon", inst)
    assert edge_set(inst, ns.plan) == {"a", "b", "c", "d"}
    assert ns.status is Status.NO_SOLUTION_FOUND
    assert "edge memory 30,000 B" in ns.message
    assert evaluate(inst, ns.plan).edge_memory_bytes == pytest.approx(30000)


def test_neurosurgeon_respects_its_memory_estimate():
    inst = skip_dag(memory=15000)  # k >= 1 needs x + a = 40,000 B in the chain model
    ns = method("neurosurgeon", inst)
    assert edge_set(inst, ns.plan) == set() and ns.status is Status.FEASIBLE


# ----- min-cut ------------------------------------------------------------------------------
def test_min_cut_pays_a_fanned_out_tensor_once():
    """a's output (10 ms) feeds b and c, both best on the cloud. Edge {a}: 1 + 10 + 3 = 14;
    cloud-only: 15 + 8 = 23. Charging a's output per reader (24) would pick cloud-only."""
    inst = make([
        layer("a", ["x"], 5000, edge=1.0, cloud=5.0),
        layer("b", ["a"], 10, edge=100.0, cloud=1.0),
        layer("c", ["a"], 10, edge=100.0, cloud=1.0),
        layer("d", ["b", "c"], 10, edge=100.0, cloud=1.0),
    ], x=15000)
    edge, value = min_cut(inst)
    assert edge == {"a"}
    assert value == pytest.approx(14.0)
    qd = method("qdmp", inst)
    m = evaluate(inst, qd.plan)
    assert m.total_ms == pytest.approx(14.0)
    assert m.transmitted_bytes == pytest.approx(10000.0)


def test_min_cut_ignores_memory_and_says_so():
    inst = skip_dag(memory=15000)
    qd = method("qdmp", inst)
    assert edge_set(inst, qd.plan) == {"a", "b", "c", "d"}
    assert qd.status is Status.NO_SOLUTION_FOUND and "edge memory" in qd.message


def random_dag(seed, problem="split", link_latency=0.0, memory=1e12, error_budget=None):
    """A random DAG of 2..8 layers (networkx G(n, p), arcs from lower to higher index);
    layers without a predecessor, and a few others, read the raw input x."""
    rng = random.Random(seed)
    n = rng.randint(2, 8)
    g = nx.gnp_random_graph(n, rng.uniform(0.2, 0.7), seed=seed, directed=True)
    layers = []
    for v in range(n):
        preds = sorted(u for u in g.predecessors(v) if u < v)
        inputs = [f"l{u}" for u in preds]
        if not inputs or rng.random() < 0.15:
            inputs.append("x")
        errs = dict(zip((8, 4, 2), sorted(rng.uniform(0.0, 0.1) for _ in range(3))))
        layers.append(layer(
            f"l{v}", inputs, int(10 ** rng.uniform(1.5, 4.3)),
            edge=round(rng.uniform(0.1, 10.0), 3), cloud=round(rng.uniform(0.1, 3.0), 3),
            weights=rng.randint(0, 5000),
            werr={b: e / 2 for b, e in errs.items()}, aerr=errs,
        ))
    return make(layers, x=rng.randint(1000, 40000), problem=problem, link_latency=link_latency,
                memory=memory, error_budget=error_budget)


def closed_edge_sets(inst):
    """Every set of layers closed under predecessors (the valid edge sides)."""
    names = [l.name for l in inst.layers]
    for r in range(len(names) + 1):
        for subset in itertools.combinations(names, r):
            s = set(subset)
            if all(src in s or src in inst.input_by_name for n in s for src in inst.layer_by_name[n].inputs):
                yield s


def test_random_dags_have_nontrivial_optima():
    """The enumeration test below is only as strong as its sample: many optima must be
    strict splits, some of them not a prefix of the execution order."""
    split = nonprefix = 0
    for seed in range(50):
        inst = random_dag(seed)
        edge, _ = min_cut(inst)
        names = [l.name for l in inst.layers]
        split += 0 < len(edge) < len(names)
        nonprefix += edge != set(names[: len(edge)])
    assert split >= 10 and nonprefix >= 5


@pytest.mark.parametrize("seed", range(50))
def test_min_cut_equals_enumeration_of_closed_edge_sets(seed):
    inst = random_dag(seed)
    best = min(evaluate(inst, uniform_plan(inst, s)).total_ms for s in closed_edge_sets(inst))
    edge, value = min_cut(inst)
    true = evaluate(inst, uniform_plan(inst, edge)).total_ms
    assert value == pytest.approx(true, rel=1e-9)
    assert value == pytest.approx(best, rel=1e-9)
    # Neurosurgeon scans only prefixes with a chain model: never better than the optimum
    ns = method("neurosurgeon", inst)
    assert evaluate(inst, ns.plan).total_ms >= best * (1 - 1e-9)


def test_min_cut_value_misses_only_the_fixed_link_latency():
    for seed in range(10):
        inst = random_dag(seed, link_latency=3.0)
        qd = method("qdmp", inst)
        m = evaluate(inst, qd.plan)
        assert qd.objective is None
        assert m.total_ms == pytest.approx(qd.extra["cut_value_ms"] + (3.0 if m.transmitted_bytes > 0 else 0.0))


# ----- AUTO-SPLIT -----------------------------------------------------------------------------
def bits_chain(error_budget=None, memory=10000, x=1000, transmit_bits=None):
    """x (1,000 B) -> a (2,000 el.) -> b (200 el.) -> c (10 el., 100,000 weights), bits {4, 8}.

    Edge 1 ms per layer, cloud 2 ms. T_0 = 1,000 B; at 4 bits T_1 = 1,000, T_2 = 100, so
    P = {0, 1, 2}: n = 3 needs 4 * (102,000 + 2,000) / 8 = 52,000 B > 10,000 B.
    Cloud-only 7 ms; n = 2 with b's output at 8 bits: 2 + 0.2 + 2 = 4.2 ms, error
    (weights 0.01 + activations 0.02) per layer = 0.06 at W8A8."""
    werr, aerr = {4: 0.1, 8: 0.01}, {4: 0.2, 8: 0.02}
    if transmit_bits is not None:  # a sent tensor reaches the cloud at transmit_bits: its error is needed
        aerr = {**aerr, transmit_bits: 0.4}
    return make([
        layer("a", ["x"], 2000, edge=1.0, cloud=2.0, weights=1000, werr=werr, aerr=aerr),
        layer("b", ["a"], 200, edge=1.0, cloud=2.0, weights=1000, werr=werr, aerr=aerr),
        layer("c", ["b"], 10, edge=1.0, cloud=2.0, weights=100000, werr=werr, aerr=aerr),
    ], x=x, problem="split_bits", bit_widths=(4, 8), memory=memory, error_budget=error_budget,
       transmit_bits=transmit_bits)


def test_auto_split_potential_splits_eq6():
    assert potential_splits(bits_chain()) == [0, 1, 2]
    assert potential_splits(bits_chain(memory=1e6)) == [0, 1, 2, 3]
    # raw input 500 B: a's output (1,000 B at 4 bits) costs more than sending x
    assert potential_splits(bits_chain(x=500)) == [0, 2]
    # ... unless outputs are sent at 2 bits (500 B)
    assert potential_splits(bits_chain(x=500, transmit_bits=2)) == [0, 1, 2]


@pytest.mark.parametrize("seed", range(30))
def test_auto_split_cut_sizes_in_one_sweep_equal_the_cut_by_cut_sum(seed):
    """Eq. 6's T_n for every n from one difference-array sweep (integers in bits) equals
    the sum over the tensors crossing each cut, exactly, at every transmitted precision."""
    inst = random_dag(seed, problem="split_bits")
    for bits in sorted(inst.settings.bit_widths):
        assert cut_bytes_all(inst, bits) == [cut_bytes(inst, n, bits) for n in range(len(inst.layers) + 1)]


def test_auto_split_stops_at_the_deadline_with_the_best_candidate_so_far():
    """Past its deadline Algorithm 1 stops after the candidate in hand (cloud-only first)
    and says so; with time it builds the whole list."""
    import time

    inst = random_dag(3, problem="split_bits")
    late = get_backend("auto-split", EDGE_CLOUD).solve(EDGE_CLOUD, inst, SolveOptions(deadline=time.monotonic() - 1))
    assert late.status is Status.FEASIBLE and edge_layers(inst, late.plan) == []
    assert late.extra["candidates"] == 1 and late.extra["stopped_by"] == "time limit"
    assert "the time limit stopped Algorithm 1 after 1 candidates" in late.message
    full = method("auto-split", inst)
    assert full.extra["candidates"] == len(candidates(inst)) and "stopped_by" not in full.extra


def test_auto_split_activation_bits_eq9():
    """a has 2,000 output elements (2,000 B at 8 bits), b 200: under 1,000 B a must drop
    to 4 bits, b keeps its lowest-error 8 bits."""
    inst = bits_chain()
    assert activation_bits(inst, ["a", "b"], 1000.0) == {"a": 4, "b": 8}
    assert activation_bits(inst, ["a", "b"], 2000.0) == {"a": 8, "b": 8}


def test_auto_split_hand_case():
    inst = bits_chain()
    out = method("auto-split", inst)
    assert out.status is Status.FEASIBLE and out.bound is None
    assert edge_layers(inst, out.plan) == ["a", "b"]
    assert {n: (out.plan.weight_bits[n], out.plan.activation_bits[n]) for n in "ab"} == {"a": (8, 8), "b": (8, 8)}
    m = evaluate(inst, out.plan)
    assert m.total_ms == pytest.approx(4.2)
    assert m.error == pytest.approx(0.06)


def test_auto_split_honours_the_error_budget():
    """Budget 0.05: every n = 2 candidate has error >= 0.06; n = 1 at W8A8 (error 0.03)
    costs 1 + 2 + 4 = 7 ms, tied with cloud-only, which wins on error."""
    inst = bits_chain(error_budget=0.05)
    out = method("auto-split", inst)
    assert out.status is Status.FEASIBLE
    assert edge_layers(inst, out.plan) == []
    assert evaluate(inst, out.plan).total_ms == pytest.approx(7.0)


def test_lagrangian_knapsack_mixes_bit_widths():
    """Two layers of 1,000 weights at 4 or 8 bits (500 or 1,000 B), budget 1,500 B:
    p loses 0.5 at 4 bits, q only 0.1, so the optimum keeps p at 8 and drops q to 4."""
    options = {
        "p": [(500.0, 0.5, 4), (1000.0, 0.0, 8)],
        "q": [(500.0, 0.1, 4), (1000.0, 0.0, 8)],
    }
    assert lagrangian_choice(options, 1500.0) == {"p": 8, "q": 4}
    assert lagrangian_choice(options, 2000.0) == {"p": 8, "q": 8}
    assert lagrangian_choice(options, 1000.0) == {"p": 4, "q": 4}


@pytest.mark.parametrize("seed", range(12))
def test_auto_split_never_worse_than_cloud_only_and_meets_budgets(seed):
    rng = random.Random(1000 + seed)
    inst = random_dag(seed, problem="split_bits", memory=rng.choice([3000, 10000, 40000, 1e9]),
                      error_budget=rng.choice([None, 0.02, 0.1, 0.3]))
    out = method("auto-split", inst)
    assert out.status is Status.FEASIBLE
    m = evaluate(inst, out.plan)
    assert m.feasible
    cloud = evaluate(inst, uniform_plan(inst, []))
    assert m.total_ms <= cloud.total_ms * (1 + 1e-12)
    cands = candidates(inst)
    feasible = [c.metrics.total_ms for c in cands if c.metrics.feasible]
    assert m.total_ms == pytest.approx(min(feasible))
    # Remark 5: never worse than the edge-only solutions it considers
    for c in cands:
        if c.n == len(inst.layers) and c.metrics.feasible:
            assert m.total_ms <= c.metrics.total_ms * (1 + 1e-12)


# ----- edge-only, u8, cloud-only --------------------------------------------------------------
def uniform_case(error_budget=None, memory=1e9):
    """Two layers whose edge latency falls with bits: w4a4 1 ms, w8a8 2 ms each (mixed
    pairs 1.5 ms; the table must cover every candidate pair); errors per layer 0.3 at 4
    bits, 0.03 at 8 bits."""
    edge = {"w4a4": 1.0, "w8a8": 2.0, "w4a8": 1.5, "w8a4": 1.5}
    werr, aerr = {4: 0.1, 8: 0.01}, {4: 0.2, 8: 0.02}
    return make([
        layer("a", ["x"], 100, edge=edge, weights=100, werr=werr, aerr=aerr),
        layer("b", ["a"], 100, edge=edge, weights=100, werr=werr, aerr=aerr),
    ], problem="split_bits", bit_widths=(4, 8), error_budget=error_budget, memory=memory)


@pytest.mark.parametrize("budget, bits, status", [
    (None, 4, Status.FEASIBLE),              # fastest
    (0.1, 8, Status.FEASIBLE),               # 4 bits: error 0.6 > 0.1
    (0.01, 8, Status.NO_SOLUTION_FOUND),     # none fits: the lowest-error one
])
def test_edge_only_picks_the_fastest_uniform_bits_within_budget(budget, bits, status):
    inst = uniform_case(budget)
    out = method("edge-only", inst)
    assert out.status is status
    assert set(out.plan.weight_bits.values()) == set(out.plan.activation_bits.values()) == {bits}
    assert edge_set(inst, out.plan) == {"a", "b"}
    assert out.objective == pytest.approx(evaluate(inst, out.plan).total_ms) == pytest.approx(2.0 * (1 if bits == 4 else 2))
    if status is Status.NO_SOLUTION_FOUND:
        assert "quantization error" in out.message


def test_u8_runs_everything_at_8_bits_and_reports_memory():
    inst = bits_chain()  # c alone holds 100,000 weights: 100,000 B at 8 bits > 10,000 B
    out = method("u8", inst)
    assert out.status is Status.NO_SOLUTION_FOUND and "edge memory" in out.message
    assert edge_set(inst, out.plan) == {"a", "b", "c"}
    assert set(out.plan.weight_bits.values()) == set(out.plan.activation_bits.values()) == {8}
    assert out.objective == pytest.approx(3.0)


def test_u8_not_applicable_without_8_bits():
    inst = make([layer("a", ["x"], 10, werr={2: 0.1, 4: 0.01}, aerr={2: 0.1, 4: 0.01})],
                problem="split_bits", bit_widths=(2, 4))
    with pytest.raises(NotApplicable, match="8"):
        method("u8", inst)


def test_cloud_only_sends_the_raw_input():
    inst = skip_dag()
    out = method("cloud-only", inst)
    assert out.status is Status.FEASIBLE and edge_set(inst, out.plan) == set()
    assert out.objective == pytest.approx(55.0) == pytest.approx(evaluate(inst, out.plan).total_ms)


def test_float_baselines_refuse_split_bits():
    with pytest.raises(NotApplicable, match="split_bits"):
        method("qdmp", bits_chain())


# ----- every baseline: a well-formed plan, honest status and objective ------------------------
ALL = [m for m in EDGE_CLOUD.methods()]


@pytest.mark.parametrize("backend", ALL, ids=lambda b: b.name)
@pytest.mark.parametrize("case", ["skip", "chain", "rand3", "rand7"])
def test_every_baseline_returns_a_valid_plan(backend, case):
    inst = {
        "skip": lambda: skip_dag(memory=30000),
        "chain": lambda: bits_chain(error_budget=0.2),
        "rand3": lambda: random_dag(3, problem="split_bits", memory=20000, error_budget=0.1),
        "rand7": lambda: random_dag(7, problem="split_bits", memory=5000, error_budget=0.05),
    }[case]()
    problems = backend.problems or EDGE_CLOUD.problems
    if inst.problem not in problems:
        if problems != ("split",):
            pytest.skip(f"{backend.name} needs split_bits")
        inst = inst.with_settings(problem="split")
    assert backend.kind == "baseline"
    out = method(backend.name, inst)
    check_plan(inst, out.plan)
    m = evaluate(inst, out.plan)
    assert out.bound is None
    assert out.status is (Status.FEASIBLE if m.feasible else Status.NO_SOLUTION_FOUND)
    if out.objective is not None:
        assert out.objective == pytest.approx(m.total_ms, rel=1e-9)
