"""The llm search space: the order in which the usable devices would run (a permutation),
how many parts each runs (0: unused) and the bit-width of each. Repair makes the counts
cover the parts in that order: each device takes at most what is left, and what is left at
the end goes to the last device that runs anything. Memory, links, pins and the error
budget are left to the evaluator."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.families.llm.data import data
from splitopt.families.llm.plan import LlmPlan, plan_of
from splitopt.families.llm.settings import LlmSettings
from splitopt.search.space import ChoiceGene, Gene, Genome, IntegerGene, PermutationGene, SearchSpace


def llm_space(inst: Instance[LlmSettings]) -> SearchSpace:
    d = data(inst)
    names = d.devices
    genes: tuple[Gene, ...] = (
        PermutationGene("order", names), *(IntegerGene(f"parts[{name}]", 0, d.n) for name in names),
        *(ChoiceGene(f"bits[{name}]", tuple(d.widths[w] for w in d.bits_of(e))) for e, name in enumerate(names)))

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        left, last = d.n, None
        for name in out["order"]:
            take = min(out[f"parts[{name}]"], left)
            out[f"parts[{name}]"] = take
            left -= take
            last = name if take else last
        if left:
            out[f"parts[{last or out['order'][0]}]"] += left
        return out

    def to_plan(genome: Genome) -> LlmPlan:
        stages, at = [], 0
        for name in genome["order"]:
            count = genome[f"parts[{name}]"]
            if count:
                stages.append((name, at, at + count, genome[f"bits[{name}]"]))
                at += count
        return plan_of(stages)

    def from_plan(plan: LlmPlan) -> Genome:
        used = [st.device for st in plan.stages]
        genome: Genome = {"order": tuple(used + [n for n in names if n not in used])}
        for e, name in enumerate(names):
            genome[f"parts[{name}]"] = 0
            genome[f"bits[{name}]"] = d.widths[d.lowest(e)]
        for st in plan.stages:
            genome[f"parts[{st.device}]"] = st.end - st.start
            genome[f"bits[{st.device}]"] = st.bits
        return genome

    return SearchSpace(genes, to_plan, from_plan, repair,
                       notes="device order, parts per device (0: unused), bit-width per device")
