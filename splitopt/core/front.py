"""A Pareto front of latency against a second measure, as a family computes it
(``Family.pareto_front``) and ``splitopt pareto`` shows it: the points, the rows of its
table and its JSON, and what its plot marks (the instance's limits, the plan a solve of
the instance returns). Data only: the sweeps live in the families, the solves are handed
to them (``splitopt.analysis.pareto``), the drawing is ``splitopt.analysis.plots``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

#: how a front's budgets may be swept: every corner ("exact") or evenly spaced ("grid");
#: a family whose front has one way only ignores the choice (``Front.mode`` is None)
MODES = ("exact", "grid")


@dataclass
class FrontPoint:
    """One point of a front: ``result`` (a ``SolveResult``), the plan found under
    ``budget`` (the limit on the front's measure it was solved under; None: none), its
    latency (ms) and its value of the front's measure (None where unknown, e.g. an
    accuracy that was not measured). ``label``: written beside the point on the plot."""

    budget: float | None
    result: Any
    latency_ms: float
    measure: float | None
    label: str = ""


@dataclass(frozen=True)
class Limit:
    """A limit of the instance drawn on the front's plot as a dashed line: at ``value``
    of the measure (``axis="measure"``, a vertical line) or of latency (``axis="latency"``,
    ms, a horizontal line), named by ``label`` in the legend."""

    axis: str
    value: float
    label: str


@dataclass
class Front:
    """A family's front: ``points`` ordered along the measure; ``instance`` the instance
    its solves varied (where there is no point, a solve of it says why). ``title`` names
    the front ("latency / error Pareto front"), ``measure`` its second axis (the plot's x
    label); ``columns`` and ``rows`` its table, ``records`` its JSON (one per point, the
    plan in the format ``splitopt evaluate`` reads); ``limits`` and ``chosen`` (the point
    a solve of the instance returns, None where none meets its limits, named
    ``chosen_label``) what the plot marks; ``mode`` the sweep used (None where the family
    has one way only); ``step``: how the plot joins the points ("post": a point's
    latency holds up to the next one's measure, "pre": from the previous one's);
    ``latency``: what the points' ``latency_ms`` is (the plot's y label)."""

    title: str
    measure: str
    points: list[FrontPoint]
    instance: Any
    columns: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    limits: tuple[Limit, ...] = ()
    chosen: FrontPoint | None = None
    chosen_label: str = "chosen plan (solve)"
    mode: str | None = None
    step: str = "post"
    latency: str = "latency (ms)"


def least_latency(points: Sequence[FrontPoint], fits: Callable[[float], bool]) -> FrontPoint | None:
    """The point a solve under the instance's limit picks: the least latency among the
    points whose measure is known and ``fits``; None when none does."""
    ok = [p for p in points if p.measure is not None and fits(p.measure)]
    return min(ok, key=lambda p: p.latency_ms) if ok else None
