"""Every chain plan, for the brute-force backend: every placement whose device index
never decreases along a DAG edge (monotone placements), walked in execution order."""

from __future__ import annotations

from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.core.plan import Plan
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.chain.settings import ChainInstance


def enumerate_plans(inst: ChainInstance, limit: int) -> Iterator[Plan]:
    """Every monotone placement; NotApplicable when ``M ** N`` (an upper bound on their
    number) exceeds ``limit``."""
    M, N = len(inst.settings.chain), len(inst.layers)
    if M ** N > limit:
        raise NotApplicable(f"brute-force: {M}^{N} chain placements is too many (limit {limit:,})")
    names = [l.name for l in inst.layers]
    inputs = [[src for src in l.inputs if src in inst.layer_by_name] for l in inst.layers]
    pos = inst.position

    def walk(i: int, index: list[int]) -> Iterator[Plan]:
        if i == N:
            yield plan_from_indices(inst, dict(zip(names, index)))
            return
        low = max((index[pos[src]] for src in inputs[i]), default=0)
        for m in range(low, M):
            index.append(m)
            yield from walk(i + 1, index)
            index.pop()

    return walk(0, [])
