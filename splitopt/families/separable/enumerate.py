"""Every separable plan, for the brute-force backend: per step every permutation over
existing links (identity included) and, for a step where someone sends, every
sparsity level and dtype (a silent step has one canonical form); and the ring
all-reduce plan where its links exist."""

from __future__ import annotations

import itertools
from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.families.separable.data import SeparableData, data
from splitopt.families.separable.plan import SeparablePlan, Step, make_step, permutations


def step_options(d: SeparableData) -> list[Step]:
    """Every distinct step: a silent step once, a sending one at every level and dtype."""
    out = []
    for p in permutations(d):
        if all(g == h for g, h in enumerate(p)):
            out.append(make_step(d, p))
        else:
            out += [make_step(d, p, level, dtype) for level in range(d.levels) for dtype in d.dtypes]
    return out


def enumerate_plans(inst: Instance, limit: int) -> Iterator[SeparablePlan]:
    """Every policy (see the module docstring); NotApplicable when there are more than
    ``limit``."""
    d = data(inst)
    options = step_options(d)
    ring = d.ring_available
    count = len(options) ** d.steps + ring
    if count > limit:
        raise NotApplicable(f"brute-force: {count:,} separable plans is too many (limit {limit:,})")

    def walk() -> Iterator[SeparablePlan]:
        if ring:
            yield SeparablePlan((), ring=True)
        for steps in itertools.product(options, repeat=d.steps):
            yield SeparablePlan(tuple(steps))

    return walk()
