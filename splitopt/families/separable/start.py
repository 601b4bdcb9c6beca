"""A separable policy to start from (and fall back on, and hint the programs with): the
best, by the evaluator, of a few constructions that meet every limit where they can:

* the silent policy (no step sends);
* the all-intensive shift (every device to the next at every step), and the ring
  all-reduce reference;
* dissemination: ``ceil(log2 G)`` rounds, round ``r`` a cyclic shift by ``2**r``, after
  which every device knows every device's features (the dissemination barrier's
  pattern); placed on the cheapest steps (fewest bytes), on the last steps, or repeated
  on every step, each at the lowest and at the top sparsity level and dtype.
"""

from __future__ import annotations

from splitopt.families.separable.data import SeparableData, data
from splitopt.families.separable.methods import best_of, shift_plan
from splitopt.families.separable.plan import SeparablePlan, Step, identity, make_step, silent_plan, widest_dtype
from splitopt.families.separable.settings import DTYPE_BYTES, SeparableInstance


def dissemination_rounds(d: SeparableData) -> list[tuple[int, ...]] | None:
    """The rounds' permutations (None when a link they use is missing)."""
    rounds = []
    shift = 1
    while shift < d.g:
        p = tuple((g + shift) % d.g for g in range(d.g))
        if not all(d.has_link(g, h) for g, h in enumerate(p)):
            return None
        rounds.append(p)
        shift *= 2
    return rounds


def dissemination_plans(d: SeparableData) -> list[SeparablePlan]:
    rounds = dissemination_rounds(d)
    if not rounds or len(rounds) > d.steps:
        return []
    narrow = min(d.dtypes, key=lambda t: DTYPE_BYTES[t])
    out = []
    for level, dtype in ((0, narrow), (d.levels - 1, widest_dtype(d))):
        cheapest = sorted(range(d.steps), key=lambda j: (d.message_bytes(j, level, dtype), -j))[:len(rounds)]
        last = list(range(d.steps - len(rounds), d.steps))
        for chosen in (sorted(cheapest), last):
            steps: list[Step] = [make_step(d, identity(d.g)) for _ in range(d.steps)]
            for j, p in zip(chosen, rounds):
                steps[j] = make_step(d, p, level, dtype)
            out.append(SeparablePlan(tuple(steps)))
        out.append(SeparablePlan(tuple(make_step(d, rounds[j % len(rounds)], level, dtype) for j in range(d.steps))))
    return out


def start_plan(inst: SeparableInstance) -> SeparablePlan:
    d = data(inst)
    plans = [silent_plan(d)]
    shift = shift_plan(inst)
    if shift is not None:
        plans.append(shift)
    if d.ring_available:
        plans.append(SeparablePlan((), ring=True))
    plans += dissemination_plans(d)
    return best_of(inst, plans)[1]
