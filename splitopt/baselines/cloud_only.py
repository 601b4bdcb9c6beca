"""CLOUD16 (AUTO-SPLIT Sec. 5.3): every layer on the cloud at the reference precision;
the raw input is sent over the uplink. It uses no edge memory and has zero error, so it
always meets the budgets (AUTO-SPLIT Remark 3)."""

from __future__ import annotations

from splitopt.baselines.common import check_problem, finish, float_latencies, raw_input_bytes
from splitopt.instance import Instance
from splitopt.latency import transfer_ms
from splitopt.plan import Plan
from splitopt.result import BackendOutput
from splitopt.solvers.base import Backend, SolveOptions


def cloud_only_ms(inst: Instance) -> float:
    """Latency (ms) of the cloud-only plan: raw input transfer + all layers on the cloud."""
    return transfer_ms(inst, raw_input_bytes(inst)) + sum(c for _, c in float_latencies(inst).values())


class CloudOnlyBackend(Backend):
    name = "cloud-only"
    kind = "baseline"
    problems = ("split", "split_bits")
    description = "CLOUD16: all layers on the cloud, raw input sent (AUTO-SPLIT Sec. 5.3)"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        check_problem(self, inst)
        return finish(inst, Plan.uniform(inst, []), self.name, objective=cloud_only_ms(inst))
