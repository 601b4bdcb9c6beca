"""An edge/cloud plan to start from (and fall back on): cloud-only, or the plan of the
relaxation's minimum cut where it is better and meets every limit."""

from __future__ import annotations

from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.bound import relaxed_cut_plan
from splitopt.families.edge_cloud.evaluate import evaluate
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def start_plan(inst: EdgeCloudInstance) -> Plan | None:
    """The better of cloud-only (:func:`cloud_only_plan`) and the plan of the relaxation's
    minimum cut (``bound.py``) where it meets every limit; None where neither is a plan
    that meets them and no cloud-only plan exists."""
    candidates = [p for p in (cloud_only_plan(inst), relaxed_cut_plan(inst)) if p is not None]
    scored = [(m.objective_ms, i) for i, m in enumerate(evaluate(inst, p) for p in candidates) if m.feasible]
    if scored:
        return candidates[min(scored)[1]]
    return cloud_only_plan(inst)


def cloud_only_plan(inst: EdgeCloudInstance) -> Plan | None:
    """A plan every instance without pinned edge layers admits: cloud-only (no edge
    memory, no error). Backends start from it, and return it when a time limit stops
    them before they find a better one."""
    if inst.settings.edge_required:
        return None
    return uniform_plan(inst, [])
