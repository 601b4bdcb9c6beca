"""Edge/cloud hand cases: the brute-force reference checked against an independent
enumeration (every layer on the cloud or on the edge at every bit pair, malformed plans
discarded by the evaluator) and against optima derived by hand; every exact backend on
the same hand cases. (Exact backends against brute force on random instances of every
family: ``tests/test_contracts.py``.)
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings

from splitopt import InvalidPlan, NotApplicable, Status, evaluate, parse_instance
from splitopt.backends.brute_force import MAX_PLANS, BruteForceBackend
from splitopt.core.instance_io import to_dict
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.enumerate import all_plans, count_plans, down_sets
from splitopt.families.registry import family
from splitopt.solve import solve
from splitopt.testing.contracts import EXACT_BACKENDS
from splitopt.families.edge_cloud.examples import random_instance

from splitopt.families.edge_cloud.strategies import instances
from splitopt.families.edge_cloud.plan import edge_cloud_plan, edge_layers
from splitopt.families.edge_cloud.data import candidate_bits

REL, ABS = 1e-6, 1e-9  # objective agreement: relative, plus absolute (ms)


def brute(inst, limit: int = MAX_PLANS):
    """The brute-force backend's own output on an edge/cloud instance."""
    return BruteForceBackend(limit).solve(family("edge_cloud"), inst, SolveOptions())


def same_objective(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b)) + ABS


# ----- hand instances -----------------------------------------------------------------------

def hand(layers, inputs=(("x", 1000, 8),), link_latency_ms=0.0, **settings):
    """Edge 'e' and cloud 'c', compute-only (1e9 and 1e12 MAC/s); uplink 8e6 bit/s
    (1000 B = 1 ms) plus ``link_latency_ms``; candidates [4, 8], reference 16."""
    s = {"problem": "split_bits", "edge": "e", "cloud": "c", "edge_memory_bytes": 1e9,
         "error_budget": None, "bit_widths": [4, 8], "cloud_bits": 16}
    s.update(settings)
    for l in layers:
        l.setdefault("op", "op")
        l.setdefault("macs", 0.0)
        l.setdefault("weights", 0.0)
        l.setdefault("activation_error", {"4": 0.02, "8": 0.01})
        if l["weights"] > 0:
            l.setdefault("weight_error", {"4": 0.04, "8": 0.02})
    return parse_instance({
        "format": "splitopt-instance/1", "name": "hand",
        "graph": {"inputs": [{"name": n, "shape": [e], "bits": b} for n, e, b in inputs], "layers": layers},
        "devices": [
            {"name": "e", "mac_per_s": 1e9, "offchip_bytes_per_s": None, "onchip_bytes": 1e5,
             "memory_bytes": 1e9, "bit_widths": [4, 8, 16]},
            {"name": "c", "mac_per_s": 1e12, "offchip_bytes_per_s": None, "onchip_bytes": 1e7,
             "memory_bytes": 1e12, "bit_widths": [8, 16]},
        ],
        "links": [{"source": "e", "target": "c", "bandwidth_bits_per_s": 8e6, "latency_ms": link_latency_ms}],
        "settings": s,
    })


def two_layer(**settings):
    """x (1000 el, 8 bits = 1000 B) -> a (100 el) -> b (10 el, the output).

    Latency (ms) from overrides: a on the edge 1 at w4, 2 at w8; b on the edge 5; each on
    the cloud 0.5. a: 100 weights, errors w {4: .3, 8: .1}, a {4: .2, 8: .05}.
    Plans: cloud-only   x 1000 B = 1 ms + 0.5 + 0.5                 = 2.0,  error 0
           {a} w4 a4    1 + a 50 B = 0.05 + 0.5                     = 1.55, error 0.5
           {a} w4 a8    1 + a 100 B = 0.1 + 0.5                     = 1.6,  error 0.35
           {a} w8 a4    2 + 0.05 + 0.5                              = 2.55, error 0.3
           {a} w8 a8    2 + 0.1 + 0.5                               = 2.6,  error 0.15
           {a, b}       >= 1 + 5 (b is the output: nothing sent)    >= 6
    Edge memory of {a}: x 1000 + a (50 or 100) + weights (50 or 100) > 1000."""
    return hand([
        {"name": "a", "inputs": ["x"], "output_shape": [100], "weights": 100,
         "weight_error": {"4": 0.3, "8": 0.1}, "activation_error": {"4": 0.2, "8": 0.05},
         "latency_ms": {"e": {"w4a4": 1, "w4a8": 1, "w8a4": 2, "w8a8": 2}, "c": 0.5}},
        {"name": "b", "inputs": ["a"], "output_shape": [10],
         "latency_ms": {"e": {"w4a4": 5, "w4a8": 5, "w8a4": 5, "w8a8": 5}, "c": 0.5}},
    ], **settings)


#: (instance, optimum in ms, edge set of the optimum or None when ties are possible)
KNOWN = {
    "two-layer free": (lambda: two_layer(), 1.55, ("a",)),
    "two-layer error 0.35": (lambda: two_layer(error_budget=0.35), 1.6, ("a",)),
    "two-layer error 0.2": (lambda: two_layer(error_budget=0.2), 2.0, ()),
    "two-layer error 0": (lambda: two_layer(error_budget=0.0), 2.0, ()),
    "two-layer memory 1000": (lambda: two_layer(edge_memory_bytes=1000.0), 2.0, ()),
    "two-layer memory 1100": (lambda: two_layer(edge_memory_bytes=1100.0), 1.55, ("a",)),
    # edge memory of {a} (weights + x 1000 + a, a held to be sent): w4a4 50 + 1050 = 1100,
    # w4a8 50 + 1100 = 1150, w8a4 100 + 1050 = 1150, w8a8 100 + 1100 = 1200
    "two-layer memory 1099": (lambda: two_layer(edge_memory_bytes=1099.0), 2.0, ()),
    "two-layer memory 1150 error 0.35": (lambda: two_layer(edge_memory_bytes=1150.0, error_budget=0.35), 1.6, ("a",)),
}


def branches(**settings):
    """Two branches: x -> a, x -> b, c reads a and b: {b} is a down-set without a.
    Compute-only analytical latency: MACs a 4e6, b 1e6, c 1e9; outputs a 10 el, b 2000 el,
    c 1 el; x 1000 B. (Cloud-only: 1 ms for x + 0.004 + 0.001 + 1 = 2.005 ms.)"""
    return hand([
        {"name": "a", "inputs": ["x"], "output_shape": [10], "macs": 4e6},
        {"name": "b", "inputs": ["x"], "output_shape": [2000], "macs": 1e6},
        {"name": "c", "inputs": ["a", "b"], "output_shape": [1], "macs": 1e9},
    ], **settings)


def skip_chain(**settings):
    """x -> a -> b -> c, and a -> c (skip); a and c carry weights; 1 ms link latency."""
    return hand([
        {"name": "a", "inputs": ["x"], "output_shape": [300], "macs": 2e5, "weights": 500},
        {"name": "b", "inputs": ["a"], "output_shape": [40], "macs": 1e5},
        {"name": "c", "inputs": ["b", "a"], "output_shape": [5], "macs": 3e6, "weights": 40},
    ], link_latency_ms=1.0, **settings)


HAND = {
    "two-layer": two_layer,
    "two-layer tight": lambda: two_layer(error_budget=0.3, edge_memory_bytes=1200.0),
    "branches": branches,
    "branches transmit 4": lambda: branches(transmit_bits=4, error_budget=0.05),
    "skip": skip_chain,
    "skip tight": lambda: skip_chain(edge_memory_bytes=1700.0, error_budget=0.07),
    "skip transmit 4": lambda: skip_chain(transmit_bits=4),
    "skip split": lambda: skip_chain(problem="split"),
    "skip three bits": lambda: skip_chain(bit_widths=[4, 8, 16], error_budget=0.05),
    "skip required b": lambda: skip_chain(edge_required=["b"], error_budget=0.1),
    "skip required, no plan fits": lambda: skip_chain(edge_required=["a"], edge_memory_bytes=10.0),
}


def independent_optimum(inst) -> float:
    """Least feasible latency by a second, independent enumeration: every layer on the
    cloud or on the edge at every bit pair, all combinations, malformed plans (edge set
    not closed under predecessors) discarded because the evaluator refuses them."""
    bits = candidate_bits(inst)
    options = [None] + [(w, a) for w in bits for a in bits]
    best = float("inf")
    for choice in itertools.product(options, repeat=len(inst.layers)):
        edge = {l.name: c for l, c in zip(inst.layers, choice) if c is not None}
        try:
            m = evaluate(inst, edge_cloud_plan(inst, edge))
        except InvalidPlan:
            continue
        if m.feasible:
            best = min(best, m.total_ms)
    return best


# ----- brute force itself -------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(HAND))
def test_brute_force_matches_an_independent_enumeration(name):
    inst = HAND[name]()
    out = brute(inst)
    if independent_optimum(inst) == float("inf"):
        assert out.status is Status.INFEASIBLE
        return
    assert out.status is Status.OPTIMAL
    m = evaluate(inst, out.plan)
    assert m.feasible
    assert out.objective == m.total_ms == out.bound
    assert same_objective(out.objective, independent_optimum(inst))


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_brute_force_finds_hand_optima(name):
    make, optimum, edge_set = KNOWN[name]
    inst = make()
    out = brute(inst)
    assert out.status is Status.OPTIMAL
    assert out.objective == pytest.approx(optimum)
    assert tuple(edge_layers(inst, out.plan)) == edge_set


@settings(max_examples=25)
@given(instances(problem="split_bits", min_layers=2, max_layers=4, bit_widths=(4, 8)))
def test_brute_force_matches_an_independent_enumeration_on_random_instances(inst):
    out = brute(inst)
    expected = independent_optimum(inst)
    if expected == float("inf"):  # possible only with edge_required
        assert inst.settings.edge_required and out.status is Status.INFEASIBLE and out.plan is None
    else:
        assert out.status is Status.OPTIMAL
        assert same_objective(out.objective, expected)


def test_brute_force_honours_edge_required():
    inst = skip_chain(edge_required=["b"])  # b and its ancestor a on the edge
    out = brute(inst)
    assert out.status is Status.OPTIMAL
    assert edge_layers(inst, out.plan)[:2] == ["a", "b"]
    assert same_objective(out.objective, independent_optimum(inst))
    # a needs 500 weights * 4 bits = 250 B plus x 1000 B: 10 B of memory fits nothing
    tiny = skip_chain(edge_required=["a"], edge_memory_bytes=10.0)
    out = brute(tiny)
    assert out.status is Status.INFEASIBLE and out.plan is None and out.message


@pytest.mark.parametrize("seed", range(5))
def test_brute_force_picks_cloud_only_with_no_error_budget_and_tiny_memory(seed):
    inst = random_instance(seed, 4, bit_widths=[4, 8], edge_required=False).with_settings(
        error_budget=0.0, edge_memory_bytes=1.0)
    out = brute(inst)
    assert out.status is Status.OPTIMAL
    assert edge_layers(inst, out.plan) == []
    assert out.objective == pytest.approx(evaluate(inst, edge_cloud_plan(inst, {})).total_ms)


def test_brute_force_picks_all_edge_when_the_link_is_useless():
    # a 1 bit/s link: sending anything costs ages, and all-edge sends nothing
    inst = skip_chain()
    data = to_dict(inst)
    data["links"][0]["bandwidth_bits_per_s"] = 1.0
    inst = parse_instance(data)
    out = brute(inst)
    assert edge_layers(inst, out.plan) == ["a", "b", "c"]
    # and at the cheapest bits: every latency is compute-only, so any bits tie; the
    # objective is a + b + c on the edge = 0.2 + 0.1 + 3 ms
    assert out.objective == pytest.approx(3.3)


def test_down_sets_are_exactly_the_predecessor_closed_sets():
    for inst in (branches(), skip_chain(), random_instance(3, 6), random_instance(11, 7)):
        names = [l.name for l in inst.layers]
        closed = set()
        for r in range(len(names) + 1):
            for subset in itertools.combinations(names, r):
                s = set(subset)
                if all(src in s for n in s for src in inst.graph.predecessors(n)):
                    closed.add(frozenset(s))
        found = list(down_sets(inst))
        assert len(found) == len(set(found)) == len(closed)
        assert {frozenset(d) for d in found} == closed
        assert all(list(d) == sorted(d, key=inst.position.get) for d in found)


def test_count_plans():
    inst = skip_chain()  # down-sets: {}, {a}, {a,b}, {a,b,c}; 4 pairs: 1 + 4 + 16 + 64
    assert count_plans(inst) == 85 == sum(1 for _ in all_plans(inst))
    assert count_plans(skip_chain(problem="split")) == 4
    assert count_plans(inst, stop_above=10) > 10


def test_brute_force_refuses_too_many_plans():
    with pytest.raises(NotApplicable) as info:
        brute(skip_chain(), limit=84)
    msg = str(info.value)
    assert "\n" not in msg and "84" in msg and "brute-force" in msg
    assert brute(skip_chain(), limit=85).status is Status.OPTIMAL
    big = random_instance(0, 12, bit_widths=[2, 4, 8])
    with pytest.raises(NotApplicable, match="200,000"):
        brute(big)


def test_brute_force_is_deterministic():
    inst = random_instance(5, 5, bit_widths=[4, 8])
    a = brute(inst)
    b = brute(inst)
    assert a.plan.key() == b.plan.key() and a.objective == b.objective


# ----- every exact backend on the hand cases (random instances: tests/test_contracts.py) ---------

EXACT = list(EXACT_BACKENDS)


def brute_force_optimum(inst) -> float | None:
    """Brute force's optimum (None: no plan is feasible)."""
    out = brute(inst)
    assert out.status in (Status.OPTIMAL, Status.INFEASIBLE)
    return out.objective if out.status is Status.OPTIMAL else None


def check_contract(name: str, inst, optimum: float | None) -> None:
    """OPTIMAL with a feasible plan at the optimum; INFEASIBLE when ``optimum`` is None."""
    res = solve(inst, solver=name)
    where = f"{name} on {inst.name}"
    if optimum is None:
        assert res.status is Status.INFEASIBLE, f"{where}: {res.status}, brute force proves no plan feasible"
        return
    assert res.status is Status.OPTIMAL, f"{where}: {res.status} {res.message}"
    assert res.plan is not None, where
    m = evaluate(inst, res.plan)
    assert m.feasible, f"{where}: {m.violations}"
    assert same_objective(res.objective, m.total_ms), f"{where}: objective {res.objective} != evaluated {m.total_ms}"
    assert same_objective(res.objective, optimum), f"{where}: objective {res.objective} != brute force {optimum}"
    if res.bound is not None:
        assert res.bound <= res.objective + REL * abs(res.objective) + ABS, where


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("case", sorted(KNOWN))
def test_exact_known_optima(name, case):
    make, optimum, _ = KNOWN[case]
    check_contract(name, make(), optimum)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("case", sorted(HAND))
def test_exact_vs_brute_force_hand(name, case):
    inst = HAND[case]()
    check_contract(name, inst, brute_force_optimum(inst))
