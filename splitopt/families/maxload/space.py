"""The maxload search space: one device gene per colour group (groups in topological
order of their first node). Repair: a group that may not run on an accelerator
(``supportedOnFpga`` false) goes to the CPU when there is a core. Memory, device counts
and contiguity are left to the evaluator (search ranks feasible placements first).

* Throughput objective: a group's gene is its device, ``fpga<i>`` or ``cpu<j>``.
* Latency objective: a group's gene is ``fpga<i>`` or ``cpu`` (the latency does not
  depend on the core); the plan's cores are the family's own choice
  (``splitopt.families.maxload.cores.cpu_cores``, its search bounded by
  ``SEARCH_BUDGET``; where it finds none, the capped labels of ``capped_cores``, which
  the evaluator then judges). Every plan the latency enumeration yields is the decoding
  of its genome.
"""

from __future__ import annotations

from splitopt.families.maxload.cores import CPU, SEARCH_BUDGET, capped_cores, placement_of
from splitopt.families.maxload.groups import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement
from splitopt.search.space import ChoiceGene, Genome, SearchSpace

#: the latency space's gene value for "on the CPU"
ON_CPU = "cpu"


def maxload_space(inst: MaxloadInstance) -> SearchSpace:
    gr = groups_of(inst)
    latency = inst.objective == "latency"
    cpus = ((ON_CPU,) if inst.cpus else ()) if latency else tuple(inst.cpus)
    devices = tuple(inst.fpgas) + cpus
    names = [f"group[{g}]" for g in range(len(gr.members))]
    genes = tuple(ChoiceGene(name, devices) for name in names) if devices else ()

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        if cpus:
            for g, name in enumerate(names):
                if out[name].startswith("fpga") and not gr.fpga_ok(inst, g):
                    out[name] = cpus[0]
        if not latency:
            out = runs_repaired(out)
        return out

    def runs_repaired(genome: Genome) -> Genome:
        """Each device's groups one run in group order (an interval of a topological order
        is convex, so the placement is contiguous wherever each group's forward nodes are
        consecutive): a group whose device already ran earlier joins the run before it,
        where that device may take it."""
        out = dict(genome)
        closed: set[str] = set()
        current = None
        for g, name in enumerate(names):
            d = out[name]
            if d != current and d in closed and current is not None and \
                    (not current.startswith("fpga") or gr.fpga_ok(inst, g)):
                d = current
            if d != current:
                if current is not None:
                    closed.add(current)
                current = d
            out[name] = d
        return out

    def to_plan(genome: Genome) -> MaxloadPlacement:
        if not latency:
            return MaxloadPlacement({v: genome[names[gr.of[v]]] for v in inst.node_by_id})
        where = {g: CPU if genome[name] == ON_CPU else int(genome[name][4:]) for g, name in enumerate(names)}
        placement = placement_of(inst, gr, where, search=True, budget=SEARCH_BUDGET)
        return placement if placement is not None else placement_of(inst, gr, where, capped_cores(inst, gr, where))

    def from_plan(plan: MaxloadPlacement) -> Genome:
        genome = {names[g]: plan.device[members[0]] for g, members in enumerate(gr.members)}
        if latency:
            genome = {name: ON_CPU if d.startswith("cpu") else d for name, d in genome.items()}
        return genome

    notes = ("per colour group: an accelerator or the CPU (cores: the family's choice); unsupported groups repaired "
             "onto the CPU") if latency else ("per colour group: its device; unsupported groups repaired onto cpu0, "
                                             "then each device's groups made one run in group order")
    # throughput: the runs repair leaves out contiguous placements that interleave devices in group order
    return SearchSpace(genes, to_plan, from_plan, repair, notes=notes, meta={"represents_every_plan": latency})
