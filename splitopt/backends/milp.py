"""What the MILP backends (``cbc.py``, ``highs.py``) share: the emission of a family's
``LinearProgram`` with its row scaling, the PuLP model (CBC's input, and the ``.lp``/
``.mps`` files of ``--export-model``), the template that turns a solver's answer into a
``RunResult``, and streaming a solver's log to stderr.

Error rows are divided by the budget (and ``memory`` rows in bytes by their limit) so
that the solver's absolute feasibility tolerance (1e-7) is a relative one; ``bits`` rows
stay in bits. A run that hits its time limit is reported FEASIBLE with the solver's best
bound, never OPTIMAL (CBC may print "Optimal" after a time-limited run:
../shared/NOTES.md). A run that stops before finding any plan returns the family's start
plan as FEASIBLE with the solver's bound (``splitopt.backends.base.ProgramBackend``).
Emission checks the user's deadline every few thousand rows
(``splitopt.backends.deadline``).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from abc import abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from splitopt.backends.base import ProgramBackend, RunResult, check_linear_scale
from splitopt.backends.deadline import CHECK_EVERY_ROWS, check_deadline
from splitopt.core import progress
from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.options import PORTABLE_OPTIONS, SolveOptions, check_portable_option
from splitopt.core.program import LinearProgram, Program, Row
from splitopt.core.result import Status


def emitted_rows(lp: LinearProgram, options: SolveOptions | None = None) -> Iterator[tuple[int, Row, dict[int, float], float]]:
    """Each row of ``lp`` as a MILP solver receives it: (index, row, coefficients, rhs),
    error and memory rows divided by their right-hand side. Checks the deadline of
    ``options`` every CHECK_EVERY_ROWS rows (DeadlinePassed)."""
    for j, row in enumerate(lp.rows):
        if options is not None and j % CHECK_EVERY_ROWS == 0:
            check_deadline(options)
        scale = 1.0 / row.rhs if row.kind in ("error", "memory") and row.rhs > 0 else 1.0
        coeffs = {i: c * scale for i, c in row.coeffs.items()} if scale != 1.0 else row.coeffs
        if row.kind == "error" and row.sense == "<=" and row.rhs > 0:
            # error rows: nonnegative errors of 0/1 choices; one above the budget can only
            # be 0, and 2.0 says so as well without a huge ratio (a tiny budget)
            coeffs = {i: min(c, 2.0) if lp.variables[i].ub <= 1 and c >= 0 else c for i, c in coeffs.items()}
        yield j, row, coeffs, row.rhs * scale


def _new_variable(prob, name: str, lb: float, ub: float, cat: str):
    """PuLP >= 3.3 attaches variables to the model; older PuLP builds them directly."""
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound=lb, upBound=ub, cat=cat)
    import pulp

    return pulp.LpVariable(name, lowBound=lb, upBound=ub, cat=cat)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def to_pulp(lp: LinearProgram, name: str = "splitopt", options: SolveOptions | None = None):
    """Translate a LinearProgram to a ``pulp.LpProblem``; returns (problem, variables).
    Expressions are built from (variable, coefficient) pairs, not by PuLP's operator
    arithmetic, which made one temporary expression per term (3x slower on 50,000 rows)."""
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
        xs.append(_new_variable(prob, f"v{i}_{_safe(v.name)}"[:200], v.lb, v.ub, cat))
    prob.setObjective(pulp.LpAffineExpression([(xs[i], c) for i, c in lp.objective.items()],
                                              constant=lp.objective_constant, name="latency_ms"))
    senses = {"<=": pulp.LpConstraintLE, ">=": pulp.LpConstraintGE, "==": pulp.LpConstraintEQ}
    for j, row, coeffs, rhs in emitted_rows(lp, options):
        expr = pulp.LpAffineExpression([(xs[i], c) for i, c in coeffs.items()])
        prob.addConstraint(pulp.LpConstraint(expr, senses[row.sense], rhs=rhs), f"c{j}_{_safe(row.name or 'row')}"[:200])
    return prob, xs


def export_pulp(prob, path: Path) -> None:
    path = Path(path)
    if path.suffix.lower() not in (".mps", ".lp"):
        raise NotApplicable(f"--export-model: MILP backends write .lp or .mps, not '{path.suffix or path.name}'")
    try:
        prob.writeMPS(str(path)) if path.suffix.lower() == ".mps" else prob.writeLP(str(path))
    except OSError as e:
        raise InvalidOption(f"--export-model {path}: cannot write the file ({e.strerror or type(e).__name__})") from None


#: the start of a line a solver's child process writes to its log for the progress shown
#: (HiGHS's child): ``splitopt-progress INCUMBENT BOUND`` in the program's units, ``nan``
#: for a value not known yet; never echoed to the user
PROGRESS_MARK = "splitopt-progress"


class LogTail:
    """Follow a growing log file while a solver runs: copy it to stderr (``echo``, for
    ``--verbose``, so that stdout stays clean for ``--json``; progress lines left out) and
    hand each complete line to ``on_line`` (the progress shown). A thread polls the file
    every ``POLL_S`` seconds; nothing runs when neither is asked for."""

    POLL_S = 0.1

    def __init__(self, path: str, echo: bool, on_line: Callable[[str], None] | None = None):
        self.path, self.echo, self.on_line = path, echo, on_line
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.echo or self.on_line is not None:
            self._thread.start()
        return self

    def _run(self) -> None:
        offset, partial = 0, ""
        while True:
            stop = self._stop.is_set()
            if os.path.exists(self.path):
                with open(self.path, errors="replace") as f:
                    f.seek(offset)
                    partial += f.read()
                    offset = f.tell()
            lines = partial.split("\n")
            partial = lines.pop()  # a line still being written
            if stop and partial:
                lines.append(partial)
            if lines:
                self._take(lines)
            if stop:
                return
            time.sleep(self.POLL_S)

    def _take(self, lines: list[str]) -> None:
        if self.echo:
            shown = [line for line in lines if not line.startswith(PROGRESS_MARK)]
            if shown:
                sys.stderr.write("\n".join(shown) + "\n")
                sys.stderr.flush()
        if self.on_line is not None:
            for line in lines:
                try:
                    self.on_line(line)
                except Exception:  # the progress shown must never break a solve
                    pass

    def __exit__(self, *exc):
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()


@dataclass
class MilpAnswer:
    """What a MILP solver answered, in the solver's terms: ``status``; ``values`` (one per
    variable of the LinearProgram) when it has a solution; its best ``bound`` and its own
    ``objective`` value (either may leave out the program's constant: the template
    aligns the bound with the objective; without an objective, ``constant_in_bound``
    says whether the bound includes it); ``interrupted``: stopped by the deadline or
    Ctrl-C."""

    status: Status
    values: list[float] | None = None
    bound: float | None = None
    objective: float | None = None
    message: str = ""
    interrupted: bool = False
    constant_in_bound: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


class MilpBackend(ProgramBackend):
    """A MILP backend: runs ``LinearProgram``s. A subclass implements :meth:`_solve` and,
    for the solver's own options, :meth:`check_native_option`."""

    kind = "exact"
    runs = ("linear",)
    options = PORTABLE_OPTIONS

    def check_options(self, options: Mapping[str, Any]) -> None:
        """InvalidOption for a portable option out of range, or a name the solver does not
        accept as its own option (or one splitopt sets)."""
        native = {}
        for key, value in options.items():
            if key in PORTABLE_OPTIONS:
                check_portable_option(key, value)
            else:
                native[key] = value
        if native:
            self.check_native_options(native)

    def check_native_options(self, options: Mapping[str, Any]) -> None:
        """InvalidOption (one line naming it) for the first option the solver does not take."""
        key = next(iter(options))
        raise InvalidOption(f"option '{key}': not an option of solver '{self.name}' (options: "
                            f"{', '.join(sorted(PORTABLE_OPTIONS))})")

    def export(self, program: Program, path) -> None:
        prob, _ = to_pulp(program.model)
        export_pulp(prob, path)

    def check_scale(self, objective_ms: float) -> None:
        check_linear_scale(self.name, objective_ms)

    #: whether the objective values in the solver's log include the program's constant
    log_includes_constant: bool = True

    def progress_in_line(self, line: str) -> tuple[float | None, float | None] | None:
        """(incumbent, bound) that a line of the solver's log reports, in the program's
        units (None for either not in it), or None: the line reports neither."""
        return None

    def run(self, program: Program, options: SolveOptions) -> RunResult:
        lp: LinearProgram = program.model
        answer = self._solve(lp, in_program_units(options, program.unit_ms), self._progress_reader(program))
        stats = dict(answer.stats)
        if answer.status in (Status.INFEASIBLE, Status.ERROR):
            return RunResult(answer.status, message=answer.message, stats=stats)
        bound = answer.bound
        if answer.status is Status.NO_SOLUTION_FOUND or answer.values is None:
            if bound is not None and not answer.constant_in_bound:
                bound += lp.objective_constant
            return RunResult(Status.NO_SOLUTION_FOUND, bound=bound, message=answer.message,
                             interrupted=answer.interrupted, stats=stats)
        objective = lp.evaluate_objective(answer.values)
        if bound is not None and answer.objective is not None:
            # solvers may drop the objective's constant term; shift their bound alike
            bound += objective - answer.objective
        status = answer.status
        if status is Status.OPTIMAL:
            bound = objective if bound is None else min(bound, objective)
        return RunResult(status, values=answer.values, objective=objective, bound=bound, message=answer.message,
                         interrupted=answer.interrupted, stats=stats)

    def _progress_reader(self, program: Program) -> Callable[[str], None] | None:
        """What reads the solver's log lines into the progress shown (incumbent and bound
        in ms), or None when nobody listens. The reporter is taken here, in the solving
        thread: the thread that follows the log does not see the caller's context."""
        reporter = progress.current()
        if reporter is None:
            return None
        shift = 0.0 if self.log_includes_constant else program.model.objective_constant

        def on_line(line: str) -> None:
            found = self.progress_in_line(line)
            if found is not None:
                incumbent, bound = (None if v is None or v != v or abs(v) >= 1e30 else program.to_ms(v + shift)
                                    for v in found)
                reporter(incumbent, bound)

        return on_line

    @abstractmethod
    def _solve(self, lp: LinearProgram, options: SolveOptions,
               on_line: Callable[[str], None] | None = None) -> MilpAnswer:
        """Emit and solve ``lp`` within the budget of ``options`` (checking it while
        emitting: DeadlinePassed), stopping on Ctrl-C with what the solver has; each line
        of the solver's log goes to ``on_line`` while it runs (the progress shown). The
        portable ``mip_gap_abs`` in ``options`` is in the program's objective units."""


def in_program_units(options: SolveOptions, unit_ms: float) -> SolveOptions:
    """``options`` with the portable ``mip_gap_abs`` (ms) in units of ``unit_ms`` ms, the
    program's objective unit (a mesh program's objective is in hyperperiods)."""
    gap = options.solver_options.get("mip_gap_abs")
    if gap is None or unit_ms == 1.0:
        return options
    return replace(options, solver_options={**options.solver_options, "mip_gap_abs": gap / unit_ms})


def remaining_budget(options: SolveOptions) -> float | None:
    """The solver's own time limit: what is left of the user's budget (at least 0.01 s)."""
    left = options.remaining_s()
    return None if left is None else max(0.01, left)


def solver_option_value(value: Any) -> str:
    """A user's option value as a solver's command line or option string takes it
    (true/false -> on/off)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def read_text(path: str) -> str:
    return Path(path).read_text(errors="replace") if os.path.exists(path) else ""
