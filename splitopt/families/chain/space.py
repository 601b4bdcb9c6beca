"""The chain search space: one integer gene per layer, in execution order, its position
along the chain (0 = the first device). Repair makes positions monotone along every DAG
edge (a layer moves to its furthest input's position when an input runs later in the
chain); memory limits are left to the evaluator."""

from __future__ import annotations

from splitopt.core.plan import Plan
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.chain.settings import ChainInstance
from splitopt.search.space import Genome, IntegerGene, SearchSpace


def chain_space(inst: ChainInstance) -> SearchSpace:
    M = len(inst.settings.chain)
    genes = tuple(IntegerGene(layer.name, 0, M - 1) for layer in inst.layers)
    index_of = {name: i for i, name in enumerate(inst.settings.chain)}

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        for layer in inst.layers:
            low = max((out[src] for src in layer.inputs if src in inst.layer_by_name), default=0)
            out[layer.name] = max(out[layer.name], low)
        return out

    def to_plan(genome: Genome) -> Plan:
        return plan_from_indices(inst, {l.name: genome[l.name] for l in inst.layers})

    def from_plan(plan: Plan) -> Genome:
        return {l.name: index_of[plan.device[l.name]] for l in inst.layers}

    return SearchSpace(genes, to_plan, from_plan, repair,
                       notes="per layer: its chain position; repaired to be monotone along the DAG")
