"""Every separable plan, for the brute-force backend: per step every permutation over
existing links (identity included) and, for a step where someone sends, every
sparsity level and dtype (a silent step has one canonical form); and the ring
all-reduce plan where its links exist."""

from __future__ import annotations

import itertools
import math
from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.families.separable.data import SeparableData, data
from splitopt.families.separable.plan import SeparablePlan, Step, TooManyPermutations, make_step, permutations
from splitopt.families.separable.settings import SeparableInstance


def step_options(d: SeparableData, perms: list[tuple[int, ...]]) -> list[Step]:
    """Every distinct step over ``perms``: a silent step once, a sending one at every level
    and dtype."""
    out = []
    for p in perms:
        if all(g == h for g, h in enumerate(p)):
            out.append(make_step(d, p))
        else:
            out += [make_step(d, p, level, dtype) for level in range(d.levels) for dtype in d.dtypes]
    return out


def enumerate_plans(inst: SeparableInstance, limit: int) -> Iterator[SeparablePlan]:
    """Every policy (see the module docstring); NotApplicable when there are more than
    ``limit`` (decided before any list longer than ``limit`` is built)."""
    d = data(inst)
    per = d.levels * len(d.dtypes)  # steps per sending permutation
    try:  # each permutation but the identity gives ``per`` steps, each step at least one plan
        perms = permutations(d, cap=1 + max(0, limit - 1) // per)
    except TooManyPermutations:
        raise NotApplicable(f"brute-force: the links allow too many permutations of the {d.g} devices per step: "
                            f"more than {limit:,} separable plans (limit {limit:,})") from None
    n_options = 1 + (len(perms) - 1) * per
    ring = d.ring_available
    if d.steps * math.log10(n_options) > math.log10(max(limit, 1)) + 1:  # no huge power is computed
        raise NotApplicable(f"brute-force: {n_options:,}^{d.steps} separable plans is too many (limit {limit:,})")
    count = n_options ** d.steps + ring
    if count > limit:
        raise NotApplicable(f"brute-force: {count:,} separable plans is too many (limit {limit:,})")
    options = step_options(d, perms)

    def walk() -> Iterator[SeparablePlan]:
        if ring:
            yield SeparablePlan((), ring=True)
        for steps in itertools.product(options, repeat=d.steps):
            yield SeparablePlan(tuple(steps))

    return walk()
