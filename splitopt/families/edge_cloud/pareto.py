"""The latency / quantization-error Pareto front (AUTO-SPLIT Fig. 5) by the
epsilon-constraint method: minimise latency subject to error <= eps, for a sequence of
budgets eps, on problem ``split_bits`` (the float ``split`` problem has one error, 0).

``exact`` sweep: start with no budget; each step re-solves with the budget just below
the error of the last plan found (``eps = error * (1 - 1e-5)``), so every point is a
proven-optimal latency for its budget and consecutive points are the front's corners,
down to the least-error plan (cloud-only, error 0, unless layers are pinned to the edge).
``grid`` sweep: ``points`` budgets evenly spaced between 0 and the error of the
unconstrained optimum.
"""

from __future__ import annotations

from typing import Any, Callable

from splitopt.core import progress
from splitopt.core.front import Front, FrontPoint, Limit, least_latency
from splitopt.families.edge_cloud.plan import edge_layers, plan_to_dict
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

#: relative step below the last point's error in the exact sweep; larger than every
#: backend's error tolerance (1e-6) so the sweep always moves
STEP_RTOL = 1e-5
#: solves per point of the front at most, ties of equal latency included (exact mode)
TIE_SOLVES = 20


def error_front(inst: EdgeCloudInstance, solve: Callable[[EdgeCloudInstance], Any], mode: str = "exact",
                points: int = 50) -> list[FrontPoint]:
    """Pareto points (measure: the plan's summed error) sorted by increasing error
    (decreasing latency). Points whose solve stopped without proof keep their FEASIBLE
    status; dominated points are dropped. Progress (``splitopt.core.progress``) names the
    point being solved and its budget."""
    out: list[FrontPoint] = []

    def point(eps: float | None, res: Any) -> FrontPoint:
        return FrontPoint(eps, res, res.objective, res.metrics.error)

    progress.step(f"point 1 of {points if mode == 'grid' else f'at most {points}'}: no error budget")
    first = solve(inst.with_settings(error_budget=None))
    if not first.status.has_plan:
        return out
    out.append(point(None, first))
    if mode == "grid":
        top = first.metrics.error
        for k in range(points - 1):
            eps = top * k / max(1, points - 1)
            progress.step(f"point {k + 2} of {points}: error budget {eps:.4g}")
            res = solve(inst.with_settings(error_budget=eps))
            if res.status.has_plan:
                out.append(point(eps, res))
    else:
        # a solve may return, among the plans of least latency under the budget, one whose
        # error is not the least (brute force walks such ties one at a time: on the toy, 30
        # solves at one latency): only a new latency counts as a corner against ``points``,
        # with at most TIE_SOLVES solves per point in all
        err, corners, solves = first.metrics.error, 1, 1
        while corners < points and err > 0 and solves < TIE_SOLVES * points:
            eps = max(0.0, err * (1 - STEP_RTOL) - 1e-15)
            progress.step(f"point {corners + 1} of at most {points}: error budget {eps:.4g}")
            res = solve(inst.with_settings(error_budget=eps))
            solves += 1
            if not res.status.has_plan:
                break
            if res.objective > out[-1].latency_ms + 1e-12:
                corners += 1
            out.append(point(eps, res))
            err = res.metrics.error
    return _non_dominated(out)


def _non_dominated(points: list[FrontPoint]) -> list[FrontPoint]:
    points = sorted(points, key=lambda p: (p.measure, p.latency_ms))
    front: list[FrontPoint] = []
    for p in points:
        if not front or p.latency_ms < front[-1].latency_ms - 1e-12:
            front.append(p)
    return front


def pareto_front(inst: EdgeCloudInstance, solve: Callable[[EdgeCloudInstance], Any], points: int, mode: str) -> Front:
    """The front of ``inst`` run as problem ``split_bits`` (``inst`` prepared as such by
    the caller), with its table, JSON and plot marks: the instance's error budget, and
    the plan a solve returns (the least latency within it)."""
    found = error_front(inst, solve, mode, points)
    budget = inst.settings.error_budget
    chosen = least_latency(found, lambda e: budget is None or e <= budget * (1 + 1e-6))
    rows: list[tuple[str, ...]] = []
    records: list[dict[str, Any]] = []
    for p in found:
        m, plan = p.result.metrics, p.result.plan
        rows.append((f"{p.measure:.6g}", f"{p.latency_ms:.4f}", str(m.edge_layer_count),
                     f"{m.edge_memory_bytes:,.0f}", p.result.status.value))
        records.append({"error_budget": p.budget, "error": p.measure, "latency_ms": p.latency_ms,
                        "status": p.result.status.value, "gap": p.result.gap,
                        "edge_layers": len(edge_layers(inst, plan)), "plan": plan_to_dict(inst, plan)})
    return Front(
        "latency / error Pareto front", "summed quantization error (relative MSE)", found, inst,
        columns=("error", "latency ms", "edge layers", "edge memory B", "status"), rows=rows, records=records,
        limits=() if budget is None else (Limit("measure", budget, f"error budget {budget:.4g}"),),
        chosen=chosen,
        chosen_label="chosen plan (solve)" if budget is not None else "chosen plan (solve, no error budget)",
        mode=mode)
