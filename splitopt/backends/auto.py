"""``auto``: evolutionary search first, then the family's exact program; the better of
the two plans, with the exact bound.

1. Evolutionary search (``splitopt.backends.heuristic``) runs for a first slice of the
   budget: ``HEURISTIC_SHARE`` of the time limit (at most ``10^4`` evaluations), or
   ``EVALUATIONS_WITHOUT_LIMIT`` evaluations when there is no time limit.
2. The exact backend (``cpsat`` where it runs the family's programs, else the family's
   default) runs for the rest of the budget, from the family's own start plan. The
   search's plan is not given to it as a hint: measured on
   ``transformer1000_chain8_throughput``, CP-SAT hinted with the search's plan (65.5 ms)
   proved the optimum in 9-19 s in 3 runs and not within 24 s in 3; unhinted, in 9-11 s
   in 6 runs of 6.
3. The answer is the better plan by the family's evaluator, with the exact run's bound,
   so the gap is honest; OPTIMAL only when the exact run proved it. Where the exact
   program could not be built or solved in time, the search's plan comes back FEASIBLE
   with whatever bound the exact run knew (none when it was not built), and the message
   says so.

Ctrl-C during the search returns the search's best plan at once (the exact run does not
start); during the exact run, that run's answer (its incumbent or the start plan).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping

from splitopt.backends.base import Backend
from splitopt.backends.registry import backend_class, get_backend
from splitopt.core.errors import InvalidOption, SolverFailure
from splitopt.core.jsonfile import cut
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status

#: share of the time limit evolutionary search gets before the exact run
HEURISTIC_SHARE = 0.2
#: evaluations of evolutionary search when there is no time limit
EVALUATIONS_WITHOUT_LIMIT = 2000
#: evaluations of evolutionary search at most, within its slice of a time limit
EVALUATIONS_WITH_LIMIT = 10_000
#: the exact backend auto prefers, where it handles the family
PREFERRED_EXACT = "cpsat"


def exact_backend_for(family: Any) -> str:
    """The exact backend auto runs on ``family``: CP-SAT where it handles the family's
    programs and is installed (fastest on every family in the benchmarks), else the
    family's default."""
    cls = backend_class(PREFERRED_EXACT)
    if cls.is_installed() and cls().handles(family, family.problems[0]):
        return PREFERRED_EXACT
    return family.default_backend


class AutoBackend(Backend):
    name = "auto"
    kind = "portfolio"
    description = ("evolutionary search for a first slice of the budget, then the exact program started from its "
                   "plan (cpsat where it applies); the better plan with the exact bound")

    def check_options(self, options: Mapping[str, Any]) -> None:
        for key in options:
            raise InvalidOption(f"option '{cut(key)}': solver 'auto' takes no solver options (name a backend, "
                                f"e.g. --solver cpsat or --solver evolutionary, to pass its options)")

    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        self.check_options(options.solver_options)
        t0 = time.perf_counter()
        limit = options.remaining_s()
        if limit is None:
            search_options = dataclasses.replace(options, solver_options={"evaluations": EVALUATIONS_WITHOUT_LIMIT})
        else:
            share = max(0.0, HEURISTIC_SHARE * limit)
            search_options = dataclasses.replace(options, time_limit_s=share, deadline=time.monotonic() + share,
                                                 solver_options={"evaluations": EVALUATIONS_WITH_LIMIT})
        heuristic = get_backend("evolutionary").solve(family, inst, search_options)
        search_s = time.perf_counter() - t0
        found = heuristic.plan if heuristic.status is Status.FEASIBLE else None
        extra: dict[str, Any] = {"search": {k: v for k, v in heuristic.extra.items() if k != "anytime"},
                                 "anytime": heuristic.extra.get("anytime", []), "search_s": search_s}
        said = (f"evolutionary: {heuristic.extra.get('evaluations', 0)} evaluations in {search_s:.2f} s"
                + (f", best {family.evaluate(inst, found).objective_ms:.6g} ms" if found is not None else
                   ", no plan meeting every limit"))
        if heuristic.extra.get("interrupted"):
            extra.update(interrupted=True, returned="search plan", solve_s=search_s)
            return dataclasses.replace(heuristic, message=f"auto: interrupted (Ctrl-C) during the search; {said}",
                                       extra=extra)

        exact_name = exact_backend_for(family)
        exact_options = dataclasses.replace(options, solver_options={})
        exact = get_backend(exact_name).solve(family, inst, exact_options)
        extra.update({"exact_backend": exact_name, "exact_status": exact.status.value,
                      **{f"exact_{k}": v for k, v in exact.extra.items() if k in ("build_s", "solve_s", "returned")}})
        if exact.extra.get("interrupted"):
            extra["interrupted"] = True
        extra["solve_s"] = time.perf_counter() - t0
        message = f"auto: {said}; {exact_name}: {exact.message}"
        if exact.status is Status.INFEASIBLE:
            if found is not None:
                raise SolverFailure(f"auto: {exact_name} claims the instance is infeasible, but evolutionary search "
                                    f"found a plan that meets every limit")
            return dataclasses.replace(exact, message=exact.message, extra=extra)
        if exact.plan is not None and exact.status.has_plan:
            exact_objective = family.evaluate(inst, exact.plan).objective_ms
            if found is None or exact.status is Status.OPTIMAL or \
                    exact_objective <= family.evaluate(inst, found).objective_ms:
                extra["returned"] = "exact plan" if exact.extra.get("returned") is None else \
                    f"exact run's {exact.extra['returned']}"
                return dataclasses.replace(exact, message=message, extra=extra)
        if found is None:
            extra["returned"] = "nothing"
            return dataclasses.replace(exact, message=message, extra=extra)
        extra["returned"] = "search plan"
        bound = exact.bound if exact.status is not Status.ERROR else None
        return BackendOutput(Status.FEASIBLE, plan=found, objective=heuristic.objective, bound=bound,
                             message=f"{message}; returning the search's plan", extra=extra)
