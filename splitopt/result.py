"""Solver outcomes: the status enum and the result record every backend's run ends in."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from splitopt.evaluator import Metrics
from splitopt.plan import Plan


class Status(str, enum.Enum):
    OPTIMAL = "OPTIMAL"
    """The plan is proven optimal (gap within the solver's tolerance)."""
    FEASIBLE = "FEASIBLE"
    """A plan meeting every budget, not proven optimal: an exact solver stopped at its
    time limit (see ``gap``), or a baseline/heuristic, which proves nothing."""
    INFEASIBLE = "INFEASIBLE"
    """Proven: no plan meets the budgets. ``message`` names the binding budget."""
    NO_SOLUTION_FOUND = "NO_SOLUTION_FOUND"
    """Stopped without a plan that meets the budgets (time limit, or a baseline whose
    method only reaches plans that break a budget; such a plan is still attached, with
    its violations in ``metrics``)."""
    ERROR = "ERROR"
    """The backend failed; ``message`` says how."""

    @property
    def has_plan(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass
class BackendOutput:
    """What a backend hands back before evaluation.

    ``objective`` is the backend's own value of the plan's total latency (ms), when it
    computes one; ``bound`` a proven lower bound on the optimum (ms), when it has one."""

    status: Status
    plan: Plan | None = None
    objective: float | None = None
    bound: float | None = None
    message: str = ""
    #: known absolute error (ms) of ``objective``/``bound`` from integer scaling (CP-SAT)
    objective_tolerance_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class SolveResult:
    """The record of one solve.

    ``objective`` is the plan's total latency in ms as computed by the evaluator,
    ``bound`` the backend's proven lower bound (ms) if any, and
    ``gap = (objective - bound) / objective`` (relative, 0 for a proven optimum, None
    without a bound)."""

    status: Status
    backend: str
    problem: str
    plan: Plan | None
    metrics: Metrics | None
    objective: float | None
    bound: float | None
    gap: float | None
    build_s: float
    solve_s: float
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.build_s + self.solve_s
