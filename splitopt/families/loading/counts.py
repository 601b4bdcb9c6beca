"""The exact first response over every allowed child count (``count-search``;
``formulations/loading_balance.md``, "Exact search over child counts").

* Counts ``k <= T`` (Case 1): the exact min-max partition of :mod:`partition`.
* Counts ``k > T`` (Case 2): first a lower bound per count, the *staircase relaxation*
  (:func:`relaxed_starts`), bisected on the target ``theta``; a count whose bound reaches the
  incumbent is closed. The relaxation's largest child starts at a target just above the bound
  give a plan (the incumbent of that count), which a local search (:mod:`polish`) improves, as
  it does every plan the exact search finds. Every count still open is then searched exactly
  (:class:`CountSearch`): depth-first over the children in index order, a child's thread and
  last block, pruning every node whose relaxation from its state has no solution below the
  incumbent, and every state dominated by one already searched.

Every plan found is re-evaluated by :func:`evaluate.first_response_ms`. The answer is OPTIMAL
when every count is closed: its bound is within ``RTOL`` (and the rounding slack) of the
plan's value: the search only looks for plans at least ``RTOL`` better than the incumbent, and
a refuted target ``theta`` proves the bound ``theta - slack`` (the search computes load ends
in its own order of floating-point operations)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Callable

from splitopt.families.loading.bound import first_child_bound, packed_bound
from splitopt.families.loading.data import LoadingData
from splitopt.families.loading.evaluate import first_response_ms
from splitopt.families.loading.partition import min_max_partition
from splitopt.families.loading.plan import LoadingPlan, canonical_threads, paper_threads
from splitopt.families.loading.polish import polish

#: the search looks for plans better than the incumbent by this relative margin: the proven
#: bound is ``incumbent * (1 - RTOL)``, well within OPTIMAL's 1e-9
RTOL = 1e-10
#: bisection of the relaxation bound stops at this relative width
BOUND_RTOL = 1e-13
#: floating-point slack (relative to the serial horizon) added to every right-hand side of the
#: relaxation, so that rounding can only make it looser (a valid bound stays valid)
SLACK = 1e-12
#: a fixpoint of the relaxation that has not settled after this many passes is taken as
#: "may be feasible" (never prunes wrongly)
MAX_PASSES = 200
#: the target each exact search tests: this far from the count's bound to the incumbent;
#: a search that refutes its target tests 4x farther next (the incumbent's own target at
#: last), one that runs over its node budget 4x nearer, with twice the budget
SPLIT = 1 / 16
#: without a fixed cost, states this many blocks on are checked for dominance
SCAN = 8
#: after a test over its budget, a plan-seeking test this far from the bound to the target
SEEK = (1.0, 0.5)
#: nodes one exact search may visit before it is abandoned (doubled each time)
NODE_BUDGET = 20_000
#: the local search starts from the relaxation's greatest starts at these relative distances
#: above the count's bound
POLISH_FROM = (1e-4, 1e-3, 3e-3)
#: ... for this many of the searched counts, those of least bound
POLISH_COUNTS = 2


class OutOfTime(Exception):
    pass


class Found(Exception):
    pass


class OverBudget(Exception):
    pass


class Staircase:
    """The data of one child count ``k > T`` as Python lists (scalar work is faster on
    lists than on numpy arrays): ``SR`` the read prefix times ``sigma_k``, ``I`` the inference
    prefix, the caps on each start."""

    def __init__(self, d: LoadingData, k: int):
        self.d, self.k, self.T = d, k, d.threads
        self.N, self.F, self.sigma = d.n, d.fixed_ms, d.slowdown(k)
        self.SR = [self.sigma * float(v) for v in d.read_prefix]
        self.R = [float(v) for v in d.read_prefix]
        self.I = [float(v) for v in d.infer_prefix]
        self.IN = self.I[-1]
        self.cap = [0] + [min(self.N - (k - j), d.last_start_max - (k - 1 - j)) for j in range(1, k)] + [self.N]
        self.horizon = k * self.F + self.SR[-1] + self.IN
        self.slack = SLACK * max(self.horizon, 1.0)

    def load(self, s: int, e: int) -> float:
        """Child ``[s, e)``'s load time, as the evaluator computes it."""
        return self.F + self.sigma * (self.R[e] - self.R[s])


def relaxed_starts(st: Staircase, theta: float, i0: int, e0: int, f: list[float],
                   loose: bool = False) -> list[int] | None:
    """The staircase relaxation from a state: children ``0 .. i0-1`` placed, child ``i0``
    starts at block ``e0``, the threads are free at ``f`` (ascending, ``T`` values). Every
    completion with first response ``<= theta`` has child starts ``s_j <= u_j`` for the
    returned ``u`` (length ``k + 1``); None proves that there is none.

    With ``d(x) = theta - I[N] + I[x]`` (child ``j`` must be loaded by ``d(s_j)``), the
    constraints, each an upper bound on ``s_{j+1}`` non-decreasing in the earlier starts:

    (a) ``f_min + F + sigma (R[s_{j+1}] - R[s_j]) <= d(s_j)`` (child ``j`` loads after its
        thread frees, no earlier than ``f_min``);
    (b) with ``n = j - i0 + 1`` new children ``i0 .. j`` of total load ``W``: ``W <=
        sum_{q < min(T, n)} max(0, d(s_{j-q}) - f_q)`` (the threads that load them end at
        distinct children's deadlines, the latest ``min(T, n)`` at most, and start from
        their free times, the smallest at least);

    and ``s_{j+1} >= s_j + 1``, the caps of the limits, ``s_k = N``. The set of solutions is
    closed under componentwise max, so the greatest one is the limit of lowering every
    ``u_j`` to what the constraints allow (a greatest fixpoint).

    ``loose``: the lower limits ``s_j >= e0 + (j - i0)`` are weakened to ``s_j >= j`` (child
    ``i0`` may be empty). Every right-hand side is non-decreasing in ``e0`` and in ``-f``,
    and the lower limits no longer depend on ``e0``, so the loose test is monotone: if it
    holds at ``(e0, f)``, it holds at every ``e0' >= e0`` and ``f' <= f``."""
    k, T, SR, I, F = st.k, st.T, st.SR, st.I, st.F
    base = theta - st.IN
    slack = st.slack
    u = list(st.cap)
    u[i0] = e0
    floor = [j for j in range(k + 1)] if loose else [e0 + (j - i0) for j in range(k + 1)]
    for j in range(i0 + 1, k):
        if u[j] < floor[j]:
            return None
    fmin = f[0]
    for _ in range(MAX_PASSES):
        changed = False
        for j in range(i0, k):
            uj = u[j]
            b = base + I[uj] - fmin - F + SR[uj]
            n = j - i0 + 1
            s = 0.0
            for q in range(min(T, n)):
                term = base + I[u[j - q]] - f[q]
                if term <= 0:
                    break
                s += term
            b2 = s - n * F + SR[e0]
            lim = (b if b < b2 else b2) + slack
            if j + 1 == k:
                if SR[st.N] > lim:
                    return None
                continue
            x = bisect.bisect_right(SR, lim) - 1
            if x < u[j + 1]:
                if j == i0 and x <= e0 and not loose:
                    return None
                u[j + 1] = x
        # the forward pass leaves every bound on s_{j+1} met (it only lowers later starts);
        # only a lowering by the order constraints below can break one again
        for j in range(k - 1, i0, -1):
            if u[j] > u[j + 1] - 1:
                u[j] = u[j + 1] - 1
                changed = True
        for j in range(i0 + 1, k):
            if u[j] < floor[j]:
                return None
        if not changed:
            return u
    return u  # unsettled: treated as feasible (never a wrong pruning)


def relaxation_bound(st: Staircase, low: float, high: float, out_of_time: Callable[[], bool] = lambda: False) -> float:
    """The largest target proven infeasible for the staircase relaxation from the start
    (no plan with ``k`` children responds earlier), by bisection between ``low`` (a valid
    bound) and ``high``; ``high`` when even that is infeasible."""
    zero = [0.0] * st.T
    if relaxed_starts(st, high, 0, 0, zero) is None:
        return high
    if relaxed_starts(st, low, 0, 0, zero) is not None:
        return low
    while high - low > BOUND_RTOL * abs(high) and not out_of_time():
        mid = (low + high) / 2
        if not low < mid < high:
            break
        if relaxed_starts(st, mid, 0, 0, zero) is None:
            low = mid
        else:
            high = mid
    return low


def threads_for(st: Staircase, starts: list[int]) -> list[tuple[tuple[int, ...], ...]]:
    """Thread layouts worth trying for fixed starts: the paper's order and round robin."""
    k, T = len(starts), st.T
    return [paper_threads(st.d, starts), canonical_threads([[i for i in range(k) if i % T == t] for t in range(T)])]


def plan_near(st: Staircase, theta: float) -> LoadingPlan | None:
    """A plan from the relaxation's greatest starts at ``theta`` (None if it has none or
    they do not form ``k`` children), its best thread layout among :func:`threads_for`."""
    u = relaxed_starts(st, theta, 0, 0, [0.0] * st.T)
    if u is None:
        return None
    starts = u[: st.k]
    if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] > st.d.last_start_max:
        return None
    plans = [LoadingPlan(tuple(starts), layout) for layout in threads_for(st, starts)]
    return min(plans, key=lambda plan: first_response_ms(st.d, plan))  # the first of equals


@dataclass
class Incumbent:
    """The best plan so far and its first response by the evaluator (ms)."""

    value: float = float("inf")
    plan: LoadingPlan | None = None

    def offer(self, d: LoadingData, plan: LoadingPlan | None) -> bool:
        if plan is None:
            return False
        value = first_response_ms(d, plan)
        if value < self.value:
            self.value, self.plan = value, plan
            return True
        return False

    @property
    def target(self) -> float:
        """Only plans below this are looked for."""
        return self.value * (1 - RTOL)


@dataclass
class CountSearch:
    """Exact depth-first search of one child count ``k > T`` for a plan responding before
    ``theta``; it stops at the first one (offered to ``best``)."""

    st: Staircase
    best: Incumbent
    theta: float
    out_of_time: Callable[[], bool]
    budget: int | None = None
    nodes: int = 0
    seen: dict = field(default_factory=dict)

    def run(self) -> bool | None:
        """True: a plan below ``theta`` was found; False: none exists; None: the node
        budget ran out first. OutOfTime when the time limit stopped it."""
        st = self.st
        try:
            self._dfs(0, 0, [0.0] * st.T, 0.0, [[] for _ in range(st.T)], [0])
        except Found:
            return True
        except OverBudget:
            return None
        return False

    def _dominated(self, i: int, e: int, f: list[float], m: float) -> bool:
        """Whether a state already searched is at least as good (formulations/
        loading_balance.md): the same child and block, threads free no later (sorted), a
        partial response no later; without a fixed cost also one with fewer children placed
        or at a later block (up to ``SCAN`` blocks on). The state is recorded otherwise."""
        loose = self.st.F == 0.0
        last = min(self.st.N, e + SCAN) if loose else e
        for e2 in range(e, last + 1):
            for i2, g, mm in self.seen.get(e2, ()):
                if (i2 == i or (loose and i2 < i)) and mm <= m and all(a <= b for a, b in zip(g, f)):
                    return True
        self.seen.setdefault(e, []).append((i, f, m))
        return False

    def _dfs(self, i: int, e: int, f: list[float], m: float, lanes: list[list[int]], starts: list[int]) -> None:
        """Child ``i`` starts at block ``e``; thread ``t`` is free at ``f[t]`` and has loaded
        ``lanes[t]``; ``m``: the largest ``C_j + I[N] - I[s_j]`` of the children placed."""
        st, d = self.st, self.st.d
        self.nodes += 1
        if self.nodes % 256 == 0 and self.out_of_time():
            raise OutOfTime()
        if self.budget is not None and self.nodes > self.budget:
            raise OverBudget()
        k, N = st.k, st.N
        tail = st.IN - st.I[e]
        free = sorted(f)
        # canonical starts: a child after the first that starts at a block of zero read time
        # and holds more than that block would lose nothing by starting one block later
        # (same loads, a later deadline): only such plans with a single-block child are searched
        single = i > 0 and st.R[e + 1] == st.R[e] and e + 1 <= st.cap[i]
        if i == k - 1:  # the last child: on the thread that frees first
            if e > d.last_start_max or (single and N > e + 1):
                return
            t = f.index(free[0])
            c = f[t] + st.load(e, N)
            if max(m, c + tail) >= self.theta:
                return
            lanes[t].append(i)
            plan = LoadingPlan(tuple(starts), canonical_threads(lanes))
            lanes[t].pop()
            self.best.offer(d, plan)
            if first_response_ms(d, plan) < self.theta:
                raise Found()
            return
        u = relaxed_starts(st, self.theta, i, e, free)
        if u is None or self._dominated(i, e, free, m):
            return
        tried = set()
        for t in sorted(range(st.T), key=f.__getitem__, reverse=True):
            ft = f[t]
            if ft in tried:  # identical threads: one of equal free times suffices
                continue
            tried.add(ft)
            # the loose test from the child's state with the shortest possible load on thread
            # t is monotone in the child's end (see relaxed_starts): ends below the first one
            # it accepts are pruned at once, by bisection
            g = sorted(f[:t] + f[t + 1:] + [ft + st.load(e, e + 1)])
            top = e + 1 if single else u[i + 1]
            lo, hi = e + 1, top + 1
            while lo < hi:
                mid = (lo + hi) // 2
                if relaxed_starts(st, self.theta, i + 1, mid, g, loose=True) is None:
                    lo = mid + 1
                else:
                    hi = mid
            for x in range(top, lo - 1, -1):
                c = ft + st.load(e, x)
                if c + tail >= self.theta:
                    continue
                f[t] = c
                lanes[t].append(i)
                starts.append(x)
                self._dfs(i + 1, x, f, max(m, c + tail), lanes, starts)
                starts.pop()
                lanes[t].pop()
                f[t] = ft


@dataclass
class CountsResult:
    """The best plan, the proven bound (ms), whether every count is closed, per count what
    was done (``case``, bounds, ``nodes``, ``closed``), and the search nodes in all."""

    plan: LoadingPlan | None
    bound: float
    closed: bool
    counts: dict = field(default_factory=dict)
    nodes: int = 0


def solve_counts(d: LoadingData, out_of_time: Callable[[], bool] = lambda: False) -> CountsResult:
    """The exact first response over every allowed count (see the module docstring)."""
    counts = list(d.child_counts())
    best = Incumbent()
    bounds: dict[int, float] = {}
    info: dict[int, dict] = {}
    closed = True
    for k in [k for k in counts if k <= d.threads]:
        if out_of_time():
            bounds[k] = max(first_child_bound(d, d.slowdown(k)), packed_bound(d, k))
            closed = False
            info[k] = {"case": 1, "closed": False}
            continue
        part = min_max_partition(d, k, with_inference=True)
        best.offer(d, LoadingPlan(part.starts, canonical_threads([[i] for i in range(k)])))
        bounds[k] = part.bound
        info[k] = {"case": 1, "closed": True, "bound": part.bound, "value": part.value}
    case2 = [k for k in counts if k > d.threads]
    sts = {k: Staircase(d, k) for k in case2}
    low = {k: max(first_child_bound(d, sts[k].sigma), packed_bound(d, k)) for k in case2}
    for k in case2:
        high = best.value if best.plan is not None else sts[k].horizon
        low[k] = relaxation_bound(sts[k], min(low[k], high), high, out_of_time)
        info[k] = {"case": 2, "relaxation_bound": low[k]}
    # a plan per open count from the relaxation just above its bound
    for k in sorted(case2, key=low.__getitem__):
        if low[k] >= best.target or out_of_time():
            continue
        for factor in (1e-6, 1e-4, 1e-3, 1e-2):
            if best.offer(d, plan_near(sts[k], low[k] * (1 + factor))):
                break
    # without a fixed cost, splitting a child in two on its thread never delays the response
    # (formulations/loading_balance.md): every count above T is no better than the largest
    searched = [max(case2)] if case2 and d.fixed_ms == 0.0 else case2
    # local search (polish.py) from the relaxation's starts a little above the bound and from
    # the incumbent: plans only, each re-evaluated by the evaluator
    for k in sorted(searched, key=low.__getitem__)[:POLISH_COUNTS]:
        for factor in POLISH_FROM:
            if low[k] >= best.target or out_of_time():
                break
            plan = plan_near(sts[k], low[k] * (1 + factor))
            if plan is not None:
                best.offer(d, polish(d, plan, out_of_time=out_of_time))
    if best.plan is not None and best.plan.k > d.threads and not out_of_time():
        best.offer(d, polish(d, best.plan, out_of_time=out_of_time))
    nodes = 0
    split = {k: SPLIT for k in case2}
    budget = {k: NODE_BUDGET for k in case2}
    upper: dict[int, bool] = {}
    seeks: dict[int, int] = {}
    hard = False
    try:
        while True:
            open_ = [k for k in searched if low[k] + sts[k].slack < best.target]
            if not open_:
                break
            k = min(open_, key=low.__getitem__)
            # after a search over its budget, one that looks for any better plan (at the
            # incumbent's target)
            seeking = upper.pop(k, False)
            if seeking:
                seeks[k] = seeks.get(k, 0) + 1
            share = SEEK[(seeks[k] - 1) % len(SEEK)] if seeking else split[k]
            theta = low[k] + share * (best.target - low[k])
            if not low[k] + sts[k].slack < theta < best.target or share >= 1.0:
                theta = best.target
            search = CountSearch(sts[k], best, theta, out_of_time, budget[k])
            try:
                found = search.run()
            finally:
                nodes += search.nodes
                info[k]["nodes"] = info[k].get("nodes", 0) + search.nodes
            if found:  # a plan below theta: polish it too
                assert best.plan is not None  # the search offered it to best before saying so
                best.offer(d, polish(d, best.plan, out_of_time=out_of_time, pairs=hard))
            elif found is None:  # over its node budget: no information
                if not seeking:  # a test closer to the bound next, with more nodes, after
                    split[k] /= 4  # one that looks for a better plan
                    budget[k] *= 2
                    upper[k] = True
                    if not hard:  # a hard instance: the slower two-cut moves too, from now on
                        hard = True
                        if best.plan is not None:  # no plan yet: none to polish
                            best.offer(d, polish(d, best.plan, out_of_time=out_of_time, pairs=True))
            elif not found:  # no plan of k children responds before theta (up to rounding)
                low[k] = theta - sts[k].slack
                split[k] = min(1.0, split[k] * 4)
    except OutOfTime:
        closed = False
    for k in case2:
        if k not in searched:  # no better than the largest count (no fixed cost)
            low[k] = max(low[k], low[max(case2)])
        bounds[k] = low[k]
        info[k]["bound"] = low[k]
        info[k]["closed"] = low[k] + sts[k].slack >= best.target
        closed = closed and info[k]["closed"]
    bound = min(bounds.values()) if bounds else float("inf")
    if best.plan is not None:
        bound = min(bound, best.target)
    return CountsResult(best.plan, bound, closed and best.plan is not None, info, nodes)
