"""CLOUD16 (AUTO-SPLIT Sec. 5.3): every layer on the cloud at the reference precision;
the raw input is sent over the uplink. It uses no edge memory and has zero error, so it
always meets the budgets (AUTO-SPLIT Remark 3)."""

from __future__ import annotations

from splitopt.families.edge_cloud.baselines.common import finish, float_latencies, raw_input_bytes
from splitopt.families.edge_cloud.evaluate import transfer_ms
from splitopt.core.result import BackendOutput
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def cloud_only_ms(inst: EdgeCloudInstance) -> float:
    """Latency (ms) of the cloud-only plan: raw input transfer + all layers on the cloud."""
    return transfer_ms(inst, raw_input_bytes(inst)) + sum(c for _, c in float_latencies(inst).values())


def run(inst: EdgeCloudInstance, options: SolveOptions) -> BackendOutput:
    """CLOUD16: all layers on the cloud, raw input sent (AUTO-SPLIT Sec. 5.3)."""
    return finish(inst, uniform_plan(inst, []), "cloud-only", objective=cloud_only_ms(inst))
