"""The edge/cloud family's relaxation bound (``splitopt/families/edge_cloud/bound.py``,
one minimum cut through ``splitopt/core/layered_cut.py``) against brute force, and the
cut itself against every monotone labelling of small random problems."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitopt.core.layered_cut import LayeredCut, solve_layered_cut
from splitopt.core.result import Status
from splitopt.families.edge_cloud.bound import edge_cloud_lower_bound, relaxed_cut_plan
from splitopt.families.edge_cloud.evaluate import evaluate
from splitopt.families.registry import family
from splitopt.solve import solve
from splitopt.families.edge_cloud.examples import random_instance
from splitopt.families.edge_cloud.plan import edge_layers
from splitopt.families.edge_cloud.data import required_on_edge


def random_problem(rng, n: int, K: int) -> tuple[LayeredCut, list[list[int]]]:
    """A random DAG (each layer reads 1-2 earlier layers or a raw input), random costs,
    some pins; returns the problem and each layer's producers (-1: raw input)."""
    ints = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    producers = []
    for i in range(n):
        k = int(rng.integers(1, 3))
        producers.append(sorted({int(rng.integers(-1, i)) for _ in range(k)}))
    readers: dict[int, list[int]] = {}
    for i, ps in enumerate(producers):
        for p in ps:
            readers.setdefault(p, []).append(i)
    flow_r = [i for i, ps in enumerate(producers) for p in ps if p >= 0]
    flow_p = [p for ps in producers for p in ps if p >= 0]
    single, multi = [t for t, r in readers.items() if len(r) == 1], [t for t, r in readers.items() if len(r) > 1]
    cost = lambda: rng.uniform(0, 3, K) * (rng.random(K) < 0.8)  # noqa: E731
    pinned = [i for i in range(n) if rng.random() < 0.1]
    problem = LayeredCut(
        unary=rng.uniform(0, 5, (n, K + 1)) * (rng.random((n, K + 1)) < 0.9),
        flow_reader=ints(flow_r), flow_producer=ints(flow_p),
        single_producer=ints(single), single_reader=ints([readers[t][0] for t in single]),
        single_cost=np.array([cost() for _ in single]).reshape(len(single), K),
        multi_producer=ints(multi), multi_cost=np.array([cost() for _ in multi]).reshape(len(multi), K),
        multi_reader_tensor=ints([a for a, t in enumerate(multi) for _ in readers[t]]),
        multi_reader_layer=ints([r for t in multi for r in readers[t]]),
        fixed=rng.uniform(0, 2, K) * (rng.random(K) < 0.5),
        sinks=ints([i for i in range(n) if i not in readers]), pinned=ints(pinned))
    return problem, producers


def labelling_cost(problem: LayeredCut, producers, labels) -> float | None:
    """The cost of ``labels`` by the module docstring's definition (None: not monotone or
    a pin broken)."""
    n, K = problem.unary.shape[0], problem.unary.shape[1] - 1
    label = lambda p: 0 if p < 0 else labels[p]  # noqa: E731
    if any(label(p) > labels[i] for i, ps in enumerate(producers) for p in ps):
        return None
    if any(labels[i] != 0 for i in problem.pinned):
        return None
    total = sum(problem.unary[i, labels[i]] for i in range(n))
    tensors = [(int(p), [int(r)], problem.single_cost[j]) for j, (p, r) in
               enumerate(zip(problem.single_producer, problem.single_reader))]
    for a, p in enumerate(problem.multi_producer):
        tensors.append((int(p), [int(r) for t, r in zip(problem.multi_reader_tensor, problem.multi_reader_layer)
                                 if t == a], problem.multi_cost[a]))
    for m in range(K):
        for p, rs, c in tensors:
            if label(p) <= m and any(labels[r] > m for r in rs):
                total += c[m]
        if any(labels[i] > m for i in range(n)):
            total += problem.fixed[m]
    return total


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), K=st.integers(1, 3))
def test_layered_cut_is_the_least_monotone_labelling(seed, n, K):
    """Here every layer reads something, so a level's fixed cost is paid exactly when
    some layer lies above it (the callers' condition)."""
    problem, producers = random_problem(np.random.default_rng(seed), n, K)
    costs = [c for labels in itertools.product(range(K + 1), repeat=n)
             if (c := labelling_cost(problem, producers, labels)) is not None]
    cut = solve_layered_cut(problem)
    best = min(costs)
    assert cut.bound_ms <= best * (1 + 1e-12) + 1e-12
    found = labelling_cost(problem, producers, cut.labels)
    assert found is not None and found == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert found <= cut.bound_ms + cut.slack_ms + 1e-9 * max(1.0, found)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 5), problem=st.sampled_from(["split", "split_bits"]),
       pinned=st.booleans())
def test_edge_cloud_bound_never_exceeds_the_optimum(seed, n, problem, pinned):
    inst = random_instance(seed, n, problem=problem, edge_required=pinned)
    ref = solve(inst, "brute-force")
    bound = edge_cloud_lower_bound(inst)
    plan = relaxed_cut_plan(inst)
    metrics = evaluate(inst, plan)
    assert set(required_on_edge(inst)) <= set(edge_layers(inst, plan))
    if ref.status is Status.OPTIMAL:
        assert bound <= ref.objective * (1 + 1e-9) + 1e-12
        if metrics.feasible:
            assert metrics.objective_ms >= ref.objective * (1 - 1e-9)
    start = family("edge_cloud").start_plan(inst)
    if start is not None and evaluate(inst, start).feasible and ref.status is Status.OPTIMAL:
        assert evaluate(inst, start).objective_ms >= ref.objective * (1 - 1e-9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 7))
def test_float_split_without_binding_limits_is_the_cut(seed, n):
    """On ``split`` (one bit-width) with loose memory and no error budget the relaxation
    is the problem itself: the cut's plan is the brute-force optimum."""
    inst = random_instance(seed, n, problem="split")
    inst = inst.with_settings(error_budget=None)
    ref = solve(inst, "brute-force")
    plan = relaxed_cut_plan(inst)
    metrics = evaluate(inst, plan)
    if metrics.feasible:
        assert metrics.objective_ms == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
        assert edge_cloud_lower_bound(inst) == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
