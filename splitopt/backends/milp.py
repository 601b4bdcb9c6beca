"""MILP backends through PuLP: CBC (bundled with PuLP, the default) and HiGHS.

A family builds a ``LinearProgram`` (``splitopt.core.program``); it is emitted here.
Error rows are divided by the budget (and ``memory`` rows in bytes by their limit) so that
the solver's absolute feasibility tolerance (1e-7) is a relative one; ``bits`` rows stay
in bits. A run that hits its time limit is
reported FEASIBLE with the solver's best bound, never OPTIMAL (CBC may print "Optimal"
after a time-limited run: ../shared/NOTES.md), and the status is read from
``prob.sol_status`` and the solver's own log, not from ``LpStatus`` alone. A run that
stops before finding any plan returns the family's start plan as FEASIBLE with the
solver's bound (``splitopt.backends.base.ProgramBackend``).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
import warnings
from abc import abstractmethod
from pathlib import Path

from splitopt.backends.base import ProgramBackend, RunResult
from splitopt.core.errors import InvalidOption, NotApplicable, SolverFailure
from splitopt.core.options import PORTABLE_OPTIONS, SolveOptions, check_portable_option
from splitopt.core.program import LinearProgram, Program
from splitopt.core.result import Status


def _new_variable(prob, name: str, lb: float, ub: float, cat: str):
    """PuLP >= 3.3 attaches variables to the model; older PuLP builds them directly."""
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound=lb, upBound=ub, cat=cat)
    import pulp

    return pulp.LpVariable(name, lowBound=lb, upBound=ub, cat=cat)


def to_pulp(lp: LinearProgram, name: str = "splitopt"):
    """Translate a LinearProgram to a ``pulp.LpProblem``; returns (problem, variables)."""
    import pulp

    prob = pulp.LpProblem(name, pulp.LpMinimize)
    xs = []
    for i, v in enumerate(lp.variables):
        # LpBinary resets the bounds to [0, 1]: a 0/1 variable fixed by its bounds (e.g.
        # ub = 0 from symmetry breaking) is emitted as an integer with its own bounds
        if v.binary:
            cat = pulp.LpBinary if (v.lb, v.ub) == (0.0, 1.0) else pulp.LpInteger
        else:
            cat = pulp.LpContinuous
        safe = re.sub(r"[^A-Za-z0-9_]", "_", v.name)
        xs.append(_new_variable(prob, f"v{i}_{safe}"[:200], v.lb, v.ub, cat))
    prob += pulp.lpSum(c * xs[i] for i, c in lp.objective.items()) + lp.objective_constant, "latency_ms"
    for j, row in enumerate(lp.rows):
        scale = 1.0
        if row.kind in ("error", "memory") and row.rhs > 0:
            scale = 1.0 / row.rhs
        coeffs = {i: c * scale for i, c in row.coeffs.items()}
        if row.kind == "error" and row.sense == "<=" and row.rhs > 0:
            # error rows: nonnegative errors of 0/1 choices; one above the budget can only
            # be 0, and 2.0 says so as well without a huge ratio (a tiny budget)
            coeffs = {i: min(c, 2.0) if lp.variables[i].ub <= 1 and c >= 0 else c for i, c in coeffs.items()}
        expr = pulp.lpSum(c * xs[i] for i, c in coeffs.items())
        rhs = row.rhs * scale
        if row.sense == "<=":
            cons = expr <= rhs
        elif row.sense == ">=":
            cons = expr >= rhs
        else:
            cons = expr == rhs
        safe = re.sub(r"[^A-Za-z0-9_]", "_", row.name or "row")
        prob += cons, f"c{j}_{safe}"[:200]
    return prob, xs


def export_pulp(prob, path: Path) -> None:
    path = Path(path)
    if path.suffix.lower() not in (".mps", ".lp"):
        raise NotApplicable(f"--export-model: MILP backends write .lp or .mps, not '{path.suffix or path.name}'")
    try:
        prob.writeMPS(str(path)) if path.suffix.lower() == ".mps" else prob.writeLP(str(path))
    except OSError as e:
        raise InvalidOption(f"--export-model {path}: cannot write the file ({e.strerror or type(e).__name__})") from None


class _LogTail:
    """Copy a growing log file to stderr while a solver runs (``--verbose``), so that
    stdout stays clean for ``--json``."""

    def __init__(self, path: str, enabled: bool):
        self.path, self.enabled = path, enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.enabled:
            self._thread.start()
        return self

    def _run(self) -> None:
        offset = 0
        while True:
            stop = self._stop.is_set()
            if os.path.exists(self.path):
                with open(self.path) as f:
                    f.seek(offset)
                    chunk = f.read()
                    offset = f.tell()
                if chunk:
                    sys.stderr.write(chunk)
                    sys.stderr.flush()
            if stop:
                return
            time.sleep(0.1)

    def __exit__(self, *exc):
        if self.enabled:
            self._stop.set()
            self._thread.join()


def parse_cbc_log(text: str) -> dict:
    """What CBC's log ``text`` reports: ``result`` (the "Result - ..." line), and where
    printed ``objective`` and ``bound`` (the objective's units; floats)."""
    out: dict = {}
    m = re.search(r"Result - (.+)", text)
    if m:
        out["result"] = m.group(1).strip()
    for key, pattern in (("objective", r"Objective value:\s+(\S+)"), ("bound", r"Lower bound:\s+(\S+)")):
        m = re.search(pattern, text)
        if m:
            try:
                out[key] = float(m.group(1))
            except ValueError:
                pass
    return out


class PulpBackend(ProgramBackend):
    """A MILP backend through PuLP: runs ``LinearProgram``s."""

    kind = "exact"
    runs = ("linear",)
    requires = ("pulp",)
    install_hint = "pip install pulp"
    #: whether the solver's reported bound leaves out the objective's constant term
    bound_excludes_constant = True
    options = PORTABLE_OPTIONS

    def check_options(self, options) -> None:
        """InvalidOption for a name other than the portable ones or a value out of range."""
        super().check_options(options)
        for key, value in options.items():
            check_portable_option(key, value)

    def export(self, program: Program, path) -> None:
        prob, _ = to_pulp(program.model)
        export_pulp(prob, path)

    def run(self, program: Program, options: SolveOptions) -> RunResult:
        lp: LinearProgram = program.model
        prob, xs = to_pulp(lp, name="splitopt")
        # No MIP start: CBC 2.10.3 exits with an error when a MIP start meets a time limit
        # (seen here), and PuLP's HiGHS interface takes none. The template returns the
        # start plan instead when the solver stops without a plan of its own.
        status, bound, message, solver_objective = self._run(prob, options)
        if status in (Status.INFEASIBLE, Status.ERROR):
            return RunResult(status, message=message)
        if status is Status.NO_SOLUTION_FOUND:
            if bound is not None and self.bound_excludes_constant:
                bound += lp.objective_constant
            return RunResult(status, bound=bound, message=message)
        values = [v.value() if v.value() is not None else 0.0 for v in xs]
        objective = lp.evaluate_objective(values)
        if bound is not None and solver_objective is not None:
            # solvers may drop the objective's constant term; shift their bound alike
            bound += objective - solver_objective
        if status is Status.OPTIMAL:
            bound = objective if bound is None else min(bound, objective)
        return RunResult(status, values=values, objective=objective, bound=bound, message=message)

    @abstractmethod
    def _run(self, prob, options: SolveOptions) -> tuple[Status, float | None, str, float | None]:
        """Run the solver on ``prob``; return (status, best bound or None, message, the
        solver's own objective value or None), bound and value in the solver's terms."""


class CbcBackend(PulpBackend):
    name = "milp-cbc"
    description = "MILP, PuLP + CBC 2.10 (bundled with PuLP)"

    def _run(self, prob, options):
        import pulp

        budget = _remaining(options)
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            # PuLP 3.3 announces that PULP_CBC_CMD (the bundled CBC) leaves in 4.0; pinned < 4
            warnings.simplefilter("ignore", DeprecationWarning)
            log = os.path.join(tmp, "cbc.log")
            solver = pulp.PULP_CBC_CMD(
                msg=False,
                timeLimit=budget,
                threads=options.threads,
                logPath=log,
                gapRel=float(options.solver_options.get("mip_gap", 0.0)),
                gapAbs=options.solver_options.get("mip_gap_abs"),
            )
            start = time.perf_counter()
            with _LogTail(log, options.verbose):
                try:
                    prob.solve(solver)
                except pulp.PulpSolverError as e:
                    return Status.ERROR, None, f"CBC failed: {e}", None
            elapsed = time.perf_counter() - start
            text = Path(log).read_text() if os.path.exists(log) else ""
        info = parse_cbc_log(text)
        result = info.get("result", "")
        # every variable is bounded, so CBC's "infeasible or unbounded" means infeasible;
        # but a time limit can cut CBC's preprocessing short and make it say so wrongly
        # (seen: a 300-layer instance with a feasible cloud-only plan, limit 0.1 s)
        claims_infeasible = (
            prob.sol_status == pulp.LpSolutionInfeasible
            or "infeasible" in result.lower()
            or (prob.status == pulp.LpStatusInfeasible and "infeasible" in text.lower())
        )
        limited = budget is not None and elapsed >= 0.5 * budget
        if claims_infeasible and limited:
            return Status.NO_SOLUTION_FOUND, None, "CBC: stopped by the time limit (an infeasibility claim from an interrupted run is not trusted)", None
        if claims_infeasible:
            return Status.INFEASIBLE, None, "CBC: infeasible", None
        stopped = "time limit" in result.lower() or "stopped" in result.lower()
        if budget is not None and elapsed >= budget * 0.98:
            stopped = stopped or "optimal" not in result.lower()
        if prob.sol_status == pulp.LpSolutionOptimal and not stopped:
            # with a gap option "optimal" means within that gap: only the logged bound is proven
            gap_asked = any(options.solver_options.get(k) for k in ("mip_gap", "mip_gap_abs"))
            bound = info.get("bound") if gap_asked else info.get("objective")
            message = f"CBC: {result or 'optimal'}" if gap_asked else "CBC: optimal"
            return Status.OPTIMAL, bound, message, info.get("objective")
        if prob.sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
            return Status.FEASIBLE, info.get("bound"), f"CBC: {result or 'stopped'}", info.get("objective")
        return Status.NO_SOLUTION_FOUND, info.get("bound"), f"CBC: no plan found ({result or pulp.LpStatus[prob.status]})", None


#: HiGHS fixes its thread pool at the first solve in a process; a later solve asking
#: for another count returns "Not Solved" (../shared/NOTES.md). The first count asked
#: for is used for every HiGHS solve of the process.
_HIGHS_THREADS: int | None = None


def highs_threads(requested: int) -> int:
    """The thread count every HiGHS solve of this process must use."""
    global _HIGHS_THREADS
    if _HIGHS_THREADS is None:
        _HIGHS_THREADS = max(1, int(requested))
    return _HIGHS_THREADS


class HighsBackend(PulpBackend):
    name = "milp-highs"
    description = "MILP, PuLP + HiGHS (highspy)"
    requires = ("pulp", "highspy")
    install_hint = "pip install 'highspy>=1.7.1,<1.15'"

    def _run(self, prob, options):
        import highspy
        import pulp

        note = ""
        for threads in (highs_threads(options.threads), None):
            with tempfile.TemporaryDirectory() as tmp:
                log = os.path.join(tmp, "highs.log")
                # the log goes to a file that is streamed to stderr, never to stdout
                logging = {"log_file": log, "log_to_console": False} if options.verbose else {}
                solver = pulp.HiGHS(
                    msg=options.verbose,
                    timeLimit=_remaining(options),
                    threads=threads,
                    gapRel=float(options.solver_options.get("mip_gap", 0.0)),
                    gapAbs=options.solver_options.get("mip_gap_abs"),
                    # HiGHS 1.14 can claim a wrong optimum after a restart (seen on a
                    # 7-layer chain: "Optimal" at 0.10025 ms, the optimum is 0.10020 ms)
                    mip_allow_restart=False,
                    **logging,
                )
                if not solver.available():
                    raise SolverFailure("HiGHS is not available to PuLP (see ../shared/NOTES.md on highspy and ortools)")
                with _LogTail(log, options.verbose):
                    try:
                        prob.solve(solver)
                    except pulp.PulpSolverError as e:
                        return Status.ERROR, None, f"HiGHS failed: {e}", None
            model = getattr(prob, "solverModel", None)
            if model is None:
                return Status.ERROR, None, f"HiGHS: {pulp.LpStatus[prob.status]}", None
            if threads is None or model.getModelStatus() != highspy.HighsModelStatus.kNotset:
                break
            # something else in this process ran HiGHS first with another thread count, which
            # HiGHS keeps: it answers "Not Set" at once; run again with the option unset
            note = f" (with this process's HiGHS thread count, not {threads})"

        model_status = model.getModelStatus()
        info = model.getInfo()
        bound = getattr(info, "mip_dual_bound", None)
        value = getattr(info, "objective_function_value", None)
        text = model.modelStatusToString(model_status)
        if model_status == highspy.HighsModelStatus.kInfeasible:
            return Status.INFEASIBLE, None, f"HiGHS: infeasible{note}", None
        if model_status == highspy.HighsModelStatus.kOptimal:
            return Status.OPTIMAL, bound, f"HiGHS: optimal{note}", value
        if prob.sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
            return Status.FEASIBLE, bound, f"HiGHS: {text}{note}", value
        if bound is not None and not (abs(bound) < 1e30):
            bound = None  # HiGHS reports +-inf when it has no bound
        return Status.NO_SOLUTION_FOUND, bound, f"HiGHS: no plan found ({text}){note}", None


def _remaining(options: SolveOptions) -> float | None:
    """The solver's time limit: what is left of the user's budget (at least 0.01 s)."""
    left = options.remaining_s()
    return None if left is None else max(0.01, left)
