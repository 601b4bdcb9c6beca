"""The latency / quantization-error Pareto front (AUTO-SPLIT Fig. 5) by the
epsilon-constraint method: minimise latency subject to error <= eps, for a sequence of
budgets eps.

``exact`` sweep: start with no budget; each step re-solves with the budget just below
the error of the last plan found (``eps = error * (1 - 1e-5)``), so every point is a
proven-optimal latency for its budget and consecutive points are the front's corners,
down to the least-error plan (cloud-only, error 0, unless layers are pinned to the edge).
``grid`` sweep: ``points`` budgets evenly spaced between 0 and the error of the
unconstrained optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

from splitopt.instance import Instance
from splitopt.result import SolveResult, Status
from splitopt.solve import solve

#: relative step below the last point's error in the exact sweep; larger than every
#: backend's error tolerance (1e-6) so the sweep always moves
STEP_RTOL = 1e-5


@dataclass
class ParetoPoint:
    budget: float | None
    result: SolveResult

    @property
    def latency_ms(self) -> float:
        return self.result.objective

    @property
    def error(self) -> float:
        return self.result.metrics.error


def pareto_front(
    inst: Instance,
    solver: str = "milp-cbc",
    mode: str = "exact",
    points: int = 50,
    time_limit: float | None = None,
    threads: int = 2,
) -> list[ParetoPoint]:
    """Pareto points sorted by increasing error (decreasing latency). Points whose solve
    stopped without proof keep their FEASIBLE status; dominated points are dropped."""
    out: list[ParetoPoint] = []
    first = solve(inst.with_settings(error_budget=None), solver, time_limit, threads, diagnose=False)
    if not first.status.has_plan:
        return out
    out.append(ParetoPoint(None, first))
    if mode == "grid":
        top = first.metrics.error
        for k in range(points - 1):
            eps = top * k / max(1, points - 1)
            res = solve(inst.with_settings(error_budget=eps), solver, time_limit, threads, diagnose=False)
            if res.status.has_plan:
                out.append(ParetoPoint(eps, res))
    elif mode == "exact":
        err = first.metrics.error
        while len(out) < points and err > 0:
            eps = max(0.0, err * (1 - STEP_RTOL) - 1e-15)
            res = solve(inst.with_settings(error_budget=eps), solver, time_limit, threads, diagnose=False)
            if not res.status.has_plan:
                break
            out.append(ParetoPoint(eps, res))
            err = res.metrics.error
    else:
        raise ValueError(f"mode must be 'exact' or 'grid', got {mode!r}")
    return _non_dominated(out)


def _non_dominated(points: list[ParetoPoint]) -> list[ParetoPoint]:
    points = sorted(points, key=lambda p: (p.error, p.latency_ms))
    front: list[ParetoPoint] = []
    for p in points:
        if not front or p.latency_ms < front[-1].latency_ms - 1e-12:
            front.append(p)
    return front


def plot_front(inst: Instance, front: list[ParetoPoint], path: str, baselines: dict[str, tuple[float, float]] | None = None) -> None:
    """Latency (ms) against quantization error, with optional baseline points
    ``{name: (error, latency_ms)}``; written to ``path`` (PNG/SVG/PDF)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p.error for p in front]
    ys = [p.latency_ms for p in front]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    proven = [p for p in front if p.result.status is Status.OPTIMAL]
    ax.scatter([p.error for p in proven], [p.latency_ms for p in proven], color="tab:blue", label="Pareto-optimal (proven)")
    other = [p for p in front if p.result.status is not Status.OPTIMAL]
    if other:
        ax.scatter([p.error for p in other], [p.latency_ms for p in other], color="tab:orange", label="time-limited")
    for name, (err, lat) in (baselines or {}).items():
        ax.scatter([err], [lat], marker="x")
        ax.annotate(name, (err, lat), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("summed quantization error (relative MSE)")
    ax.set_ylabel("end-to-end latency (ms)")
    ax.set_title(f"{inst.name}: latency vs error")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
