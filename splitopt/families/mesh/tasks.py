"""The tasks of a mesh plan (compute per layer, one transfer per hop of every tensor's
multicast tree) and their semi-active schedule for given per-resource orders."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence, overload

from splitopt.core.errors import InvalidPlan
from splitopt.families.mesh.data import MeshData, transfer_id


@dataclass
class TaskSpec:
    id: str
    kind: str  # "compute" | "transfer"
    resource: str
    duration: float
    preds: list[str]
    key: tuple
    label: str
    tensor: str = ""
    pair: tuple[str, str] | None = None

    def hop(self) -> str:
        """A transfer's hop, ``source->target`` (:func:`build_tasks` gives every transfer its pair)."""
        assert self.pair is not None, f"task {self.id} is not a transfer"
        return f"{self.pair[0]}->{self.pair[1]}"


def build_tasks(data: MeshData, device_map: Mapping[str, str], durations: Mapping | None = None) -> dict[str, TaskSpec]:
    """The tasks of an assignment with their data predecessors; durations in ms (or in
    the units of ``durations``, a map ``("c", layer, device)`` / ``("t", tensor, pair)``
    -> duration, used by the CP-SAT backend for its integer schedule)."""
    tasks: dict[str, TaskSpec] = {}
    arrival: dict[tuple[str, str], str | None] = {}  # (tensor, device) -> task that makes it available
    for t in data.tensors:
        a = data.producer_device(device_map, t)
        arrival[(t, a)] = None if data.is_raw[t] else t
        for pair, hop in data.tree(device_map, t):
            u, v = pair
            tid = transfer_id(t, pair)
            pred = arrival[(t, u)]
            dur = data.transfer_ms[(t, pair)] if durations is None else durations[("t", t, pair)]
            tasks[tid] = TaskSpec(tid, "transfer", data.resource_of[pair], dur, [] if pred is None else [pred],
                                   (data.tensor_pos[t], hop, data.link_index[pair]), t, t, pair)
            arrival[(t, v)] = tid
    for n in data.layers:
        d = device_map[n]
        preds = []
        for t in data.layer_inputs[n]:
            src = arrival[(t, d)]
            if src is not None:
                preds.append(src)
        dur = data.compute_ms[(n, d)] if durations is None else durations[("c", n, d)]
        tasks[n] = TaskSpec(n, "compute", d, dur, preds, (data.tensor_pos[n], 0, -1), n, n)
    return tasks


@overload
def semi_active_times(tasks: Mapping[str, TaskSpec], order: Mapping[str, Sequence[str]],
                      partial: Literal[False] = False) -> dict[str, tuple[float, float]] | None: ...


@overload
def semi_active_times(tasks: Mapping[str, TaskSpec], order: Mapping[str, Sequence[str]],
                      partial: Literal[True]) -> dict[str, tuple[float, float]]: ...


def semi_active_times(tasks: Mapping[str, TaskSpec], order: Mapping[str, Sequence[str]],
                      partial: bool = False) -> dict[str, tuple[float, float]] | None:
    """Start and end of every task in the semi-active schedule of the per-resource
    orders (listed tasks first, the rest in default order); None if the orders and the
    data dependencies form a cycle (``partial``: the tasks placed before the cycle stopped
    the schedule, for :func:`deadlock_error`). Zero-duration tasks occupy no resource."""
    prev = _resource_predecessors(tasks, order)
    indegree = {tid: len(t.preds) + (1 if tid in prev else 0) for tid, t in tasks.items()}
    succ: dict[str, list[str]] = {tid: [] for tid in tasks}
    for tid, t in tasks.items():
        for p in t.preds:
            succ[p].append(tid)
        if tid in prev:
            succ[prev[tid]].append(tid)
    heap = [(t.key, tid) for tid, t in tasks.items() if indegree[tid] == 0]
    heapq.heapify(heap)
    times: dict[str, tuple[float, float]] = {}
    while heap:
        _, tid = heapq.heappop(heap)
        t = tasks[tid]
        start = 0.0
        for p in t.preds:
            start = max(start, times[p][1])
        if tid in prev:
            start = max(start, times[prev[tid]][1])
        times[tid] = (start, start + t.duration)
        for s in succ[tid]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(heap, (tasks[s].key, s))
    if len(times) < len(tasks) and not partial:
        return None
    return times


def _resource_predecessors(tasks: Mapping[str, TaskSpec], order: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Per task, the task just before it on its resource (listed tasks first, the rest in
    default order; zero-duration tasks occupy no resource)."""
    chains: dict[str, list[str]] = {}
    for res, ids in order.items():
        chains[res] = [tid for tid in ids if tasks[tid].duration > 0]
    rest: dict[str, list[TaskSpec]] = {}
    for task in tasks.values():
        if task.duration > 0:
            rest.setdefault(task.resource, []).append(task)
    for res, items in rest.items():
        listed = set(chains.get(res, ()))
        chains[res] = chains.get(res, []) + [t.id for t in sorted(items, key=lambda t: t.key) if t.id not in listed]
    prev: dict[str, str] = {}
    for ids in chains.values():
        for a, b in zip(ids, ids[1:]):
            prev[b] = a
    return prev


#: tasks of a deadlock's cycle named in its message at most
NAMED_IN_DEADLOCK = 6


def deadlock_error(tasks: Mapping[str, TaskSpec], order: Mapping[str, Sequence[str]],
                   scheduled: Mapping[str, object]) -> InvalidPlan:
    """The one-line error of a deadlock (``semi_active_times`` returned None; ``scheduled``:
    the tasks it could place, none of a cycle), naming the tasks of one cycle of waits:
    each waits for the next, as an input (data) or as the task before it on its device
    or link (the plan's order)."""
    prev = _resource_predecessors(tasks, order)

    def waits_for(tid: str) -> str:
        """An unscheduled task ``tid`` waits for (one exists: else it had been placed)."""
        t = tasks[tid]
        for p in t.preds + ([prev[tid]] if tid in prev else []):
            if p not in scheduled:
                return p
        raise AssertionError(f"task {tid} waits for nothing")

    def named(tid: str) -> str:
        t = tasks[tid]
        if t.kind == "compute":
            return f"layer '{t.label}' on '{t.resource}'"
        return f"tensor '{t.tensor}' {t.hop()}"

    walk: list[str] = [next(tid for tid in tasks if tid not in scheduled)]
    seen = {walk[0]: 0}
    while True:
        nxt = waits_for(walk[-1])
        if nxt in seen:
            cycle = walk[seen[nxt]:]
            break
        seen[nxt] = len(walk)
        walk.append(nxt)
    shown = " waits for ".join(named(tid) for tid in cycle[:NAMED_IN_DEADLOCK])
    more = f" ... ({len(cycle)} tasks)" if len(cycle) > NAMED_IN_DEADLOCK else ""
    return InvalidPlan(f"plan.order: the orders contradict the data dependencies (deadlock): {shown}"
                       f"{more} waits for {named(cycle[0])}; every resource's order must follow the data flow")


def schedule_makespan(data: MeshData, device_map: Mapping[str, str], order: Mapping[str, Sequence[str]],
                      durations: Mapping | None = None) -> float:
    """Makespan of the semi-active schedule (ms, or the units of ``durations``); raises
    InvalidPlan on a deadlock."""
    tasks = build_tasks(data, device_map, durations)
    times = semi_active_times(tasks, order)
    if times is None:
        raise deadlock_error(tasks, order, semi_active_times(tasks, order, partial=True))
    return max((e for _, e in times.values()), default=0.0)
