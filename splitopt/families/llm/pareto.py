"""The llm family's Pareto fronts (``splitopt pareto``), by the epsilon-constraint method;
the tokens/s are the pipeline's over all its streams (objective ``throughput``: ``1000 /
ms_per_token``), which is one stream's where ``streams`` is 1:

* ``throughput`` (the default): time to first token against tokens/s. Each corner is two
  solves: the most tokens/s with the time to first token within a limit
  (``settings.ttft_limit_ms``), then the least time to first token at those tokens/s
  (``settings.min_tokens_per_s``, relaxed by ``STEP_RTOL``), which removes the plans the
  first solve may return that another dominates. The first corner has no limit (the
  fastest pipeline), each next limit is ``STEP_RTOL`` below the last corner's time to
  first token, down to the least time to first token there is.
* ``error``: the pipeline's time per token against the summed weight error of the
  bit-widths. The most tokens/s with the error within a budget (``settings.error_budget``),
  from a budget no plan can exceed down to ``STEP_RTOL`` below each corner's error, until
  the error is 0 or no plan meets the budget; solves that return a plan of the same
  tokens/s with a smaller error walk the ties (at most ``TIE_SOLVES`` per point in all),
  and dominated points are dropped.

Every point is the optimum of its solves (proven where they are OPTIMAL): the time to
first token (or the error) is the least among the plans whose tokens/s are within
``STEP_RTOL`` of the point's, and no two points lie within ``STEP_RTOL`` of each other's
limit. ``grid`` mode solves ``points`` limits evenly spaced between the two ends instead.
The instance's own limits on the front's two measures are not applied to the sweep: the
plot draws them and stars the point a solve of the instance returns; its other limits
(memory, links, pins; the error budget on the first front, the time to first token limit
on the second) hold at every point.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from splitopt.core import progress
from splitopt.core.errors import NotApplicable
from splitopt.core.front import Front, FrontPoint, Limit
from splitopt.core.result import Status
from splitopt.families.llm.settings import REFERENCE_BITS

#: the fronts, the first the default (``splitopt pareto --against``)
MEASURES = ("throughput", "error")
#: relative step of the sweep and relaxation of a corner's tokens/s in its second solve;
#: larger than every exact backend's tolerance, so the sweep always moves
STEP_RTOL = 1e-5
#: solves per point of the error front at most, ties of equal tokens/s included
TIE_SOLVES = 20

#: a solve of a variant of the instance (``Family.pareto_front``); its results have a plan
#: and metrics where their status has a plan
Solve = Callable[[Any], Any]


def _weaker(first: Any, second: Any, chosen: Any) -> Any:
    """``chosen`` (one of the two solves of a corner) with the weaker status of the two:
    a corner is proven only where both are."""
    if chosen.status is Status.OPTIMAL and any(r is not None and r.status is not Status.OPTIMAL
                                               for r in (first, second)):
        return dataclasses.replace(chosen, status=Status.FEASIBLE)
    return chosen


def _devices(res: Any) -> str:
    """The plan's devices in order, with their bits where they differ."""
    stages = res.plan.stages
    bits = {st.bits for st in stages}
    return " > ".join(st.device + ("" if len(bits) == 1 else f"@{st.bits}") for st in stages)


# ----- time to first token against tokens/s ------------------------------------------------------

def ttft_corner(inst: Any, solve: Solve, ttft_limit: float | None) -> Any:
    """The corner under ``ttft_limit`` (ms; None: none): the most tokens/s, then the least
    time to first token within ``STEP_RTOL`` of them; None where no plan meets the limit."""
    fast = solve(inst.with_settings(objective="throughput", ttft_limit_ms=ttft_limit, min_tokens_per_s=None))
    if not fast.status.has_plan:
        return None
    floor_ms = fast.metrics.ms_per_token * (1 + STEP_RTOL)
    lean = solve(inst.with_settings(objective="ttft", ttft_limit_ms=ttft_limit, min_tokens_per_s=1000.0 / floor_ms))
    better = lean.status.has_plan and lean.metrics.ttft_ms <= fast.metrics.ttft_ms
    return _weaker(fast, lean, lean if better else fast)


def ttft_front(inst: Any, solve: Solve, points: int = 50, mode: str = "exact") -> list[FrontPoint]:
    """The corners (budget: the time to first token limit solved under; latency: the time
    to first token; measure: tokens/s), by increasing tokens/s; dominated points dropped."""
    out: list[FrontPoint] = []

    def add(limit: float | None, res: Any) -> None:
        out.append(FrontPoint(limit, res, res.metrics.ttft_ms, res.metrics.tokens_per_s))

    progress.step(f"point 1 of {points if mode == 'grid' else f'at most {points}'}: most tokens/s")
    first = ttft_corner(inst, solve, None)
    if first is None:
        return out
    add(None, first)
    if mode == "grid" and points > 1:
        progress.step(f"point 2 of {points}: least time to first token")
        least = solve(inst.with_settings(objective="ttft", ttft_limit_ms=None, min_tokens_per_s=None))
        high = first.metrics.ttft_ms
        low = least.metrics.ttft_ms if least.status.has_plan else high
        for k in range(points - 1):
            eps = low + (high - low) * k / max(1, points - 2)
            progress.step(f"point {k + 2} of {points}: time to first token at most {eps:.6g} ms")
            res = ttft_corner(inst, solve, eps)
            if res is not None:
                add(eps, res)
    else:
        while len(out) < points:
            limit = out[-1].latency_ms * (1 - STEP_RTOL)
            progress.step(f"point {len(out) + 1} of at most {points}: time to first token at most {limit:.6g} ms")
            res = ttft_corner(inst, solve, limit)
            if res is None:
                break
            add(limit, res)
    front: list[FrontPoint] = []
    for p in sorted(out, key=lambda p: (p.latency_ms, -(p.measure or 0.0))):
        if not front or (p.measure or 0.0) > (front[-1].measure or 0.0) * (1 + 1e-12):
            front.append(p)
    return front


# ----- tokens/s against error --------------------------------------------------------------------

def free_error_budget(inst: Any) -> float:
    """A budget no plan exceeds: every part at its largest error among the candidate
    bit-widths; NotApplicable where a width below the reference precision lacks a layer's
    error (the error of a plan is then not known)."""
    s = inst.settings
    low = [b for b in s.bit_widths if b < REFERENCE_BITS]
    total = 0.0
    for layer in inst.layers:
        if not layer.weights:
            continue
        for bits in low:
            if bits not in layer.weight_error:
                raise NotApplicable(f"pareto: layer '{layer.name}' has no weight_error at {bits} bits (settings."
                                    f"bit_widths holds {bits}): the error of a plan is not known")
        total += max((layer.weight_error.get(b, 0.0) for b in s.bit_widths), default=0.0)
    return total


def error_front(inst: Any, solve: Solve, points: int = 50, mode: str = "exact") -> list[FrontPoint]:
    """The corners (budget: the error budget solved under; latency: ms per token of the
    pipeline; measure: the summed error), by increasing error; dominated points dropped."""
    start = free_error_budget(inst)
    out: list[FrontPoint] = []

    def run(budget: float) -> Any:
        res = solve(inst.with_settings(objective="throughput", error_budget=budget, min_tokens_per_s=None))
        if not res.status.has_plan:
            return None
        out.append(FrontPoint(budget, res, res.metrics.ms_per_token, res.metrics.error))
        return res

    progress.step(f"point 1 of {points if mode == 'grid' else f'at most {points}'}: error budget {start:.4g}")
    first = run(start)
    if first is None:
        return out
    if mode == "grid":
        top = first.metrics.error
        for k in range(points - 1):
            eps = top * k / max(1, points - 1)
            progress.step(f"point {k + 2} of {points}: error budget {eps:.4g}")
            run(eps)
    else:
        err, corners, solves, last = first.metrics.error, 1, 1, first.metrics.ms_per_token
        while corners < points and err > 0 and solves < TIE_SOLVES * points:
            eps = max(0.0, err * (1 - STEP_RTOL) - 1e-15)
            progress.step(f"point {corners + 1} of at most {points}: error budget {eps:.4g}")
            res = run(eps)
            solves += 1
            if res is None:
                break
            if res.metrics.ms_per_token > last * (1 + 1e-12):
                corners += 1
            err, last = res.metrics.error, res.metrics.ms_per_token
    front: list[FrontPoint] = []
    for p in sorted(out, key=lambda p: (p.measure, p.latency_ms)):
        if not front or p.latency_ms < front[-1].latency_ms * (1 - 1e-12):
            front.append(p)
    return front


# ----- the fronts as splitopt pareto shows them ---------------------------------------------------

def _status(res: Any) -> str:
    return res.status.value


#: a front with more points than this is plotted without labels (they would overlap)
MOST_LABELS = 30


def _label_changes(found: list[FrontPoint]) -> None:
    """A point's plot label: its devices in order where they differ from the point
    before's (bits aside; the table gives them), none on a front of more than
    ``MOST_LABELS`` points."""
    shown = None
    for p in found:
        devices = " > ".join(st.device for st in p.result.plan.stages)
        p.label = devices if devices != shown and len(found) <= MOST_LABELS else ""
        shown = devices


def pareto_front(inst: Any, solve: Solve, points: int, mode: str, against: str = MEASURES[0]) -> Front:
    """The front ``against`` (one of ``MEASURES``) with its table, JSON and plot marks: the
    instance's limits, and the point a solve of the instance returns where its objective
    is the front's (``throughput``, or ``ttft`` on the first front)."""
    s = inst.settings
    floor = s.min_tokens_per_s
    if against == "error":
        found = error_front(inst, solve, points, mode)
        limits = [] if s.error_budget is None else [Limit("measure", s.error_budget, f"error budget {s.error_budget:.4g}")]
        if s.ms_per_token_limit is not None:
            limits.append(Limit("latency", s.ms_per_token_limit, f"at least {floor:g} tokens/s"))
        chosen = None
        if inst.objective == "throughput":
            ok = [p for p in found if (s.error_budget is None or (p.measure or 0.0) <= s.error_budget * (1 + 1e-9))
                  and (s.ms_per_token_limit is None or p.latency_ms <= s.ms_per_token_limit * (1 + 1e-9))]
            chosen = min(ok, key=lambda p: p.latency_ms) if ok else None
        rows: list[tuple[str, ...]] = [(f"{p.measure:.6g}", f"{p.latency_ms:.6g}", f"{p.result.metrics.tokens_per_s:.6g}",
                 f"{p.result.metrics.ttft_ms:.6g}", _devices(p.result), _status(p.result)) for p in found]
        _label_changes(found)
        records = [{"error_budget": p.budget, "error": p.measure, "ms_per_token": p.latency_ms,
                    "tokens_per_s": p.result.metrics.tokens_per_s, "ttft_ms": p.result.metrics.ttft_ms,
                    "status": _status(p.result), "gap": p.result.gap,
                    "plan": p.result.plan.to_dict(inst)} for p in found]
        return Front("tokens/s / error front", "summed weight error", found, inst,
                     columns=("error", "ms per token", "tokens/s", "time to first token ms", "devices", "status"),
                     rows=rows, records=records, limits=tuple(limits), chosen=chosen,
                     chosen_label="chosen plan (solve, objective throughput)", mode=mode, step="post",
                     latency="ms per token (pipeline)")
    found = ttft_front(inst, solve, points, mode)
    limits = [] if s.ttft_limit_ms is None else [Limit("latency", s.ttft_limit_ms,
                                                       f"time to first token {s.ttft_limit_ms:g} ms")]
    if floor is not None:
        limits.append(Limit("measure", floor, f"at least {floor:g} tokens/s"))
    chosen = None
    ok = [p for p in found if (s.ttft_limit_ms is None or p.latency_ms <= s.ttft_limit_ms * (1 + 1e-9))
          and (floor is None or (p.measure or 0.0) >= floor * (1 - 1e-9))]
    if inst.objective == "throughput":
        chosen = max(ok, key=lambda p: p.measure or 0.0) if ok else None
    elif inst.objective == "ttft":
        chosen = min(ok, key=lambda p: p.latency_ms) if ok else None
    rows = [(f"{p.measure:.6g}", f"{p.result.metrics.ms_per_token:.6g}", f"{p.latency_ms:.6g}", _devices(p.result),
             _status(p.result)) for p in found]
    _label_changes(found)
    records = [{"ttft_limit_ms": p.budget, "tokens_per_s": p.measure, "ms_per_token": p.result.metrics.ms_per_token,
                "ttft_ms": p.latency_ms, "status": _status(p.result), "gap": p.result.gap,
                "plan": p.result.plan.to_dict(inst)} for p in found]
    return Front("time to first token / tokens/s front", f"tokens/s (pipeline, {s.streams} stream"
                 f"{'s' if s.streams != 1 else ''})", found, inst,
                 columns=("tokens/s", "ms per token", "time to first token ms", "devices", "status"), rows=rows,
                 records=records, limits=tuple(limits), chosen=chosen,
                 chosen_label=f"chosen plan (solve, objective {inst.objective})", mode=mode, step="pre",
                 latency="time to first token (ms)")
