"""The contract suites of ``splitopt.testing.contracts`` over every registered family and
backend: registering a family or a backend is all it takes to be checked here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitopt.families.registry import FAMILIES
from splitopt.testing import contracts

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
#: examples per family and check (brute force on multiview and mesh costs the most)
EXAMPLES = {"edge_cloud": 200, "chain": 150, "mesh": 100, "multiview": 80, "maxload": 150}


def examples(n: int):
    return settings(max_examples=n, deadline=None)


@pytest.mark.parametrize("family", FAMILIES)
def test_protocol(family):
    contracts.check_protocol(family)


@pytest.mark.parametrize("backend", contracts.EXACT_BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_exact_matches_brute_force(family, backend):
    @examples(EXAMPLES[family])
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_exact_matches_brute_force(family, backend, seed)

    run()


@pytest.mark.parametrize("family", FAMILIES)
def test_program_agrees_with_evaluator(family):
    @examples(40)
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_program_agrees_with_evaluator(family, seed)

    run()


@pytest.mark.parametrize("family", FAMILIES)
def test_methods_never_beat_the_optimum(family):
    @examples(max(10, EXAMPLES[family] // 2))
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_methods_never_beat_the_optimum(family, seed)

    run()


@pytest.mark.parametrize("family", FAMILIES)
def test_plan_json_round_trip(family):
    @examples(20)
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_plan_json_round_trip(family, seed)

    run()


@pytest.mark.parametrize("family", FAMILIES)
def test_start_plan(family):
    @examples(20)
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_start_plan(family, seed)

    run()


@pytest.mark.parametrize("backend", contracts.EXACT_BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_plan(family, backend):
    @examples(5)
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_same_seed_same_plan(family, backend, seed)

    run()


@pytest.mark.parametrize("family", FAMILIES)
def test_search_space(family):
    @examples(20)
    @given(seed=SEEDS)
    def run(seed):
        contracts.check_search_space(family, seed)

    run()
