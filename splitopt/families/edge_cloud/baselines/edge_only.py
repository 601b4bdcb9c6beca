"""EDGE-ONLY: every layer on the edge, nothing sent.

``split``: at the reference precision ``cloud_bits``. ``split_bits``: the uniform
bit-width (same bits for every weight and activation, AUTO-SPLIT's U2/U4/U6/U8 of Fig. 5)
with the lowest latency among those meeting the memory and error budgets (ties: lower
error); when none does, the lowest-error one (ties: lower latency) with
NO_SOLUTION_FOUND.
"""

from __future__ import annotations

from splitopt.families.edge_cloud.baselines.common import edge_ms, finish
from splitopt.families.edge_cloud.evaluate import evaluate
from splitopt.core.plan import Plan
from splitopt.core.result import BackendOutput
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def uniform_edge_plan(inst: EdgeCloudInstance, bits: int) -> Plan:
    """All layers on the edge at ``bits`` for weights and activations."""
    return uniform_plan(inst, [layer.name for layer in inst.layers], bits)


def uniform_edge_ms(inst: EdgeCloudInstance, bits: int) -> float:
    """Latency (ms) of the all-edge plan at uniform ``bits``: edge compute only."""
    return edge_ms(inst, {layer.name: (bits, bits) for layer in inst.layers})


def run(inst: EdgeCloudInstance, options: SolveOptions) -> BackendOutput:
    """EDGE-ONLY: all layers on the edge (split_bits: best uniform bit-width)."""
    if inst.problem == "split":
        bits = inst.settings.cloud_bits
    else:
        rows = []
        for b in inst.settings.bit_widths:
            m = evaluate(inst, uniform_edge_plan(inst, b))
            rows.append((b, m))
        feasible = [(b, m) for b, m in rows if m.feasible]
        if feasible:
            bits = min(feasible, key=lambda r: (r[1].total_ms, r[1].error, -r[0]))[0]
        else:
            bits = min(rows, key=lambda r: (r[1].error, r[1].total_ms, -r[0]))[0]
    return finish(
        inst, uniform_edge_plan(inst, bits), "edge-only", objective=uniform_edge_ms(inst, bits), extra={"bits": bits}
    )
