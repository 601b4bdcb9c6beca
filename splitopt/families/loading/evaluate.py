"""The one evaluator of loading plans (``formulations/loading_balance.md``).

Each thread loads its children one after another from time 0 (a load never waits: its
duration is fixed, so starting later never helps). Inference of child ``i`` starts when
child ``i`` is loaded and child ``i-1``'s inference has ended; the first response is the
end of the last child's inference. ``k <= T`` is the paper's Case 1 (every child on its own
thread, all loading at once), ``k > T`` its Case 2 (inference of loaded children overlaps
the loading of the rest); one schedule covers both.

Objectives: ``latency``: the first-response time (ms, load plus inference: the paper's
``T_total`` of a cold start); ``balance``: the heaviest child's load time (ms, the paper's
Eq. 1 balance). Limits: ``children.min <= k <= children.max``, and the last child holds the
trainable tail (it starts at or before block ``N - m``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from splitopt.core.metrics import FamilyMetrics
from splitopt.core.schedule import Task
from splitopt.families.loading.data import LoadingData, data
from splitopt.families.loading.plan import LoadingPlan, check_plan
from splitopt.families.loading.settings import LoadingInstance


@dataclass(frozen=True)
class ChildCost:
    """One child model: blocks ``first .. last`` (names), bytes on disk, load and
    inference times (ms), the thread that loads it and when (ms)."""

    index: int
    first: str
    last: str
    blocks: int
    bytes: float
    load_ms: float
    infer_ms: float
    thread: int
    load_start_ms: float
    load_end_ms: float
    infer_start_ms: float
    infer_end_ms: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LoadingMetrics(FamilyMetrics):
    """What a loading plan costs (ms). ``monolithic_ms``: the first response of the whole
    model as one child (load then inference), the reference of ``speedup``."""

    objective: str
    first_response_ms: float
    heaviest_load_ms: float
    loads_done_ms: float
    monolithic_ms: float
    k: int
    threads: int
    slowdown: float
    children: tuple[ChildCost, ...]
    schedule: tuple[Task, ...]

    @property
    def objective_ms(self) -> float:
        return self.heaviest_load_ms if self.objective == "balance" else self.first_response_ms

    @property
    def case(self) -> int:
        """The paper's case: 1 when every child has its own thread (k <= T), else 2."""
        return 1 if self.k <= self.threads else 2

    @property
    def speedup(self) -> float:
        """Monolithic first response over this plan's."""
        return self.monolithic_ms / self.first_response_ms if self.first_response_ms > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "objective_ms": self.objective_ms,
                "first_response_ms": self.first_response_ms, "heaviest_load_ms": self.heaviest_load_ms,
                "loads_done_ms": self.loads_done_ms, "monolithic_ms": self.monolithic_ms, "speedup": self.speedup,
                "k": self.k, "threads": self.threads, "case": self.case, "slowdown": self.slowdown,
                "children": [c.to_dict() for c in self.children], "schedule": [t.to_dict() for t in self.schedule],
                **self.verdict()}


def limit_violations(d: LoadingData, starts: tuple[int, ...]) -> list[str]:
    """The limits a plan with these child starts breaks (one line each)."""
    out = []
    k = len(starts)
    if k < d.k_min:
        out.append(f"children.min: {k} children, at least {d.k_min} required")
    if k > d.k_max:
        out.append(f"children.max: {k} children, at most {d.k_max} allowed")
    if starts[-1] > d.last_start_max:
        out.append(f"trainable_tail: the last child starts at block '{d.blocks[starts[-1]]}' (index {starts[-1]}); "
                   f"the last {d.tail} blocks must all sit in it (start at index <= {d.last_start_max})")
    return out


def first_response_ms(d: LoadingData, plan: LoadingPlan) -> float:
    """The first response of ``plan`` (ms), without building the metrics (for search)."""
    return _timeline(d, plan)[2]


def _timeline(d: LoadingData, plan: LoadingPlan):
    k = plan.k
    ranges = plan.ranges(d.n)
    load = [d.load_ms(a, b, k) for a, b in ranges]
    load_start, load_end, thread_of = [0.0] * k, [0.0] * k, [0] * k
    for t, children in enumerate(plan.threads):
        at = 0.0
        for i in children:
            load_start[i], thread_of[i] = at, t
            at += load[i]
            load_end[i] = at
    at = 0.0
    infer_start, infer_end = [0.0] * k, [0.0] * k
    for i, (a, b) in enumerate(ranges):
        infer_start[i] = max(at, load_end[i])
        at = infer_start[i] + d.infer_sum(a, b)
        infer_end[i] = at
    return load, (load_start, load_end, thread_of, infer_start, infer_end), at


def evaluate(inst: LoadingInstance, plan: LoadingPlan) -> LoadingMetrics:
    """Evaluate a loading plan; InvalidPlan if malformed, the broken limits listed."""
    check_plan(inst, plan)
    d = data(inst)
    load, (ls, le, th, is_, ie), response = _timeline(d, plan)
    children, tasks = [], []
    for i, (a, b) in enumerate(plan.ranges(d.n)):
        children.append(ChildCost(i, d.blocks[a], d.blocks[b - 1], b - a, float(d.block_bytes[a:b].sum()), load[i],
                                  d.infer_sum(a, b), th[i], ls[i], le[i], is_[i], ie[i]))
        tasks.append(Task(f"thread {th[i]}", "transfer", f"load child {i}", ls[i], le[i]))
        tasks.append(Task(d.device, "compute", f"child {i}", is_[i], ie[i]))
    monolithic = d.load_ms(0, d.n, 1) + d.total_infer_ms
    return LoadingMetrics(
        objective=inst.objective, first_response_ms=response, heaviest_load_ms=max(load),
        loads_done_ms=max(le), monolithic_ms=monolithic, k=plan.k, threads=d.threads, slowdown=d.slowdown(plan.k),
        children=tuple(children), schedule=tuple(tasks), violations=tuple(limit_violations(d, plan.starts)))
