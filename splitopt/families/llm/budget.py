"""The llm family's exact method where the error budget binds (``formulations/llm.md``,
"Error budget"): the best pipeline over device choice, order, ranges *and* each device's
bit-width with ``sum of stage errors <= budget``.

A resource-constrained shortest path over the dynamic program's states, solved exactly in
two steps:

1. **Lagrangian bound.** For a multiplier ``lam >= 0`` the dynamic program of ``dp.py``
   with stage cost ``min over widths of time + lam * error`` gives ``Phi(lam) = min over
   plans of time + lam * error`` (each stage picks its own width, and a device runs one
   stage); ``Phi(lam) - lam * budget`` bounds the optimum from below. The best multiplier is
   found by walking the lower convex hull of the plans' ``(error, time)`` points between
   the fastest plan and the most accurate one (each step one run of the program at the
   slope of the current pair); every plan met within the budget is an incumbent. In a ring
   the walk runs the chain's program (cheaper by the device count; its value, without the
   return, still bounds the ring's) and measures each plan with its return.
2. **Closing the gap** (where the hull's best plan within the budget is not already within
   tolerance of the bound): a best-first search over partial pipelines (labels ``(time,
   error)`` at states ``(first device, devices used, last device, boundary)``), pruned by
   (a) the Lagrangian bound of the best completion, from the same program run over the
   reversed parts (``R[U', e', b]``: the least ``time + lam * error`` running ``[b, n)`` on
   the devices ``U'``, ``e'`` first; its minimum over subsets of the unused devices), (b) the
   least time of any completion (the same at ``lam = 0``), (c) the least error any completion
   adds, and (d) dominance between labels of one state. The search stops when the least
   bound left is the incumbent's value: the incumbent is optimal (within ``RTOL``).

``throughput`` (``max(busiest resource, round trip / S)``) keeps the dynamic program's
crossing argument (``dp.py``) with the least round trip *within the budget*, ``T_E(v)``,
which also falls as ``v`` grows; each test of ``T_E(v)`` against ``S v`` is the sum method
above on the stages and links no busier than ``v`` (:func:`throughput_within_budget`).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from splitopt.families.llm import dp
from splitopt.families.llm.data import LlmData
from splitopt.families.llm.evaluate import RTOL

Stop = Callable[[], bool]
#: a stage of a found plan: ``(device index, start, end, width index)``
Stage = tuple[int, int, int, int]
#: the most multipliers the hull walk tries (it ends far sooner: one per hull vertex)
MAX_HULL_STEPS = 60
#: the search's multipliers once it has made ``GRID_AFTER_LABELS`` labels, as multiples of the
#: hull's best one (and 0): each label takes the best of their bounds, closer to its own dual
#: optimum than one multiplier for all (before: the hull's and 0)
MULTIPLIER_GRID = (0.5, 1.0, 2.0)
GRID_AFTER_LABELS = 20000


class Stopped(Exception):
    """``stop()`` said to stop (the time limit)."""


@dataclass(frozen=True)
class BudgetTables:
    """A sum objective's tables with the width as a decision: ``time[w, e, a, b]`` (ms; inf
    where device ``e`` does not run width ``w`` or the stage breaks its memory or a pin),
    ``error[w, a, b]`` (0 where ``a >= b``), ``link[b, e, e']`` (ms), ``back[e_last, e_first]`` (a ring's return,
    ms; None in a chain), the devices every plan uses (a bit mask), the budget and the order of twin devices
    (``after``: ``dp.pipeline_table``)."""

    time: np.ndarray
    error: np.ndarray
    link: np.ndarray
    back: np.ndarray | None
    required: int
    budget: float
    after: Mapping[int, int] = field(default_factory=dict)

    @property
    def D(self) -> int:
        return int(self.time.shape[1])

    @property
    def n(self) -> int:
        return int(self.time.shape[2]) - 1


@dataclass(frozen=True)
class Found:
    """A plan the method found: its stages, time (ms) and error."""

    stages: tuple[Stage, ...]
    time: float
    error: float


@dataclass(frozen=True)
class BudgetAnswer:
    """The method's answer: the best plan within the budget (None where none exists below
    ``cap``), the lower bound it proved (ms) and whether the bound meets the plan (optimal)."""

    best: Found | None
    bound: float
    optimal: bool


def budget_tables(d: LlmData, part_ms: np.ndarray, link: np.ndarray, budget: float,
                  after: Mapping[int, int] | None = None) -> BudgetTables:
    """The tables of a sum objective (``part_ms``: prefill or mean decode per part, device
    and width; ``link``: the matching link table; ``after``: twins, ``data.twins``)."""
    W, N1 = len(d.widths), d.n + 1
    time = np.full((W, d.D, N1, N1), np.inf)
    error = np.zeros((W, N1, N1))
    for w in range(W):
        widths = [w] * d.D
        ok = dp.stage_mask(d, widths) & d.runs[:, w][:, None, None]
        time[w] = dp.stage_costs(part_ms, widths, ok)
        prefix = np.concatenate([[0.0], np.cumsum(d.error[:, w])])
        spans = prefix[None, :] - prefix[:, None]
        error[w] = np.where(np.triu(np.ones((N1, N1), dtype=bool), 1), np.maximum(spans, 0.0), 0.0)
    return BudgetTables(time, error, link, d.return_ms if d.ring else None, dp.required_mask(d), budget,
                        dict(after or {}))


def within(err: float, budget: float) -> bool:
    """The evaluator's test of an error against the budget."""
    return err <= budget * (1 + RTOL) + 1e-12


def measure(t: BudgetTables, stages: tuple[Stage, ...]) -> Found:
    """A plan's time and error from the tables."""
    time = math.fsum(float(t.time[w, e, a, b]) for e, a, b, w in stages)
    time += math.fsum(float(t.link[b, e, f]) for (e, _, b, _), (f, _, _, _) in zip(stages, stages[1:]))
    if t.back is not None:
        time += float(t.back[stages[-1][0], stages[0][0]])
    return Found(stages, time, math.fsum(float(t.error[w, a, b]) for _, a, b, w in stages))


@dataclass(frozen=True)
class Lagrangian:
    """A run of the program at one multiplier: its plan (measured exactly) and a lower
    bound on ``min over plans of time + lam * error`` (ms): the program's value."""

    plan: Found
    lower: float


def lagrangian_plan(t: BudgetTables, lam: float, stop: Stop | None) -> Lagrangian | None:
    """The plan of least ``time + lam * error`` (each stage at its best width), None where no
    pipeline exists; ``lam = inf``: the least error. In a ring, at a finite multiplier, the
    program of a chain (the return left out: its value still bounds the ring's from below,
    and it is the ring's program divided by the device count); the ring's own where the
    chain's plan has no link back."""
    link, back = t.link, t.back
    if math.isinf(lam):  # the links cost no error: only whether they exist counts
        total = np.where(np.isfinite(t.time), np.broadcast_to(t.error[:, None], t.time.shape), np.inf)
        link = np.where(np.isfinite(link), 0.0, np.inf)
        back = None if back is None else np.where(np.isfinite(back), 0.0, np.inf)
    else:
        total = t.time + lam * t.error[:, None]
    cost, width = total.min(axis=0), total.argmin(axis=0)
    relaxed = back is not None and not math.isinf(lam)
    for program_back in ((None, back) if relaxed else (back,)):
        found = dp.cheapest_pipeline(cost, link, program_back, t.required, stop, t.after)
        if found is None:
            if stop is not None and stop():
                raise Stopped
            return None
        plan = measure(t, tuple((e, a, b, int(width[e, a, b])) for e, a, b in found.stages))
        if math.isfinite(plan.time):
            return Lagrangian(plan, found.value)
    return None


@dataclass
class Hull:
    """The hull walk's result: the incumbent (the fastest plan within the budget met), the
    best multiplier and the bound it proves (ms)."""

    incumbent: Found | None
    lam: float
    bound: float


def hull_walk(t: BudgetTables, stop: Stop | None, cap: float = math.inf, any_below: bool = False,
              known: Sequence[tuple[Stage, ...]] = (), fast_known: Lagrangian | None = None) -> Hull | None:
    """The best Lagrangian bound (module docstring, step 1); None where no pipeline exists
    at all. The bound is ``inf`` where no plan meets the budget. The walk ends early once
    the bound reaches ``cap`` (ms), or, with ``any_below``, once a plan within the budget
    is below it. ``known``: plans met before (those these tables still allow and within the
    budget start the walk in place of the most accurate plan); ``fast_known``: the run at
    ``lam = 0`` on tables that allow at least what these do (where these still allow its
    plan, it is their run too)."""
    allowed = None if fast_known is None else _allowed(t, fast_known.plan.stages)
    if fast_known is not None and allowed is not None:
        fast = Lagrangian(allowed, fast_known.lower)
    else:
        found = lagrangian_plan(t, 0.0, stop)
        if found is None:
            return None
        fast = found
    if within(fast.plan.error, t.budget):
        return Hull(fast.plan, 0.0, fast.lower)
    if fast.lower >= cap:
        return Hull(None, 0.0, fast.lower)
    seeds = [f for f in (_allowed(t, stages) for stages in known) if f is not None and within(f.error, t.budget)]
    if seeds:
        accurate: Found | None = min(seeds, key=lambda f: f.time)
    else:
        most = lagrangian_plan(t, math.inf, stop)
        accurate = None if most is None else most.plan
    if accurate is None or not within(accurate.error, t.budget):
        return Hull(None, math.inf, math.inf)
    left, right, best, bound, lam = fast.plan, accurate, accurate, fast.lower, 0.0
    for _ in range(MAX_HULL_STEPS):
        if right.time <= left.time or left.error <= right.error or (any_below and best.time < cap):
            break
        lam = (right.time - left.time) / (left.error - right.error)
        run = lagrangian_plan(t, lam, stop)
        assert run is not None
        p = run.plan
        bound = max(bound, run.lower - lam * t.budget)
        line = left.time + lam * left.error
        if bound >= cap or run.lower >= line - RTOL * max(1.0, abs(line)):
            break  # no plan below the line through the pair: lam is the best multiplier
        if p.time + lam * p.error >= line - RTOL * max(1.0, abs(line)):
            break  # a ring's plan whose return undoes its gain: the search closes the rest
        if within(p.error, t.budget):
            right = p
            best = min(best, p, key=lambda f: f.time)
        else:
            left = p
    return Hull(best, lam, min(bound, best.time))


def _allowed(t: BudgetTables, stages: tuple[Stage, ...] | None) -> Found | None:
    """A plan measured on ``t``, None where ``t`` no longer allows it (or none is given)."""
    if stages is None:
        return None
    found = measure(t, stages)
    return found if math.isfinite(found.time) else None


def subset_min(R: np.ndarray) -> np.ndarray:
    """``out[M] = min over subsets U of M of R[U]`` (over the first axis, bit masks)."""
    out = R.copy()
    full = out.shape[0]
    masks = np.arange(full)
    for i in range(full.bit_length() - 1):
        has = masks[(masks >> i) & 1 == 1]
        out[has] = np.minimum(out[has], out[has ^ (1 << i)])
    return out


def completion_bounds(t: BudgetTables, cost: np.ndarray, stop: Stop | None) -> np.ndarray:
    """``H[U, e, b]``: the least ``cost`` (a stage table ``(D, N1, N1)``) plus links of any
    way to run parts ``[b, n)`` on devices outside ``U`` after device ``e`` (no return)."""
    D, n = t.D, t.n
    link = t.link
    table = dp.pipeline_table(cost[:, ::-1, ::-1].transpose(0, 2, 1), link[::-1].transpose(0, 2, 1), False, stop)
    if table is None:
        raise Stopped
    R = subset_min(table[0][:, :, ::-1])  # R[U', e', b]: [b, n) on U', e' first
    full = 1 << D
    H = np.full((full, D, n + 1), np.inf)
    for U in range(1, full):
        others = [e for e in range(D) if not U >> e & 1]
        if not others:
            continue
        rest = R[(full - 1) ^ U][others]  # (E, N1)
        H[U] = (link[:, :, others] + rest.T[:, None, :]).min(axis=2).T
    return H


@dataclass(frozen=True)
class Label:
    """A partial pipeline: its time so far (ms), error, the state and its last stage."""

    time: float
    error: float
    first: int
    used: int
    last: int
    end: int
    stage: Stage
    parent: int  # index of the label it extends, -1 for a first stage


@dataclass(frozen=True)
class BusyTables:
    """What each resource is busy per token (ms), for ``throughput``: ``stage[w, e, a, b]``
    (the stage's mean decode step), ``link[b, e, e']`` (no latency), ``back[e, f]``."""

    stage: np.ndarray
    link: np.ndarray
    back: np.ndarray | None


def busiest(busy: BusyTables, stages: tuple[Stage, ...]) -> float:
    """The busiest resource of a plan (ms per token)."""
    times = [float(busy.stage[w, e, a, b]) for e, a, b, w in stages]
    times += [float(busy.link[b, e, f]) for (e, _, b, _), (f, _, _, _) in zip(stages, stages[1:])]
    if busy.back is not None and len(stages) > 1:
        times.append(float(busy.back[stages[-1][0], stages[0][0]]))
    return max(times)


def held_to(t: BudgetTables, busy: BusyTables, v: float) -> BudgetTables:
    """The tables with every stage and link busier than ``v`` ms per token removed."""
    back = None if t.back is None or busy.back is None else np.where(busy.back <= v, t.back, np.inf)
    return replace(t, time=np.where(busy.stage <= v, t.time, np.inf), link=np.where(busy.link <= v, t.link, np.inf),
                   back=back)


def pipeline_within_budget(t: BudgetTables, stop: Stop | None = None, cap: float = math.inf,
                           any_below: bool = False) -> BudgetAnswer | None:
    """The least ``time`` within the budget (module docstring); only plans below ``cap``
    (ms) are sought; with ``any_below``, the first plan found below ``cap`` (the answer's
    ``optimal`` then says only that the search was not stopped). None where no pipeline
    exists whatever the budget."""
    try:
        hull = hull_walk(t, stop, cap, any_below)
    except Stopped:
        return BudgetAnswer(None, 0.0, False)
    if hull is None:
        return None
    inc = hull.incumbent if hull.incumbent is not None and hull.incumbent.time < cap else None
    if hull.bound >= cap or math.isinf(hull.bound):
        return BudgetAnswer(inc, hull.bound, True)
    ub = inc.time if inc is not None else cap
    if ub - hull.bound <= RTOL * max(1.0, abs(ub)) or (any_below and inc is not None):
        return BudgetAnswer(inc, hull.bound, True)
    return Search(t, hull.lam, stop).run(inc, ub, hull.bound, any_below)


def throughput_within_budget(t: BudgetTables, busy: BusyTables, streams: int,
                             stop: Stop | None = None) -> BudgetAnswer | None:
    """The least ``max(busiest resource, round trip / streams)`` within the budget (module
    docstring; ``t``: the decode tables; the answer's ``Found.time`` is that objective, ms
    per token). None where no pipeline exists whatever the budget.

    The crossing ``v_k`` (the least candidate with ``T_E(v_k) / S <= v_k``) is found by
    bisection over the candidates (the stages' and links' busy times) between the round
    trip's bound over ``S`` (below it no ``v`` qualifies) and the best plan met (at the
    least candidate above its value, or past every busy time, one qualifies); each test asks for *any* plan within
    the budget, no busier than ``v``, whose round trip is at most ``S v`` (the hull walk
    with its early ends, started from the plans met before that the test still allows,
    then the search where the walk did not decide); each plan met narrows the upper end to
    its own value. The optimum is the better of the plan found at ``v_k`` and the least round trip at
    ``v_{k-1}``."""
    try:  # a bound on T_E(inf), the least round trip within the budget, and a first plan
        free = hull_walk(t, stop)
    except Stopped:
        return BudgetAnswer(None, 0.0, False)
    if free is None:
        return None
    if free.incumbent is None:  # no plan meets the budget
        return BudgetAnswer(None, math.inf, True)

    def value(f: Found) -> float:
        return max(busiest(busy, f.stages), f.time / streams)

    incumbent, lo = free.incumbent, free.bound / streams
    met: list[tuple[Stage, ...]] = [incumbent.stages]
    fastest = lagrangian_plan(t, 0.0, stop)
    assert fastest is not None

    def test(v: float, cap: float, any_below: bool) -> BudgetAnswer:
        """The least round trip below ``cap`` (any, with ``any_below``) of the plans within
        the budget no busier than ``v``."""
        held = held_to(t, busy, v)
        hull = hull_walk(held, stop, cap, any_below, met, fastest)
        if hull is None or hull.incumbent is None or math.isinf(hull.bound):
            return BudgetAnswer(None, math.inf, True)
        inc = hull.incumbent if hull.incumbent.time < cap else None
        if inc is not None:
            met.append(inc.stages)
        if hull.bound >= cap or (inc is not None and (any_below or inc.time - hull.bound <= RTOL * max(1.0, inc.time))):
            return BudgetAnswer(inc, hull.bound, True)
        got = Search(held, hull.lam, stop).run(inc, inc.time if inc is not None else cap, hull.bound, any_below)
        if got.best is not None:
            met.append(got.best.stages)
        return got

    if value(incumbent) <= lo * (1 + RTOL):
        return _answer(incumbent, value, lo, True)
    values = [busy.stage[np.isfinite(t.time)], busy.link[np.isfinite(t.link)]]
    if busy.back is not None:
        values.append(busy.back[np.isfinite(busy.back)])
    # inf last: there every plan qualifies (the best plan's value may exceed every busy time)
    candidates = np.concatenate([np.unique(np.concatenate(values)), [math.inf]])
    hi = int(np.searchsorted(candidates, value(incumbent), side="left"))
    lo_k = min(int(np.searchsorted(candidates, lo, side="left")), hi)
    try:
        while lo_k < hi:  # the least k with T_E(v_k) / S <= v_k (it holds at hi)
            mid = (lo_k + hi) // 2
            v = float(candidates[mid])
            got = test(v, streams * v * (1 + RTOL), True)
            if not got.optimal:
                raise Stopped
            if got.best is not None:
                incumbent = min(incumbent, got.best, key=value)
                hi = min(mid, int(np.searchsorted(candidates, value(got.best), side="left")))
            else:
                lo_k = mid + 1
        if hi > 0:
            cap = streams * min(float(candidates[hi]), value(incumbent))
            before = test(float(candidates[hi - 1]), cap, False)
            if not before.optimal:
                raise Stopped
            if before.best is not None:
                incumbent = min(incumbent, before.best, key=value)
    except Stopped:
        return _answer(incumbent, value, lo, False)
    return _answer(incumbent, value, value(incumbent), True)


def _answer(best: Found, value: Callable[[Found], float], bound: float, optimal: bool) -> BudgetAnswer:
    """A throughput answer: the plan with its objective as ``time``."""
    v = value(best)
    return BudgetAnswer(Found(best.stages, v, best.error), min(bound, v), optimal)


class Search:
    """Step 2 of the module docstring: best-first over labels until the least bound left
    reaches the incumbent's value; where any plan below a cap will do, depth first (the
    most promising extension first), which meets a complete plan sooner."""

    def __init__(self, t: BudgetTables, lam: float, stop: Stop | None):
        self.t, self.lam, self.stop = t, lam, stop
        self.D, self.n = t.D, t.n
        self.least_error = np.concatenate([np.cumsum(np.min(np.diagonal(t.error, 1, 1, 2), axis=0)[::-1])[::-1],
                                           [0.0]])
        self.error_cap = t.budget * (1 + RTOL) + 1e-12
        self.back_least = np.zeros(t.D) if t.back is None else \
            np.array([min((t.back[x, f] for x in range(t.D) if x != f), default=0.0) for f in range(t.D)])
        self.ends = np.arange(t.n + 1)
        self.labels: list[Label] = []
        self.fronts: dict[tuple[int, int, int, int], list[tuple[float, float]]] = {}
        self.heap: list[tuple[float, int]] = []

    def run(self, inc: Found | None, ub: float, bound: float, any_below: bool = False) -> BudgetAnswer:
        """The best plan below ``ub`` (the incumbent ``inc``'s time or a cap), or with
        ``any_below`` the first one found."""
        try:  # (a) the Lagrangian bound and (b) the least time of any completion
            self.bounds_for([0.0, self.lam] if self.lam > 0 else [0.0])
        except Stopped:
            return BudgetAnswer(inc, bound, False)
        self.best, self.ub, self.dive = inc, ub, any_below
        self.expand(-1, 0.0, 0.0, 0, 0, 0, 0)
        heap = self.heap
        while heap:
            if self.stop is not None and self.stop():
                return BudgetAnswer(self.best, min(lb for lb, _ in heap) if not self.dive else bound, False)
            lb, i = heap.pop() if self.dive else heapq.heappop(heap)
            if any_below and self.best is not None:
                break
            if lb >= self.ub - RTOL * max(1.0, abs(self.ub)):
                if self.dive:
                    continue
                break
            if len(self.labels) > GRID_AFTER_LABELS and len(self.lams) < 3 and self.lam > 0:
                try:  # a long search: tighter bounds from more multipliers pay for themselves
                    self.bounds_for([0.0] + [self.lam * f for f in MULTIPLIER_GRID])
                except Stopped:
                    return BudgetAnswer(self.best, bound, False)
            L = self.labels[i]
            self.expand(i, L.time, L.error, L.first, L.used, L.last, L.end)
        return BudgetAnswer(self.best, self.ub, True)

    def bounds_for(self, lams: Sequence[float]) -> None:
        """The completion bounds (a) and (b) for each multiplier in ``lams``."""
        t = self.t
        self.lams = np.array(lams)
        self.H = np.stack([completion_bounds(t, (t.time + lam * t.error[:, None]).min(axis=0), self.stop)
                           for lam in lams])  # (K, sets, D, N1)

    def expand(self, parent: int, time: float, error: float, first: int, used: int, last: int, at: int) -> None:
        """Push every extension of a label by one stage that may still beat the incumbent
        (bounds (a)-(c), dominance (d)); take every complete one that does."""
        t, n = self.t, self.n
        others = np.array([e for e in range(self.D) if not used >> e & 1 and (e not in t.after or used >> t.after[e] & 1)],
                          dtype=np.int64)
        if not len(others):
            return
        hand = np.zeros(len(others)) if parent < 0 else t.link[at, last, others]
        times = time + hand[None, :, None] + t.time[:, others, at, :]  # (W, E, N1)
        errors = np.broadcast_to(error + t.error[:, at, :][:, None, :], times.shape)
        firsts = others if parent < 0 else np.full(len(others), first)
        sets = used | (1 << others)
        back = np.zeros(len(others)) if t.back is None else t.back[others, firsts]
        done = times[:, :, n] + back[None, :]
        complete = (done < self.ub - RTOL * max(1.0, abs(self.ub))) & (errors[:, :, n] <= self.error_cap) & \
            ((sets & t.required) == t.required)[None, :]
        for w, k in zip(*np.nonzero(complete)):
            if done[w, k] < self.ub - RTOL * max(1.0, abs(self.ub)):
                self.best = measure(t, _walk(self.labels, parent) + ((int(others[k]), at, n, int(w)),))
                self.ub = float(done[w, k])
        slack_error = errors - t.budget  # (W, E, N1)
        lb = (self.lams[:, None, None, None] * slack_error[None] + self.H[:, sets, others][:, None]).max(axis=0)
        lb += times + self.back_least[firsts][None, :, None]
        keep = (self.ends < n)[None, None, :] & (lb < self.ub - RTOL * max(1.0, abs(self.ub))) & \
            (errors + self.least_error[None, None, :] <= self.error_cap)
        children: list[tuple[float, int]] = []
        for w, k, b in zip(*np.nonzero(keep)):
            tm, er = float(times[w, k, b]), float(errors[w, k, b])
            e = int(others[k])
            key = (int(firsts[k]) if t.back is not None else 0, int(sets[k]), e, int(b))  # a chain: any first
            front = self.fronts.setdefault(key, [])
            slack = RTOL * max(1.0, abs(tm))
            if any(t0 <= tm + slack and e0 <= er for t0, e0 in front):
                continue
            front[:] = [f for f in front if not (tm <= f[0] and er <= f[1])] + [(tm, er)]
            self.labels.append(Label(tm, er, key[0], key[1], e, key[3], (e, at, key[3], int(w)), parent))
            children.append((float(lb[w, k, b]), len(self.labels) - 1))
        if self.dive:  # depth first, the most promising child on top
            self.heap.extend(sorted(children, reverse=True))
        else:
            for child in children:
                heapq.heappush(self.heap, child)


def _walk(labels: list[Label], i: int) -> tuple[Stage, ...]:
    """The stages of label ``i`` and its ancestors, first stage first."""
    out: list[Stage] = []
    while i >= 0:
        out.append(labels[i].stage)
        i = labels[i].parent
    return tuple(reversed(out))
