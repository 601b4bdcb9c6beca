"""``milp-highs``: HiGHS through highspy, in a child process.

The ``LinearProgram`` goes to HiGHS as one row-wise sparse matrix (``HighsLp``), with
the row scaling every MILP backend shares (``splitopt.backends.milp.emitted_rows``); PuLP's
HiGHS interface built it term by term through Python expressions and took longer than
the solve on the larger programs. The matrix is written as numpy arrays to a temporary
folder and solved by ``python -m splitopt.backends.highs FOLDER``, a child process of
its own session (``splitopt.backends.deadline.run_child``, as CBC): at the deadline or on
Ctrl-C the child gets SIGINT, cancels HiGHS through its interrupt callbacks and writes
the incumbent and bound; a child that does not answer within the grace period is killed
and the family's start plan is returned. In process, HiGHS could not be abandoned: its
presolve polls the interrupt rarely, and ran 23 s past a 10 s limit on
``transformer1000_chain8_throughput`` (benchmarks/results/time_limits.md). A fresh
process per solve also gives every solve the thread count it asks for (HiGHS fixes its
thread pool at the first solve of a process: ../shared/NOTES.md). The child costs about
0.2 s of start-up.

Fixed settings: ``mip_allow_restart=false`` (HiGHS 1.13 and 1.14 claimed a wrong optimum
after a restart: "Optimal" at 0.10025 ms on a 7-layer chain whose optimum is
0.10020 ms). The solver's own options (``--option presolve=off``,
``mip_heuristic_effort=0.2``, ...) are HiGHS options, checked by name, type and range by
HiGHS itself before the program is built; those splitopt sets, the tolerances the
programs state theirs at, objective bounds and file options are refused.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from typing import Any, Callable, Mapping

from splitopt.backends.deadline import ChildRun, check_deadline, run_child
from splitopt.backends.milp import (PROGRESS_MARK, LogTail, MilpAnswer, MilpBackend, emitted_rows, read_text,
                                    remaining_budget)
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
    accepted: tuple[type, ...]
    accepted, what = types[kind]
    if not isinstance(value, accepted) or (isinstance(value, bool) and kind != highspy.HighsOptionType.kBool) \
            or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidOption(f"option '{key}': HiGHS option '{key}' takes {what}, got {shown(value)}")
    if kind == highspy.HighsOptionType.kInt and isinstance(value, int) and not -2**31 <= value < 2**31:
        raise InvalidOption(f"option '{key}': HiGHS option '{key}' takes a 32-bit integer, got {shown(value)}")
    if kind == highspy.HighsOptionType.kDouble and isinstance(value, (int, float)):
        value = float(value)
    if h.setOptionValue(key, value) != highspy.HighsStatus.kOk:
        raise InvalidOption(f"option '{key}': HiGHS refuses the value {shown(value)} (out of its range or not "
                            f"one of its values)")


def model_arrays(lp: LinearProgram, options: SolveOptions | None = None) -> dict:
    """``lp`` as the arrays of a HiGHS model with a row-wise matrix (numpy), rows as every
    MILP backend emits them; checks the deadline while emitting (DeadlinePassed)."""
    import numpy as np

    inf = math.inf
    n = len(lp.variables)
    cost = np.zeros(n)
    for i, c in lp.objective.items():
        cost[i] = c
    starts: list[int] = [0]
    index: list[int] = []
    value: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    for _, row, coeffs, rhs in emitted_rows(lp, options):
        index.extend(coeffs.keys())
        value.extend(coeffs.values())
        starts.append(len(index))
        lower.append(rhs if row.sense in (">=", "==") else -inf)
        upper.append(rhs if row.sense in ("<=", "==") else inf)
    return {"offset": np.array([float(lp.objective_constant)]), "cost": cost,
            "col_lower": np.array([v.lb for v in lp.variables], dtype=float),
            "col_upper": np.array([v.ub for v in lp.variables], dtype=float),
            "integer": np.array([v.binary for v in lp.variables], dtype=bool),
            "row_lower": np.array(lower, dtype=float), "row_upper": np.array(upper, dtype=float),
            "start": np.array(starts, dtype=np.int32), "index": np.array(index, dtype=np.int32),
            "value": np.array(value, dtype=float)}


def to_highs(arrays: Mapping[str, Any]):
    """A ``highspy.HighsLp`` from :func:`model_arrays`."""
    import highspy
    import numpy as np

    inf = highspy.kHighsInf
    model = highspy.HighsLp()
    n = len(arrays["cost"])
    m = len(arrays["row_lower"])
    model.num_col_ = n
    model.num_row_ = m
    model.col_cost_ = arrays["cost"]
    model.offset_ = float(arrays["offset"][0])
    model.col_lower_ = arrays["col_lower"]
    model.col_upper_ = arrays["col_upper"]
    model.integrality_ = [highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous
                          for b in arrays["integer"]]
    model.row_lower_ = np.where(np.isinf(arrays["row_lower"]), -inf, arrays["row_lower"])
    model.row_upper_ = np.where(np.isinf(arrays["row_upper"]), inf, arrays["row_upper"])
    matrix = model.a_matrix_
    matrix.format_ = highspy.MatrixFormat.kRowwise
    matrix.num_col_ = n
    matrix.num_row_ = m
    matrix.start_ = arrays["start"]
    matrix.index_ = arrays["index"]
    matrix.value_ = arrays["value"]
    model.a_matrix_ = matrix
    return model


class HighsBackend(MilpBackend):
    name = "milp-highs"
    description = "MILP, HiGHS through highspy (a child process, cancelled at the deadline)"
    requires = ("highspy",)
    install_hint = "pip install 'highspy>=1.7.1,<1.14'"

    def check_native_options(self, options: Mapping[str, Any]) -> None:
        h = quiet_highs()
        for key, value in options.items():
            set_option(h, key, value)

    def progress_in_line(self, line: str) -> tuple[float | None, float | None] | None:
        """The child's own progress lines (``PROGRESS_MARK``; HiGHS's log is not read)."""
        if not line.startswith(PROGRESS_MARK):
            return None
        parts = line.split()
        if len(parts) != 3:
            return None
        try:
            return float(parts[1]), float(parts[2])
        except ValueError:
            return None

    def _solve(self, lp: LinearProgram, options: SolveOptions,
               on_line: Callable[[str], None] | None = None) -> MilpAnswer:
        import numpy as np

        if not lp.variables:  # HiGHS answers "Empty" to a program without columns
            met = all((r.sense == "<=" and 0 <= r.rhs) or (r.sense == ">=" and 0 >= r.rhs) or
                      (r.sense == "==" and r.rhs == 0) for r in lp.rows)
            if not met:
                return MilpAnswer(Status.INFEASIBLE, message="HiGHS: infeasible (a program without variables)")
            return MilpAnswer(Status.OPTIMAL, [], lp.objective_constant, lp.objective_constant,
                              "HiGHS: optimal (a program without variables)")
        with tempfile.TemporaryDirectory(prefix="splitopt-highs-") as tmp:
            np.savez(os.path.join(tmp, "model.npz"), **model_arrays(lp, options))
            settings: dict[str, Any] = {"random_seed": int(options.seed), "mip_allow_restart": False,
                                        "threads": max(1, int(options.threads)),
                                        "mip_rel_gap": float(options.solver_options.get("mip_gap", 0.0))}
            if options.verbose:  # HiGHS's console is the log file, streamed to stderr
                settings.update(output_flag=True, log_to_console=True)
            if options.solver_options.get("mip_gap_abs") is not None:
                settings["mip_abs_gap"] = float(options.solver_options["mip_gap_abs"])
            native = {k: v for k, v in options.solver_options.items() if k not in ("mip_gap", "mip_gap_abs")}
            budget = remaining_budget(options)
            if budget is not None:
                settings["time_limit"] = float(budget)
            with open(os.path.join(tmp, "settings.json"), "w") as f:
                json.dump({"settings": settings, "native": native, "progress": on_line is not None}, f)
            check_deadline(options)
            log = os.path.join(tmp, "highs.log")
            with LogTail(log, options.verbose, on_line):
                child = run_child([sys.executable, "-m", "splitopt.backends.highs", tmp], log, options)
            answer_path = os.path.join(tmp, "answer.json")
            answer = None
            if not child.killed and os.path.exists(answer_path):
                with open(answer_path) as f:
                    answer = json.load(f)
                if answer.get("has_solution"):
                    answer["values"] = np.load(os.path.join(tmp, "values.npy")).tolist()
            text = read_text(log)
        return _answer(lp, answer, child, text)


def solve_in_child(folder: str) -> None:
    """The child process: read ``model.npz`` and ``settings.json`` from ``folder``, solve,
    write ``answer.json`` (and ``values.npy``). SIGINT (the parent's deadline or Ctrl-C)
    cancels the solve through HiGHS's interrupt callbacks, which HiGHS polls in its
    simplex, IPM and branch and bound; HiGHS then returns its incumbent and bound. A HiGHS
    that does not poll in time (its presolve can run for many seconds on a large program)
    is killed by the parent after the grace period."""
    import highspy
    import numpy as np

    with open(os.path.join(folder, "settings.json")) as f:
        given = json.load(f)
    with np.load(os.path.join(folder, "model.npz")) as data:
        arrays = {k: data[k] for k in data.files}
    h = quiet_highs()
    for key, value in given["settings"].items():
        h.setOptionValue(key, value)
    for key, value in given["native"].items():
        set_option(h, key, value)
    # kWarning: HiGHS took the program and dropped matrix entries of |value| <= 1e-9
    # (small_matrix_value) left by the row scaling; the evaluator re-checks the plan
    if h.passModel(to_highs(arrays)) == highspy.HighsStatus.kError:
        _write_answer(folder, {"refused": True})
        return
    h.HandleUserInterrupt = True
    if given.get("progress"):
        report_progress(h)
    interrupted = False
    h.startSolve()
    while True:
        try:
            done, _ = h.wait(0.05)
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = True
                h.cancelSolve()
            continue
        if done:
            break
    status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if has_solution:
        np.save(os.path.join(folder, "values.npy"), np.asarray(h.getSolution().col_value, dtype=float))
    _write_answer(folder, {"status": int(status), "status_text": h.modelStatusToString(status),
                           "has_solution": has_solution, "objective": info.objective_function_value,
                           "mip_dual_bound": info.mip_dual_bound})


def report_progress(h, every_s: float = 0.2) -> None:
    """Have HiGHS's branch and bound print each new incumbent and bound to stdout (the
    log the parent follows) as ``PROGRESS_MARK INCUMBENT BOUND``: at every improving
    solution, and from its interrupt polls at most every ``every_s`` seconds when the
    numbers changed."""
    last: dict[str, Any] = {"at": 0.0, "values": None}

    def write(values: tuple[float, float], force: bool) -> None:
        now = time.monotonic()
        if values != last["values"] and (force or now - last["at"] >= every_s):
            last["at"], last["values"] = now, values
            print(f"{PROGRESS_MARK} {values[0]!r} {values[1]!r}", flush=True)

    def on_solution(e) -> None:
        write((e.data_out.objective_function_value, e.data_out.mip_dual_bound), True)

    def on_poll(e) -> None:
        write((e.data_out.mip_primal_bound, e.data_out.mip_dual_bound), False)

    h.cbMipImprovingSolution.subscribe(on_solution)
    h.cbMipInterrupt.subscribe(on_poll)


def _write_answer(folder: str, answer: dict) -> None:
    """Write ``answer.json`` whole or not at all (a kill mid-write leaves no answer)."""
    path = os.path.join(folder, "answer.json")
    with open(path + ".part", "w") as f:
        json.dump(answer, f, allow_nan=True)
    os.replace(path + ".part", path)


def _answer(lp: LinearProgram, answer: dict | None, child: ChildRun, log: str) -> MilpAnswer:
    """Read what the child wrote: HiGHS's model status, solution and bound."""
    import highspy

    S = highspy.HighsModelStatus
    stats = {"highs_returncode": child.returncode, "highs_wall_s": child.elapsed_s}
    if child.interrupted:
        stats["ctrl_c"] = True  # the user's Ctrl-C, not the deadline (what auto needs to know)
    asked = "; interrupted (Ctrl-C)" if child.interrupted else "; stopped at the deadline" if child.stopped else ""
    if answer is None:
        if child.killed:
            return MilpAnswer(Status.NO_SOLUTION_FOUND, message=f"HiGHS{asked}; it did not stop within the grace "
                              "period (a long presolve pass) and was killed", interrupted=True, stats=stats)
        if child.stopped or child.interrupted:  # stopped before HiGHS ran (while the child started)
            return MilpAnswer(Status.NO_SOLUTION_FOUND, message=f"HiGHS{asked} before it began", interrupted=True,
                              stats=stats)
        last = ([line for line in log.strip().splitlines() if not line.startswith(PROGRESS_MARK)] or ["no output"])[-1]
        return MilpAnswer(Status.ERROR, message=f"HiGHS process ended with exit code {child.returncode}: "
                          f"{cut(last)}", stats=stats)
    if answer.get("refused"):
        raise SolverFailure("milp-highs: HiGHS refused the program")
    status = S(answer["status"])
    text = answer["status_text"]
    stats["highs_status"] = text
    values = answer.get("values")
    if values is not None and len(values) != len(lp.variables):
        values = None
    integer = any(v.binary for v in lp.variables)
    bound = answer["mip_dual_bound"] if integer else (answer["objective"] if status == S.kOptimal else None)
    if bound is not None and not abs(bound) < 1e30:
        bound = None  # HiGHS reports +-inf when it has no bound
    objective = answer["objective"] if values is not None else None
    # a cancel that came too late leaves HiGHS's proven answer standing
    if status == S.kInfeasible:
        return MilpAnswer(Status.INFEASIBLE, message="HiGHS: infeasible", stats=stats)
    if status == S.kOptimal and values is not None:
        return MilpAnswer(Status.OPTIMAL, values, bound, objective, "HiGHS: optimal", stats=stats)
    if status in (S.kModelError, S.kSolveError, S.kPresolveError, S.kPostsolveError, S.kLoadError,
                  S.kMemoryLimit) and values is None:
        return MilpAnswer(Status.ERROR, message=f"HiGHS: {text}", stats=stats)
    limited = child.stopped or child.interrupted or status in (S.kTimeLimit, S.kInterrupt, S.kHighsInterrupt)
    if values is not None:
        return MilpAnswer(Status.FEASIBLE, values, bound, objective, f"HiGHS: {text}{asked}",
                          interrupted=limited, stats=stats)
    return MilpAnswer(Status.NO_SOLUTION_FOUND, bound=bound, message=f"HiGHS: no plan found ({text}){asked}",
                      interrupted=limited, constant_in_bound=True, stats=stats)


if __name__ == "__main__":
    solve_in_child(sys.argv[1])
