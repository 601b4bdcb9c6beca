"""The latency / accuracy front of a multiview instance whose compression widths carry
measured accuracies (``settings.multiview.accuracy``), by the epsilon-constraint method
in the accuracy's direction: minimise latency subject to accuracy >= ``min_accuracy``,
starting from the least measured accuracy and raising the limit each step to the next
measured level above the last plan's accuracy. The levels are discrete, so every corner
is found and every point is a proven optimum (or time-limited).
"""

from __future__ import annotations

from typing import Any, Callable

from splitopt.core import progress
from splitopt.core.errors import NotApplicable
from splitopt.core.front import Front, FrontPoint, Limit, least_latency
from splitopt.families.multiview.data import data
from splitopt.families.multiview.settings import MultiviewInstance


def accuracy_levels(inst: MultiviewInstance) -> list[float]:
    """The distinct measured accuracies of the instance's architectures, ascending."""
    return sorted({a for a in data(inst).accuracy.values() if a is not None})


def accuracy_front(inst: MultiviewInstance, solve: Callable[[MultiviewInstance], Any], points: int = 50) -> list[FrontPoint]:
    """Latency-optimal plans for increasing ``min_accuracy`` (budget) with their accuracy
    (measure), sorted by increasing accuracy (and latency); dominated points dropped. The
    sweep starts at the least measured accuracy (so every compressed width needs a
    record), then sets the limit to the next measured level above the last plan's
    accuracy, until no plan meets it or the plan's accuracy is not measured (an
    uncompressed architecture without a record). NotApplicable without records."""
    levels = accuracy_levels(inst)
    if not levels:
        raise NotApplicable("pareto: no measured accuracy in settings.multiview.accuracy; nothing to trade latency "
                            "against")
    out: list[FrontPoint] = []
    limit: float | None = levels[0]
    while limit is not None and len(out) < points:
        progress.step(f"point {len(out) + 1} of at most {min(points, len(levels))}: accuracy >= {limit:.4g}")
        res = solve(inst.with_settings(multiview={**inst.settings.multiview, "min_accuracy": limit}))
        if not res.status.has_plan:
            break
        acc = res.metrics.accuracy
        width = res.plan.width
        out.append(FrontPoint(limit, res, res.objective, acc, "no compression" if width is None else f"d={width}"))
        limit = None if acc is None else next((level for level in levels if level > acc), None)
    front: list[FrontPoint] = []
    for p in sorted(out, key=lambda p: (-(p.measure if p.measure is not None else -1.0), p.latency_ms)):
        if not front or p.latency_ms < front[-1].latency_ms - 1e-12:
            front.append(p)
    return front[::-1]


def pareto_front(inst: MultiviewInstance, solve: Callable[[MultiviewInstance], Any], points: int) -> Front:
    """The front with its table, JSON and plot marks: the instance's least accuracy
    (``min_accuracy``), and the plan a solve returns (the least latency meeting it)."""
    found = accuracy_front(inst, solve, points)
    least = data(inst).min_accuracy
    rows: list[tuple[str, ...]] = []
    records: list[dict[str, Any]] = []
    for p in found:
        plan, m = p.result.plan, p.result.metrics
        rows.append(("-" if p.measure is None else f"{p.measure:.4f}", f"{p.latency_ms:.4f}", plan.fusion,
                     "none" if plan.width is None else str(plan.width), f"{sum(v.sent_bytes for v in m.views):,.0f}",
                     p.result.status.value))
        records.append({"min_accuracy": p.budget, "accuracy": p.measure, "latency_ms": p.latency_ms,
                        "status": p.result.status.value, "gap": p.result.gap, "fusion": plan.fusion,
                        "width": plan.width, "plan": plan.to_dict(inst)})
    return Front(
        "latency / accuracy front", "measured accuracy", found, inst,
        columns=("accuracy", "latency ms", "fusion", "width d", "sent B", "status"), rows=rows, records=records,
        limits=() if least is None else (Limit("measure", least, f"accuracy budget {least:.4g}"),),
        chosen=least_latency(found, lambda a: least is None or a >= least - 1e-12), step="pre")
