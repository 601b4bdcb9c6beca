"""The base of every problem family's metrics: what its one evaluator returns
(:class:`splitopt.core.result.MetricsLike`).

A family's metrics class is a frozen dataclass deriving from :class:`FamilyMetrics` that
declares its own fields (each in the unit its docstring states), ``objective_ms`` (the
value the programs minimise: ms for every time objective, the family's
``objective_unit`` otherwise) and ``to_dict`` (its JSON form, ending in
:meth:`FamilyMetrics.verdict`). The base holds what every evaluator states the same way:
the broken limits (``violations``), whether there are none (``feasible``) and the last
two keys of the JSON form.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FamilyMetrics(ABC):
    """``violations``: one line per limit the plan breaks (empty: it meets every limit);
    a keyword argument, so that each family's own fields keep their positions."""

    violations: tuple[str, ...] = field(default=(), kw_only=True)

    @property
    def feasible(self) -> bool:
        """Whether the plan meets every limit."""
        return not self.violations

    @property
    @abstractmethod
    def objective_ms(self) -> float:
        """The objective's value, what the programs minimise (ms for a time objective)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``solve --json``'s ``metrics``), ending in :meth:`verdict`."""

    def verdict(self) -> dict[str, Any]:
        """The last two keys of every family's JSON form: ``feasible`` and ``violations``."""
        return {"feasible": self.feasible, "violations": list(self.violations)}
