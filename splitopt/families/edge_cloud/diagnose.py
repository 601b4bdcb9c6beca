"""Why an edge/cloud instance has no plan: only pinned edge layers (``edge_required``) make
one infeasible (cloud-only meets every budget otherwise), so the binding limit is the
edge memory, the error budget, or both together. Found by re-solving with each lifted."""

from __future__ import annotations

from typing import Callable

from splitopt.core.jsonfile import byte_count
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

#: an edge memory limit no plan can reach (bytes): "no memory limit" for the re-solve
LIFTED_MEMORY_BYTES = 1e30


def diagnose(inst: EdgeCloudInstance, resolve: Callable[[EdgeCloudInstance], bool]) -> str:
    """One line naming the budget no plan can meet; ``resolve(variant)`` says whether a
    variant of ``inst`` with one budget lifted has a plan."""
    s = inst.settings
    required = ", ".join(s.edge_required) or "none"
    ok_without_error = s.error_budget is not None and resolve(inst.with_settings(error_budget=None))
    ok_without_memory = resolve(inst.with_settings(edge_memory_bytes=LIFTED_MEMORY_BYTES))
    if ok_without_error and not ok_without_memory:
        return (
            f"infeasible: error budget {s.error_budget:.6g} is below the minimum achievable error of any plan "
            f"that runs the required edge layers ({required}) within the memory limit"
        )
    if ok_without_memory and not ok_without_error:
        return (
            f"infeasible: edge memory limit {byte_count(s.edge_memory_bytes)} B is below what the required edge "
            f"layers ({required}) need at any bit-width"
        )
    if ok_without_error and ok_without_memory:
        return (
            f"infeasible: edge memory limit {byte_count(s.edge_memory_bytes)} B and error budget {s.error_budget:.6g} "
            "cannot be met together (each alone can)"
        )
    return (
        f"infeasible: neither the edge memory limit {byte_count(s.edge_memory_bytes)} B nor the error budget "
        f"{s.error_budget} can be met by the required edge layers ({required})"
    )
