"""The latency / bytes front of a separable instance, from the fastest plan down to the
fewest bytes, by the epsilon-constraint method, lexicographically at each corner:
minimise latency under the byte budget, then minimise bytes under that latency; the next
budget is one byte less (bytes are integers). Every corner is proven when both solves are
OPTIMAL.
"""

from __future__ import annotations

from typing import Any, Callable

from splitopt.core import progress
from splitopt.core.drawing import human_bytes
from splitopt.core.front import Front, FrontPoint, Limit
from splitopt.families.separable.settings import SETTINGS_KEY, SeparableInstance

#: relative slack of the latency limit of a corner's second solve (fewest bytes at the
#: corner's latency); larger than every backend's tolerance (1e-6)
STEP_RTOL = 1e-5


def bytes_front(inst: SeparableInstance, solve: Callable[[SeparableInstance], Any], points: int = 50) -> list[FrontPoint]:
    """The corners (budget: the byte budget solved under, None: the instance's own;
    measure: the plan's bytes), fastest first. Each corner's result is a bytes-optimal
    plan among the plans of the least latency within the budget."""
    base = dict(inst.settings.separable)
    budget: float | None = base.get("byte_budget_bytes")
    out: list[FrontPoint] = []
    while len(out) < points:
        progress.step(f"point {len(out) + 1} of at most {points}: byte budget "
                      f"{'none' if budget is None else f'{budget:.6g} B'}")
        fast = solve(inst.with_settings(objective="latency", **{SETTINGS_KEY: {**base, "byte_budget_bytes": budget}}))
        if not fast.status.has_plan:
            break
        limit = fast.metrics.latency_ms * (1 + STEP_RTOL)
        if base.get("latency_budget_ms") is not None:
            limit = min(limit, base["latency_budget_ms"])
        lean = solve(inst.with_settings(objective="bytes", **{SETTINGS_KEY: {
            **base, "byte_budget_bytes": budget, "latency_budget_ms": limit}}))
        best = lean if lean.status.has_plan and lean.metrics.total_bytes <= fast.metrics.total_bytes else fast
        out.append(FrontPoint(budget, best, best.metrics.latency_ms, best.metrics.total_bytes))
        if best.metrics.total_bytes <= 0:
            break
        budget = best.metrics.total_bytes - 1.0
    return out


def pareto_front(inst: SeparableInstance, solve: Callable[[SeparableInstance], Any], points: int) -> Front:
    """The front with its table, JSON and plot marks: the instance's byte and latency
    budgets, and the plan a solve returns (the least of its objective within both)."""
    found = bytes_front(inst, solve, points)
    opts = inst.settings.separable
    byte_budget, latency_budget = opts.get("byte_budget_bytes"), opts.get("latency_budget_ms")
    limits = []
    if byte_budget is not None:
        limits.append(Limit("measure", byte_budget, f"byte budget {human_bytes(byte_budget)}"))
    if latency_budget is not None:
        limits.append(Limit("latency", latency_budget, f"latency budget {latency_budget:.4g} ms"))
    ok = [p for p in found if (byte_budget is None or p.measure <= byte_budget)
          and (latency_budget is None or p.latency_ms <= latency_budget * (1 + 1e-9))]
    objective = inst.objective
    key = (lambda p: (p.measure, p.latency_ms)) if objective == "bytes" else (lambda p: (p.latency_ms, p.measure))
    rows: list[tuple[str, ...]] = []
    records: list[dict[str, Any]] = []
    for p in found:
        m = p.result.metrics
        rows.append((f"{p.measure:,.0f}", f"{100 * m.ratio_to_ring:.3f}", f"{p.latency_ms:.4f}", str(m.intensive_steps),
                     p.result.status.value))
        records.append({"byte_budget": p.budget, "bytes": p.measure, "ratio_to_ring": m.ratio_to_ring,
                        "latency_ms": p.latency_ms, "status": p.result.status.value, "gap": p.result.gap,
                        "plan": p.result.plan.to_dict(inst)})
    return Front(
        "latency / bytes front", "bytes sent", found, inst,
        columns=("bytes", "% of ring", "latency ms", "intensive steps", "status"), rows=rows, records=records,
        limits=tuple(limits), chosen=min(ok, key=key) if ok else None,
        chosen_label=f"chosen plan (solve, objective {objective})")
