"""The latency / quantization-error Pareto front (AUTO-SPLIT Fig. 5) by the
epsilon-constraint method: minimise latency subject to error <= eps, for a sequence of
budgets eps.

``exact`` sweep: start with no budget; each step re-solves with the budget just below
the error of the last plan found (``eps = error * (1 - 1e-5)``), so every point is a
proven-optimal latency for its budget and consecutive points are the front's corners,
down to the least-error plan (cloud-only, error 0, unless layers are pinned to the edge).
``grid`` sweep: ``points`` budgets evenly spaced between 0 and the error of the
unconstrained optimum.

The latency / accuracy front of a ``multiview`` instance whose compression widths carry
measured accuracies (``settings.multiview.accuracy``) is swept the same way in
the other direction (:func:`accuracy_front`): minimise latency subject to accuracy >=
``min_accuracy``, starting from the least measured accuracy and raising the limit each
step to the next measured level above the last plan's accuracy. The levels are discrete,
so every corner is found and every point is a proven optimum (or time-limited).
"""

from __future__ import annotations

from dataclasses import dataclass

from splitopt.core import progress
from splitopt.core.instance import Instance
from splitopt.core.result import SolveResult
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


#: solves per point of the front at most, ties of equal latency included (exact mode)
TIE_SOLVES = 20


@progress.clears_step
def pareto_front(
    inst: Instance,
    solver: str = "milp-cbc",
    mode: str = "exact",
    points: int = 50,
    time_limit: float | None = None,
    threads: int = 2,
) -> list[ParetoPoint]:
    """Pareto points sorted by increasing error (decreasing latency). Points whose solve
    stopped without proof keep their FEASIBLE status; dominated points are dropped.
    Progress (``splitopt.core.progress``) names the point being solved and its budget."""
    if mode not in ("exact", "grid"):
        raise ValueError(f"mode must be 'exact' or 'grid', got {mode!r}")
    out: list[ParetoPoint] = []
    progress.step(f"point 1 of {points if mode == 'grid' else f'at most {points}'}: no error budget")
    first = solve(inst.with_settings(error_budget=None), solver, time_limit, threads, diagnose=False)
    if not first.status.has_plan:
        return out
    out.append(ParetoPoint(None, first))
    if mode == "grid":
        top = first.metrics.error
        for k in range(points - 1):
            eps = top * k / max(1, points - 1)
            progress.step(f"point {k + 2} of {points}: error budget {eps:.4g}")
            res = solve(inst.with_settings(error_budget=eps), solver, time_limit, threads, diagnose=False)
            if res.status.has_plan:
                out.append(ParetoPoint(eps, res))
    elif mode == "exact":
        # a solve may return, among the plans of least latency under the budget, one whose
        # error is not the least (brute force walks such ties one at a time: on the toy, 30
        # solves at one latency): only a new latency counts as a corner against ``points``,
        # with at most TIE_SOLVES solves per point in all
        err, corners, solves = first.metrics.error, 1, 1
        while corners < points and err > 0 and solves < TIE_SOLVES * points:
            eps = max(0.0, err * (1 - STEP_RTOL) - 1e-15)
            progress.step(f"point {corners + 1} of at most {points}: error budget {eps:.4g}")
            res = solve(inst.with_settings(error_budget=eps), solver, time_limit, threads, diagnose=False)
            solves += 1
            if not res.status.has_plan:
                break
            if res.objective > out[-1].latency_ms + 1e-12:
                corners += 1
            out.append(ParetoPoint(eps, res))
            err = res.metrics.error
    return _non_dominated(out)


def _non_dominated(points: list[ParetoPoint]) -> list[ParetoPoint]:
    points = sorted(points, key=lambda p: (p.error, p.latency_ms))
    front: list[ParetoPoint] = []
    for p in points:
        if not front or p.latency_ms < front[-1].latency_ms - 1e-12:
            front.append(p)
    return front


@dataclass
class AccuracyPoint:
    """One point of the latency / accuracy front: the limit solved under and its result."""

    min_accuracy: float
    result: SolveResult

    @property
    def latency_ms(self) -> float:
        return self.result.objective

    @property
    def accuracy(self) -> float | None:
        return self.result.metrics.accuracy


def accuracy_levels(inst: Instance) -> list[float]:
    """The distinct measured accuracies of a multiview instance's architectures, ascending."""
    from splitopt.families.multiview.data import data

    return sorted({a for a in data(inst).accuracy.values() if a is not None})


@progress.clears_step
def accuracy_front(inst: Instance, solver: str = "cpsat", time_limit: float | None = None,
                   threads: int = 2, points: int = 50) -> list[AccuracyPoint]:
    """Latency-optimal plans for increasing ``min_accuracy`` (a multiview instance with
    measured accuracies), sorted by increasing accuracy (and latency); dominated points
    dropped. The sweep starts at the least measured accuracy (so every compressed width
    needs a record), then sets the limit to the next measured level above the last
    plan's accuracy, until no plan meets it or the plan's accuracy is not measured
    (an uncompressed architecture without a record). ValueError without records."""
    levels = accuracy_levels(inst)
    if not levels:
        raise ValueError("no measured accuracy in settings.multiview.accuracy; nothing to trade latency against")
    out: list[AccuracyPoint] = []
    limit: float | None = levels[0]
    while limit is not None and len(out) < points:
        progress.step(f"point {len(out) + 1} of at most {min(points, len(levels))}: accuracy >= {limit:.4g}")
        changed = inst.with_settings(multiview={**inst.settings.multiview, "min_accuracy": limit})
        res = solve(changed, solver, time_limit, threads, diagnose=False)
        if not res.status.has_plan:
            break
        out.append(AccuracyPoint(limit, res))
        acc = res.metrics.accuracy
        limit = None if acc is None else next((l for l in levels if l > acc), None)
    front: list[AccuracyPoint] = []
    for p in sorted(out, key=lambda p: (-(p.accuracy if p.accuracy is not None else -1.0), p.latency_ms)):
        if not front or p.latency_ms < front[-1].latency_ms - 1e-12:
            front.append(p)
    return front[::-1]


@dataclass
class BytesPoint:
    """One corner of the latency / bytes front of a separable instance: the fewest bytes
    (``result``, a bytes-optimal plan) among the plans of the least latency within the
    byte budget ``budget`` (None: no budget)."""

    budget: float | None
    latency_ms: float
    result: SolveResult

    @property
    def bytes(self) -> float:
        return self.result.metrics.total_bytes


@progress.clears_step
def bytes_front(inst: Instance, solver: str = "cpsat", time_limit: float | None = None, threads: int = 2,
                points: int = 50) -> list[BytesPoint]:
    """The latency / bytes front of a ``separable`` instance, from the fastest plan down to
    the fewest bytes, by the epsilon-constraint method, lexicographically at each corner:
    minimise latency under the byte budget, then minimise bytes under that latency; the
    next budget is one byte less (bytes are integers). Every corner is proven when both
    solves are OPTIMAL."""
    from splitopt.families.separable.settings import SETTINGS_KEY

    base = dict(inst.settings.family_options(SETTINGS_KEY))
    budget: float | None = base.get("byte_budget_bytes")
    out: list[BytesPoint] = []
    while len(out) < points:
        progress.step(f"point {len(out) + 1} of at most {points}: byte budget "
                      f"{'none' if budget is None else f'{budget:.6g} B'}")
        fast = solve(inst.with_settings(objective="latency", **{SETTINGS_KEY: {**base, "byte_budget_bytes": budget}}),
                     solver, time_limit, threads, diagnose=False)
        if not fast.status.has_plan:
            break
        latency = fast.metrics.latency_ms
        limit = latency * (1 + STEP_RTOL)
        if base.get("latency_budget_ms") is not None:
            limit = min(limit, base["latency_budget_ms"])
        lean = solve(inst.with_settings(objective="bytes", **{SETTINGS_KEY: {
            **base, "byte_budget_bytes": budget, "latency_budget_ms": limit}}), solver, time_limit, threads,
            diagnose=False)
        best = lean if lean.status.has_plan and lean.metrics.total_bytes <= fast.metrics.total_bytes else fast
        out.append(BytesPoint(budget, best.metrics.latency_ms, best))
        if best.metrics.total_bytes <= 0:
            break
        budget = best.metrics.total_bytes - 1.0
    return out
