"""CP-SAT backend (OR-Tools): runs a family's native CP-SAT model, or its ``LinearProgram``
emitted here with integer data.

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
  1e-10 relative on the shipped instances). Where times of wildly different magnitude
  make the unit coarse (a coefficient rounds to 0 beside a huge one), ``tol`` is large
  and ``splitopt.solve`` reports the run FEASIBLE with that true gap, never OPTIMAL; the
  instance ranges (``splitopt/core/ranges.py``) keep ``U`` below some 1e10 ms;
* memory rows ("bits"): integers (sizes times bit-widths: shapes and weight counts are
  integers by the schema, all sizes together below 2**50); a limit is rounded down, which
  is exact for integer sums (a non-integral size, possible only in a program built from
  other data, is rounded up, so every plan CP-SAT accepts fits);
* error rows (budget ``E > 0``): multiplied by ``s = 2**40 / E`` and rounded to
  nearest, with the budget raised by ``n/2 + 1`` units (``n`` terms): every plan with
  error at most ``E`` is accepted, and an accepted plan's error exceeds ``E`` by at most
  ``(n + 1) * E / 2**40``, far inside the evaluator's 1e-6 relative tolerance. A
  coefficient above the budget becomes ``budget + 1`` (that choice is impossible
  anyway; so a tiny budget never overflows the scaling). A zero budget is enforced exactly by the program (``x <= 0`` rows);
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
from pathlib import Path
from typing import Any, Mapping

from splitopt.backends.base import ProgramBackend, RunResult
from splitopt.backends.deadline import CHECK_EVERY_ROWS, check_deadline
from splitopt.core import progress
from splitopt.core.errors import InvalidOption, NotApplicable, SolverFailure
from splitopt.core.interrupts import solve_cpsat
from splitopt.core.jsonfile import cut, shown
from splitopt.core.options import SolveOptions, check_portable_option
from splitopt.core.program import LinearProgram, Program
from splitopt.core.result import Status

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


def _weighted_sum(cp_model, xs, coeffs: dict):
    """``sum c * xs[i]`` built in one call (the operator form costs a Python call per term)."""
    items = [(i, c) for i, c in coeffs.items() if c]
    return cp_model.LinearExpr.WeightedSum([xs[i] for i, _ in items], [c for _, c in items])


def to_cpsat(lp: LinearProgram, options: SolveOptions | None = None):
    """Translate a LinearProgram; returns (model, variables, unit_ms, tol_ms). With
    ``options``, the deadline is checked every ``CHECK_EVERY_ROWS`` rows (DeadlinePassed)."""
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
            xs.append(model.new_int_var(0, 0, v.name))
        elif v.unit == "ms":  # a time variable, in objective units
            xs.append(model.new_int_var(math.floor(v.lb / unit), math.ceil(v.ub / unit), v.name))
        elif v.binary or (v.lb >= 0 and v.ub <= 1):
            if not (v.binary or v.implied_integer):
                raise SolverFailure(f"cpsat: continuous variable '{v.name}' cannot be made integral")
            if (v.lb, v.ub) == (0.0, 1.0):
                xs.append(model.new_bool_var(v.name))
            else:  # a 0/1 variable fixed by its bounds (e.g. ub = 0) keeps them
                xs.append(model.new_int_var(math.ceil(v.lb), math.floor(v.ub), v.name))
        else:
            xs.append(model.new_int_var(math.floor(v.lb), math.ceil(v.ub), v.name))

    time_terms = 0
    for k, row in enumerate(rows):
        if options is not None and k % CHECK_EVERY_ROWS == 0:
            check_deadline(options)
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
            rhs = SCALE + len(row.coeffs) // 2 + 1
            # c / budget > 1: that choice alone breaks the budget; rhs + 1 forbids it as well
            # (and no huge ratio of a tiny budget overflows)
            coeffs = {i: rhs + 1 if c / row.rhs > 1.0 else int(round(c / row.rhs * SCALE))
                      for i, c in row.coeffs.items()}
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
        expr = _weighted_sum(cp_model, xs, coeffs)
        if row.sense == "<=":
            model.add(expr <= rhs)
        elif row.sense == ">=":
            model.add(expr >= rhs)
        else:
            model.add(expr == rhs)

    obj = {}
    for i, c in lp.objective.items():
        if lp.variables[i].unit == "ms":
            if not _is_int(c):
                raise SolverFailure(f"cpsat: non-integral objective coefficient {c} of time variable '{lp.variables[i].name}'")
            obj[i] = int(round(c))
        else:
            obj[i] = int(round(c / unit))
    model.minimize(_weighted_sum(cp_model, xs, obj))
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
    if not model.ExportToFile(str(path)):
        raise InvalidOption(f"--export-model {path}: cannot write the file")


def cpsat_solver(time_limit_s: float | None, threads: int, seed: int, verbose: bool, presolve: bool,
                 extra: Mapping[str, Any] | None = None):
    """A CP-SAT solver set up the way every splitopt model runs: proven optimality (no gap
    tolerance), ``threads`` workers, a fixed seed, the log to stderr when ``verbose`` (so
    that stdout stays clean for ``--json``), presolve as asked (off where a row could
    trigger or-tools #5293), then the user's ``extra`` parameters (``SatParameters``
    field names; an unknown one is an InvalidOption)."""
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
    for key, value in (extra or {}).items():
        set_parameter(p, key, value)
    return solver


#: parameters the user may not set through options: splitopt sets them from its own options
RESERVED = {"max_time_in_seconds": "--time-limit", "num_workers": "--threads", "num_search_workers": "--threads",
            "random_seed": "--seed", "log_search_progress": "--verbose", "log_to_stdout": "--verbose",
            "catch_sigint_signal": "Ctrl-C (splitopt stops the search itself)"}
#: parameters splitopt sets per model, and why
FIXED = {"cp_model_presolve": "splitopt turns presolve off where or-tools #5293 could certify a wrong optimum"}
#: portable option names every exact backend accepts, as CP-SAT parameters
PORTABLE = {"mip_gap": "relative_gap_limit", "mip_gap_abs": "absolute_gap_limit"}


def set_parameter(params, key: str, value: Any) -> None:
    """Set one ``SatParameters`` field from a user option; InvalidOption (one line) for an
    unknown or reserved name or a value of the wrong type. The field's type comes from the
    protobuf descriptor (``sat_parameters_pb2``); ``params`` is a ``SatParameters``
    protobuf or the solver's parameter object (in OR-Tools 9.15 a pybind class without a
    descriptor: setting an unknown or ill-typed field there gave an AttributeError). Numbers go as numbers
    (an int32 field refuses a value beyond 32 bits), booleans as true/false, enums by
    name (e.g. ``search_branching=FIXED_SEARCH``); repeated and message fields are not
    settable this way."""
    from ortools.sat import sat_parameters_pb2

    if key in PORTABLE:
        check_portable_option(key, value)
    name = PORTABLE.get(key, key)
    if name in RESERVED:
        raise InvalidOption(f"option '{key}': set it with {RESERVED[name]}, not as a solver option")
    if name in FIXED:
        raise InvalidOption(f"option '{key}': not settable ({FIXED[name]})")
    field = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        raise InvalidOption(f"option '{cut(key)}': not a CP-SAT parameter (see ortools SatParameters; portable: "
                            f"{', '.join(PORTABLE)})")
    if field.is_repeated or field.type == field.TYPE_MESSAGE:
        raise InvalidOption(f"option '{key}': CP-SAT parameter '{name}' is a list or message; not settable as an option")
    if field.type == field.TYPE_ENUM:
        names = [v.name for v in field.enum_type.values]
        if value not in names:
            raise InvalidOption(f"option '{key}': {shown(value)} is not a value of CP-SAT parameter '{name}' "
                                f"(values: {', '.join(names)})")
        setattr(params, name, getattr(params, value))
        return
    kinds: dict[int, tuple[type | tuple[type, ...], str]] = {
        field.TYPE_BOOL: (bool, "true or false"), field.TYPE_STRING: (str, "a string"),
        field.TYPE_DOUBLE: ((int, float), "a number"), field.TYPE_FLOAT: ((int, float), "a number")}
    kind, what = kinds.get(field.type, (int, "an integer"))
    if not isinstance(value, kind) or (isinstance(value, bool) and field.type != field.TYPE_BOOL):
        raise InvalidOption(f"option '{key}': CP-SAT parameter '{name}' takes {what}, got {shown(value)}")
    check = sat_parameters_pb2.SatParameters()
    try:
        setattr(check, name, value)  # the protobuf checks the integer range
        setattr(params, name, getattr(check, name))
    except (TypeError, ValueError) as e:
        raise InvalidOption(f"option '{key}': invalid value {shown(value)} for CP-SAT parameter '{name}' "
                            f"({cut(str(e), 80)})") from None


def check_parameters(options: Mapping[str, Any]) -> None:
    """InvalidOption (one line) unless every option is a settable CP-SAT parameter with a
    value of its type (checked on a protobuf ``SatParameters``, without importing the
    solver; a value of the right type that CP-SAT still refuses, e.g. a negative limit,
    is refused when the solve starts, see :func:`run_model`). Without options nothing is
    imported (the protobuf module costs 15-20 ms; the solver itself does not need it)."""
    if not options:
        return
    from ortools.sat import sat_parameters_pb2

    params = sat_parameters_pb2.SatParameters()
    for key, value in options.items():
        set_parameter(params, key, value)


class CpSatBackend(ProgramBackend):
    name = "cpsat"
    kind = "exact"
    runs = ("cpsat", "linear")
    requires = ("ortools",)
    install_hint = "pip install ortools==9.15.6755"
    description = "CP-SAT (OR-Tools): a family's interval model or its linear program, integer-scaled"

    def check_options(self, options: Mapping[str, Any]) -> None:
        """InvalidOption for a name that is not a CP-SAT parameter (or one splitopt sets),
        or a value CP-SAT does not accept."""
        check_parameters(options)

    def export(self, program: Program, path) -> None:
        model = to_cpsat(program.model)[0] if program.kind == "linear" else program.model
        export_model(model, path)

    def run(self, program: Program, options: SolveOptions) -> RunResult:
        if program.kind == "linear":
            return self._run_linear(program, options)
        return run_model(program.model, options, presolve=program.presolve, unit_ms=program.unit_ms,
                         offset_ms=program.offset_ms)

    def _run_linear(self, program: Program, options: SolveOptions) -> RunResult:
        """Emit the program's ``LinearProgram`` with integer data, solve, and map the answer
        back to its terms (whose objective is in units of ``program.unit_ms`` ms)."""
        lp: LinearProgram = program.model
        hint = program.hint
        model, xs, unit, tol = to_cpsat(lp, options)
        if hint is not None:
            for v, var, value in zip(lp.variables, xs, hint):
                model.AddHint(var, int(round(value / unit if v.unit == "ms" else value)))
        # presolve off: or-tools #5293, presolve overflows on large activities in 9.15
        raw = run_model(model, options, presolve=False, unit_ms=unit * program.unit_ms,
                        offset_ms=program.to_ms(lp.objective_constant))
        raw.stats.update(objective_unit_ms=unit, scaling_tolerance_ms=tol)
        if raw.values is not None:
            sol = raw.values
            raw.values = [float(sol[x.Index()]) * (unit if v.unit == "ms" else 1.0) for v, x in zip(lp.variables, xs)]
        if raw.objective is not None:
            raw.objective = raw.objective * unit + lp.objective_constant
        if raw.bound is not None:
            raw.bound = raw.bound * unit + lp.objective_constant - tol
        raw.tolerance = tol
        return raw


def _progress_callback(model, unit_ms: float, offset_ms: float):
    """A solution callback reporting each incumbent and the bound in ms
    (``splitopt.core.progress``; objective * ``unit_ms`` + ``offset_ms``), or None when
    nobody listens or the model has no objective."""
    from ortools.sat.python import cp_model

    current = progress.current()
    if current is None or not model.HasObjective():
        return None
    reporter = current  # not None: the callback below reports to it

    class Reporting(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            reporter(self.ObjectiveValue() * unit_ms + offset_ms, self.BestObjectiveBound() * unit_ms + offset_ms)

    return Reporting()


def cap_objective(model, most: float) -> None:
    """Keep only the solutions of a minimising CP-SAT ``model`` whose objective is at most
    ``most`` (the model's objective units): the row ``objective <= most``. Solved, an
    infeasible answer proves that no solution is that good."""
    objective = model.Proto().objective
    scale = objective.scaling_factor or 1.0
    if scale < 0 or any(v < 0 for v in objective.vars):
        raise ValueError("cap_objective: a minimised objective over integer variables only")
    terms = [model.GetIntVarFromProtoIndex(v) * c for v, c in zip(objective.vars, objective.coeffs)]
    model.add(sum(terms) <= math.floor(most / scale - objective.offset))


def run_model(model, options: SolveOptions, presolve: bool, unit_ms: float = 1.0,
              offset_ms: float = 0.0) -> RunResult:
    """Solve a CP-SAT model within what is left of the time limit; values are the solution
    vector (by ``var.Index()``), objective and bound in the model's integer units (of
    ``unit_ms`` ms each: the portable ``mip_gap_abs``, in ms, is converted to them;
    ``offset_ms``: the objective's constant, for the progress shown)."""
    from ortools.sat.python import cp_model

    extra = dict(options.solver_options)
    if "mip_gap_abs" in extra:
        extra["mip_gap_abs"] = extra["mip_gap_abs"] / unit_ms
    remaining = options.remaining_s()
    solver = cpsat_solver(None if remaining is None else max(0.01, remaining), options.threads, options.seed,
                          options.verbose, presolve=presolve, extra=extra)
    code, ctrl_c = solve_cpsat(solver, model, _progress_callback(model, unit_ms, offset_ms))
    name = solver.StatusName(code)
    stats = {"cpsat_status": name, "presolve": presolve, "wall_s": solver.WallTime()}
    if ctrl_c:
        stats["ctrl_c"] = True  # the user's Ctrl-C, not the deadline (what auto needs to know)
        name += " (stopped by Ctrl-C)"
    if code == cp_model.INFEASIBLE:
        return RunResult(Status.INFEASIBLE, message="CP-SAT: infeasible", stats=stats)
    if code == cp_model.MODEL_INVALID:
        if not model.Validate() and options.solver_options:  # a valid model: the user's parameters
            raise InvalidOption(f"option {', '.join(map(str, options.solver_options))}: CP-SAT refuses the "
                                f"parameters: {cut(solver.SolutionInfo(), 160)}")
        return RunResult(Status.ERROR, message=f"CP-SAT: model invalid: {model.Validate()}", stats=stats)
    bound = solver.BestObjectiveBound() if model.HasObjective() else None
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # no bound: stopped before it had one, CP-SAT reports 0.0, which is no bound on an
        # objective with negative coefficients (measured: a 3,000-layer chain program stopped
        # in its first 0.5 s gave 0.0, read back as 242 ms, above the optimum)
        return RunResult(Status.NO_SOLUTION_FOUND, message=f"CP-SAT: {name}", interrupted=True, stats=stats)
    values = list(solver.ResponseProto().solution)
    objective = solver.ObjectiveValue() if model.HasObjective() else 0.0
    status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
    if status is Status.OPTIMAL and bound is None:
        bound = objective
    return RunResult(status, values=values, objective=objective, bound=bound, message=f"CP-SAT: {name}",
                     interrupted=status is Status.FEASIBLE, stats=stats)
