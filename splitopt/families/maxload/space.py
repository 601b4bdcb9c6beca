"""The maxload search space: one device gene per colour group (groups in topological
order of their first node). Repair: a group that may not run on an accelerator
(``supportedOnFpga`` false) goes to ``cpu0`` when there is a core. Memory, device counts
and contiguity are left to the evaluator (search ranks feasible placements first)."""

from __future__ import annotations

from splitopt.families.maxload.groups import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement
from splitopt.search.space import ChoiceGene, Genome, SearchSpace


def maxload_space(inst: MaxloadInstance) -> SearchSpace:
    gr = groups_of(inst)
    devices = tuple(inst.fpgas) + tuple(inst.cpus)
    names = [f"group[{g}]" for g in range(len(gr.members))]
    genes = tuple(ChoiceGene(name, devices) for name in names) if devices else ()

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        if inst.cpus:
            for g, name in enumerate(names):
                if out[name].startswith("fpga") and not gr.fpga_ok(inst, g):
                    out[name] = inst.cpus[0]
        return out

    def to_plan(genome: Genome) -> MaxloadPlacement:
        return MaxloadPlacement({v: genome[names[gr.of[v]]] for v in inst.node_by_id})

    def from_plan(plan: MaxloadPlacement) -> Genome:
        return {names[g]: plan.device[members[0]] for g, members in enumerate(gr.members)}

    return SearchSpace(genes, to_plan, from_plan, repair,
                       notes="per colour group: its device; unsupported groups repaired onto cpu0")
