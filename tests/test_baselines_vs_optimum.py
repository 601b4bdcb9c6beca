"""No baseline beats the optimum: on random instances of both problems, every baseline
plan that meets the budgets costs at least the brute-force optimum of the problem it
ran on (float baselines run the float problem of a split_bits instance)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitopt.errors import NotApplicable
from splitopt.solve import solve
from splitopt.solvers import registry
from splitopt.synthetic import random_instance

BASELINES = [n for n in registry.names("baseline") if {"split", "split_bits"} & set(registry.backend_class(n).problems)]


@functools.lru_cache(maxsize=256)
def optimum(seed: int, n_layers: int, problem: str, bits: tuple[int, ...]):
    inst = random_instance(seed, n_layers, problem="split_bits", bit_widths=bits)
    if problem == "split":
        inst = inst.with_settings(problem="split")
    return solve(inst, "brute-force")


@pytest.mark.parametrize("baseline", BASELINES)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_layers=st.integers(3, 5), bits=st.sampled_from([(4, 8), (2, 8)]))
def test_baseline_never_beats_the_optimum(baseline, seed, n_layers, bits):
    inst = random_instance(seed, n_layers, problem="split_bits", bit_widths=bits)
    try:
        res = solve(inst, baseline)
    except NotApplicable:
        return
    best = optimum(seed, n_layers, res.problem, bits)
    if res.metrics is not None and res.metrics.feasible:
        assert best.objective is not None, "brute force found no feasible plan but the baseline did"
        assert res.objective >= best.objective * (1 - 1e-9) - 1e-12, (baseline, res.objective, best.objective)
