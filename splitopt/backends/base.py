"""The backend boundary. A backend is one small class registered by name in
``splitopt.backends.registry``; it never names a family.

* :class:`ProgramBackend` (CBC, HiGHS, CP-SAT): as cvxpy's solvers, a program goes in,
  values and a status come out. The family builds the program (``Family.build_program``
  of a kind the backend runs, in the backend's order of preference: the family declares
  what it builds, the backend what it runs), the backend runs it (:meth:`run`, the only
  solver-specific step: its status and log are read there, once), and the shared
  template here decodes the values into a plan, converts objective and bound to ms with
  the program's stated tolerance, keeps the user's wall-clock budget (building
  included) and falls back on the family's start plan when the solver stops without a
  plan of its own.
* Backends that produce plans directly (brute force, a family's own methods) implement
  :meth:`Backend.solve` themselves.
"""

from __future__ import annotations

import importlib.util
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from splitopt.backends.deadline import DeadlinePassed
from splitopt.core import progress
from splitopt.core.errors import InvalidOption, NotApplicable, SolverFailure, SplitoptError
from splitopt.core.gcpause import paused_gc
from splitopt.core.options import BuildDeadlinePassed, SolveOptions, building_until
from splitopt.core.program import Program
from splitopt.core.result import BackendOutput, Status


@dataclass
class RunResult:
    """What running a program gives: ``status``; ``values`` (for a ``LinearProgram`` one
    float per variable, for a CP-SAT model the solution vector by ``var.Index()``), when
    a solution is at hand; ``objective`` and ``bound`` in the model's own units
    (including a ``LinearProgram``'s constant); ``interrupted``: stopped by the deadline
    or by Ctrl-C; ``stats``: solve seconds and solver details."""

    status: Status
    values: Sequence[float] | None = None
    objective: float | None = None
    bound: float | None = None
    message: str = ""
    interrupted: bool = False
    #: known error of ``objective`` from the run's own scaling (model units; already
    #: subtracted from ``bound``), e.g. CP-SAT's integer emission of a LinearProgram
    tolerance: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    #: registry name, e.g. "milp-cbc"
    name: ClassVar[str] = ""
    #: "exact" (proves optimality), "baseline" (a published method), "heuristic" (search;
    #: proves nothing) or "portfolio" (auto: search, then an exact backend)
    kind: ClassVar[str] = "exact"
    #: importable modules it needs; checked without importing them
    requires: ClassVar[tuple[str, ...]] = ()
    #: the pip command or extra that installs them
    install_hint: ClassVar[str] = "pip install -e ."
    description: ClassVar[str] = ""
    #: OPTIMAL means: the plan's objective is within this relative tolerance (and
    #: ``OPTIMAL_ATOL_MS``) of a proven lower bound on the optimum; the bound already
    #: accounts for the program's stated scaling and feasibility tolerances, so the
    #: reported gap is honest, and a solver "optimum" whose gap exceeds this is FEASIBLE
    optimal_rtol: ClassVar[float] = 1e-4
    #: an exact backend that keeps its best plan and a proven bound and improves both
    #: until its time limit, with no use for a plan found elsewhere (a family's branch and
    #: bound): ``auto`` runs it once for most of the budget (``backends/auto.py``)
    anytime: ClassVar[bool] = False
    #: solver options it accepts (name -> one line); ``check_options`` refuses others
    options: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def is_installed(cls) -> bool:
        return all(importlib.util.find_spec(mod) is not None for mod in cls.requires)

    def check_options(self, options: Mapping[str, Any]) -> None:
        """InvalidOption naming the first option this backend does not accept."""
        for key in options:
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise InvalidOption(f"option '{key}': not an option of solver '{self.name}' (options: {known})")

    def handles(self, family: Any, problem: str) -> bool:
        """Whether this backend can solve ``problem`` of ``family``."""
        return True

    @abstractmethod
    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        """Solve ``inst`` (of ``family``) and return the plan (or the reason there is none)."""


#: absolute part of the OPTIMAL tolerance (ms): objectives near zero
OPTIMAL_ATOL_MS = 1e-9


#: the objective scale (ms, a feasible plan's) within which a MILP solver's absolute
#: tolerances decide correctly: rows met to about 1e-6 and binaries to 1e-6 on big-M rows
#: (measured: with every time 1e-9 of a ms, and with times near 1e9 ms, HiGHS and CBC
#: called plans 49 % to 66x worse than brute force's optimal, with bounds above it)
LINEAR_SCALE_MS = (1e-3, 1e7)


def check_linear_scale(solver: str, objective_ms: float) -> None:
    """NotApplicable (one line) where a feasible plan's objective lies outside
    ``LINEAR_SCALE_MS``: the MILP's answer there would be decided by its tolerances."""
    low, high = LINEAR_SCALE_MS
    if 0 < objective_ms < low or objective_ms > high:
        raise NotApplicable(f"{solver}: this instance's plans take about {objective_ms:.3g} ms, outside the "
                            f"{low:g} .. {high:g} ms where the MILP solvers' absolute tolerances (1e-6 per row) "
                            "decide correctly: give the times in ms, or use cpsat (it scales its unit to the "
                            "instance)")


def optimal_atol_ms(*values: float) -> float:
    """The absolute part of OPTIMAL's tolerance for objectives and bounds ``values`` (ms):
    ``OPTIMAL_ATOL_MS``, but never more than a billionth of the largest of them, so that
    an instance whose times are all tiny (1e-12 ms) is not proven by a tolerance larger
    than its objective."""
    return min(OPTIMAL_ATOL_MS, 1e-9 * max((abs(v) for v in values), default=0.0))


def feasible_start_plan(family: Any, inst: Any, options: SolveOptions | None = None, hints: bool = True) -> Any | None:
    """The plan of least objective that meets every limit among the family's start plan and
    (``hints``) the plans of its *hint* methods (``Method.hint``: cheap baselines that run
    on the instance's problem), else None: the only plan a backend may fall back on (so an
    exact backend never returns a plan worse than a baseline it was hinted with), the one
    it hands the solver as a hint, and the one that refutes an INFEASIBLE claim. Hints run
    while ``options``' time lasts; the answer is kept with the instance once every hint
    has run."""
    options = options or SolveOptions()

    def family_start() -> tuple[Any | None, float]:
        start = family.start_plan(inst)
        if start is not None:
            metrics = family.evaluate(inst, start)
            if metrics.feasible:
                return start, metrics.objective_ms
        return None, float("inf")

    start = inst.derived(("backends", "feasible_start_plan"), family_start)
    if start[0] is not None:
        progress.report(incumbent_ms=start[1])
    if not hints:
        return start[0]

    def best_plan() -> Any | None:
        best, best_ms = start
        for method in family.methods():
            if not method.hint or (method.problems is not None and inst.problem not in method.problems):
                continue
            if options.out_of_time():
                raise _HintsCutShort(best)
            try:
                plan = method.run(inst, options).plan
                metrics = None if plan is None else family.evaluate(inst, plan)
            except SplitoptError:  # a baseline that does not apply here (or cannot run on it) hints nothing
                continue
            if metrics is not None and metrics.feasible and metrics.objective_ms < best_ms:
                best, best_ms = plan, metrics.objective_ms
        return best

    try:
        return inst.derived(("backends", "hinted_start_plan"), best_plan)
    except _HintsCutShort as cut:  # not kept: a later call with more time runs every hint
        return cut.plan


class _HintsCutShort(Exception):
    """The time ran out before every hint method ran; ``plan``: the best one so far."""

    def __init__(self, plan: Any | None):
        super().__init__("hints cut short by the time limit")
        self.plan = plan


class ProgramBackend(Backend):
    """A backend that runs the programs families build (see the module docstring)."""

    #: program kinds it runs, in order of preference
    runs: ClassVar[tuple[str, ...]] = ("linear",)

    def handles(self, family: Any, problem: str) -> bool:
        return any(kind in family.program_kinds for kind in self.runs)

    def kind_for(self, family: Any) -> str:
        for kind in self.runs:
            if kind in family.program_kinds:
                return kind
        raise NotApplicable(f"solver '{self.name}' runs {', '.join(self.runs)} programs; family '{family.name}' "
                            f"builds {', '.join(family.program_kinds)}")

    @abstractmethod
    def run(self, program: Program, options: SolveOptions) -> RunResult:
        """Run ``program`` within ``options.remaining_s()`` seconds and return what is
        known when the deadline or Ctrl-C stops the solver (``interrupted``); while
        emitting the program it may raise DeadlinePassed (or let a KeyboardInterrupt
        through): the template then returns the start plan."""

    @abstractmethod
    def export(self, program: Program, path: Any) -> None:
        """Write the program as the solver reads it (``--export-model``)."""

    def check_scale(self, objective_ms: float) -> None:
        """NotApplicable where a feasible plan's objective (ms) lies where this solver's
        tolerances, not the program, would decide the answer (the MILP backends:
        :func:`check_linear_scale`); CP-SAT scales its integer unit to the instance."""

    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        self.check_options(options.solver_options)
        kind = self.kind_for(family)
        t0 = time.perf_counter()
        # the family's own start plan first: where it attains the family's bound, no hint runs
        start = feasible_start_plan(family, inst, options, hints=False)
        proven, relaxation = self._start_attains_bound(family, inst, start, options)
        if proven is not None:
            proven.extra["build_s"] = time.perf_counter() - t0
            return proven
        start = feasible_start_plan(family, inst, options)
        if start is not None and family.objective_unit(inst) == "ms":
            self.check_scale(family.evaluate(inst, start).objective_ms)

        def stronger(bound: float | None) -> float | None:
            """A stopped run's bound, or the family's relaxation bound where that is higher."""
            if relaxation is None:
                return bound
            return relaxation if bound is None else max(bound, relaxation)
        progress.report(bound_ms=relaxation)
        try:
            with building_until(options.deadline), paused_gc(), progress.phase("building the program"):
                program = family.build_program(inst, kind, start)
        except BuildDeadlinePassed:
            return self._stopped(family, inst, start, stronger(None), "the time limit ran out while building the program",
                                 {"build_s": time.perf_counter() - t0, "interrupted": True}, 0.0)
        except KeyboardInterrupt:
            if start is None:
                raise
            return self._stopped(family, inst, start, stronger(None), "interrupted (Ctrl-C) while building the program",
                                 {"build_s": time.perf_counter() - t0, "interrupted": True, "ctrl_c": True}, 0.0)
        build_s = time.perf_counter() - t0
        if options.export_path is not None:
            self.export(program, options.export_path)
        extra: dict[str, Any] = {"build_s": build_s, "program": kind, "optimal_rtol": self.optimal_rtol,
                                 **program.stats}
        remaining = options.remaining_s()
        if remaining is not None and remaining <= 0:
            return self._stopped(family, inst, start, stronger(None), "the time limit ran out while building the program",
                                 extra, time.perf_counter() - t0 - build_s)
        t1 = time.perf_counter()
        try:
            with progress.phase("solving"):
                raw = self.run(program, options)
        except DeadlinePassed:
            raw = RunResult(Status.NO_SOLUTION_FOUND, message="the time limit ran out while emitting the program",
                            interrupted=True)
        except KeyboardInterrupt:
            if start is None:
                raise
            raw = RunResult(Status.NO_SOLUTION_FOUND, message="interrupted (Ctrl-C) before the solver had a plan",
                            interrupted=True, stats={"ctrl_c": True})
        extra.update(raw.stats)
        extra["solve_s"] = time.perf_counter() - t1
        if raw.interrupted:
            extra["interrupted"] = True
        bound_tol = program.tolerance_ms if program.bound_tolerance_ms is None else program.bound_tolerance_ms
        bound = None if raw.bound is None else program.to_ms(raw.bound) - bound_tol
        if raw.status in (Status.INFEASIBLE, Status.ERROR):
            return BackendOutput(raw.status, message=raw.message, extra=extra)
        if raw.status is not Status.OPTIMAL:
            bound = stronger(bound)
        if not raw.status.has_plan or raw.values is None:
            return self._stopped(family, inst, start, bound, raw.message, extra, extra["solve_s"])
        plan = program.decode(raw.values)
        if plan is None:
            raise SolverFailure(f"{self.name}: reports {raw.status.value} on a program without solutions")
        objective = None if raw.objective is None else program.to_ms(raw.objective)
        status = raw.status
        if status is Status.FEASIBLE and start is not None:
            # a stopped solver's plan may be worse than the start plan it was given
            if family.evaluate(inst, start).objective_ms < family.evaluate(inst, plan).objective_ms:
                plan, objective = start, None
                extra["returned"] = "start plan (better than the solver's incumbent)"
        return BackendOutput(status, plan=plan, objective=objective, bound=bound, message=raw.message,
                             objective_tolerance_ms=program.tolerance_ms + raw.tolerance * program.unit_ms,
                             # a stopped solver's objective variable need not be tight (a bottleneck
                             # bound, a makespan above the decoded schedule): its plan may be better
                             one_sided=status is not Status.OPTIMAL,
                             extra=extra)

    def _start_attains_bound(self, family: Any, inst: Any, start: Any | None,
                             options: SolveOptions) -> tuple[BackendOutput | None, float | None]:
        """(OPTIMAL without building anything when the feasible start plan's objective is
        within this backend's tolerance of the family's proven lower bound, else None; and
        that bound, for a stopped run's answer). Neither when there is no start plan, the
        program is to be exported or the time is up."""
        if start is None or options.export_path is not None or options.out_of_time():
            return None, None
        bound = family.lower_bound(inst)
        if bound is None:
            return None, None
        value = family.evaluate(inst, start).objective_ms
        if value > bound + self.optimal_rtol * abs(bound) + optimal_atol_ms(value, bound):
            return None, bound
        return BackendOutput(Status.OPTIMAL, plan=start, bound=min(bound, value),
                             message="the start plan attains the family's lower bound; no program was needed",
                             extra={"program": "none: start plan at the lower bound",
                                    "optimal_rtol": self.optimal_rtol}), bound

    def _stopped(self, family: Any, inst: Any, start: Any | None, bound: float | None, message: str,
                 extra: dict[str, Any], solve_s: float) -> BackendOutput:
        """Stopped without a plan of the solver's own: the start plan (FEASIBLE) with the
        bound known, or NO_SOLUTION_FOUND."""
        extra["solve_s"] = solve_s
        if start is not None:
            extra["returned"] = "start plan"
            return BackendOutput(Status.FEASIBLE, plan=start, bound=bound, message=f"{message}; returning the start plan",
                                 extra=extra)
        return BackendOutput(Status.NO_SOLUTION_FOUND, bound=bound, message=message, extra=extra)
