"""A mesh plan to start from: the best of every single-device plan and HEFT's."""

from __future__ import annotations

from splitopt.core.errors import InvalidPlan
from splitopt.families.mesh.data import MeshData, mesh_data
from splitopt.families.mesh.evaluate import evaluate
from splitopt.families.mesh.methods import heft_plan
from splitopt.families.mesh.plan import MeshPlan, check_routes, single_device_plan
from splitopt.families.mesh.settings import MeshInstance


def start_plan(inst: MeshInstance, data: MeshData | None = None) -> MeshPlan | None:
    """The best memory-feasible plan among every single-device plan and the HEFT
    heuristic's plan (None if none is feasible)."""
    data = data or mesh_data(inst)
    best, best_ms = None, float("inf")
    candidates = []
    for d in data.devices:
        plan = single_device_plan(inst, d)
        try:
            check_routes(data, plan.device, "plan")
        except InvalidPlan:
            continue
        candidates.append(plan)
    heft = heft_plan(inst, data)
    if heft is not None:
        candidates.append(heft)
    for plan in candidates:
        m = evaluate(inst, plan, data)
        if m.feasible and m.makespan_ms < best_ms:
            best, best_ms = plan, m.makespan_ms
    return best
