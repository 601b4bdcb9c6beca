"""Helpers shared by the multiview methods and programs (allowed cut points, simple
orders), and the start plan."""

from __future__ import annotations

from typing import Mapping

from splitopt.families.multiview.data import MEMORY_RTOL, data
from splitopt.families.multiview.evaluate import view_costs
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance


def allowed_cut(inst: MultiviewInstance, fusion: str, width: int | None, sensor: str, cut: str) -> bool:
    """Whether a view may use ``cut``: it runs every required layer and fits the memory."""
    c = view_costs(inst, fusion, width, sensor, cut)
    return not c.missing_required and c.memory_bytes <= c.memory_limit * (1 + MEMORY_RTOL)


def best_orders(inst: MultiviewInstance, plan_cuts: Mapping[str, str], fusion: str, width: int | None
                ) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """A simple order rule (not optimal in general): transfers by sensor finish time,
    aggregator tasks by arrival, ties by sensor index. Used by the baselines."""
    d = data(inst)
    costs = {s: view_costs(inst, fusion, width, s, plan_cuts[s]) for s in d.sensors}
    idx = {s: i for i, s in enumerate(d.sensors)}
    bus: tuple[str, ...] | None = None
    if d.serial:
        bus = tuple(sorted(d.sensors, key=lambda s: (costs[s].sensor_ms, idx[s])))
        free, arrive = 0.0, {}
        for s in bus:
            free = max(free, costs[s].sensor_ms) + costs[s].transfer_ms
            arrive[s] = free
    else:
        arrive = {s: costs[s].sensor_ms + costs[s].transfer_ms for s in d.sensors}
    agg = tuple(sorted(d.sensors, key=lambda s: (arrive[s], idx[s])))
    return bus, agg


def start_plan(inst: MultiviewInstance) -> MultiviewPlan | None:
    """A plan meeting every limit, if a cheap one exists: the earliest allowed common cut
    point (raw input unless layers are required on the sensors) under the first fusion
    candidate that admits it, no compression; None when no common cut fits every sensor
    (or no compression misses ``min_accuracy``)."""
    d = data(inst)
    for fusion in d.fusions:
        if d.accuracy_problem(fusion, None):
            continue
        for cut in d.points(fusion, None):
            if all(allowed_cut(inst, fusion, None, s, cut) for s in d.sensors):
                bus, agg = best_orders(inst, {s: cut for s in d.sensors}, fusion, None)
                return MultiviewPlan(fusion, None, {s: cut for s in d.sensors}, bus, agg)
    return None
