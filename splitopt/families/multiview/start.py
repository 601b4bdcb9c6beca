"""Helpers shared by the multiview methods and programs (allowed cut points, simple
orders), the start plan, and the diagnosis of an instance without plans."""

from __future__ import annotations

from typing import Mapping

from splitopt.core.instance import Instance
from splitopt.families.multiview.data import MEMORY_RTOL, data
from splitopt.families.multiview.evaluate import view_costs
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.core.jsonfile import byte_count


def allowed_cut(inst: Instance, fusion: str, width: int | None, sensor: str, cut: str) -> bool:
    """Whether a view may use ``cut``: it runs every required layer and fits the memory."""
    c = view_costs(inst, fusion, width, sensor, cut)
    return not c.missing_required and c.memory_bytes <= c.memory_limit * (1 + MEMORY_RTOL)


def best_orders(inst: Instance, plan_cuts: Mapping[str, str], fusion: str, width: int | None
                ) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """A simple order rule (not optimal in general): transfers by sensor finish time,
    aggregator tasks by arrival, ties by sensor index. Used by the baselines."""
    d = data(inst)
    costs = {s: view_costs(inst, fusion, width, s, plan_cuts[s]) for s in d.sensors}
    idx = {s: i for i, s in enumerate(d.sensors)}
    bus = tuple(sorted(d.sensors, key=lambda s: (costs[s].sensor_ms, idx[s]))) if d.serial else None
    if d.serial:
        free, arrive = 0.0, {}
        for s in bus:
            free = max(free, costs[s].sensor_ms) + costs[s].transfer_ms
            arrive[s] = free
    else:
        arrive = {s: costs[s].sensor_ms + costs[s].transfer_ms for s in d.sensors}
    agg = tuple(sorted(d.sensors, key=lambda s: (arrive[s], idx[s])))
    return bus, agg


def start_plan(inst: Instance) -> MultiviewPlan | None:
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


def diagnose(inst: Instance) -> str:
    """Name the limit no plan meets: the sensor whose memory limit is below what every
    cut point it may use (running the required layers) needs."""
    d = data(inst)
    if not d.allowed_archs:
        best = max((a for a in d.archs if d.accuracy.get(a) is not None), key=lambda a: d.accuracy[a], default=None)
        found = "no architecture has a measured accuracy" if best is None else (
            f"the best measured is {d.accuracy[best]:.4f} "
            f"({'no compression' if best[1] is None else f'width d={best[1]}'} at '{best[0]}')")
        return (f"infeasible: settings.multiview.min_accuracy {d.min_accuracy:g} is met by no fusion point and "
                f"width: {found}")
    required = ", ".join(inst.settings.edge_required) or "none"
    for s in d.sensors:
        best = None
        for f, w in d.allowed_archs:
            for cut in d.points(f, w):
                c = view_costs(inst, f, w, s, cut)
                if c.missing_required:
                    continue
                if best is None or c.memory_bytes < best.memory_bytes:
                    best = c
        if best is None:
            return f"infeasible: no cut point of sensor '{s}' runs the required layers ({required})"
        if best.memory_bytes > best.memory_limit * (1 + MEMORY_RTOL):
            return (f"infeasible: sensor memory limit {byte_count(best.memory_limit)} B of sensor '{s}' "
                    "(settings.edge_memory_bytes / device memory_bytes) is below the "
                    f"{byte_count(best.memory_bytes)} B "
                    f"that the smallest allowed sensor part needs (cut '{best.cut}', required layers: {required})")
    return "infeasible: no plan meets the sensor memory limits and required layers together"
