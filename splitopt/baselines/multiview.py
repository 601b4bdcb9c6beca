"""Baselines of the multiview family (problem ``multiview``, SplitNets Table 6) and its
brute-force reference. Every plan is judged by ``splitopt.multiview.evaluate``.

* ``multiview-brute-force``: every (fusion, width), every cut point per view, every bus
  order (serial bus) and every aggregator order; the least makespan meeting every limit.
  Exact on small instances; refuses (NotApplicable) above ``max_plans``;
* ``all-on-aggregator``: every view sends its raw input; fusion at the last fusion
  candidate (late fusion after the last convolution, as the prior methods of Table 6), no
  compression (SplitNets "All-on-agg.");
* ``all-on-sensor``: every sensor runs the whole pre-fusion part of the last fusion
  candidate (the whole network when that is the output), no compression ("All-on-sen.");
* ``common-split``: one common cut at the fusion point for every view, no compression,
  the best fusion candidate ("Split at fusion", what SplitNets' Neurosurgeon-style
  baseline picks): least makespan among those meeting the memory limits, else the least
  memory overrun with NO_SOLUTION_FOUND.

Orders of the baselines: transfers by sensor finish time, aggregator tasks by arrival
(``splitopt.multiview.best_orders``).
"""

from __future__ import annotations

import itertools
import math

from splitopt.errors import NotApplicable
from splitopt.multiview import (MultiviewPlan, best_orders, data, fusion_ms, simulate, view_costs, evaluate,
                                MEMORY_RTOL)
from splitopt.instance import Instance
from splitopt.result import BackendOutput, Status
from splitopt.solvers.base import Backend, SolveOptions

PROBLEMS = ("multiview",)
#: default limit on the number of plans brute force evaluates
MAX_PLANS = 300_000


def _check(backend, inst: Instance) -> None:
    if inst.settings.problem not in backend.problems:
        raise NotApplicable(f"baseline '{backend.name}' handles problems {list(backend.problems)}, "
                            f"not '{inst.settings.problem}'")


def _finish(inst: Instance, plan: MultiviewPlan, method: str) -> BackendOutput:
    m = evaluate(inst, plan)
    if m.feasible:
        return BackendOutput(Status.FEASIBLE, plan=plan, objective=m.makespan_ms)
    return BackendOutput(Status.NO_SOLUTION_FOUND, plan=plan, objective=m.makespan_ms,
                         message=f"{method}: its plan breaks a limit the method does not model: "
                                 + "; ".join(m.violations))


def _uniform(inst: Instance, fusion: str, cut: str) -> MultiviewPlan:
    d = data(inst)
    cuts = {s: cut for s in d.sensors}
    bus, agg = best_orders(inst, cuts, fusion, None)
    return MultiviewPlan(fusion, None, cuts, bus, agg)


def count_plans(inst: Instance) -> int:
    """Number of plans brute force evaluates."""
    d = data(inst)
    V = d.views
    orders = math.factorial(V) ** (2 if d.serial else 1)
    return sum(len(d.points(f, w)) ** V for f, w in d.archs) * orders


class MultiviewBruteForceBackend(Backend):
    name = "multiview-brute-force"
    kind = "exact"
    problems = PROBLEMS
    requires = ()
    description = "multiview: enumerate fusion, width, per-view cuts and task orders through the evaluator"

    def __init__(self, max_plans: int = MAX_PLANS):
        self.max_plans = max_plans

    def solve(self, inst: Instance, options: SolveOptions | None = None) -> BackendOutput:
        """The least-makespan plan meeting every limit, proven by enumeration. Per-view costs
        are the evaluator's (cached per view); each combination is scheduled by the
        evaluator's ``simulate``. ``options`` are ignored."""
        _check(self, inst)
        count = count_plans(inst)
        if count > self.max_plans:
            raise NotApplicable(f"multiview-brute-force: instance '{inst.name}' has {count:,} plans, more than "
                                f"{self.max_plans:,}; use cpsat or a MILP backend")
        d = data(inst)
        perms = list(itertools.permutations(d.sensors))
        best, best_ms, evaluated = None, math.inf, 0
        for f, w in d.archs:
            if d.accuracy_problem(f, w):  # below settings.multiview.min_accuracy
                continue
            final = fusion_ms(inst, f, w)
            for cuts in itertools.product(d.points(f, w), repeat=d.views):
                costs = [view_costs(inst, f, w, s, c) for s, c in zip(d.sensors, cuts)]
                if any(c.missing_required or c.memory_bytes > c.memory_limit * (1 + MEMORY_RTOL) for c in costs):
                    evaluated += len(perms) ** (2 if d.serial else 1)
                    continue
                for bus in (perms if d.serial else [None]):
                    for agg in perms:
                        evaluated += 1
                        ms, _ = simulate(inst, costs, final, bus, agg)
                        if ms < best_ms:
                            best_ms = ms
                            best = MultiviewPlan(f, w, dict(zip(d.sensors, cuts)), bus, agg)
        extra = {"plans_evaluated": evaluated}
        if best is None:
            return BackendOutput(Status.INFEASIBLE, message="no plan meets the sensor limits", extra=extra)
        return BackendOutput(Status.OPTIMAL, plan=best, objective=best_ms, bound=best_ms, extra=extra)


class AllOnAggregatorBackend(Backend):
    name = "all-on-aggregator"
    kind = "baseline"
    problems = PROBLEMS
    description = "multiview: raw views sent, fusion at the last candidate, all compute on the aggregator"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        _check(self, inst)
        d = data(inst)
        return _finish(inst, _uniform(inst, d.fusions[-1], d.input), self.name)


class AllOnSensorBackend(Backend):
    name = "all-on-sensor"
    kind = "baseline"
    problems = PROBLEMS
    description = "multiview: each sensor runs everything before the last fusion candidate"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        _check(self, inst)
        d = data(inst)
        return _finish(inst, _uniform(inst, d.fusions[-1], d.fusions[-1]), self.name)


class CommonSplitBackend(Backend):
    name = "common-split"
    kind = "baseline"
    problems = PROBLEMS
    description = "multiview: best common cut at the fusion point, no compression (SplitNets 'split at fusion')"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        _check(self, inst)
        d = data(inst)
        rows = []
        for f in d.fusions:
            plan = _uniform(inst, f, f)
            m = evaluate(inst, plan)
            over = max(c.memory_bytes - c.memory_limit for c in m.views)
            rows.append((m.feasible, m.makespan_ms, over, plan))
        feasible = [r for r in rows if r[0]]
        if feasible:
            plan = min(feasible, key=lambda r: r[1])[3]
        else:
            plan = min(rows, key=lambda r: (r[2], r[1]))[3]
        return _finish(inst, plan, self.name)
