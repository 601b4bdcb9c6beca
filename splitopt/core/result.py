"""Solver outcomes: the status enum, what every plan and metrics object offers, the raw
output of a backend and the result record every solve ends in."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Generic, Hashable, Protocol, TypeVar, runtime_checkable


class Status(str, enum.Enum):
    OPTIMAL = "OPTIMAL"
    """The plan is proven optimal: its objective is within the backend's stated
    tolerance (``SolveResult.extra["optimal_rtol"]``) of a proven lower bound."""
    FEASIBLE = "FEASIBLE"
    """A plan meeting every budget, not proven optimal: an exact solver stopped at its
    time limit or by an interrupt (see ``gap``), or a baseline/heuristic, which proves
    nothing."""
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


@runtime_checkable
class PlanLike(Protocol):
    """What every family's plan offers: a hashable identity (equal plans, equal keys)."""

    def key(self) -> Hashable: ...


@runtime_checkable
class MetricsLike(Protocol):
    """What every family's evaluator returns: the objective the programs minimise (ms),
    whether every limit is met and, if not, one line per broken limit, and a JSON form."""

    @property
    def objective_ms(self) -> float: ...

    @property
    def feasible(self) -> bool: ...

    @property
    def violations(self) -> tuple[str, ...]: ...

    def to_dict(self) -> dict: ...


PlanT = TypeVar("PlanT")
MetricsT = TypeVar("MetricsT")


@dataclass
class BackendOutput(Generic[PlanT]):
    """What a backend hands back before evaluation.

    ``objective`` is the backend's own value of the plan's objective (ms), when it
    computes one; ``bound`` a proven lower bound on the optimum (ms), when it has one
    (already lowered by ``objective_tolerance_ms``, the known error of ``objective`` and
    ``bound`` from scaling)."""

    status: Status
    plan: PlanT | None = None
    objective: float | None = None
    bound: float | None = None
    message: str = ""
    objective_tolerance_ms: float = 0.0
    #: the evaluator's objective of the plan may be below ``objective`` (a stopped
    #: solver's objective need not be tight): only "not worse" is checked
    one_sided: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class SolveResult(Generic[PlanT, MetricsT]):
    """The record of one solve.

    ``objective`` is the plan's objective in ms as computed by the family's evaluator
    (``metrics.objective_ms``), ``bound`` a proven lower bound on the optimum (ms) if any,
    and ``gap = (objective - bound) / objective`` (relative; 0 for a plan that matches
    its bound, None without a bound). ``build_s``: seconds to build the program (or to
    prepare the data), ``solve_s``: the rest of the backend's run. ``problem``: the
    problem actually solved (a float baseline runs the float ``split`` problem of a
    ``split_bits`` instance)."""

    status: Status
    backend: str
    problem: str
    plan: PlanT | None
    metrics: MetricsT | None
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
