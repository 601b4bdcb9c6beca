"""Evolutionary search (backend ``evolutionary``): a steady (mu + lambda) genetic
algorithm over any family's search space, as SplitNets' stage-2 search (mutate and cross
pairs of the generation, keep only candidates that meet the hard limits, then the best;
its 512 candidates x 20 generations are the preset ``splitnets``).

* Population: the seeds (start plan, baselines), then random genomes; duplicates (same
  plan) are kept once.
* Selection: binary tournaments on the feasibility-first rank
  (``splitopt.heuristics.search.rank``: plans meeting every limit before any that break
  one, fewer broken limits first, then the objective); survivors: the best
  ``population`` of parents and children (elitist, so the best plan is never lost).
* Crossover (rate ``crossover``): two-point crossover along the gene order of the choice
  and integer genes (genes follow the execution order, so a segment of a parent, e.g.
  the layers between two cuts, is inherited whole), order crossover (OX1) for each
  permutation gene.
* Mutation: each choice or integer gene with probability ``mutation`` (default 1/n,
  at least one gene per child): half the time a point change (a choice gene takes another
  option, an integer gene moves by up to 3 or is redrawn), half the time a segment move:
  a run of consecutive choice genes takes the value of its left or right neighbour (a cut
  point moves) or one random option; permutation genes: a swap or an insertion.
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from splitopt.heuristics.base import Heuristic, Setting
from splitopt.heuristics.search import Scored, Search
from splitopt.search.space import ChoiceGene, Genome, IntegerGene, PermutationGene


class Evolutionary(Heuristic):
    name = "evolutionary"
    description = "genetic algorithm over the family's search space, feasibility first, seeded by the baselines"
    settings = (
        Setting("population", int, 64, "survivors per generation", low=2, high=100_000),
        Setting("offspring", int, None, "children per generation (default: the population)", low=1, high=100_000,
                optional=True),
        Setting("crossover", float, 0.9, "probability that a child is a crossover of two parents", low=0.0, high=1.0),
        Setting("mutation", float, None, "probability per gene of a mutation (default 1/genes)", low=0.0, high=1.0,
                optional=True),
        Setting("tournament", int, 2, "parents drawn per tournament", low=1, high=64),
    )
    presets = {"splitnets": {"population": 512, "offspring": 512, "generations": 20}}

    def run(self, search: Search, rng: random.Random, seeds: Sequence[Genome], config: Mapping[str, Any]) -> None:
        space = search.space
        size, offspring = config["population"], config["offspring"] or config["population"]
        scalar = [g for g in space.genes if not isinstance(g, PermutationGene)]
        perms = [g for g in space.genes if isinstance(g, PermutationGene)]
        rate = config["mutation"] if config["mutation"] is not None else 1.0 / max(1, len(space.genes))

        # the seeds are judged before the random genomes are drawn (drawing one walks every
        # gene: 60 ms at 10,000 layers), and the drawing stops at the deadline
        scored = search.score(seeds)
        drawn = []
        for _ in range(max(0, size - len(seeds))):
            if search.options.out_of_time():
                break
            drawn.append(space.sample(rng))
        population = _survivors(scored + search.score(drawn), size)
        search.end_generation()
        while not search.done and population:
            children = []
            for _ in range(offspring):
                a = _tournament(population, config["tournament"], rng)
                if rng.random() < config["crossover"] and len(population) > 1:
                    b = _tournament(population, config["tournament"], rng)
                    child = _crossover(a.genome, b.genome, scalar, perms, rng)
                else:
                    child = dict(a.genome)
                children.append(_mutate(child, scalar, perms, rate, rng))
            population = _survivors(population + search.score(children), size)
            search.end_generation()


def _survivors(scored: Sequence[Scored], size: int) -> list[Scored]:
    """The best ``size`` distinct plans (by rank; ties: first met)."""
    seen, out = set(), []
    for s in sorted(scored, key=lambda s: s.rank):
        if s.key not in seen:
            seen.add(s.key)
            out.append(s)
            if len(out) == size:
                break
    return out


def _tournament(population: Sequence[Scored], k: int, rng: random.Random) -> Scored:
    return min((population[rng.randrange(len(population))] for _ in range(k)), key=lambda s: s.rank)


def _crossover(a: Genome, b: Genome, scalar: Sequence[Any], perms: Sequence[PermutationGene],
               rng: random.Random) -> Genome:
    child = dict(a)
    if len(scalar) > 1:
        i, j = sorted(rng.sample(range(len(scalar) + 1), 2))
        for g in scalar[i:j]:
            child[g.name] = b[g.name]
    elif scalar and rng.random() < 0.5:
        child[scalar[0].name] = b[scalar[0].name]
    for g in perms:
        if rng.random() < 0.5:
            child[g.name] = order_crossover(a[g.name], b[g.name], rng)
    return child


def order_crossover(p: tuple, q: tuple, rng: random.Random) -> tuple:
    """OX1: a slice of ``p`` in place, the other items in ``q``'s order."""
    n = len(p)
    if n < 2:
        return tuple(p)
    i, j = sorted(rng.sample(range(n + 1), 2))
    middle = p[i:j]
    taken = set(middle)
    rest = [x for x in q if x not in taken]
    return tuple(rest[:i]) + tuple(middle) + tuple(rest[i:])


def _mutate(genome: Genome, scalar: Sequence[Any], perms: Sequence[PermutationGene], rate: float,
            rng: random.Random) -> Genome:
    genes = list(scalar) + list(perms)
    if not genes:
        return genome
    chosen = [g for g in genes if rng.random() < rate] or [genes[rng.randrange(len(genes))]]
    for g in chosen:
        if isinstance(g, PermutationGene):
            genome[g.name] = _mutate_order(genome[g.name], rng)
        elif rng.random() < 0.5 or not isinstance(g, ChoiceGene):
            genome[g.name] = _point(g, genome[g.name], rng)
        else:
            _segment(genome, scalar, scalar.index(g), rng)
    return genome


def _point(g: Any, value: Any, rng: random.Random) -> Any:
    if isinstance(g, IntegerGene):
        if rng.random() < 0.5:
            return min(g.high, max(g.low, value + rng.choice((-3, -2, -1, 1, 2, 3))))
        return g.sample(rng)
    if len(g.options) == 1:
        return value
    other = rng.randrange(len(g.options) - 1)
    current = g.options.index(value) if value in g.options else -1
    return g.options[other + 1 if 0 <= current <= other else other]


def _segment(genome: Genome, scalar: Sequence[Any], i: int, rng: random.Random) -> None:
    """A run of consecutive choice genes from ``i`` takes one value: a neighbour's (so a
    boundary between two values moves) or a random option."""
    n = len(scalar)
    length = 1 + min(int(rng.expovariate(1 / 4)), n - 1)
    if rng.random() < 0.5:
        lo, hi = i, min(n, i + length)
        neighbour = scalar[lo - 1] if lo > 0 else None
    else:
        lo, hi = max(0, i - length + 1), i + 1
        neighbour = scalar[hi] if hi < n else None
    g = scalar[i]
    value = genome[neighbour.name] if neighbour is not None and rng.random() < 0.7 else g.sample(rng)
    for k in range(lo, hi):
        h = scalar[k]
        if isinstance(h, ChoiceGene) and value in h.options:
            genome[h.name] = value


def _mutate_order(order: tuple, rng: random.Random) -> tuple:
    items = list(order)
    if len(items) < 2:
        return order
    i, j = rng.sample(range(len(items)), 2)
    if rng.random() < 0.5:
        items[i], items[j] = items[j], items[i]
    else:
        items.insert(j, items.pop(i))
    return tuple(items)
