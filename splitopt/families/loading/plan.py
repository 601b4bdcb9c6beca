"""Loading plans: where each child model starts and which thread loads which child in
which order; the JSON form (``splitopt-loading-plan/1``) and the paper's default load
order (Alg. 2).

A plan document::

    {"format": "splitopt-loading-plan/1", "instance": "resnet152_host",
     "children": ["conv1", "layer2.0.conv1", "layer3.0.conv1"],   # first block of each child
     "threads": [[0, 2], [1]]}                                     # per thread, children in load order

``children`` lists the first block (layer) of every child in execution order; the first
is the model's first block. ``threads`` (optional; null or absent: the paper's order) lists,
for each thread used, the children it loads one after another from time 0; threads are
identical, so their order in the list does not matter (plans compare equal when they
differ only in it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from splitopt.core.errors import InvalidPlan
from splitopt.core.jsonfile import shown
from splitopt.core.plan import check_plan_header
from splitopt.families.loading.data import LoadingData, data
from splitopt.families.loading.settings import PLAN_FORMAT, LoadingInstance
FIELDS = ("format", "instance", "children", "threads", "objective_ms", "note")


@dataclass(frozen=True)
class LoadingPlan:
    """``starts``: the first block index of each child (``starts[0] == 0``, increasing);
    ``threads``: per thread used, the child indices it loads in order (each child once,
    threads sorted by their first child: the canonical form)."""

    starts: tuple[int, ...]
    threads: tuple[tuple[int, ...], ...]

    @property
    def k(self) -> int:
        return len(self.starts)

    def ranges(self, n: int) -> list[tuple[int, int]]:
        """``(start, end)`` block ranges of the children (end exclusive)."""
        return list(zip(self.starts, list(self.starts[1:]) + [n]))

    def key(self) -> tuple:
        return (self.starts, self.threads)

    def to_dict(self, inst: LoadingInstance) -> dict[str, Any]:
        d = data(inst)
        return {"format": PLAN_FORMAT, "instance": inst.name, "children": [d.blocks[s] for s in self.starts],
                "threads": [list(t) for t in self.threads]}


def canonical_threads(threads: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    """Threads with no child dropped, the rest sorted by their first child."""
    return tuple(sorted((tuple(t) for t in threads if len(t)), key=lambda t: t[0]))


def paper_threads(d: LoadingData, starts: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """The paper's execution policy (Alg. 2): the first ``T`` children start loading at
    once, each later child (in index order) on the thread that frees first (ties: the
    lower thread). With ``k <= T`` (Case 1) every child has its own thread."""
    k = len(starts)
    ends = list(starts[1:]) + [d.n]
    free = [(0.0, t) for t in range(min(d.threads, k))]
    heapq.heapify(free)
    threads: list[list[int]] = [[] for _ in range(len(free))]
    for i in range(k):
        at, t = heapq.heappop(free)
        threads[t].append(i)
        heapq.heappush(free, (at + d.load_ms(starts[i], ends[i], k), t))
    return canonical_threads(threads)


def plan_from_starts(d: LoadingData, starts: Sequence[int], threads: Sequence[Sequence[int]] | None = None) -> LoadingPlan:
    """A plan from child start blocks, with the paper's load order unless ``threads`` is given."""
    starts = tuple(int(s) for s in starts)
    return LoadingPlan(starts, paper_threads(d, starts) if threads is None else canonical_threads(threads))


def plan_from_dict(inst: LoadingInstance, raw: Any, where: str = "plan") -> LoadingPlan:
    """Parse and check a loading plan; InvalidPlan names the field."""
    d = data(inst)
    check_plan_header(raw, inst.name, where, PLAN_FORMAT, FIELDS)
    names = raw.get("children")
    if not isinstance(names, list) or not names or not all(isinstance(b, str) for b in names):
        raise InvalidPlan(f"{where}.children: must list the first block (layer name) of each child, got {shown(names)}")
    index = {b: i for i, b in enumerate(d.blocks)}
    starts = []
    for j, name in enumerate(names):
        if name not in index:
            raise InvalidPlan(f"{where}.children[{j}]: unknown block (layer) {shown(name)}")
        starts.append(index[name])
    threads = raw.get("threads")
    if threads is not None:
        if not isinstance(threads, list) or not all(isinstance(t, list) for t in threads) or not all(
                isinstance(c, int) and not isinstance(c, bool) for t in threads for c in t):
            raise InvalidPlan(f"{where}.threads: must be a list of lists of child indices (or null), got {shown(threads)}")
        if len(threads) > d.threads:
            raise InvalidPlan(f"{where}.threads: {len(threads)} threads; the instance has {d.threads}")
    plan = plan_from_starts(d, starts, threads) if _starts_ok(starts, d) else LoadingPlan(tuple(starts), ())
    check_plan(inst, plan, where, threads is not None)
    return plan


def _starts_ok(starts: Sequence[int], d: LoadingData) -> bool:
    return bool(starts) and starts[0] == 0 and all(a < b for a, b in zip(starts, starts[1:])) and starts[-1] < d.n


def check_plan(inst: LoadingInstance, plan: LoadingPlan, where: str = "plan", check_threads: bool = True) -> None:
    """Raise InvalidPlan unless the plan is well-formed: children start at increasing
    blocks from the first, and the threads (at most ``T``) load every child exactly once.
    Limits (bounds on k, the trainable tail) are not checked here: the evaluator reports
    them."""
    d = data(inst)
    starts = plan.starts
    for j, b in enumerate(starts):  # plans built in Python need not come from plan_from_dict
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b < d.n:
            raise InvalidPlan(f"{where}.children[{j}]: must be a block index in [0, {d.n - 1}], got {shown(b)}")
    for t, kids in enumerate(plan.threads):
        for c in kids:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                raise InvalidPlan(f"{where}.threads[{t}]: must list child indices, got {shown(c)}")
    if not starts or starts[0] != 0:
        raise InvalidPlan(f"{where}.children[0]: the first child must start at the first block '{d.blocks[0]}'")
    for j, (a, b) in enumerate(zip(starts, starts[1:])):
        if b <= a:
            raise InvalidPlan(f"{where}.children[{j + 1}]: '{d.blocks[b]}' does not come after '{d.blocks[a]}' "
                              f"in execution order (children are contiguous runs of blocks, in order)")
    if not check_threads:
        return
    if len(plan.threads) > d.threads:
        raise InvalidPlan(f"{where}.threads: {len(plan.threads)} threads; the instance has {d.threads}")
    seen = sorted(c for t in plan.threads for c in t)
    if seen != list(range(plan.k)):
        raise InvalidPlan(f"{where}.threads: must load every child 0..{plan.k - 1} exactly once, got "
                          f"{shown([list(t) for t in plan.threads])}")
