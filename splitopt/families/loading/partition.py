"""Exact min-max contiguous partition by parametric search (``formulations/loading_balance.md``,
"Min-max partition").

For a fixed number of children ``k`` the cost of a child of blocks ``[s, e)`` is

* ``balance``:  ``c(s, e) = F + sigma_k * (R[e] - R[s])`` (its load time);
* ``case1``:    ``c(s, e) = F + sigma_k * (R[e] - R[s]) + (I[N] - I[s])`` (its load time plus the
  inference of every block from ``s`` on: with ``k <= T`` each child loads on its own thread
  from time 0, and the first response is the largest of these),

with ``R``, ``I`` the prefix sums of read and inference times, ``F`` the per-child fixed cost
and ``sigma_k`` the storage slowdown. Both are *monotone*: a child that contains another
costs at least as much. So (1) splitting a child never raises the largest cost, and (2)
the greedy that walks from the last block backwards, making each child as long as the
threshold allows, uses the fewest children of any partition whose costs are all at most
the threshold, and its last child is the longest possible (so it holds the trainable tail
whenever any such partition's does). Hence "some partition into exactly k children has
every cost <= theta" iff the greedy needs at most k children and ``k <= N - m + 1``.

Bisection on theta between a lower bound ``L`` (no partition does better) and the largest
cost ``U`` of a known partition: a feasible theta lowers ``U`` to the greedy partition's
largest cost; an infeasible one raises ``L`` to theta, which proves every partition costs
more. It stops when ``U - L <= RTOL * U + ATOL``: the partition is optimal within that
tolerance, ``L`` is the proven bound. Each greedy step is one binary search over a monotone
prefix array, so a threshold costs ``O(k log N)`` and a solve ``O(k log N log(U/tol))``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from splitopt.families.loading.bound import first_child_bound, heaviest_child_bound
from splitopt.families.loading.data import LoadingData

#: stop when the proven bound is within this relative distance of the partition's cost
RTOL = 1e-12
ATOL_MS = 1e-12
#: bisection steps at most (64-bit floats halve an interval at most about 1100 times)
MAX_STEPS = 2000


@dataclass(frozen=True)
class Partition:
    """``starts`` of the children, their largest cost ``value`` (ms) and the proven lower
    bound ``bound`` (ms) on every partition into ``k`` children."""

    starts: tuple[int, ...]
    value: float
    bound: float


class SegmentCost:
    """``c(s, e)`` of one objective and child count (see the module docstring)."""

    def __init__(self, d: LoadingData, k: int, with_inference: bool):
        self.d, self.k = d, k
        self.sigma = d.slowdown(k)
        self.with_inference = with_inference
        # key[s] is nondecreasing in s and c(s, e) <= theta  <=>  key[s] >= need(e, theta)
        self.key = self.sigma * d.read_prefix + (d.infer_prefix if with_inference else 0.0)

    def __call__(self, s: int, e: int) -> float:
        d = self.d
        cost = d.fixed_ms + self.sigma * (float(d.read_prefix[e]) - float(d.read_prefix[s]))
        if self.with_inference:
            cost += d.total_infer_ms - float(d.infer_prefix[s])
        return cost

    def longest(self, e: int, theta: float) -> int | None:
        """The smallest start ``s < e`` with ``c(s, e) <= theta`` (None if even ``[e-1, e)``
        costs more)."""
        d = self.d
        need = d.fixed_ms + self.sigma * float(d.read_prefix[e]) - theta
        if self.with_inference:
            need += d.total_infer_ms
        s = int(np.searchsorted(self.key, need, side="left"))
        s = min(max(s, 0), e)
        while s > 0 and self(s - 1, e) <= theta:  # floating point: the rearranged test may differ
            s -= 1
        while s < e and self(s, e) > theta:
            s += 1
        return s if s < e else None


def greedy(cost: SegmentCost, theta: float, limit: int) -> list[int] | None:
    """The fewest children with every cost <= ``theta``, built from the last block
    backwards (starts in increasing order), or None when more than ``limit`` are needed or
    the trainable tail cannot fit."""
    d = cost.d
    starts: list[int] = []
    e = d.n
    while e > 0:
        s = cost.longest(e, theta)
        if s is None or (not starts and s > d.last_start_max) or len(starts) == limit:
            return None
        starts.append(s)
        e = s
    return starts[::-1]


def split_to(cost: SegmentCost, starts: list[int], k: int) -> list[int]:
    """``starts`` refined to exactly ``k`` children (costs never rise: monotone): the most
    expensive child that can be split is halved by read time, again and again."""
    d = cost.d
    starts = list(starts)
    while len(starts) < k:
        ends = starts[1:] + [d.n]
        best = None
        for j, (s, e) in enumerate(zip(starts, ends)):
            last_ok = (d.last_start_max if j == len(starts) - 1 else e - 1)
            if last_ok > s and (best is None or cost(s, e) > best[0]):
                best = (cost(s, e), j, s, e, last_ok)
        if best is None:
            raise ValueError(f"cannot split into {k} children")
        _, j, s, e, last_ok = best
        middle = (float(d.read_prefix[s]) + float(d.read_prefix[e])) / 2
        x = int(np.searchsorted(d.read_prefix, middle, side="left"))
        x = min(max(x, s + 1), last_ok)
        starts.insert(j + 1, x)
    return starts


def lower_bound(cost: SegmentCost) -> float:
    """A cost no partition into ``k`` children beats: the heaviest-child bound, and with
    inference the first child's (``bound.py``)."""
    bound = heaviest_child_bound(cost.d, cost.sigma, cost.k)
    return max(bound, first_child_bound(cost.d, cost.sigma)) if cost.with_inference else bound


def min_max_partition(d: LoadingData, k: int, with_inference: bool) -> Partition:
    """The best partition into exactly ``k`` children (``1 <= k <= N - m + 1``) by the
    bisection of the module docstring."""
    if not 1 <= k <= d.last_start_max + 1:
        raise ValueError(f"k = {k} children is not possible with {d.n} blocks and a tail of {d.tail}")
    cost = SegmentCost(d, k, with_inference)

    def largest(starts: list[int]) -> float:
        return max(cost(s, e) for s, e in zip(starts, starts[1:] + [d.n]))

    best = split_to(cost, [0], k)
    upper = largest(best)
    low = min(lower_bound(cost), upper)
    for _ in range(MAX_STEPS):
        if upper - low <= RTOL * abs(upper) + ATOL_MS:
            break
        theta = (low + upper) / 2
        if not low < theta < upper:  # the interval is down to adjacent doubles
            break
        found = greedy(cost, theta, k)
        if found is None:
            low = theta
        else:
            found = split_to(cost, found, k)
            value = largest(found)
            if value >= upper:  # cannot happen (value <= theta < upper); guards a floating-point corner
                break
            best, upper = found, value
    return Partition(tuple(best), upper, min(low, upper))


def counts_to_solve(d: LoadingData, with_inference: bool) -> list[int]:
    """The allowed child counts whose optimum may be the overall one. With inference (the
    first response of Case 1) the counts up to T; otherwise every allowed count below T
    (each has its own slowdown) and, of those >= T (one slowdown), the largest, since more
    children never raise the largest cost."""
    counts = list(d.child_counts())
    if with_inference:
        return [k for k in counts if k <= d.threads]
    below = [k for k in counts if k < d.threads]
    return below + ([max(counts)] if counts and max(counts) >= d.threads else [])


def best_partition(d: LoadingData, counts: list[int], with_inference: bool,
                   out_of_time: Callable[[], bool] = lambda: False) -> tuple[Partition | None, bool]:
    """The best min-max partition over ``counts`` (its ``bound``: the least bound over all of
    them) and whether ``out_of_time`` stopped it early. Counts are tried in the order of their
    cheap bounds, and a count whose cheap bound reaches the incumbent is not solved."""
    cheap = {k: lower_bound(SegmentCost(d, k, with_inference)) for k in counts}
    best: Partition | None = None
    bounds: list[float] = []
    stopped = False
    for k in sorted(counts, key=cheap.__getitem__):
        if best is not None and cheap[k] >= best.value:  # cannot beat the incumbent
            bounds.append(cheap[k])
            continue
        if out_of_time():
            bounds.append(cheap[k])
            stopped = True
            continue
        part = min_max_partition(d, k, with_inference)
        bounds.append(part.bound)
        if best is None or part.value < best.value:
            best = part
    if best is None:
        return None, stopped
    return Partition(best.starts, best.value, min(min(bounds), best.value)), stopped
