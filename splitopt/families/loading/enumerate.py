"""Every loading plan, for the brute-force backend: every set of child starts with
``1 <= k <= min(N, children.max)`` children whose last child holds the trainable tail
(every start at or before block ``N - m``: the others break that limit whatever else
they do, and skipping them lets brute force take an instance whose tail leaves few
plans), and (for the latency objective) every way
to load the ``k`` children on at most ``T`` identical threads, each thread in some order.
The balance objective does not depend on the load order: one order per partition."""

from __future__ import annotations

import itertools
import math
from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.families.loading.data import data
from splitopt.families.loading.plan import LoadingPlan, canonical_threads, plan_from_starts
from splitopt.families.loading.settings import LoadingInstance


def lah(n: int, j: int) -> int:
    """Ways to split ``n`` labelled items into ``j`` non-empty ordered lists, the lists
    unlabelled (Lah number)."""
    return math.comb(n - 1, j - 1) * math.factorial(n) // math.factorial(j)


def thread_layouts(k: int, threads: int) -> Iterator[tuple[tuple[int, ...], ...]]:
    """Every way to put children ``0..k-1`` on at most ``threads`` identical threads,
    each in an order (canonical form: threads sorted by their first child)."""
    def place(i: int, lists: list[list[int]]) -> Iterator[tuple[tuple[int, ...], ...]]:
        if i == k:
            yield canonical_threads(lists)
            return
        for lst in lists:  # into an existing thread, at any position
            for pos in range(len(lst) + 1):
                lst.insert(pos, i)
                yield from place(i + 1, lists)
                lst.pop(pos)
        if len(lists) < threads:  # or a new thread
            lists.append([i])
            yield from place(i + 1, lists)
            lists.pop()

    yield from place(0, [])


def count_plans(n: int, k_max: int, threads: int, orders: bool, last_start: int | None = None) -> int:
    """How many plans :func:`enumerate_plans` lists: ``k - 1`` cuts among the blocks
    ``1 .. last_start`` (default ``N - 1``: any), times the thread layouts (latency)."""
    cuts = n - 1 if last_start is None else last_start
    total = 0
    for k in range(1, min(n, k_max) + 1):
        layouts = sum(lah(k, j) for j in range(1, min(k, threads) + 1)) if orders else 1
        total += math.comb(cuts, k - 1) * layouts
    return total


def enumerate_plans(inst: LoadingInstance, limit: int) -> Iterator[LoadingPlan]:
    """Every plan (see the module docstring); NotApplicable when there are more than
    ``limit``."""
    d = data(inst)
    orders = inst.objective == "latency"
    count = count_plans(d.n, d.k_max, d.threads, orders, d.last_start_max)
    if count > limit:
        raise NotApplicable(f"brute-force: {count:,} loading plans is too many (limit {limit:,})")

    def walk() -> Iterator[LoadingPlan]:
        for k in range(1, min(d.n, d.k_max) + 1):
            for cuts in itertools.combinations(range(1, d.last_start_max + 1), k - 1):
                starts = (0,) + cuts
                if not orders:
                    yield plan_from_starts(d, starts)
                    continue
                for layout in thread_layouts(k, d.threads):
                    yield LoadingPlan(starts, layout)

    return walk()
