"""The contract suites of ``splitopt.testing.contracts`` over every registered family and
backend: registering a family or a backend is all it takes to be checked here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitopt.families.registry import FAMILIES, family
from splitopt.testing import contracts

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)


def examples_of(name: str) -> int:
    """Examples per check for the family (``Family.contract_examples``: brute force on
    multiview and mesh costs the most)."""
    return family(name).contract_examples


def examples(n: int):
    return settings(max_examples=n, deadline=None)


def for_seeds(n: int, check, *args) -> None:
    """Run ``check(*args, seed)`` on ``n`` hypothesis-drawn seeds."""
    @examples(n)
    @given(seed=SEEDS)
    def run(seed):
        check(*args, seed)

    run()


@pytest.mark.parametrize("family", FAMILIES)
def test_protocol(family):
    contracts.check_protocol(family)


@pytest.mark.parametrize("backend", contracts.EXACT_BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_exact_matches_brute_force(family, backend):
    for_seeds(examples_of(family), contracts.check_exact_matches_brute_force, family, backend)


@pytest.mark.parametrize("family", FAMILIES)
def test_program_agrees_with_evaluator(family):
    for_seeds(40, contracts.check_program_agrees_with_evaluator, family)


@pytest.mark.parametrize("family", FAMILIES)
def test_methods_never_beat_the_optimum(family):
    for_seeds(max(10, examples_of(family) // 2), contracts.check_methods_never_beat_the_optimum, family)


@pytest.mark.parametrize("family", FAMILIES)
def test_plan_json_round_trip(family):
    for_seeds(20, contracts.check_plan_json_round_trip, family)


@pytest.mark.parametrize("family", FAMILIES)
def test_start_plan(family):
    for_seeds(20, contracts.check_start_plan, family)


@pytest.mark.parametrize("family", FAMILIES)
def test_exact_backends_never_worse_than_their_hints(family):
    for_seeds(15, contracts.check_exact_never_worse_than_hints, family)


@pytest.mark.parametrize("backend", contracts.EXACT_BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_plan(family, backend):
    for_seeds(5, contracts.check_same_seed_same_plan, family, backend)


@pytest.mark.parametrize("family", FAMILIES)
def test_lower_bound_never_exceeds_the_optimum(family):
    for_seeds(examples_of(family), contracts.check_lower_bound, family)


@pytest.mark.parametrize("family", FAMILIES)
def test_search_space(family):
    for_seeds(20, contracts.check_search_space, family)


HEURISTICS = contracts.heuristic_backends()
#: examples per family for each heuristic (REINFORCE trains a torch policy: fewer)
HEURISTIC_EXAMPLES = {"evolutionary": 25, "q-learning": 15, "reinforce": 6}


@pytest.mark.parametrize("backend", HEURISTICS)
@pytest.mark.parametrize("family", FAMILIES)
def test_heuristic(family, backend):
    for_seeds(HEURISTIC_EXAMPLES.get(backend, 10), contracts.check_heuristic, family, backend)


#: draws per family for the optimum rate of evolutionary search, and the least rate
OPTIMUM_DRAWS = 30
OPTIMUM_RATE = 0.8


@pytest.mark.parametrize("family", FAMILIES)
def test_evolutionary_search_finds_the_brute_force_optimum_in_most_draws(family):
    """On small random instances, 2,000 evaluations of evolutionary search reach the
    brute-force optimum in at least 80 % of the draws where a feasible plan exists (the
    rates measured are in docs/guide/verification.md)."""
    found = [contracts.heuristic_finds_optimum(family, "evolutionary", seed, 2000) for seed in range(OPTIMUM_DRAWS)]
    judged = [f for f in found if f is not None]
    assert len(judged) >= OPTIMUM_DRAWS // 3, f"only {len(judged)} draws had a feasible optimum"
    rate = sum(judged) / len(judged)
    assert rate >= OPTIMUM_RATE, f"evolutionary reached the optimum in {sum(judged)} of {len(judged)} draws"


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_returns_the_optimum_or_an_honest_gap(family):
    for_seeds(8, contracts.check_auto, family)
