"""Search spaces: the genes a family exposes to heuristic search, and the maps between
genomes and plans.

A genome is a dict gene name -> value. Three kinds of gene cover the families:

* :class:`ChoiceGene`: one of a few options (a layer's device, a bit-width pair, a cut
  point, an architecture);
* :class:`IntegerGene`: an integer in ``[low, high]`` (a position along a chain);
* :class:`PermutationGene`: an order of items (tasks on a resource, views on a bus).

A family's :class:`SearchSpace` gives ``to_plan`` (genome -> plan), ``from_plan`` (plan ->
genome) and ``repair`` (genome -> a genome that decodes to a well-formed plan, e.g. an
edge set closed under predecessors). ``decode = to_plan . repair``. Budgets (memory,
error, accuracy) are not repaired: the family's evaluator judges the plan, and search
ranks plans by feasibility first. Contract (``splitopt.testing.contracts``): every
sampled genome decodes to a plan the evaluator accepts (it may break budgets), and
``decode(from_plan(p))`` is ``p`` for every plan ``p`` the family's enumeration yields.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Union

Genome = dict


@dataclass(frozen=True)
class ChoiceGene:
    """One value out of ``options`` (hashable, compared by equality)."""

    name: str
    options: tuple[Any, ...]

    def sample(self, rng: random.Random) -> Any:
        return self.options[rng.randrange(len(self.options))]

    def valid(self, value: Any) -> bool:
        return value in self.options

    @property
    def size(self) -> int:
        return len(self.options)


@dataclass(frozen=True)
class IntegerGene:
    """An integer in ``[low, high]`` (both included)."""

    name: str
    low: int
    high: int

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)

    def valid(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high

    @property
    def size(self) -> int:
        return self.high - self.low + 1


@dataclass(frozen=True)
class PermutationGene:
    """An order of ``items`` (a tuple holding each item once)."""

    name: str
    items: tuple[Any, ...]

    def sample(self, rng: random.Random) -> tuple:
        order = list(self.items)
        rng.shuffle(order)
        return tuple(order)

    def valid(self, value: Any) -> bool:
        return isinstance(value, tuple) and len(value) == len(self.items) and set(value) == set(self.items)

    @property
    def size(self) -> int:
        return math.factorial(len(self.items))


Gene = Union[ChoiceGene, IntegerGene, PermutationGene]


def _identity(genome: Genome) -> Genome:
    return genome


@dataclass(frozen=True)
class SearchSpace:
    """The genes of one instance and the maps between genomes and plans (see the module
    docstring). ``genes`` are in the order decisions are made (sequential methods such as
    Q-learning decide them one after the other). ``meta``: what the contract suite checks
    of the space, ``represents_every_plan`` (default true: every plan decodes from its own
    genome) or, weaker, ``represents_every_feasible_plan`` (every plan that meets every
    limit does, where the repair changes only plans that break one)."""

    genes: tuple[Gene, ...]
    to_plan: Callable[[Genome], Any]
    from_plan: Callable[[Any], Genome]
    repair: Callable[[Genome], Genome] = _identity
    notes: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def sample(self, rng: random.Random) -> Genome:
        """A uniformly random genome (before repair)."""
        return {g.name: g.sample(rng) for g in self.genes}

    def decode(self, genome: Genome) -> Any:
        """The plan of ``genome``, repaired to be well-formed."""
        return self.to_plan(self.repair(dict(genome)))

    def check(self, genome: Genome) -> None:
        """Raise ValueError unless ``genome`` holds a valid value for every gene."""
        for g in self.genes:
            if g.name not in genome or not g.valid(genome[g.name]):
                raise ValueError(f"genome: gene '{g.name}' has no valid value ({genome.get(g.name)!r})")

    @property
    def log10_size(self) -> float:
        """log10 of the number of genomes (before repair)."""
        return sum(math.log10(max(1, g.size)) for g in self.genes)
