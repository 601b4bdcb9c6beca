"""Hypothesis strategies for random edge/cloud instances (``examples.random_instance``);
needs the test extra (hypothesis). Sizes are kept small enough for brute force: at most
a few thousand plans each."""

from __future__ import annotations

from hypothesis import strategies as st

from splitopt.families.edge_cloud.examples import random_instance
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def instances(draw, problem: str = "split_bits", min_layers: int = 3, max_layers: int = 7,
              bit_widths: tuple[int, ...] | None = None) -> EdgeCloudInstance:
    """A random instance of ``problem`` with ``min_layers``..``max_layers`` layers."""
    seed = draw(SEEDS)
    n_layers = draw(st.integers(min_value=min_layers, max_value=max_layers))
    return random_instance(seed, n_layers, problem=problem, bit_widths=bit_widths)


def split_instances() -> st.SearchStrategy[EdgeCloudInstance]:
    """Problem split (float cut): 3-7 layers, at most 2**7 plans."""
    return instances(problem="split", min_layers=3, max_layers=7)


def split_bits_instances() -> st.SearchStrategy[EdgeCloudInstance]:
    """Problem split_bits (cut + bit-widths), small enough for brute force (at most about 2,000
    plans): two candidate bit-widths with 3-5 layers, or three with 3 layers."""
    two = st.sampled_from([(4, 8), (2, 8)]).flatmap(
        lambda bits: instances(problem="split_bits", min_layers=3, max_layers=5, bit_widths=bits))
    three = instances(problem="split_bits", min_layers=3, max_layers=3, bit_widths=(2, 4, 8))
    return st.one_of(two, three)
