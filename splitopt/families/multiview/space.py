"""The multiview search space: the architecture (fusion point, Conv-Reduce width), one
cut-point gene per sensor, and the orders of the bus (serial bus only) and of the
aggregator. Repair: a cut point that is not a point of the chosen architecture becomes
its first point (the raw input, or the earliest allowed cut). Memory, required layers
and ``min_accuracy`` are left to the evaluator."""

from __future__ import annotations

from splitopt.families.multiview.data import REDUCE, data
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance
from splitopt.search.space import ChoiceGene, Gene, Genome, PermutationGene, SearchSpace

ARCH = "architecture"
BUS = "bus_order"
AGGREGATOR = "aggregator_order"


def multiview_space(inst: MultiviewInstance) -> SearchSpace:
    d = data(inst)
    cut_options = tuple(dict.fromkeys(tuple(d.cuts) + (REDUCE,)))
    genes: list[Gene] = [ChoiceGene(ARCH, tuple(d.archs))]
    genes += [ChoiceGene(f"cut[{s}]", cut_options) for s in d.sensors]
    if d.serial:
        genes.append(PermutationGene(BUS, d.sensors))
    genes.append(PermutationGene(AGGREGATOR, d.sensors))

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        f, w = out[ARCH]
        points = d.points(f, w)
        for s in d.sensors:
            if out[f"cut[{s}]"] not in points:
                out[f"cut[{s}]"] = points[0]
        return out

    def to_plan(genome: Genome) -> MultiviewPlan:
        f, w = genome[ARCH]
        return MultiviewPlan(f, w, {s: genome[f"cut[{s}]"] for s in d.sensors},
                             tuple(genome[BUS]) if d.serial else None, tuple(genome[AGGREGATOR]))

    def from_plan(plan: MultiviewPlan) -> Genome:
        genome: Genome = {ARCH: (plan.fusion, plan.width)}
        genome.update({f"cut[{s}]": plan.cuts[s] for s in d.sensors})
        if d.serial:
            assert plan.bus_order is not None  # a plan of a serial bus orders its transfers (check_plan)
            genome[BUS] = tuple(plan.bus_order)
        genome[AGGREGATOR] = tuple(plan.aggregator_order)
        return genome

    return SearchSpace(tuple(genes), to_plan, from_plan, repair,
                       notes="architecture; a cut point per sensor; bus and aggregator orders")
