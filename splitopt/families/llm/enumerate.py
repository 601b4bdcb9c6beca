"""Every llm plan, for the brute-force backend: every ordered choice of distinct usable
devices, every split of the parts into that many non-empty contiguous ranges, and every
bit-width each chosen device runs."""

from __future__ import annotations

from itertools import combinations, permutations, product
from math import comb, factorial
from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.families.llm.data import LlmData, data
from splitopt.families.llm.plan import LlmPlan, plan_of
from splitopt.families.llm.settings import LlmSettings


def plan_count(d: LlmData) -> int:
    """How many plans there are: ``sum_k C(n-1, k-1) k! e_k`` with ``e_k`` the elementary
    symmetric polynomial of the devices' width counts (ordered choices of ``k`` devices,
    each with its widths)."""
    sizes = [len(d.bits_of(e)) for e in range(d.D)]
    e = [1] + [0] * len(sizes)  # e[k]: sum over k-subsets of the product of their sizes
    for size in sizes:
        for k in range(len(sizes), 0, -1):
            e[k] += e[k - 1] * size
    return sum(comb(d.n - 1, k - 1) * factorial(k) * e[k] for k in range(1, min(d.D, d.n) + 1))


def enumerate_plans(inst: Instance[LlmSettings], limit: int) -> Iterator[LlmPlan]:
    """Every plan; NotApplicable when there are more than ``limit``."""
    d = data(inst)
    count = plan_count(d)
    if count > limit:
        raise NotApplicable(f"brute-force: {count:,} plans is too many (limit {limit:,})")

    def walk() -> Iterator[LlmPlan]:
        for k in range(1, min(d.D, d.n) + 1):
            for devices in permutations(range(d.D), k):
                for cuts in combinations(range(1, d.n), k - 1):
                    bounds = (0, *cuts, d.n)
                    for widths in product(*(d.bits_of(e) for e in devices)):
                        yield plan_of([(d.devices[e], bounds[j], bounds[j + 1], d.widths[w])
                                       for j, (e, w) in enumerate(zip(devices, widths))])

    return walk()
