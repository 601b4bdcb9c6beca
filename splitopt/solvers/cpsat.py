"""CP-SAT backend (OR-Tools): the same ``LinearProgram`` emitted with integer data.

OR-Tools 9.15 (the pinned release) can certify a wrong optimum when a linear
constraint's summed coefficients pass 2**31: an ``int`` activity accumulator in its
presolve overflows (or-tools issue #5293; reproduced here on a 3-layer instance, where
presolve on returned cloud-only at 39.46 ms "OPTIMAL" and the optimum is 6.39 ms). So
this backend runs with ``cp_model_presolve = False``; on the shipped and synthetic
instances that is also faster. Scaling, per row kind (see ``linear.py``):

* time rows and variables (ms; e.g. a bottleneck ``B >= stage time``): a time variable
  is an integer count of ``unit``, its rows' other coefficients are rounded to units like
  the objective's, and the tolerance adds ``unit / 2`` per term of the longest time row;
* objective (ms): each coefficient becomes ``round(c / unit)`` with
  ``unit = U / 2**40`` ms, ``U`` the sum of all objective coefficients' magnitudes and
  the constant (a bound on any plan's latency). Each rounding errs by at most
  ``unit / 2``, so a plan's scaled objective is within ``tol = n_terms * unit / 2`` ms of
  its true latency; the reported bound is ``bound * unit + constant - tol``, so the
  reported gap includes the scaling error (``extra["objective_tolerance_ms"]``, about
  1e-10 relative on the shipped instances);
* memory rows ("bits"): already integers (sizes times bit-widths); a non-integral size
  is rounded up and a limit down, so every plan CP-SAT accepts fits;
* error rows (budget ``E > 0``): multiplied by ``s = 2**40 / E`` and rounded to
  nearest, with the budget raised by ``n/2 + 1`` units (``n`` terms): every plan with
  error at most ``E`` is accepted, and an accepted plan's error exceeds ``E`` by at most
  ``(n + 1) * E / 2**40``, far inside the evaluator's 1e-6 relative tolerance. A
  coefficient above the budget becomes ``budget + 1`` (that choice is impossible
  anyway). A zero budget is enforced exactly by the program (``x <= 0`` rows);
* rows whose largest possible activity is within the right-hand side are dropped
  (e.g. a memory limit larger than all tensors and weights together); a row whose
  activity could overflow 64-bit integers is refused (NotApplicable).

Optional error rows (valid inequalities that only tighten the LP relaxation of the MILP
backends) are dropped: they change no feasible plan. 0/1 logic rows are exact. Continuous variables that are integral at every integral
point of the program (cut indicators, held bits) are declared integer.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from splitopt.errors import NotApplicable, SolverFailure
from splitopt.instance import PROBLEMS, Instance
from splitopt.result import BackendOutput, Status
from splitopt.solvers.base import Backend, SolveOptions
from splitopt.solvers.linear import LinearProgram
from splitopt.families import family, feasible_start_plan

#: scale of the objective and error rows (coefficients up to 2**40)
SCALE = 2**40
#: a row's largest possible activity must stay below this (64-bit integers)
MAX_ACTIVITY = 2**62


def _max_activity(lp: LinearProgram, row) -> float:
    """Largest value of the row's left-hand side over the variables' bounds."""
    total = 0.0
    for i, c in row.coeffs.items():
        v = lp.variables[i]
        total += max(c * v.lb, c * v.ub)
    return total


def _is_int(value: float) -> bool:
    return abs(value - round(value)) <= 1e-9 * max(1.0, abs(value))


def to_cpsat(lp: LinearProgram):
    """Translate a LinearProgram; returns (model, variables, unit_ms, tol_ms)."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    rows = [row for row in lp.rows if not (row.optional and row.kind == "error")]
    used = {i for row in rows for i in row.coeffs} | set(lp.objective)
    upper = abs(lp.objective_constant) + sum(
        abs(c) * max(abs(lp.variables[i].lb), abs(lp.variables[i].ub)) for i, c in lp.objective.items())
    unit = max(upper, 1e-12) / SCALE
    xs = []
    for i, v in enumerate(lp.variables):
        if i not in used:  # only in dropped optional rows
            xs.append(model.NewIntVar(0, 0, v.name))
        elif v.unit == "ms":  # a time variable, in objective units
            xs.append(model.NewIntVar(math.floor(v.lb / unit), math.ceil(v.ub / unit), v.name))
        elif v.binary or (v.lb >= 0 and v.ub <= 1):
            if not (v.binary or v.implied_integer):
                raise SolverFailure(f"cpsat: continuous variable '{v.name}' cannot be made integral")
            xs.append(model.NewBoolVar(v.name))
        else:
            xs.append(model.NewIntVar(math.floor(v.lb), math.ceil(v.ub), v.name))

    time_terms = 0
    for row in rows:
        if row.sense == "<=" and _max_activity(lp, row) <= row.rhs:
            continue  # redundant: no 0/1 point can break it
        if row.kind == "time":
            coeffs = {}
            for i, c in row.coeffs.items():
                if lp.variables[i].unit == "ms":
                    if not _is_int(c):
                        raise SolverFailure(f"cpsat: non-integral coefficient {c} of a time variable in row '{row.name}'")
                    coeffs[i] = int(round(c))
                else:
                    coeffs[i] = int(round(c / unit))
            rhs = int(round(row.rhs / unit))
            time_terms = max(time_terms, len(row.coeffs))
        elif row.kind == "error":
            if row.sense != "<=" or row.rhs <= 0 or any(c < 0 for c in row.coeffs.values()):
                raise SolverFailure("cpsat: error rows must be '<=' rows with a positive budget and nonnegative errors")
            scale = SCALE / row.rhs
            rhs = SCALE + len(row.coeffs) // 2 + 1
            coeffs = {i: min(int(round(c * scale)), rhs + 1) for i, c in row.coeffs.items()}
        else:
            coeffs = {}
            for i, c in row.coeffs.items():
                if _is_int(c):
                    coeffs[i] = int(round(c))
                elif row.kind == "bits" and c > 0 and not lp.variables[i].name.startswith(("W", "H[")):
                    coeffs[i] = math.ceil(c)  # conservative size
                else:
                    raise SolverFailure(f"cpsat: non-integral coefficient {c} in row '{row.name}'")
            if _is_int(row.rhs):
                rhs = int(round(row.rhs))
            elif row.sense == "<=":
                rhs = math.floor(row.rhs)
            else:
                raise SolverFailure(f"cpsat: non-integral right-hand side {row.rhs} in row '{row.name}'")
        activity = sum(abs(c) * max(abs(lp.variables[i].lb), abs(lp.variables[i].ub)) for i, c in coeffs.items())
        if activity >= MAX_ACTIVITY:
            raise NotApplicable(
                f"cpsat: row '{row.name}' could reach {activity:.3g}, beyond 64-bit integers; use milp-cbc or milp-highs"
            )
        expr = sum(c * xs[i] for i, c in coeffs.items())
        if row.sense == "<=":
            model.Add(expr <= rhs)
        elif row.sense == ">=":
            model.Add(expr >= rhs)
        else:
            model.Add(expr == rhs)

    obj = {}
    for i, c in lp.objective.items():
        if lp.variables[i].unit == "ms":
            if not _is_int(c):
                raise SolverFailure(f"cpsat: non-integral objective coefficient {c} of time variable '{lp.variables[i].name}'")
            obj[i] = int(round(c))
        else:
            obj[i] = int(round(c / unit))
    model.Minimize(sum(c * xs[i] for i, c in obj.items() if c))
    # each rounded coefficient errs by at most unit/2: on the objective's terms, and on
    # the terms of the time row that binds a time variable
    rounded = sum(1 for i in obj if lp.variables[i].unit != "ms")
    tol = 0.5 * unit * (rounded + time_terms)
    return model, xs, unit, tol


def export_model(model, path) -> None:
    """Write a CP-SAT model for ``--export-model``: ``.txt``/``.pbtxt`` as text, ``.pb`` as
    binary; NotApplicable (one line) for another suffix."""
    path = Path(path)
    if not path.name.endswith((".txt", ".pbtxt", ".pb.txt", ".pb")):
        raise NotApplicable(f"--export-model: cpsat writes .txt/.pbtxt (text) or .pb (binary), not '{path.name}'")
    model.ExportToFile(str(path))


def cpsat_solver(time_limit_s: float | None, threads: int, seed: int, verbose: bool, presolve: bool):
    """A CP-SAT solver set up the way every splitopt model runs: proven optimality (no gap
    tolerance), ``threads`` workers, a fixed seed, the log to stderr when ``verbose`` (so
    that stdout stays clean for ``--json``), presolve as asked (off where a row could
    trigger or-tools #5293)."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    p = solver.parameters
    if time_limit_s is not None:
        p.max_time_in_seconds = float(time_limit_s)
    p.num_workers = max(1, int(threads))
    p.random_seed = int(seed)
    p.relative_gap_limit = 0.0
    p.absolute_gap_limit = 0.0
    p.cp_model_presolve = bool(presolve)
    p.log_search_progress = bool(verbose)
    p.log_to_stdout = False
    if verbose:
        solver.log_callback = lambda line: print(line, file=sys.stderr, flush=True)
    return solver


class CpSatBackend(Backend):
    name = "cpsat"
    kind = "exact"
    problems = PROBLEMS
    requires = ("ortools",)
    install_hint = "pip install ortools==9.15.6755"
    description = "CP-SAT (OR-Tools), integer-scaled; see formulations/edge_cloud_split.md"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        from ortools.sat.python import cp_model

        fam = family(inst.settings.problem)
        if hasattr(fam, "solve_exact"):
            return fam.solve_exact(self.name, inst, options)
        t0 = time.perf_counter()
        lp = fam.build_program(inst)
        model, xs, unit, tol = to_cpsat(lp)
        build_s = time.perf_counter() - t0
        if options.export_path is not None:
            export_model(model, options.export_path)
        start = feasible_start_plan(inst)
        start_values = fam.encode_plan(inst, lp, start) if start is not None else None
        if start_values is not None:
            for v, var, value in zip(lp.variables, xs, start_values):
                model.AddHint(var, int(round(value / unit if v.unit == "ms" else value)))
        # presolve off: or-tools #5293, presolve overflows on large activities in 9.15
        solver = cpsat_solver(options.time_limit_s, options.threads, options.seed, options.verbose, presolve=False)
        t1 = time.perf_counter()
        code = solver.Solve(model)
        solve_s = time.perf_counter() - t1
        extra = {"build_s": build_s, "solve_s": solve_s, "variables": len(lp.variables), "rows": len(lp.rows),
                 "objective_unit_ms": unit, "objective_tolerance_ms": tol}
        name = solver.StatusName(code)
        if code == cp_model.INFEASIBLE:
            return BackendOutput(Status.INFEASIBLE, message="CP-SAT: infeasible", extra=extra)
        if code == cp_model.MODEL_INVALID:
            return BackendOutput(Status.ERROR, message=f"CP-SAT: model invalid: {model.Validate()}", extra=extra)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if start is not None:  # stopped before any solution: return the start plan
                bound = solver.BestObjectiveBound() * unit + lp.objective_constant - tol
                return BackendOutput(Status.FEASIBLE, plan=start, objective=lp.evaluate_objective(start_values),
                                     bound=bound, message=f"CP-SAT: {name}; returning the start plan",
                                     extra=extra)
            return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"CP-SAT: {name}", extra=extra)
        values = [float(solver.Value(x)) * (unit if v.unit == "ms" else 1.0) for v, x in zip(lp.variables, xs)]
        plan = fam.decode_plan(inst, lp, values)
        objective = solver.ObjectiveValue() * unit + lp.objective_constant
        bound = solver.BestObjectiveBound() * unit + lp.objective_constant - tol
        status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
        return BackendOutput(status, plan=plan, objective=objective, bound=bound, message=f"CP-SAT: {name}",
                             objective_tolerance_ms=tol, extra=extra)
