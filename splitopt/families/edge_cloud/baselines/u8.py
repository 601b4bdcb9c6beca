"""U8 (AUTO-SPLIT Sec. 5.3): every layer on the edge at 8-bit weights and activations;
nothing sent. NO_SOLUTION_FOUND when that breaks the memory or error budget."""

from __future__ import annotations

from splitopt.families.edge_cloud.baselines.common import finish
from splitopt.families.edge_cloud.baselines.edge_only import uniform_edge_ms, uniform_edge_plan
from splitopt.core.errors import NotApplicable
from splitopt.core.result import BackendOutput
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

BITS = 8


def run(inst: EdgeCloudInstance, options: SolveOptions) -> BackendOutput:
    """U8: all layers on the edge at 8-bit weights and activations (AUTO-SPLIT Sec. 5.3)."""
    if BITS not in inst.settings.bit_widths:
        raise NotApplicable(
            f"baseline 'u8' needs 8 among settings.bit_widths (candidates {list(inst.settings.bit_widths)})"
        )
    return finish(inst, uniform_edge_plan(inst, BITS), "u8", objective=uniform_edge_ms(inst, BITS))
