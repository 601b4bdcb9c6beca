"""Helpers shared by the edge/cloud baselines: reference-precision latencies,
transmitted tensor sizes, and the status rule every baseline ends with.

A baseline proves nothing. It returns ``FEASIBLE`` when the independent evaluator finds
no budget violation in its plan, and ``NO_SOLUTION_FOUND`` with the plan still attached
(and the broken budget named) when the method's plan breaks a budget it cannot see.
"""

from __future__ import annotations

from typing import Any

from splitopt.core.latency import layer_latency_ms
from splitopt.core.plan import Plan
from splitopt.core.result import BackendOutput, Status
from splitopt.families.edge_cloud.evaluate import evaluate
from splitopt.families.edge_cloud.data import cloud_device, edge_device
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

#: relative slack of the methods' own budget checks (floating-point noise, not slack)
RTOL = 1e-9


def fits(total: float, budget: float) -> bool:
    """``total <= budget`` up to floating-point noise (the methods' own checks)."""
    return total <= budget * (1 + RTOL)


def float_latencies(inst: EdgeCloudInstance) -> dict[str, tuple[float, float]]:
    """Layer name -> (edge ms, cloud ms), both at the reference precision ``cloud_bits``."""
    b = inst.settings.cloud_bits
    edge, cloud = edge_device(inst), cloud_device(inst)
    return {
        layer.name: (layer_latency_ms(inst, layer, edge, b, b), layer_latency_ms(inst, layer, cloud, b, b))
        for layer in inst.layers
    }


def raw_input_bytes(inst: EdgeCloudInstance) -> float:
    """Bytes of all raw graph inputs at their own bits (what a cloud-only plan sends)."""
    return sum(t.elements * t.bits / 8.0 for t in inst.inputs)


def sent_bytes(inst: EdgeCloudInstance, tensor: str, activation_bits: int) -> float:
    """Bytes sent when ``tensor`` crosses the cut: a raw input at its own bits, a layer
    output at ``settings.transmit_bits`` if set, else at ``activation_bits``."""
    return inst.tensor_elements(tensor) * inst.sent_bits(tensor, activation_bits) / 8.0


def edge_ms(inst: EdgeCloudInstance, edge_bits: dict[str, tuple[int, int]]) -> float:
    """Summed edge latency (ms) of layers ``name -> (weight bits, activation bits)``."""
    edge = edge_device(inst)
    return sum(layer_latency_ms(inst, inst.layer_by_name[n], edge, wb, ab) for n, (wb, ab) in edge_bits.items())


def finish(
    inst: EdgeCloudInstance,
    plan: Plan,
    method: str,
    objective: float | None = None,
    extra: dict[str, Any] | None = None,
) -> BackendOutput:
    """Evaluate the method's plan and wrap it: FEASIBLE when it meets every budget,
    NO_SOLUTION_FOUND (plan attached, violations named) otherwise. ``objective`` (ms) is
    passed only by methods whose own latency equals the evaluator's by construction."""
    metrics = evaluate(inst, plan)
    if metrics.feasible:
        return BackendOutput(Status.FEASIBLE, plan=plan, objective=objective, extra=dict(extra or {}))
    return BackendOutput(
        Status.NO_SOLUTION_FOUND,
        plan=plan,
        objective=objective,
        message=f"{method}: its plan breaks a budget the method does not model: " + "; ".join(metrics.violations),
        extra=dict(extra or {}),
    )
