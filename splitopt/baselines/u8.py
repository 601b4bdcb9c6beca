"""U8 (AUTO-SPLIT Sec. 5.3): every layer on the edge at 8-bit weights and activations;
nothing sent. NO_SOLUTION_FOUND when that breaks the memory or error budget."""

from __future__ import annotations

from splitopt.baselines.common import check_problem, finish
from splitopt.baselines.edge_only import uniform_edge_ms, uniform_edge_plan
from splitopt.errors import NotApplicable
from splitopt.instance import Instance
from splitopt.result import BackendOutput
from splitopt.solvers.base import Backend, SolveOptions

BITS = 8


class U8Backend(Backend):
    name = "u8"
    kind = "baseline"
    problems = ("split_bits",)
    description = "U8: all layers on the edge at 8-bit weights and activations (AUTO-SPLIT Sec. 5.3)"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        check_problem(self, inst)
        if BITS not in inst.settings.bit_widths:
            raise NotApplicable(
                f"baseline 'u8' needs 8 among settings.bit_widths (candidates {list(inst.settings.bit_widths)})"
            )
        return finish(inst, uniform_edge_plan(inst, BITS), self.name, objective=uniform_edge_ms(inst, BITS))
