"""The separable search space: per step one gene for the permutation (an index into the
permutations over existing links, identity first), one for the sparsity level and one for
the dtype; and, where the ring's links exist, a gene choosing the ring all-reduce plan
instead. Every genome decodes to a well-formed plan; the limits (mixing, budgets,
accuracy) are the evaluator's."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.families.separable.data import data
from splitopt.families.separable.plan import SeparablePlan, make_step, permutations, widest_dtype
from splitopt.search.space import ChoiceGene, Genome, SearchSpace


RING = "ring_allreduce"


def perm_gene(j: int) -> str:
    return f"send_to[{j}]"


def level_gene(j: int) -> str:
    return f"level[{j}]"


def dtype_gene(j: int) -> str:
    return f"dtype[{j}]"


def separable_space(inst: Instance) -> SearchSpace:
    d = data(inst)
    perms = permutations(d)
    index = {p: i for i, p in enumerate(perms)}
    ring = d.ring_available
    genes: list = [ChoiceGene(RING, (False, True))] if ring else []
    for j in range(d.steps):
        genes += [ChoiceGene(perm_gene(j), tuple(range(len(perms)))), ChoiceGene(level_gene(j), tuple(range(d.levels))),
                  ChoiceGene(dtype_gene(j), d.dtypes)]

    def to_plan(genome: Genome) -> SeparablePlan:
        if ring and genome[RING]:
            return SeparablePlan((), ring=True)
        return SeparablePlan(tuple(make_step(d, perms[genome[perm_gene(j)]], genome[level_gene(j)],
                                             genome[dtype_gene(j)]) for j in range(d.steps)))

    def from_plan(plan: SeparablePlan) -> Genome:
        genome: Genome = {RING: plan.ring} if ring else {}
        if plan.ring:
            for j in range(d.steps):
                genome[perm_gene(j)], genome[level_gene(j)], genome[dtype_gene(j)] = 0, d.levels - 1, widest_dtype(d)
            return genome
        for j, s in enumerate(plan.steps):
            genome[perm_gene(j)] = index[s.send_to]
            genome[level_gene(j)] = s.level
            genome[dtype_gene(j)] = s.dtype
        return genome

    return SearchSpace(tuple(genes), to_plan, from_plan, lambda genome: dict(genome),
                       notes="per step: a permutation over the links, a sparsity level, a dtype",
                       meta={"represents_every_plan": True})
