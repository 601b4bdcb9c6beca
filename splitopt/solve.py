"""``solve``: the library's entry point. Finds the instance's family and the backend, runs
it within the user's wall-clock budget, re-evaluates the plan with the family's one
evaluator, checks that the two agree, and returns a ``SolveResult``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from splitopt.backends.base import Backend, ProgramBackend, feasible_start_plan, optimal_atol_ms
from splitopt.backends.registry import get_backend
from splitopt.core import progress
from splitopt.core.errors import InvalidOption, NotApplicable, SolverFailure
from splitopt.core.jsonfile import shown
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, SolveResult, Status
from splitopt.families.base import Family
from splitopt.families.registry import family_of

#: relative tolerance between a backend's own objective and the evaluator's
AGREEMENT_RTOL = 1e-6
#: the backend ``solve`` runs when the caller names none
DEFAULT_SOLVER = "auto"


def default_solver(family: Family, options: Mapping[str, Any] | None = None, export: bool = False) -> str:
    """The backend ``solve`` runs when the caller names none: ``auto``; with solver
    options (which ``auto`` does not take) or a program to export (``auto`` may run
    several), the family's default exact backend."""
    return family.default_backend if options or export else DEFAULT_SOLVER


def solve(
    inst: Any,
    solver: str | None = None,
    time_limit: float | None = None,
    threads: int = 2,
    seed: int = 0,
    verbose: bool = False,
    export_path: str | Path | None = None,
    diagnose: bool = True,
    options: Mapping[str, Any] | None = None,
) -> SolveResult:
    """Solve ``inst`` with backend ``solver`` (see ``splitopt solvers``; None: ``auto``, a
    short exact run, then heuristic search, then the exact program for the rest of the
    budget; with ``options`` or ``export_path`` and no solver, the family's default exact backend,
    ``milp-cbc`` for the edge/cloud problems, ``cpsat`` for the others).

    ``time_limit``: the wall-clock budget in seconds from this call to its answer,
    building the program included (None: none); on reaching it the best plan found is
    returned as FEASIBLE with its gap. ``options``: solver options passed through to the
    backend (an unknown one is an InvalidOption). A method that runs only on another
    problem of the family (a float baseline on ``split_bits``) runs on that problem of
    the same instance; the result's ``problem`` says so. Raises UnknownSolver,
    SolverUnavailable, NotApplicable, InvalidOption, or SolverFailure when a backend's
    objective or feasibility disagrees with the evaluator."""
    if options is not None and (not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options)):
        raise InvalidOption(f"options: a mapping of solver option names (strings) to values is expected, got "
                            f"{type(options).__name__} {shown(options)}")
    opts = SolveOptions(
        time_limit_s=time_limit,
        threads=threads,
        seed=seed,
        verbose=verbose,
        export_path=Path(export_path) if export_path is not None else None,
        solver_options=dict(options or {}),
    )
    family = family_of(inst)
    family.prepare(inst)
    backend = get_backend(solver if solver is not None else default_solver(family, options, export_path is not None),
                          family)
    if export_path is not None and not isinstance(backend, ProgramBackend):
        raise InvalidOption(f"export: solver '{backend.name}' builds no program to write (the program backends "
                            "do: cpsat, milp-highs, milp-cbc)")
    inst = _problem_for(backend, family, inst)
    # proven from the data alone (no search): every backend says so at once, heuristics too
    reason = family.proven_infeasible(inst) if export_path is None else None
    t0 = time.perf_counter()
    with progress.solving(backend.name):
        out = (BackendOutput(Status.INFEASIBLE, message=reason, extra={"proven_by": "the instance's data"})
               if reason is not None else backend.solve(family, inst, opts))
    elapsed = time.perf_counter() - t0
    # the solve's wall time is measured here, around the whole backend call (a backend's
    # own ``solve_s`` may leave out work it did after it stopped its clock)
    build_s = min(float(out.extra.get("build_s", 0.0)), elapsed)
    solve_s = elapsed - build_s
    if out.status is Status.INFEASIBLE and feasible_start_plan(family, inst) is not None:
        raise SolverFailure(f"{backend.name}: claims the instance is infeasible, but the start plan meets every limit")
    result = _finish(family, inst, backend, out, build_s, solve_s)
    if result.status is Status.INFEASIBLE and diagnose and reason is None:
        def resolve(variant: Any) -> bool:
            return solve(variant, backend.name, time_limit, threads, seed, diagnose=False,
                         options=options).status.has_plan

        result.message = family.diagnose(inst, resolve)
    return result


def _problem_for(backend: Backend, family: Family, inst: Any) -> Any:
    """The instance a family method runs on: the same one, or its ``fallback_problem``
    variant when the method does not handle the instance's problem."""
    method = getattr(backend, "method", None)
    if method is None or method.problems is None or inst.problem in method.problems:
        return inst
    if method.fallback_problem is not None:
        variant = inst.with_settings(problem=method.fallback_problem)
        family.prepare(variant)
        return variant
    raise NotApplicable(f"solver '{backend.name}' does not handle problem '{inst.problem}' "
                        f"(handles {', '.join(method.problems)})")


def _finish(family: Family, inst: Any, backend: Backend, out: BackendOutput, build_s: float,
            solve_s: float) -> SolveResult:
    """Judge the backend's plan with the family's evaluator and build the result."""
    status, plan, metrics, message = out.status, out.plan, None, out.message
    objective = gap = None
    if plan is not None:
        metrics = family.evaluate(inst, plan)
        objective = metrics.objective_ms
        if out.objective is not None:
            tol = AGREEMENT_RTOL * max(abs(objective), 1e-9) + out.objective_tolerance_ms
            worse = objective - out.objective > tol
            better = out.objective - objective > tol and not out.one_sided
            if worse or better:
                raise SolverFailure(
                    f"{backend.name}: its objective {out.objective:.9g} ms disagrees with the evaluator's "
                    f"{objective:.9g} ms (tolerance {tol:.3g} ms)"
                )
        if not metrics.feasible and status.has_plan:
            if backend.kind == "exact":
                raise SolverFailure(f"{backend.name}: returned a plan the evaluator rejects: {metrics.violations[0]}")
            status = Status.NO_SOLUTION_FOUND
            message = message or (f"{backend.name}: its plan breaks a budget the method does not model: "
                                  + "; ".join(metrics.violations))
    bound = out.bound
    if bound is not None:
        bound = max(bound, 0.0)  # every objective is a time (ms): never below zero
    if bound is not None and objective is not None and status.has_plan:
        bound = min(bound, objective)
        gap = max(0.0, (objective - bound) / max(abs(objective), 1e-12))
        if status is Status.OPTIMAL and objective - bound > (backend.optimal_rtol * abs(objective)
                                                            + optimal_atol_ms(objective, bound)):
            status = Status.FEASIBLE  # proven only up to the program's stated tolerance
            scaling = (f" (the program's rounding tolerance alone is {out.objective_tolerance_ms:.3g} ms)"
                       if out.objective_tolerance_ms > backend.optimal_rtol * abs(objective) else "")
            message = (f"{message}; the solver's optimum is proven to within {100 * gap:.3g} %, more than "
                       f"the {backend.optimal_rtol:g} relative tolerance of OPTIMAL{scaling}")
    return SolveResult(
        status=status,
        backend=backend.name,
        problem=inst.problem,
        plan=plan,
        metrics=metrics,
        objective=objective,
        bound=bound,
        gap=gap,
        build_s=build_s,
        solve_s=solve_s,
        message=message,
        extra=dict(out.extra),
    )
