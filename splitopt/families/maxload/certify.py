"""Prove a max-load placement optimal, or beat it, with CP-SAT restricted to better
placements (``formulations/maxload_throughput.md``, "Certified acyclic optimum").

``ideal-dp`` solves the max-load problem exactly where no two contiguous devices can wait
on each other in a cycle. Where they can (resnet50's projection shortcuts, the BERT
attention heads), the same DP restricted to acyclic device orders (the peer DP's model)
still gives a placement, often the optimum, in a fraction of a second; what it cannot
give is the proof. CP-SAT gives it faster when it is asked only for a placement *better*
than that one: the family's CP-SAT program of the max-load
(``cpsat_throughput.build_cpsat_throughput``) with its objective capped below the DP's
value (``backends.cpsat.cap_objective``). Infeasible: no placement is better, the DP's is
optimal. Feasible: CP-SAT optimises on from the better placement (a cyclic one), and its
bound is the bound. On the resnet50 peer graphs the capped run proved infeasibility in
1.1-2.1 s, where the uncapped one took 2.5-5.3 s to prove the same optimum.

The cap is ``value - margin`` with ``margin = max(CUTOFF_RTOL * value, 4 (tol + unit))``
(``tol``: the emission's rounding bound, ``unit``: its time unit, ms): every placement
whose max-load is at most the cap keeps a feasible scaled load (at most ``(cap + tol) /
unit``), and the DP's placement (scaled load at least ``(value - tol) / unit``) is cut off.
So the bound proved is the cap, within ``margin`` of the value.

CP-SAT runs through the cpsat backend's ``run_model``, which keeps the time limit,
threads, seed and Ctrl-C as every CP-SAT run of splitopt does.
"""

from __future__ import annotations

import math

from splitopt.core.gcpause import paused_gc
from splitopt.core.options import BuildDeadlinePassed, SolveOptions, building_until
from splitopt.core.result import BackendOutput, Status
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement

#: the least relative margin below the known value at which the cap is set; the method
#: that certifies states a tolerance of OPTIMAL above it (``methods.IDEAL_DP_RTOL``)
CUTOFF_RTOL = 1e-6


def certify_or_improve(inst: MaxloadInstance, plan: MaxloadPlacement, value_ms: float,
                       options: SolveOptions) -> BackendOutput:
    """OPTIMAL with ``plan`` and the cap as bound where CP-SAT proves that no placement
    has a max-load at or below the cap; else CP-SAT's better placement and its bound
    (OPTIMAL where it proves it, FEASIBLE at the time limit); ``plan`` FEASIBLE where the
    time limit or Ctrl-C comes before either. ``value_ms``: ``plan``'s max-load."""
    from splitopt.backends.cpsat import cap_objective, run_model
    from splitopt.families.maxload.cpsat_throughput import build_cpsat_throughput
    from splitopt.families.maxload.evaluate import evaluate

    def unproven(why: str, **more) -> BackendOutput:
        return BackendOutput(Status.FEASIBLE, plan=plan, extra={"interrupted": True, **more},
                             message=f"ideal-dp: acyclic optimum, not proven ({why})")

    if options.out_of_time():
        return unproven("the time limit came first")
    try:  # built as the program backends build: the time limit stops the build, GC paused
        with building_until(options.deadline), paused_gc():
            program = build_cpsat_throughput(inst, None)
    except BuildDeadlinePassed:
        return unproven("the time limit ran out while building CP-SAT's program")
    except KeyboardInterrupt:
        return unproven("Ctrl-C while building CP-SAT's program", ctrl_c=True)
    unit, tol = program.unit_ms, program.tolerance_ms
    margin = max(CUTOFF_RTOL * value_ms, 4.0 * (tol + unit))
    cap_ms = value_ms - margin
    cap_objective(program.model, math.floor((cap_ms + tol) / unit) + 1)
    extra = {"certify_cap_ms": cap_ms, "certify_tolerance_ms": tol}
    raw = run_model(program.model, options, presolve=program.presolve, unit_ms=unit)
    extra.update({f"certify_{k}": v for k, v in raw.stats.items()})
    if raw.stats.get("ctrl_c"):
        extra["ctrl_c"] = True  # what auto reads to stop at once
    if raw.status is Status.INFEASIBLE:
        return BackendOutput(Status.OPTIMAL, plan=plan, bound=max(0.0, cap_ms), extra=extra,
                             message="ideal-dp: acyclic optimum; CP-SAT proves no placement better by "
                                     f"{margin:.3g} ms or more")
    if raw.values is None:
        return unproven(raw.message, **extra)
    better = program.decode(raw.values)
    restricted_bound = None if raw.bound is None else program.to_ms(raw.bound) - tol
    bound = cap_ms if restricted_bound is None else min(restricted_bound, cap_ms)
    best = better if evaluate(inst, better).max_load_ms < value_ms else plan
    status = Status.OPTIMAL if raw.status is Status.OPTIMAL else Status.FEASIBLE
    return BackendOutput(status, plan=best, bound=max(0.0, bound), extra=extra,
                         message=f"ideal-dp: CP-SAT found a placement better than the acyclic optimum ({raw.message})")
