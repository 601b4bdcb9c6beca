"""``milp-highs``: HiGHS through highspy, in process.

The ``LinearProgram`` goes to HiGHS as one row-wise sparse matrix (``HighsLp``), with
the row scaling every MILP backend shares (``splitopt.backends.milp.emitted_rows``); PuLP's
HiGHS interface built it term by term through Python expressions and took longer than
the solve on the larger programs. HiGHS runs on a worker thread (highspy's
``startSolve``); the calling thread waits, and at the deadline or on Ctrl-C cancels the
solve through HiGHS's interrupt callbacks, which HiGHS polls in its simplex, IPM and
branch-and-bound loops; HiGHS then returns its incumbent and bound.

Fixed settings: ``mip_allow_restart=false`` (HiGHS 1.13 and 1.14 claimed a wrong optimum
after a restart: "Optimal" at 0.10025 ms on a 7-layer chain whose optimum is
0.10020 ms), and the thread count of the first HiGHS solve of the process (HiGHS keeps
it for the process: ../shared/NOTES.md). The solver's own options (``--option
presolve=off``, ``mip_heuristic_effort=0.2``, ...) are HiGHS options, checked by name,
type and range by HiGHS itself before the instance is read; those splitopt sets, the
tolerances the programs state theirs at, objective bounds and file options are refused.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from typing import Any, Mapping

from splitopt.backends.deadline import check_deadline
from splitopt.backends.milp import LogTail, MilpAnswer, MilpBackend, emitted_rows, remaining_budget
from splitopt.core.errors import InvalidOption, SolverFailure
from splitopt.core.jsonfile import cut, shown
from splitopt.core.options import SolveOptions
from splitopt.core.program import LinearProgram
from splitopt.core.result import Status

#: HiGHS options splitopt sets itself, and the option that sets them
RESERVED = {
    "time_limit": "--time-limit", "threads": "--threads", "random_seed": "--seed",
    "mip_rel_gap": "the portable option mip_gap", "mip_abs_gap": "the portable option mip_gap_abs",
    "output_flag": "--verbose", "log_to_console": "--verbose", "log_file": "--verbose",
}
#: HiGHS options refused because they change what a result means (or write files)
FIXED = {
    "mip_allow_restart": "HiGHS 1.13/1.14 claimed a wrong optimum after a restart",
    "objective_bound": "an objective bound makes HiGHS call a feasible instance infeasible",
    "objective_target": "an objective target stops HiGHS at a plan it then calls optimal",
}
#: option name parts refused, with why
FIXED_PARTS = {
    "tolerance": "the programs state their tolerances at HiGHS's defaults",
    "file": "splitopt writes no files through the solver",
    "infinite": "splitopt's programs are bounded",
}

_HIGHS_THREADS: int | None = None


def highs_threads(requested: int) -> int:
    """The thread count every HiGHS solve of this process must use: the first one asked
    for (HiGHS fixes its thread pool at the first solve of a process; a later solve asking
    for another count returns "Not Set": ../shared/NOTES.md)."""
    global _HIGHS_THREADS
    if _HIGHS_THREADS is None:
        _HIGHS_THREADS = max(1, int(requested))
    return _HIGHS_THREADS


def quiet_highs():
    """A ``highspy.Highs`` that prints nothing."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def set_option(h, key: str, value: Any) -> None:
    """Set HiGHS option ``key`` on ``h``; InvalidOption (one line) for an unknown, refused
    or reserved name or a value of the wrong type or out of HiGHS's range."""
    import highspy

    if key in RESERVED:
        raise InvalidOption(f"option '{key}': set it with {RESERVED[key]}, not as a solver option")
    reason = FIXED.get(key) or next((r for part, r in FIXED_PARTS.items() if part in key), None)
    if reason is not None:
        raise InvalidOption(f"option '{key}': not settable ({reason})")
    status, kind = h.getOptionType(key)
    if status != highspy.HighsStatus.kOk:
        raise InvalidOption(f"option '{cut(key)}': not a HiGHS option (see HiGHS's option list; portable: "
                            f"mip_gap, mip_gap_abs)")
    types = {highspy.HighsOptionType.kBool: ((bool,), "true or false"),
             highspy.HighsOptionType.kInt: ((int,), "an integer"),
             highspy.HighsOptionType.kDouble: ((int, float), "a number"),
             highspy.HighsOptionType.kString: ((str,), "a word")}
    accepted, what = types[kind]
    if not isinstance(value, accepted) or (isinstance(value, bool) and kind != highspy.HighsOptionType.kBool) \
            or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidOption(f"option '{key}': HiGHS option '{key}' takes {what}, got {shown(value)}")
    if kind == highspy.HighsOptionType.kInt and not -2**31 <= value < 2**31:
        raise InvalidOption(f"option '{key}': HiGHS option '{key}' takes a 32-bit integer, got {shown(value)}")
    if kind == highspy.HighsOptionType.kDouble:
        value = float(value)
    if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
        raise InvalidOption(f"option '{key}': HiGHS refuses the value {shown(value)} (out of its range or not "
                            f"one of its values)")


def to_highs(lp: LinearProgram, options: SolveOptions | None = None):
    """``lp`` as a ``highspy.HighsLp`` (row-wise matrix), rows as every MILP backend emits
    them; checks the deadline while emitting (DeadlinePassed)."""
    import highspy
    import numpy as np

    inf = highspy.kHighsInf
    model = highspy.HighsLp()
    n = len(lp.variables)
    model.num_col_ = n
    cost = np.zeros(n)
    for i, c in lp.objective.items():
        cost[i] = c
    model.col_cost_ = cost
    model.offset_ = float(lp.objective_constant)
    model.col_lower_ = np.array([v.lb for v in lp.variables], dtype=float)
    model.col_upper_ = np.array([v.ub for v in lp.variables], dtype=float)
    model.integrality_ = [highspy.HighsVarType.kInteger if v.binary else highspy.HighsVarType.kContinuous
                          for v in lp.variables]
    starts, index, value, lower, upper = [0], [], [], [], []
    for _, row, coeffs, rhs in emitted_rows(lp, options):
        index.extend(coeffs.keys())
        value.extend(coeffs.values())
        starts.append(len(index))
        lower.append(rhs if row.sense in (">=", "==") else -inf)
        upper.append(rhs if row.sense in ("<=", "==") else inf)
    model.num_row_ = len(lower)
    model.row_lower_ = np.array(lower, dtype=float)
    model.row_upper_ = np.array(upper, dtype=float)
    matrix = model.a_matrix_
    matrix.format_ = highspy.MatrixFormat.kRowwise
    matrix.num_col_ = n
    matrix.num_row_ = len(lower)
    matrix.start_ = np.array(starts, dtype=np.int32)
    matrix.index_ = np.array(index, dtype=np.int32)
    matrix.value_ = np.array(value, dtype=float)
    model.a_matrix_ = matrix
    return model


class HighsBackend(MilpBackend):
    name = "milp-highs"
    description = "MILP, HiGHS through highspy (in process, cancelled at the deadline)"
    requires = ("highspy",)
    install_hint = "pip install 'highspy>=1.7.1,<1.14'"

    def check_native_options(self, options: Mapping[str, Any]) -> None:
        h = quiet_highs()
        for key, value in options.items():
            set_option(h, key, value)

    def _solve(self, lp: LinearProgram, options: SolveOptions) -> MilpAnswer:
        import highspy

        if not lp.variables:  # HiGHS answers "Empty" to a program without columns
            met = all((r.sense == "<=" and 0 <= r.rhs) or (r.sense == ">=" and 0 >= r.rhs) or
                      (r.sense == "==" and r.rhs == 0) for r in lp.rows)
            if not met:
                return MilpAnswer(Status.INFEASIBLE, message="HiGHS: infeasible (a program without variables)")
            return MilpAnswer(Status.OPTIMAL, [], lp.objective_constant, lp.objective_constant,
                              "HiGHS: optimal (a program without variables)")
        model = to_highs(lp, options)
        check_deadline(options)
        note = ""
        for threads in (highs_threads(options.threads), None):
            with tempfile.TemporaryDirectory(prefix="splitopt-highs-") as tmp:
                log = os.path.join(tmp, "highs.log")
                h = quiet_highs()
                if options.verbose:  # to a file streamed to stderr, never to stdout
                    for key, value in (("output_flag", True), ("log_to_console", False), ("log_file", log)):
                        h.setOptionValue(key, value)
                budget = remaining_budget(options)
                if budget is not None:
                    h.setOptionValue("time_limit", float(budget))
                if threads is not None:
                    h.setOptionValue("threads", int(threads))
                h.setOptionValue("random_seed", int(options.seed))
                h.setOptionValue("mip_allow_restart", False)
                h.setOptionValue("mip_rel_gap", float(options.solver_options.get("mip_gap", 0.0)))
                if options.solver_options.get("mip_gap_abs") is not None:
                    h.setOptionValue("mip_abs_gap", float(options.solver_options["mip_gap_abs"]))
                for key, value in options.solver_options.items():
                    if key not in ("mip_gap", "mip_gap_abs"):
                        set_option(h, key, value)
                if h.passModel(model) != highspy.HighsStatus.kOk:
                    raise SolverFailure("milp-highs: HiGHS refused the program")
                with LogTail(log, options.verbose):
                    stopped, interrupted, wall = _run_cancellable(h, options)
            status = h.getModelStatus()
            if threads is None or status != highspy.HighsModelStatus.kNotset:
                break
            # something else in this process ran HiGHS first with another thread count, which
            # HiGHS keeps: it answers "Not Set" at once; run again with the option unset
            note = f" (with this process's HiGHS thread count, not {threads})"
        return _answer(h, lp, status, stopped, interrupted, note, wall)


def _run_cancellable(h, options: SolveOptions) -> tuple[bool, bool, float]:
    """Run ``h`` on a worker thread; cancel it at the deadline or on Ctrl-C and wait for it
    to return its incumbent (a running HiGHS cannot be abandoned safely: it holds the
    process's HiGHS scheduler; it stops at its next poll of the interrupt callbacks).
    Returns (stopped at the deadline, interrupted, wall seconds)."""
    h.HandleUserInterrupt = True
    t0 = time.monotonic()
    stopped = interrupted = False
    cancelled_at: float | None = None
    h.startSolve()
    while True:
        try:
            done, _ = h.wait(0.05)
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C: HiGHS is stopping already
                continue
            interrupted = True
            h.cancelSolve()
            cancelled_at = time.monotonic()
            continue
        if done:
            break
        left = options.remaining_s()
        if cancelled_at is None and left is not None and left <= 0:
            stopped = True
            h.cancelSolve()
            cancelled_at = time.monotonic()
    return stopped, interrupted, time.monotonic() - t0


def _answer(h, lp: LinearProgram, status, stopped: bool, interrupted: bool, note: str, wall: float) -> MilpAnswer:
    """Read HiGHS's model status, solution and bound."""
    import highspy

    S = highspy.HighsModelStatus
    info = h.getInfo()
    stats = {"highs_status": h.modelStatusToString(status), "highs_wall_s": wall}
    asked = "; interrupted (Ctrl-C)" if interrupted else "; stopped at the deadline" if stopped else ""
    text = h.modelStatusToString(status)
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = list(h.getSolution().col_value) if has_solution else None
    if values is not None and len(values) != len(lp.variables):
        values = None
    integer = any(v.binary for v in lp.variables)
    bound = info.mip_dual_bound if integer else (info.objective_function_value if status == S.kOptimal else None)
    if bound is not None and not abs(bound) < 1e30:
        bound = None  # HiGHS reports +-inf when it has no bound
    objective = info.objective_function_value if values is not None else None
    # a cancel that came too late leaves HiGHS's proven answer standing
    if status == S.kInfeasible:
        return MilpAnswer(Status.INFEASIBLE, message=f"HiGHS: infeasible{note}", stats=stats)
    if status == S.kOptimal and values is not None:
        return MilpAnswer(Status.OPTIMAL, values, bound, objective, f"HiGHS: optimal{note}", stats=stats)
    if status in (S.kModelError, S.kSolveError, S.kPresolveError, S.kPostsolveError, S.kLoadError,
                  S.kMemoryLimit) and values is None:
        return MilpAnswer(Status.ERROR, message=f"HiGHS: {text}{note}", stats=stats)
    limited = stopped or interrupted or status in (S.kTimeLimit, S.kInterrupt, S.kHighsInterrupt)
    if values is not None:
        return MilpAnswer(Status.FEASIBLE, values, bound, objective, f"HiGHS: {text}{note}{asked}",
                          interrupted=limited, stats=stats)
    return MilpAnswer(Status.NO_SOLUTION_FOUND, bound=bound, message=f"HiGHS: no plan found ({text}){note}{asked}",
                      interrupted=limited, constant_in_bound=True, stats=stats)
