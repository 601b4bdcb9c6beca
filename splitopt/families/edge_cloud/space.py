"""The edge/cloud search space: one gene per layer, in execution order, choosing the
cloud or the edge at a (weight bits, activation bits) pair of the candidates.

Repair makes the edge set well-formed: in execution order, an edge layer that reads a
cloud layer's output moves to the cloud (the edge set must be closed under
predecessors). Limits (memory, error, pinned layers) are left to the evaluator."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.core.plan import Plan
from splitopt.search.space import ChoiceGene, Genome, SearchSpace

CLOUD = "cloud"


def edge_cloud_space(inst: Instance) -> SearchSpace:
    bits = inst.candidate_bits()
    options = (CLOUD,) + tuple((w, a) for w in bits for a in bits)
    genes = tuple(ChoiceGene(layer.name, options) for layer in inst.layers)
    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        on_edge: set[str] = set()
        for layer in inst.layers:
            n = layer.name
            if out[n] != CLOUD:
                if any(src in inst.layer_by_name and src not in on_edge for src in layer.inputs):
                    out[n] = CLOUD
            if out[n] != CLOUD:
                on_edge.add(n)
        return out

    def to_plan(genome: Genome) -> Plan:
        return Plan.edge_cloud(inst, {n: v for n, v in genome.items() if v != CLOUD})

    def from_plan(plan: Plan) -> Genome:
        edge = inst.settings.edge
        return {l.name: (plan.weight_bits[l.name], plan.activation_bits[l.name]) if plan.device[l.name] == edge
                else CLOUD for l in inst.layers}

    return SearchSpace(genes, to_plan, from_plan, repair,
                       notes="per layer: cloud, or edge at (weight bits, activation bits); repaired to a down-set")
