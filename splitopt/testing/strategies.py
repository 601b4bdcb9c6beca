"""Hypothesis strategies for random instances of every registered family (see
``splitopt.testing.generators``); needs the test extra (hypothesis). A family's own
strategies, with sizes of its own, live in its folder (e.g.
``splitopt.families.edge_cloud.strategies``)."""

from __future__ import annotations

from hypothesis import strategies as st

from splitopt.testing.generators import random_family_instance

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def family_instances(family: str) -> st.SearchStrategy:
    """Small random instances of a registered family (``random_family_instance``)."""
    return SEEDS.map(lambda seed: random_family_instance(family, seed))
