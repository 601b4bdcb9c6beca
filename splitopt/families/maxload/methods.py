"""Methods of the maxload family besides the generic programs.

* ``all-on-cpu``: every node on ``cpu0`` (needs ``maxCPUs >= 1``): it meets every
  placement rule, so it is the plan a time-limited solve falls back on; its max-load is
  the sum of the CPU times, its latency the DAG's longest path of CPU times.
* ``intervals`` (throughput): the best placement whose devices each hold one interval of
  a group order, by dynamic programming (``intervals.py``; non-convex intervals
  excluded).
* ``group-moves`` (throughput): the ``intervals`` plan improved by moving one colour
  group at a time while every rule holds (``moves.py``); a device may then hold several
  stretches of the order.
* ``ideal-dp`` (throughput, exact): dynamic programming over the ideals of the forward
  DAG (``ideal_dp.py``), where their count is small; where two contiguous devices could
  wait on each other in a cycle, the DP over acyclic device orders, whose plan CP-SAT then
  proves optimal or beats (``certify.py``); ``auto`` runs it instead of CP-SAT where
  its lattice is small (``MaxloadFamily.exact_method``).

Baselines' plans seed every heuristic (``splitopt.backends.heuristic.seed_genomes``).
"""

from __future__ import annotations

import math
import sys

from splitopt.core.errors import NotApplicable
from splitopt.core.options import BuildDeadlinePassed, SolveOptions, building_until
from splitopt.core.result import BackendOutput, Status
from splitopt.families.base import Method
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement


def all_on_cpu_placement(inst: MaxloadInstance) -> MaxloadPlacement | None:
    """Every node on cpu0, or None without a CPU core (an empty graph: the empty placement)."""
    if not inst.nodes:
        return MaxloadPlacement({})
    if not inst.cpus:
        return None
    return MaxloadPlacement({v: inst.cpus[0] for v in inst.node_by_id})


def all_on_cpu(inst: MaxloadInstance, options: SolveOptions) -> BackendOutput:
    """Every node on cpu0."""
    placement = all_on_cpu_placement(inst)
    if placement is None:
        raise NotApplicable("all-on-cpu: the instance has no CPU core (maxCPUs=0)")
    return BackendOutput(Status.FEASIBLE, plan=placement)


def _throughput_only(inst: MaxloadInstance, name: str) -> None:
    if inst.objective != "throughput":
        raise NotApplicable(f"{name}: a max-load (throughput) method; the instance's objective is {inst.objective}")


def interval_plan(inst: MaxloadInstance, options: SolveOptions | None = None) -> MaxloadPlacement | None:
    """The ``intervals`` plan (kept with the instance: ``group-moves`` starts from it);
    NotApplicable where the time limit of ``options`` runs out first."""
    from splitopt.families.maxload.intervals import interval_placement

    out_of_time = options.out_of_time if options is not None else None
    return inst.derived(("maxload", "intervals"), lambda: interval_placement(inst, out_of_time))


def intervals(inst: MaxloadInstance, options: SolveOptions) -> BackendOutput:
    """Each device one interval of a group order, the min max-load such plan (DP)."""
    _throughput_only(inst, "intervals")
    plan = interval_plan(inst, options)
    if plan is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND,
                             message="intervals: no placement of intervals of the group order meets the rules")
    return BackendOutput(Status.FEASIBLE, plan=plan)


def group_moves(inst: MaxloadInstance, options: SolveOptions) -> BackendOutput:
    """The ``intervals`` plan improved by single-group moves that keep every rule."""
    from splitopt.families.maxload.moves import improve

    _throughput_only(inst, "group-moves")
    plan = interval_plan(inst, options)
    if plan is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="group-moves: no start plan (intervals found none)")
    return BackendOutput(Status.FEASIBLE, plan=improve(inst, plan, out_of_time=options.out_of_time))


#: ``ideal-dp``'s tolerance of OPTIMAL: its DP is exact to float rounding, its certified
#: acyclic optimum (``certify.py``) to the cap's margin (at least ``certify.CUTOFF_RTOL``)
IDEAL_DP_RTOL = 1e-5


def ideal_dp(inst: MaxloadInstance, options: SolveOptions) -> BackendOutput:
    """Exact max-load by the ideal-enumeration DP: OPTIMAL with the DP's value as the bound
    (less its float rounding, ms); INFEASIBLE where no placement meets the rules; where
    the time limit comes first, the all-on-cpu plan FEASIBLE (NO_SOLUTION_FOUND without a
    core). Where devices could wait on each other in a cycle, the DP over acyclic device
    orders and CP-SAT asked for a better placement (``certify.py``). NotApplicable where
    the lattice is too large or a colour class has no forward node."""
    from splitopt.families.maxload.ideal_dp import IdealDpResult, solve_ideal_dp

    _throughput_only(inst, "ideal-dp")
    if not inst.nodes:  # nothing to place: the empty placement, max-load 0
        return BackendOutput(Status.OPTIMAL, plan=MaxloadPlacement({}), bound=0.0, message="ideal-dp: no node to place")
    try:  # the search for cyclic waits stops at the time limit too (BuildDeadlinePassed)
        with building_until(options.deadline):
            try:
                res, acyclic = solve_ideal_dp(inst, options.out_of_time), False
            except NotApplicable as exact_reason:
                try:  # applies but for a possible cyclic wait: the acyclic optimum, then its proof
                    res, acyclic = solve_ideal_dp(inst, options.out_of_time, acyclic_only=True), True
                except NotApplicable:
                    raise exact_reason from None
    except BuildDeadlinePassed:
        res, acyclic = IdealDpResult(None, None, 0, 0, finished=False), False
    extra = {"ideals": res.ideals, "ideal_pairs": res.pairs, "acyclic_only": acyclic}
    if not res.finished:
        fallback = all_on_cpu_placement(inst)
        if fallback is None:
            return BackendOutput(Status.NO_SOLUTION_FOUND, message="ideal-dp: the time limit came first", extra=extra)
        return BackendOutput(Status.FEASIBLE, plan=fallback, extra=extra,
                             message="ideal-dp: the time limit came first; returning all-on-cpu")
    if res.plan is None:
        return BackendOutput(Status.INFEASIBLE, extra=extra, message="ideal-dp: no contiguous, colour-consistent "
                             "placement fits the accelerator memory (maxSizePerFPGA, maxFPGAs, maxCPUs)")
    if acyclic:
        from splitopt.families.maxload.certify import certify_or_improve
        from splitopt.families.maxload.evaluate import evaluate

        out = certify_or_improve(inst, res.plan, evaluate(inst, res.plan).max_load_ms, options)
        out.extra.update(extra)
        return out
    assert res.value_ms is not None, "a finished DP that found a plan has its value"
    # the DP sums loads as differences of prefix sums: bound its rounding by the totals
    total = math.fsum(max(n.cpu_ms, n.fpga_ms) for n in inst.nodes) + math.fsum(inst.out_cost.values())
    tol = 64 * sys.float_info.epsilon * total
    return BackendOutput(Status.OPTIMAL, plan=res.plan, bound=max(0.0, res.value_ms - tol), extra=extra)


#: the family's methods besides the generic programs (``MaxloadFamily.methods``)
METHODS = (
    Method("all-on-cpu", "every node on cpu0 (meets every placement rule when maxCPUs >= 1)", all_on_cpu, hint=True),
    Method("intervals", "throughput: each device one interval of a group order, min max-load by dynamic programming",
           intervals),
    Method("group-moves", "throughput: the intervals plan improved by moving one colour group at a time "
           "(local search keeping every rule)", group_moves, hint=True),
    Method("ideal-dp", "throughput, exact: dynamic programming over the ideals of the forward DAG (where they are "
           "few); where contiguous devices could wait on each other in a cycle, its acyclic optimum proven or beaten "
           "by CP-SAT asked for a better placement", ideal_dp, kind="exact", optimal_rtol=IDEAL_DP_RTOL),
)
