"""``solve``: the library's entry point. Runs one backend, re-evaluates its plan with the
independent evaluator, checks that the two agree, and returns a ``SolveResult``."""

from __future__ import annotations

import time
from pathlib import Path

from splitopt.errors import NotApplicable, SolverFailure
from splitopt.evaluator import evaluate
from splitopt.families import family, feasible_start_plan
from splitopt.instance import Instance
from splitopt.result import BackendOutput, SolveResult, Status
from splitopt.solvers.base import SolveOptions
from splitopt.solvers.registry import default_solver, get_backend

#: relative tolerance between a backend's own objective and the evaluator's
AGREEMENT_RTOL = 1e-6


def solve(
    inst: Instance,
    solver: str | None = None,
    time_limit: float | None = None,
    threads: int = 2,
    seed: int = 0,
    verbose: bool = False,
    export_path: str | Path | None = None,
    diagnose: bool = True,
) -> SolveResult:
    """Solve ``inst`` with backend ``solver`` (see ``splitopt solvers``; None: the
    problem's default, ``milp-cbc`` for the edge/cloud problems, ``cpsat`` for the
    multi-device ones).

    ``time_limit`` in seconds (None: none). A float-precision baseline on a ``split_bits``
    instance runs on the float problem (``split``) of the same instance; the result's
    ``problem`` says so. Raises UnknownSolver, SolverUnavailable, NotApplicable, or
    SolverFailure when a backend's objective or feasibility disagrees with the evaluator."""
    if solver is None:
        solver = default_solver(inst.settings.problem)
    backend = get_backend(solver)
    problem = inst.settings.problem
    if problem not in backend.problems:
        if problem == "split_bits" and "split" in backend.problems:
            inst = inst.with_settings(problem="split")
        else:
            raise NotApplicable(f"solver '{solver}' does not handle problem '{problem}' (handles {', '.join(backend.problems)})")
    options = SolveOptions(
        time_limit_s=time_limit,
        threads=threads,
        seed=seed,
        verbose=verbose,
        export_path=Path(export_path) if export_path is not None else None,
    )
    t0 = time.perf_counter()
    out = backend.solve(inst, options)
    elapsed = time.perf_counter() - t0
    build_s = float(out.extra.get("build_s", 0.0))
    solve_s = float(out.extra.get("solve_s", elapsed - build_s))
    if out.status is Status.INFEASIBLE:
        _check_infeasibility_claim(inst, backend.name)
    result = _finish(inst, backend, out, build_s, solve_s)
    if result.status is Status.INFEASIBLE and diagnose:
        fam = family(inst.settings.problem)
        if inst.is_two_tier:
            result.message = diagnose_infeasibility(inst, solver, time_limit, threads)
        elif hasattr(fam, "diagnose_infeasibility"):
            result.message = fam.diagnose_infeasibility(inst)
    return result


def _check_infeasibility_claim(inst: Instance, backend: str) -> None:
    """An INFEASIBLE answer must not contradict the family's start plan when it is feasible."""
    if feasible_start_plan(inst) is not None:
        raise SolverFailure(f"{backend}: claims the instance is infeasible, but the start plan meets every limit")


def _finish(inst: Instance, backend, out: BackendOutput, build_s: float, solve_s: float) -> SolveResult:
    status, plan, metrics, message = out.status, out.plan, None, out.message
    objective = gap = None
    if plan is not None:
        metrics = evaluate(inst, plan)
        objective = metrics.objective_ms
        if out.objective is not None:
            tol = AGREEMENT_RTOL * max(abs(objective), 1e-9) + out.objective_tolerance_ms
            if abs(out.objective - objective) > tol:
                raise SolverFailure(
                    f"{backend.name}: its objective {out.objective:.9g} ms disagrees with the evaluator's "
                    f"{objective:.9g} ms (tolerance {tol:.3g} ms)"
                )
        if not metrics.feasible and status.has_plan:
            if backend.kind == "exact":
                raise SolverFailure(f"{backend.name}: returned a plan the evaluator rejects: {metrics.violations[0]}")
            status = Status.NO_SOLUTION_FOUND
            message = message or f"the method's plan breaks a budget: {metrics.violations[0]}"
    bound = out.bound
    if bound is not None and objective is not None and status.has_plan:
        bound = min(bound, objective)
        gap = max(0.0, (objective - bound) / max(abs(objective), 1e-12))
    return SolveResult(
        status=status,
        backend=backend.name,
        problem=inst.settings.problem,
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


def diagnose_infeasibility(inst: Instance, solver: str, time_limit, threads: int) -> str:
    """Name the budget no edge/cloud plan can meet, by re-solving with each budget lifted."""
    s = inst.settings
    required = ", ".join(s.edge_required) or "none"
    lift_error = inst.with_settings(error_budget=None)
    lift_memory = inst.with_settings(edge_memory_bytes=1e30)
    ok_without_error = s.error_budget is not None and solve(
        lift_error, solver, time_limit, threads, diagnose=False
    ).status.has_plan
    ok_without_memory = solve(lift_memory, solver, time_limit, threads, diagnose=False).status.has_plan
    if ok_without_error and not ok_without_memory:
        return (
            f"infeasible: error budget {s.error_budget:.6g} is below the minimum achievable error of any plan "
            f"that runs the required edge layers ({required}) within the memory limit"
        )
    if ok_without_memory and not ok_without_error:
        return (
            f"infeasible: edge memory limit {s.edge_memory_bytes:,.0f} B is below what the required edge "
            f"layers ({required}) need at any bit-width"
        )
    if ok_without_error and ok_without_memory:
        return (
            f"infeasible: edge memory limit {s.edge_memory_bytes:,.0f} B and error budget {s.error_budget:.6g} "
            "cannot be met together (each alone can)"
        )
    return (
        f"infeasible: neither the edge memory limit {s.edge_memory_bytes:,.0f} B nor the error budget "
        f"{s.error_budget} can be met by the required edge layers ({required})"
    )
