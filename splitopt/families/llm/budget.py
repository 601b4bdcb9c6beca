"""The llm family's exact method where a plan must hold measures within limits
(``formulations/llm.md``, "Error budget" and "Limits on time"): the best pipeline over
device choice, order, ranges *and* each device's bit-width with every limit met: the
error budget (``sum of stage errors <= budget``), and a limit on a measure other than the
objective (the time to first token, or the pipeline's tokens/s).

Each limited measure is a :class:`Resource`: a sum over the plan's stages, links and (in a
ring) its return, like the objective. The problem is a resource-constrained shortest path
over the dynamic program's states, solved exactly in two steps:

1. **Lagrangian bound.** For a multiplier ``lam >= 0`` on the first resource, the dynamic
   program of ``dp.py`` with stage cost ``min over widths of time + lam * amount`` (links:
   ``time + lam * amount``) gives ``Phi(lam) = min over plans of time + lam * amount`` (each
   stage picks its own width, and a device runs one stage); ``Phi(lam) - lam * limit``
   bounds the optimum from below (the other resources only remove plans). The best
   multiplier is found by walking the lower convex hull of the plans' ``(amount, time)``
   points between the fastest plan and the one of least amount (each step one run of the
   program at the slope of the current pair); every plan met within every limit is an
   incumbent. In a ring the walk runs the chain's program (cheaper by the device count;
   its value, without the return, still bounds the ring's) and measures each plan with
   its return.
2. **Closing the gap** (where the hull's best plan within the limits is not already within
   tolerance of the bound): a search over partial pipelines (labels ``(time, amounts)`` at
   states ``(first device, devices used, last device, boundary)``), pruned by (a) the
   Lagrangian bound of the best completion, from the same program run over the reversed
   parts (``R[U', e', b]``: the least ``time + lam * amount`` running ``[b, n)`` on the
   devices ``U'``, ``e'`` first; its minimum over subsets of the unused devices), (b) the
   least time of any completion (the same at ``lam = 0``), (c) for each resource, the least
   amount any completion adds, and (d) dominance between labels of one state. Every
   extension ends at a later boundary, so the search sweeps the boundaries in order: at
   boundary ``b`` every label that will ever end there is known, the dominated ones are
   dropped at once and the rest are extended together (numpy over labels and the stages
   the tables allow from ``b``). A first sweep keeps only the labels of least bound at each
   boundary (a beam: a good incumbent early); the exact sweep after it keeps every label
   below the incumbent, which at the last boundary is optimal (within ``RTOL``).

``throughput`` (``max(busiest resource, round trip / S)``) keeps the dynamic program's
crossing argument (``dp.py``) with the least round trip *within the limits*, ``T_E(v)``,
which also falls as ``v`` grows; each test of ``T_E(v)`` against ``S v`` is the sum method
above on the stages and links no busier than ``v`` (:func:`throughput_within_budget`); the
first plan met whose value is its round trip over ``S`` is closed by one exact search.
"""

from __future__ import annotations

import bisect
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
class Resource:
    """A measure every plan holds within ``limit``: the sum over the plan's stages of
    ``stage[w, e, a, b]`` (``stage[w, 0, a, b]`` where every device adds the same, as an
    error does), over its links of ``link[b, e, e']`` and, in a ring, of the return
    ``back[e_last, e_first]`` (None: links, or the return, add nothing); every entry >= 0,
    read only where the objective's table allows the stage or link. ``name`` words a
    message, e.g. ``"error"``, ``"time to first token"``."""

    name: str
    stage: np.ndarray
    limit: float
    link: np.ndarray | None = None
    back: np.ndarray | None = None

    @property
    def by_device(self) -> bool:
        return int(self.stage.shape[1]) > 1


@dataclass(frozen=True)
class BudgetTables:
    """A sum objective's tables with the width as a decision: ``time[w, e, a, b]`` (ms; inf
    where device ``e`` does not run width ``w`` or the stage breaks its memory or a pin),
    ``link[b, e, e']`` (ms), ``back[e_last, e_first]`` (a ring's return, ms; None in a
    chain), the devices every plan uses (a bit mask), the limited measures (``resources``;
    the hull walk's multiplier is on the first) and the order of twin devices (``after``:
    ``dp.pipeline_table``)."""

    time: np.ndarray
    link: np.ndarray
    back: np.ndarray | None
    required: int
    resources: tuple[Resource, ...]
    after: Mapping[int, int] = field(default_factory=dict)

    @property
    def D(self) -> int:
        return int(self.time.shape[1])

    @property
    def n(self) -> int:
        return int(self.time.shape[2]) - 1


@dataclass(frozen=True)
class Found:
    """A plan the method found: its stages, time (ms) and each resource's amount."""

    stages: tuple[Stage, ...]
    time: float
    amounts: tuple[float, ...]

    @property
    def error(self) -> float:
        """The first resource's amount (the error, where the budget binds)."""
        return self.amounts[0]


@dataclass(frozen=True)
class BudgetAnswer:
    """The method's answer: the best plan within the limits (None where none exists below
    ``cap``), the lower bound it proved (ms) and whether the bound meets the plan (optimal)."""

    best: Found | None
    bound: float
    optimal: bool


def stage_times(d: LlmData, part_ms: np.ndarray) -> np.ndarray:
    """``time[w, e, a, b]``: the sum of ``part_ms[a:b, e, w]`` (ms) where device ``e`` runs
    width ``w`` and the stage meets its memory and the pins, else inf."""
    W, N1 = len(d.widths), d.n + 1
    time = np.full((W, d.D, N1, N1), np.inf)
    for w in range(W):
        widths = [w] * d.D
        ok = dp.stage_mask(d, widths) & d.runs[:, w][:, None, None]
        time[w] = dp.stage_costs(part_ms, widths, ok)
    return time


def error_resource(d: LlmData, budget: float) -> Resource:
    """The error budget: ``stage[w, 0, a, b]``, the error of parts ``[a, b)`` at width ``w``."""
    W, N1 = len(d.widths), d.n + 1
    error = np.zeros((W, 1, N1, N1))
    upper = np.triu(np.ones((N1, N1), dtype=bool), 1)
    for w in range(W):
        prefix = np.concatenate([[0.0], np.cumsum(d.error[:, w])])
        error[w, 0] = np.where(upper, np.maximum(prefix[None, :] - prefix[:, None], 0.0), 0.0)
    return Resource("error", error, budget)


def budget_tables(d: LlmData, part_ms: np.ndarray, link: np.ndarray, budget: float | None,
                  after: Mapping[int, int] | None = None, resources: Sequence[Resource] = ()) -> BudgetTables:
    """The tables of a sum objective (``part_ms``: prefill or mean decode per part, device
    and width; ``link``: the matching link table; ``budget``: the error budget, None where
    it is not a resource; ``resources``: more limited measures; ``after``: twins,
    ``data.twins``)."""
    own = (error_resource(d, budget),) if budget is not None else ()
    return BudgetTables(stage_times(d, part_ms), link, d.return_ms if d.ring else None, dp.required_mask(d),
                        own + tuple(resources), dict(after or {}))


def within(amount: float, limit: float) -> bool:
    """The evaluator's test of an amount against its limit."""
    return amount <= limit * (1 + RTOL) + 1e-12


def meets(t: BudgetTables, f: Found) -> bool:
    """Whether ``f`` holds every resource within its limit."""
    return all(within(a, r.limit) for a, r in zip(f.amounts, t.resources))


def _amount(r: Resource, stages: tuple[Stage, ...]) -> float:
    parts = [float(r.stage[w, e if r.by_device else 0, a, b]) for e, a, b, w in stages]
    if r.link is not None:
        parts += [float(r.link[b, e, f]) for (e, _, b, _), (f, _, _, _) in zip(stages, stages[1:])]
    if r.back is not None:
        parts.append(float(r.back[stages[-1][0], stages[0][0]]))
    return math.fsum(parts)


def measure(t: BudgetTables, stages: tuple[Stage, ...]) -> Found:
    """A plan's time and amounts from the tables."""
    time = math.fsum(float(t.time[w, e, a, b]) for e, a, b, w in stages)
    time += math.fsum(float(t.link[b, e, f]) for (e, _, b, _), (f, _, _, _) in zip(stages, stages[1:]))
    if t.back is not None:
        time += float(t.back[stages[-1][0], stages[0][0]])
    return Found(stages, time, tuple(_amount(r, stages) for r in t.resources))


def _where_allowed(allowed: np.ndarray, amount: np.ndarray | None) -> np.ndarray:
    """``amount`` (0 where None) where ``allowed`` is finite, inf elsewhere."""
    return np.where(np.isfinite(allowed), 0.0 if amount is None else amount, np.inf)


def weighted(t: BudgetTables, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The stage, link and return tables of ``time + lam * amount`` of the first resource
    (``lam = inf``: the amount alone, where the time is finite)."""
    r = t.resources[0]
    stage = np.broadcast_to(r.stage, t.time.shape)
    if math.isinf(lam):
        back = None if t.back is None else _where_allowed(t.back, r.back)
        return np.where(np.isfinite(t.time), stage, np.inf), _where_allowed(t.link, r.link), back
    link = t.link if r.link is None or lam == 0 else t.link + lam * r.link
    back = t.back if t.back is None or r.back is None or lam == 0 else t.back + lam * r.back
    return (t.time + lam * stage if lam else t.time), link, back


@dataclass(frozen=True)
class Lagrangian:
    """A run of the program at one multiplier: its plan (measured exactly) and a lower
    bound on ``min over plans of time + lam * amount`` (ms): the program's value."""

    plan: Found
    lower: float


def lagrangian_plan(t: BudgetTables, lam: float, stop: Stop | None) -> Lagrangian | None:
    """The plan of least ``time + lam * amount`` (first resource; each stage at its best
    width), None where no pipeline exists; ``lam = inf``: the least amount. In a ring, at a
    finite multiplier, the program of a chain (the return left out: its value still bounds
    the ring's from below, and it is the ring's program divided by the device count); the
    ring's own where the chain's plan has no link back."""
    total, link, back = weighted(t, lam)
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
    """The hull walk's result: the incumbent (the fastest plan within every limit met, None
    where none was met), the best multiplier and the bound it proves (ms; inf where no plan
    meets the first resource's limit)."""

    incumbent: Found | None
    lam: float
    bound: float


def hull_walk(t: BudgetTables, stop: Stop | None, cap: float = math.inf, any_below: bool = False,
              known: Sequence[tuple[Stage, ...]] = (), fast_known: Lagrangian | None = None) -> Hull | None:
    """The best Lagrangian bound (module docstring, step 1); None where no pipeline exists
    at all. The bound is ``inf`` where no plan meets the first resource's limit. The walk
    ends early once the bound reaches ``cap`` (ms), or, with ``any_below``, once a plan
    within every limit is below it. ``known``: plans met before (those these tables still
    allow and within every limit start the walk in place of the plan of least amount);
    ``fast_known``: the run at ``lam = 0`` on tables that allow at least what these do
    (where these still allow its plan, it is their run too)."""
    limit = t.resources[0].limit
    allowed = None if fast_known is None else _allowed(t, fast_known.plan.stages)
    if fast_known is not None and allowed is not None:
        fast = Lagrangian(allowed, fast_known.lower)
    else:
        found = lagrangian_plan(t, 0.0, stop)
        if found is None:
            return None
        fast = found
    best = fast.plan if meets(t, fast.plan) else None

    def done(lam: float, bound: float) -> Hull:
        return Hull(best, lam, bound if best is None else min(bound, best.time))

    if within(fast.plan.amounts[0], limit) or fast.lower >= cap:
        return done(0.0, fast.lower)
    seeds = [f for f in (_allowed(t, stages) for stages in known) if f is not None and meets(t, f)]
    if seeds:
        accurate: Found | None = min(seeds, key=lambda f: f.time)
    else:
        most = lagrangian_plan(t, math.inf, stop)
        accurate = None if most is None else most.plan
    if accurate is None or not within(accurate.amounts[0], limit):
        return Hull(None, math.inf, math.inf)
    if meets(t, accurate):
        best = accurate
    left, right, bound, lam = fast.plan, accurate, fast.lower, 0.0
    for _ in range(MAX_HULL_STEPS):
        if right.time <= left.time or left.amounts[0] <= right.amounts[0] or \
                (any_below and best is not None and best.time < cap):
            break
        lam = (right.time - left.time) / (left.amounts[0] - right.amounts[0])
        run = lagrangian_plan(t, lam, stop)
        assert run is not None
        p = run.plan
        bound = max(bound, run.lower - lam * limit)
        line = left.time + lam * left.amounts[0]
        if bound >= cap or run.lower >= line - RTOL * max(1.0, abs(line)):
            break  # no plan below the line through the pair: lam is the best multiplier
        if p.time + lam * p.amounts[0] >= line - RTOL * max(1.0, abs(line)):
            break  # a ring's plan whose return undoes its gain: the search closes the rest
        if within(p.amounts[0], limit):
            right = p
            if meets(t, p) and (best is None or p.time < best.time):
                best = p
        else:
            left = p
    return done(lam, bound)


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


def completion_bounds(t: BudgetTables, cost: np.ndarray, stop: Stop | None, link: np.ndarray | None = None) -> np.ndarray:
    """``H[U, e, b]``: the least ``cost`` (a stage table ``(D, N1, N1)``) plus links (``link``,
    default the tables') of any way to run parts ``[b, n)`` on devices outside ``U`` after
    device ``e`` (no return)."""
    D, n = t.D, t.n
    link = t.link if link is None else link
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


def _gap_closed(ub: float, bound: float) -> bool:
    return ub - bound <= RTOL * max(1.0, abs(ub))


def pipeline_within_budget(t: BudgetTables, stop: Stop | None = None, cap: float = math.inf,
                           any_below: bool = False) -> BudgetAnswer | None:
    """The least ``time`` within every limit (module docstring); only plans below ``cap``
    (ms) are sought; with ``any_below``, the first plan found below ``cap`` (the answer's
    ``optimal`` then says only that the search was not stopped). None where no pipeline
    exists whatever the limits."""
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
    if (inc is not None and _gap_closed(ub, hull.bound)) or (any_below and inc is not None):
        return BudgetAnswer(inc, hull.bound, True)
    return Search(t, hull.lam, stop).run(inc, ub, hull.bound, any_below)


def throughput_within_budget(t: BudgetTables, busy: BusyTables, streams: int,
                             stop: Stop | None = None) -> BudgetAnswer | None:
    """The least ``max(busiest resource, round trip / streams)`` within every limit (module
    docstring; ``t``: the decode tables; the answer's ``Found.time`` is that objective, ms
    per token). None where no pipeline exists whatever the limits.

    The crossing ``v_k`` (the least candidate with ``T_E(v_k) / S <= v_k``) is found by
    bisection over the candidates (the stages' and links' busy times) between the round
    trip's bound over ``S`` (below it no ``v`` qualifies) and the best plan met (at the
    least candidate above its value, or past every busy time, one qualifies); each test
    asks for *any* plan within the limits, no busier than ``v``, whose round trip is at
    most ``S v`` (the hull walk with its early ends, started from the plans met before that
    the test still allows, then the search where the walk did not decide); each plan met
    narrows the upper end to its own value. The optimum is the better of the plan found at
    ``v_k`` and the least round trip at ``v_{k-1}``; the first plan met whose value is its
    round trip over ``S`` is closed at once by one exact search."""
    try:  # a bound on T_E(inf), the least round trip within the limits, and a first plan
        free = hull_walk(t, stop)
        if free is None:
            return None
        if math.isinf(free.bound):  # no plan meets the first limit
            return BudgetAnswer(None, math.inf, True)
        first = free.incumbent
        if first is None:  # the walk met no plan within every limit: the search finds one, or none exists
            found = Search(t, free.lam, stop).run(None, math.inf, free.bound, any_below=True)
            if not found.optimal:
                return BudgetAnswer(None, 0.0, False)
            if found.best is None:
                return BudgetAnswer(None, math.inf, True)
            first = found.best
    except Stopped:
        return BudgetAnswer(None, 0.0, False)

    def value(f: Found) -> float:
        return max(busiest(busy, f.stages), f.time / streams)

    def round_trip_bound(f: Found) -> bool:
        """Whether ``f``'s value is its round trip over ``S`` (not its busiest resource)."""
        return f.time / streams >= busiest(busy, f.stages)

    incumbent, lo = first, free.bound / streams
    met: list[tuple[Stage, ...]] = [incumbent.stages]
    fastest = lagrangian_plan(t, 0.0, stop)
    assert fastest is not None

    def test(v: float, cap: float, any_below: bool) -> BudgetAnswer:
        """The least round trip below ``cap`` (any, with ``any_below``) of the plans within
        the limits no busier than ``v``."""
        held = held_to(t, busy, v)
        hull = hull_walk(held, stop, cap, any_below, met, fastest)
        if hull is None or math.isinf(hull.bound):
            return BudgetAnswer(None, math.inf, True)
        inc = hull.incumbent if hull.incumbent is not None and hull.incumbent.time < cap else None
        if inc is not None:
            met.append(inc.stages)
        if hull.bound >= cap or (inc is not None and (any_below or _gap_closed(inc.time, hull.bound))):
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
    closed = False  # whether the exact step below has run
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
                if not closed and round_trip_bound(incumbent):
                    # a plan better than z = value(incumbent) is below z on both terms: the least
                    # round trip of the plans no busier than the last candidate below z, under S z,
                    # either does not exist (the incumbent is optimal), or is optimal where its
                    # round trip bounds its value, or lowers the upper end
                    closed, z = True, value(incumbent)
                    below = int(np.searchsorted(candidates, z, side="left")) - 1
                    if below < 0:
                        break
                    exact = test(float(candidates[below]), streams * z, False)
                    if not exact.optimal:
                        raise Stopped
                    if exact.best is None:
                        return _answer(incumbent, value, z, True)
                    incumbent = min(incumbent, exact.best, key=value)
                    if round_trip_bound(exact.best):
                        return _answer(incumbent, value, value(incumbent), True)
                    hi = min(hi, int(np.searchsorted(candidates, value(exact.best), side="left")))
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
    return BudgetAnswer(Found(best.stages, v, best.amounts), min(bound, v), optimal)


#: labels a beam sweep keeps at each boundary (``Search.run``)
BEAM_LABELS = 16
#: labels expanded at once (each makes one candidate extension per stage the tables allow)
CHUNK_LABELS = 1024
#: how many earlier labels of its state (in order of time) a label is compared with where
#: there are several resources (:func:`undominated`)
DOMINANCE_WINDOW = 32


@dataclass
class Labels:
    """Partial pipelines as columns (numpy arrays of one length): ``time`` (ms) and the
    resources' ``amount`` (one column each) so far, the state (``first`` device, ``used``
    devices as a bit mask, ``last`` device; the boundary is the bucket they are kept in),
    their last stage (``start``, ``width``; it ends at the bucket's boundary), the index of
    the label they extend (``parent``, -1 for a first stage) and their bound (``lb``, ms)."""

    time: np.ndarray
    amount: np.ndarray
    first: np.ndarray
    used: np.ndarray
    last: np.ndarray
    start: np.ndarray
    width: np.ndarray
    parent: np.ndarray
    lb: np.ndarray

    def take(self, rows: np.ndarray) -> "Labels":
        return Labels(*(getattr(self, f)[rows] for f in LABEL_FIELDS))

    def __len__(self) -> int:
        return len(self.time)


LABEL_FIELDS = ("time", "amount", "first", "used", "last", "start", "width", "parent", "lb")


def _join(parts: Sequence[Labels]) -> Labels:
    return Labels(*(np.concatenate([getattr(p, f) for p in parts]) for f in LABEL_FIELDS))


def undominated(labels: Labels, ring: bool) -> np.ndarray:
    """The rows of ``labels`` (all at one boundary) that no other row of the same state
    (``first`` in a ring, ``used``, ``last``) beats on time and every amount (of equal rows,
    one). One resource: exactly, by one sort (within a state in order of time, a row is
    dropped where an earlier row's amount is no larger: a running minimum of amount ranks,
    each state's ranks shifted below every earlier state's so that the minimum needs no
    reset). Several: each row against the ``DOMINANCE_WINDOW`` rows before it in that order
    (dominance only saves work, so a dominated row kept is no error)."""
    first = labels.first if ring else np.zeros_like(labels.first)
    amount = labels.amount
    order = np.lexsort((amount[:, 0], labels.time, labels.last, labels.used, first))
    key = np.stack([first[order], labels.used[order], labels.last[order]])
    new_state = np.concatenate([[True], np.any(key[:, 1:] != key[:, :-1], axis=0)])
    if amount.shape[1] == 1:
        group = np.cumsum(new_state) - 1
        ranks = np.unique(amount[order, 0], return_inverse=True)[1].astype(np.int64)
        shifted = ranks - group * (int(ranks.max(initial=0)) + 1)
        before = np.concatenate([[np.iinfo(np.int64).max], np.minimum.accumulate(shifted)[:-1]])
        return order[before > shifted]
    state = np.cumsum(new_state)
    a = amount[order]
    dropped = np.zeros(len(order), dtype=bool)
    for s in range(1, min(DOMINANCE_WINDOW, len(order) - 1) + 1):
        same = state[s:] == state[:-s]
        dropped[s:] |= same & np.all(a[:-s] <= a[s:], axis=1)
    return order[~dropped]


class Search:
    """Step 2 of the module docstring, as a sweep over the boundaries: a label ends at a
    boundary and every extension ends at a later one, so once the sweep reaches boundary
    ``b`` every label that will ever end there is known. The labels of ``b`` are then
    reduced to the undominated ones of each state (:func:`undominated`), those whose bound
    is below the incumbent are extended together (numpy over labels and stages), and
    complete plans below the incumbent replace it. The search ends at the last boundary
    (the incumbent is optimal within ``RTOL``) or, where any plan below a cap will do, at
    the first one found."""

    def __init__(self, t: BudgetTables, lam: float, stop: Stop | None):
        self.t, self.lam, self.stop = t, lam, stop
        self.D, self.n, self.K = t.D, t.n, len(t.resources)
        self.caps = np.array([r.limit * (1 + RTOL) + 1e-12 for r in t.resources])
        self.back_least = np.zeros(t.D) if t.back is None else \
            np.array([min((t.back[x, f] for x in range(t.D) if x != f), default=0.0) for f in range(t.D)])
        self.back = np.zeros((t.D, t.D)) if t.back is None else np.asarray(t.back)
        self.amount_back = [np.zeros((t.D, t.D)) if r.back is None or t.back is None else np.asarray(r.back)
                            for r in t.resources]
        self.bits = (1 << np.arange(t.D)).astype(np.int64)
        #: ``follows[e]``: the bit of the twin device ``e`` joins after (0: none)
        self.follows = np.array([1 << t.after[e] if e in t.after else 0 for e in range(t.D)], dtype=np.int64)
        self.store: list[Labels] = []  # every label expanded, in chunks (``parent`` indexes their concatenation)
        self.chunk_ends: list[int] = []  # the boundary every label of a chunk ends at
        self.offsets: list[int] = [0]
        self.expanded = 0
        self.steps_from: dict[int, tuple[np.ndarray, ...]] = {}

    def run(self, inc: Found | None, ub: float, bound: float, any_below: bool = False) -> BudgetAnswer:
        """The best plan below ``ub`` (the incumbent ``inc``'s time or a cap), or with
        ``any_below`` the first one found. A beam sweep first (at each boundary only the
        ``BEAM_LABELS`` labels of least bound go on) meets a good plan early, which the exact
        sweep after it then prunes by."""
        try:  # (a) the Lagrangian bound, (b) the least time and (c) the least amounts of any completion
            self.bounds_for([0.0, self.lam] if 0 < self.lam < math.inf else [0.0])
            self.least = [self.least_amount(r) for r in self.t.resources]
        except Stopped:
            return BudgetAnswer(inc, bound, False)
        self.best, self.ub = inc, ub
        for beam in (BEAM_LABELS, None):
            stopped = self.sweep(beam, any_below, bound)
            if stopped is not None:
                return stopped
            if any_below and self.best is not None:
                break
        return BudgetAnswer(self.best, self.ub, True)

    def sweep(self, beam: int | None, any_below: bool, bound: float) -> BudgetAnswer | None:
        """One sweep over the boundaries (only the ``beam`` labels of least bound at each,
        where given); the answer where ``stop()`` said to stop, else None."""
        n = self.n
        self.pending: list[list[Labels]] = [[] for _ in range(n + 1)]
        empty = np.zeros(1, dtype=np.int64)
        root = Labels(np.zeros(1), np.zeros((1, self.K)), empty - 1, empty.copy(), empty - 1, empty.copy(),
                      empty.copy(), empty - 1, np.zeros(1))
        for b in range(n):
            if any_below and self.best is not None:
                break
            if b == 0:
                labels = root
            else:
                if not self.pending[b]:
                    continue
                labels = _join(self.pending[b])
                self.pending[b] = []
                labels = labels.take(np.nonzero(labels.lb < self._threshold())[0])
                if not len(labels):
                    continue
                labels = labels.take(undominated(labels, self.t.back is not None))
                if beam is not None and len(labels) > beam:
                    labels = labels.take(np.argpartition(labels.lb, beam)[:beam])
            for lo in range(0, len(labels), CHUNK_LABELS):
                if self.stop is not None and self.stop():
                    if beam is not None or any_below:
                        return BudgetAnswer(self.best, bound, False)
                    rest = [labels.lb[lo:]] + [p.lb for bucket in self.pending[b + 1:] for p in bucket]
                    least = float(np.concatenate(rest).min(initial=math.inf))
                    return BudgetAnswer(self.best, min(self.ub, least), False)
                if self.expanded > GRID_AFTER_LABELS and len(self.lams) < 3 and 0 < self.lam < math.inf:
                    try:  # a long search: tighter bounds from more multipliers pay for themselves
                        self.bounds_for([0.0] + [self.lam * f for f in MULTIPLIER_GRID])
                    except Stopped:
                        return BudgetAnswer(self.best, bound, False)
                self.expand(labels.take(np.arange(lo, min(lo + CHUNK_LABELS, len(labels)))), b)
        return None

    def _threshold(self) -> float:
        return self.ub if math.isinf(self.ub) else self.ub - RTOL * max(1.0, abs(self.ub))

    def bounds_for(self, lams: Sequence[float]) -> None:
        """The completion bounds (a) and (b) for each multiplier in ``lams``."""
        t = self.t
        self.lams = np.array(lams)
        tables = [weighted(t, lam) for lam in lams]
        self.H = np.stack([completion_bounds(t, stage.min(axis=0), self.stop, link)
                           for stage, link, _ in tables])  # (K, sets, D, N1)

    def least_amount(self, r: Resource) -> np.ndarray:
        """(c): the least amount of ``r`` any completion adds, ``[sets, e, b]``: by the
        program over the unused devices where it depends on the device or has links, else
        (an error) the least of each remaining part over the widths, broadcast."""
        t = self.t
        if r.by_device or r.link is not None:
            cost = np.where(np.isfinite(t.time), np.broadcast_to(r.stage, t.time.shape), np.inf).min(axis=0)
            H = completion_bounds(t, cost, self.stop, _where_allowed(t.link, r.link))
            H[:, :, self.n] = 0.0
            return H
        per_part = np.min(np.diagonal(r.stage[:, 0], 1, 1, 2), axis=0)
        suffix = np.concatenate([np.cumsum(per_part[::-1])[::-1], [0.0]])
        return np.broadcast_to(suffix[None, None, :], (1 << t.D, t.D, t.n + 1))

    def _keep(self, labels: Labels, end: int) -> np.ndarray:
        """The global indices of ``labels`` (ending at boundary ``end``) once stored."""
        start = self.offsets[-1]
        self.store.append(labels)
        self.chunk_ends.append(end)
        self.offsets.append(start + len(labels))
        return np.arange(start, start + len(labels))

    def steps(self, at: int) -> tuple[np.ndarray, ...]:
        """Every stage that may start at boundary ``at`` (those the tables allow: memory and
        pins keep a device's stages short): its width, device, end, time (ms) and amounts."""
        if at not in self.steps_from:
            w, e, b = np.nonzero(np.isfinite(self.t.time[:, :, at, :]))
            w, e, b = w[b > at], e[b > at], b[b > at]
            amounts = np.stack([r.stage[w, e if r.by_device else 0, at, b] for r in self.t.resources], axis=1)
            self.steps_from[at] = (w, e, b, self.t.time[w, e, at, b], amounts)
        return self.steps_from[at]

    def expand(self, labels: Labels, at: int) -> None:
        """Extend every label (all ending at boundary ``at``) by one stage on a device it has
        not used (twins in order): take the complete extensions below the incumbent, and
        bucket by their end the others that bounds (a)-(c) keep."""
        t, n = self.t, self.n
        self.expanded += len(labels)
        ids = self._keep(labels, at) if at > 0 else np.full(1, -1)
        sw, se, sb, stime, samount = self.steps(at)
        used = labels.used[:, None]
        free = ((used & self.bits[se][None, :]) == 0) & \
            ((self.follows[se][None, :] == 0) | ((used & self.follows[se][None, :]) != 0))  # (L, steps)
        i, k = np.nonzero(free)
        e, b = se[k], sb[k]
        tm = labels.time[i] + stime[k] + (0.0 if at == 0 else t.link[at, labels.last[i], e])
        am = labels.amount[i] + samount[k]  # (M, K)
        if at > 0:
            for j, r in enumerate(t.resources):
                if r.link is not None:
                    am[:, j] += r.link[at, labels.last[i], e]
        first = e if at == 0 else labels.first[i]
        sets = labels.used[i] | self.bits[e]
        ok = np.isfinite(tm)
        for j in range(self.K):
            ok &= am[:, j] + self.least[j][sets, e, b] <= self.caps[j]
        threshold = self._threshold()
        done = np.nonzero(ok & (b == n) & ((sets & t.required) == t.required))[0]
        if len(done):
            total = tm[done] + self.back[e[done], first[done]]
            for j in range(self.K):
                total = np.where(am[done, j] + self.amount_back[j][e[done], first[done]] <= self.caps[j], total, np.inf)
            best = int(np.argmin(total))
            if total[best] < threshold:
                r = done[best]
                stages = (self._walk(int(ids[i[r]])) if at > 0 else ()) + ((int(e[r]), at, n, int(sw[k[r]])),)
                self.best = measure(t, stages)
                self.ub = float(total[best])
                threshold = self._threshold()
        rows = np.nonzero(ok & (b < n))[0]
        if not len(rows):
            return
        i, k, e, b, tm, am, first, sets = i[rows], k[rows], e[rows], b[rows], tm[rows], am[rows], first[rows], sets[rows]
        limit = t.resources[0].limit
        lb = (self.lams[:, None] * (am[:, 0] - limit)[None, :] + self.H[:, sets, e, b]).max(axis=0) + tm + \
            self.back_least[first]
        keep = np.nonzero(lb < threshold)[0]
        if not len(keep):
            return
        b = b[keep]
        children = Labels(tm[keep], am[keep], first[keep].astype(np.int64), sets[keep], e[keep].astype(np.int64),
                          np.full(len(keep), at, dtype=np.int64), sw[k[keep]].astype(np.int64), ids[i[keep]], lb[keep])
        order = np.argsort(b, kind="stable")
        ends, cuts = np.unique(b[order], return_index=True)
        for end, part in zip(ends, np.split(order, cuts[1:])):
            self.pending[int(end)].append(children.take(part))

    def _walk(self, i: int) -> tuple[Stage, ...]:
        """The stages of stored label ``i`` and its ancestors, first stage first."""
        out: list[Stage] = []
        while i >= 0:
            k = bisect.bisect_right(self.offsets, i) - 1
            chunk, row = self.store[k], i - self.offsets[k]
            out.append((int(chunk.last[row]), int(chunk.start[row]), self.chunk_ends[k], int(chunk.width[row])))
            i = int(chunk.parent[row])
        return tuple(reversed(out))
