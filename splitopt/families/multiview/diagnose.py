"""Why a multiview instance has no plan: no architecture meets ``min_accuracy``, or a
sensor whose memory limit is below what every cut point it may use needs."""

from __future__ import annotations

from splitopt.core.jsonfile import byte_count
from splitopt.families.multiview.data import MEMORY_RTOL, data
from splitopt.families.multiview.evaluate import view_costs
from splitopt.families.multiview.settings import MultiviewInstance


def diagnose(inst: MultiviewInstance) -> str:
    """Name the limit no plan meets: the sensor whose memory limit is below what every
    cut point it may use (running the required layers) needs."""
    d = data(inst)
    if not d.allowed_archs:
        measured = {a: acc for a in d.archs if (acc := d.accuracy.get(a)) is not None}
        best = max(measured, key=measured.__getitem__, default=None)
        found = "no architecture has a measured accuracy" if best is None else (
            f"the best measured is {measured[best]:.4f} "
            f"({'no compression' if best[1] is None else f'width d={best[1]}'} at '{best[0]}')")
        return (f"infeasible: settings.multiview.min_accuracy {d.min_accuracy:g} is met by no fusion point and "
                f"width: {found}")
    required = ", ".join(inst.settings.edge_required) or "none"
    for s in d.sensors:
        smallest = None
        for f, w in d.allowed_archs:
            for cut in d.points(f, w):
                c = view_costs(inst, f, w, s, cut)
                if c.missing_required:
                    continue
                if smallest is None or c.memory_bytes < smallest.memory_bytes:
                    smallest = c
        if smallest is None:
            return f"infeasible: no cut point of sensor '{s}' runs the required layers ({required})"
        if smallest.memory_bytes > smallest.memory_limit * (1 + MEMORY_RTOL):
            return (f"infeasible: sensor memory limit {byte_count(smallest.memory_limit)} B of sensor '{s}' "
                    "(settings.edge_memory_bytes / device memory_bytes) is below the "
                    f"{byte_count(smallest.memory_bytes)} B "
                    f"that the smallest allowed sensor part needs (cut '{smallest.cut}', required layers: {required})")
    return "infeasible: no plan meets the sensor memory limits and required layers together"
