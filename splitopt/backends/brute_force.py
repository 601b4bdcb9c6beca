"""Brute force: the reference optimum on small instances of any family.

Walks every plan the family enumerates (``Family.enumerate_plans``: every well-formed
plan, or every plan that can be optimal) and judges each with the family's own
evaluator, so its answer depends on no program's algebra. Keeps the feasible plan of
least objective; among equal objectives the first one met. A plan the evaluator rejects
as malformed (e.g. orders that deadlock) is skipped. Above ``limit`` plans the family's
enumeration raises NotApplicable before any work.
"""

from __future__ import annotations

import math
import time
from typing import Any

from splitopt.backends.base import Backend
from splitopt.core.errors import InvalidPlan
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status

#: default limit on the number of plans to evaluate
MAX_PLANS = 200_000


class BruteForceBackend(Backend):
    name = "brute-force"
    kind = "exact"
    description = "every plan the family enumerates, judged by its evaluator (small instances only)"
    optimal_rtol = 0.0

    def __init__(self, limit: int = MAX_PLANS):
        self.limit = limit

    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        """The least-objective plan meeting every limit, proven by enumeration. The time
        limit and Ctrl-C are honoured between plans (then FEASIBLE with the best so far)."""
        self.check_options(options.solver_options)
        t0 = time.perf_counter()
        plans = family.enumerate_plans(inst, self.limit)
        best, best_value, evaluated, stopped = None, math.inf, 0, ""
        try:
            for plan in plans:
                if options.out_of_time():
                    stopped = "stopped by the time limit"
                    break
                try:
                    metrics = family.evaluate(inst, plan)
                except InvalidPlan:
                    continue
                evaluated += 1
                if metrics.feasible and metrics.objective_ms < best_value:
                    best, best_value = plan, metrics.objective_ms
        except KeyboardInterrupt:
            stopped = "interrupted (Ctrl-C)"
        extra = {"plans_evaluated": evaluated, "solve_s": time.perf_counter() - t0, "optimal_rtol": 0.0}
        if stopped:
            extra["interrupted"] = True
            if best is None:
                return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"brute-force: {stopped}", extra=extra)
            return BackendOutput(Status.FEASIBLE, plan=best, objective=best_value,
                                 message=f"brute-force: {stopped} after {evaluated} plans", extra=extra)
        if best is None:
            return BackendOutput(Status.INFEASIBLE, message="brute-force: no plan meets every limit", extra=extra)
        return BackendOutput(Status.OPTIMAL, plan=best, objective=best_value, bound=best_value, extra=extra)
