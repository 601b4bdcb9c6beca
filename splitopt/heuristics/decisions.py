"""A search space as a sequence of decisions, for the sequential methods (Q-learning,
REINFORCE): the genes in order, each one decision (a choice gene: one of its options; an
integer gene: one of at most ``MAX_ACTIONS`` evenly spaced values, all of them when the
range is that small), a permutation gene of n items n - 1 decisions (the next item among
those not placed yet; the last one follows). Actions are indices into a step's options;
:meth:`Decisions.valid` lists those allowed given the decisions so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from splitopt.search.space import ChoiceGene, Genome, IntegerGene, PermutationGene, SearchSpace

#: the most actions of one decision (an integer gene over a wider range is binned)
MAX_ACTIONS = 64


@dataclass(frozen=True)
class Step:
    """One decision: for gene ``gene``, pick one of ``options`` (``position``: which place
    of a permutation gene it fills, -1 for choice and integer genes)."""

    gene: str
    options: tuple[Any, ...]
    position: int = -1


class Decisions:
    """The decisions of ``space`` (see the module docstring)."""

    def __init__(self, space: SearchSpace):
        self.space = space
        steps: list[Step] = []
        for g in space.genes:
            if isinstance(g, ChoiceGene):
                steps.append(Step(g.name, tuple(g.options)))
            elif isinstance(g, IntegerGene):
                steps.append(Step(g.name, integer_values(g)))
            elif isinstance(g, PermutationGene):
                steps.extend(Step(g.name, tuple(g.items), k) for k in range(max(0, len(g.items) - 1)))
        self.steps = steps
        self.width = max((len(s.options) for s in steps), default=1)

    def valid(self, t: int, actions: Sequence[int]) -> list[int]:
        """The actions allowed at step ``t`` after ``actions`` (the first ``t`` decisions)."""
        step = self.steps[t]
        if step.position < 0:
            return list(range(len(step.options)))
        placed = {actions[k] for k in range(t - step.position, t)}
        return [a for a in range(len(step.options)) if a not in placed]

    def genome(self, actions: Sequence[int]) -> Genome:
        """The genome the decisions ``actions`` (one per step) spell."""
        out: Genome = {}
        order: dict[str, list[Any]] = {}
        for step, a in zip(self.steps, actions):
            if step.position < 0:
                out[step.gene] = step.options[a]
            else:
                order.setdefault(step.gene, []).append(step.options[a])
        for g in self.space.genes:
            if isinstance(g, PermutationGene):
                chosen = order.get(g.name, [])
                taken = set(chosen)
                out[g.name] = tuple(chosen) + tuple(x for x in g.items if x not in taken)
        return out

    def actions(self, genome: Genome) -> list[int] | None:
        """The decisions that spell ``genome`` (None if one of its values is not an option,
        e.g. an integer between two bins)."""
        out = []
        for step in self.steps:
            value = genome[step.gene] if step.position < 0 else genome[step.gene][step.position]
            if value not in step.options:
                return None
            out.append(step.options.index(value))
        return out


def integer_values(g: IntegerGene) -> tuple[int, ...]:
    """The values an integer gene's decision offers: all, or MAX_ACTIONS evenly spaced."""
    if g.size <= MAX_ACTIONS:
        return tuple(range(g.low, g.high + 1))
    return tuple(sorted({g.low + round(k * (g.size - 1) / (MAX_ACTIONS - 1)) for k in range(MAX_ACTIONS)}))


def cost(scored: Any, reference: float) -> float:
    """What the sequential methods minimise (their reward is its negative): a feasible
    plan's objective over ``reference`` (a known feasible objective), capped at 10; a plan
    breaking k limits 10 + k; a malformed one 20."""
    if scored.metrics is None:
        return 20.0
    if not scored.feasible:
        return 10.0 + scored.rank[1]
    if reference <= 0 or not math.isfinite(reference):
        return min(10.0, scored.objective)
    return min(10.0, scored.objective / reference)
