"""The maxload search space: one device gene per colour group. Repair: a group that may
not run on an accelerator (``supportedOnFpga`` false) goes to the CPU when there is a
core. Memory and device counts are left to the evaluator (search ranks feasible
placements first).

* Throughput objective: a group's gene is its device, ``fpga<i>`` or ``cpu<j>``; the
  genes follow an execution order of the groups (``intervals.execution_order``: each
  group where its forward nodes run, as late as possible), so that crossover and segment
  mutations move stretches of the network. Contiguity repair: while a device's forward
  nodes are not convex, the groups of the nodes between its parts join it (its convex
  hull); where that would move more than ``HULL_GROUPS`` groups, does not settle in
  ``HULL_ROUNDS`` rounds (devices taking groups from each other) or would put an
  unsupported group on an accelerator, each device's groups are made one run in that
  order instead (which can still leave a device non-convex where a group's forward nodes
  are far apart: the evaluator judges). A genome whose devices are all convex is left as
  it is, so every plan that meets the rules is the decoding of its genome (seeds such as
  the ``group-moves`` plan, whose devices hold several stretches, survive).
* Latency objective: a group's gene is ``fpga<i>`` or ``cpu`` (the latency does not
  depend on the core); the plan's cores are the family's own choice
  (``splitopt.families.maxload.cores.cpu_cores``, its search bounded by
  ``SEARCH_BUDGET``; where it finds none, the capped labels of ``capped_cores``, which
  the evaluator then judges). Every plan the latency enumeration yields is the decoding
  of its genome.
"""

from __future__ import annotations

from splitopt.families.maxload.contiguity import splitopt_rule_only
from splitopt.families.maxload.cores import CPU, SEARCH_BUDGET, capped_cores, placement_of
from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.intervals import execution_order
from splitopt.families.maxload.plan import MaxloadPlacement, device_key
from splitopt.families.maxload.reach import reach_of
from splitopt.search.space import ChoiceGene, Genome, SearchSpace

#: the latency space's gene value for "on the CPU"
ON_CPU = "cpu"
#: rounds of the convex-hull repair before the runs repair takes over
HULL_ROUNDS = 8
#: groups the convex-hull repair may move in all before the runs repair takes over: it
#: mends small breaks (a group mutated away from its device's stretch, a crossover seam);
#: larger ones are reshaped into runs. Measured on the peer graphs (seed 0): searches from
#: the all-on-CPU start alone found worse plans with an unbounded hull (gnmt_inference
#: 1.076 x the optimum, runs only 1.007, 3: 1.004); from the baselines' seeds the runs
#: repair alone never improved on bert_L-12_training (1.010) where the hull, bounded at 3
#: or not, reached 1.000
HULL_GROUPS = 3


def maxload_space(inst: MaxloadInstance) -> SearchSpace:
    gr = groups_of(inst)
    latency = inst.objective == "latency"
    if latency:  # the cores are chosen by splitopt's rule
        splitopt_rule_only(inst, "latency search space")
    cpus = ((ON_CPU,) if inst.cpus else ()) if latency else tuple(inst.cpus)
    devices = tuple(inst.fpgas) + cpus
    names = [f"group[{g}]" for g in range(len(gr.members))]
    order = tuple(range(len(gr.members))) if latency else execution_order(inst, gr)
    genes = tuple(ChoiceGene(names[g], devices) for g in order) if devices else ()
    reach = None if latency else reach_of(inst, gr)
    ok = [gr.fpga_ok(inst, g) for g in range(len(gr.members))]

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        if cpus:
            for g, name in enumerate(names):
                if not ok[g] and out[name].startswith("fpga"):
                    out[name] = cpus[0]
        if not latency:
            out = convex_repaired(out)
        return out

    def convex_repaired(genome: Genome) -> Genome:
        """Each non-convex device takes the groups of the nodes between its parts (see the
        module docstring); the runs repair where that does not settle."""
        out = dict(genome)
        assert reach is not None, "the convex repair runs for throughput, where the reach is computed"
        fwd, down, up = reach.fwd, reach.gdesc, reach.ganc
        moved = 0
        for _ in range(HULL_ROUNDS):
            masks: dict[str, list[int]] = {}
            for g, name in enumerate(names):
                m = masks.get(out[name])
                if m is None:
                    masks[out[name]] = [fwd[g], down[g], up[g]]
                else:
                    m[0] |= fwd[g]
                    m[1] |= down[g]
                    m[2] |= up[g]
            broken = None
            for d in sorted(masks, key=device_key):
                s, a, b = masks[d]
                between = a & b & ~s
                if between:
                    broken = (d, between)
                    break
            if broken is None:
                return out
            d, between = broken
            taken = [g for g in range(len(names)) if fwd[g] & between]
            moved += len(taken)
            if moved > HULL_GROUPS or (d.startswith("fpga") and not all(ok[g] for g in taken)):
                break
            for g in taken:
                out[names[g]] = d
        return runs_repaired(out)

    def runs_repaired(genome: Genome) -> Genome:
        """Each device's groups one run in the execution order (an interval of a
        topological order is convex, so the placement is contiguous wherever each group's
        forward nodes are consecutive): a group whose device already ran earlier joins the
        run before it, where that device may take it."""
        out = dict(genome)
        closed: set[str] = set()
        current = None
        for g in order:
            name = names[g]
            d = out[name]
            if d != current and d in closed and current is not None and \
                    (not current.startswith("fpga") or ok[g]):
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
        if placement is None:  # given its cores, placement_of always places
            placement = placement_of(inst, gr, where, capped_cores(inst, gr, where))
        assert placement is not None
        return placement

    def from_plan(plan: MaxloadPlacement) -> Genome:
        genome = {names[g]: plan.device[members[0]] for g, members in enumerate(gr.members)}
        if latency:
            genome = {name: ON_CPU if d.startswith("cpu") else d for name, d in genome.items()}
        return genome

    notes = ("per colour group: an accelerator or the CPU (cores: the family's choice); unsupported groups repaired "
             "onto the CPU") if latency else ("per colour group (in execution order): its device; unsupported groups "
                                             "repaired onto cpu0, non-convex devices onto their convex hull (else one "
                                             "run per device)")
    # both repairs leave every plan that meets the rules as it is (throughput: a non-convex one is changed)
    return SearchSpace(genes, to_plan, from_plan, repair, notes=notes,
                       meta={"represents_every_plan": latency, "represents_every_feasible_plan": True})
