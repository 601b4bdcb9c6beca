"""The separable search space: per step one gene for the permutation, one for the sparsity
level and one for the dtype; and, where the ring's links exist, a gene choosing the ring
all-reduce plan instead. The permutation gene is an index into the permutations over
existing links (identity first) where there are at most ``MAX_LISTED_PERMUTATIONS`` of
them (G <= 8 always); beyond (up to 16! for G = 16), an order of the devices whose cycles
that use a missing link are made silent (their devices keep their features), so that no
list of permutations is built. Every genome decodes to a well-formed plan; the limits
(mixing, budgets, accuracy) are the evaluator's."""

from __future__ import annotations

from splitopt.families.separable.data import SeparableData, data
from splitopt.families.separable.plan import SeparablePlan, TooManyPermutations, make_step, permutations, widest_dtype
from splitopt.families.separable.settings import SeparableInstance
from splitopt.search.space import ChoiceGene, Genome, PermutationGene, SearchSpace


RING = "ring_allreduce"
#: the most permutations per step listed as the choices of one gene (8! = 40,320)
MAX_LISTED_PERMUTATIONS = 40_320


def perm_gene(j: int) -> str:
    return f"send_to[{j}]"


def level_gene(j: int) -> str:
    return f"level[{j}]"


def dtype_gene(j: int) -> str:
    return f"dtype[{j}]"


def over_links(d: SeparableData, order: tuple[int, ...]) -> tuple[int, ...]:
    """``order`` read as a permutation (device ``g`` sends to ``order[g]``) with every cycle
    that uses a missing link made silent: a permutation over the links."""
    out = list(order)
    seen = [False] * d.g
    for g in range(d.g):
        if seen[g]:
            continue
        cycle, h = [], g
        while not seen[h]:
            seen[h] = True
            cycle.append(h)
            h = order[h]
        if any(order[a] != a and not d.has_link(a, order[a]) for a in cycle):
            for a in cycle:
                out[a] = a
    return tuple(out)


def separable_space(inst: SeparableInstance) -> SearchSpace:
    d = data(inst)
    try:
        perms: list[tuple[int, ...]] | None = permutations(d, cap=MAX_LISTED_PERMUTATIONS)
    except TooManyPermutations:
        perms = None
    index = {p: i for i, p in enumerate(perms or ())}
    ring = d.ring_available

    def perm_of(value) -> tuple[int, ...]:
        return perms[value] if perms is not None else over_links(d, value)

    genes: list = [ChoiceGene(RING, (False, True))] if ring else []
    for j in range(d.steps):
        gene = (ChoiceGene(perm_gene(j), tuple(range(len(perms)))) if perms is not None
                else PermutationGene(perm_gene(j), tuple(range(d.g))))
        genes += [gene, ChoiceGene(level_gene(j), tuple(range(d.levels))), ChoiceGene(dtype_gene(j), d.dtypes)]

    def to_plan(genome: Genome) -> SeparablePlan:
        if ring and genome[RING]:
            return SeparablePlan((), ring=True)
        return SeparablePlan(tuple(make_step(d, perm_of(genome[perm_gene(j)]), genome[level_gene(j)],
                                             genome[dtype_gene(j)]) for j in range(d.steps)))

    def from_plan(plan: SeparablePlan) -> Genome:
        identity = 0 if perms is not None else tuple(range(d.g))
        genome: Genome = {RING: plan.ring} if ring else {}
        if plan.ring:
            for j in range(d.steps):
                genome[perm_gene(j)], genome[level_gene(j)], genome[dtype_gene(j)] = identity, d.levels - 1, widest_dtype(d)
            return genome
        for j, s in enumerate(plan.steps):
            genome[perm_gene(j)] = index[s.send_to] if perms is not None else tuple(s.send_to)
            genome[level_gene(j)] = s.level
            genome[dtype_gene(j)] = s.dtype
        return genome

    return SearchSpace(tuple(genes), to_plan, from_plan, lambda genome: dict(genome),
                       notes="per step: a permutation over the links, a sparsity level, a dtype",
                       meta={"represents_every_plan": True})
