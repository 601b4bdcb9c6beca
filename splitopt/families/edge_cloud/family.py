"""The edge/cloud family (problems ``split`` and ``split_bits``): one cut between an edge
device and a cloud device, with per-layer weight and activation bit-widths on the edge
(AUTO-SPLIT Eq. 1-5; ``split`` is the float cut of Neurosurgeon, DADS, QDMP, SplitNets
Eq. 1). Formulation: ``formulations/edge_cloud_split.md``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.plan import FORMAT, Plan
from splitopt.core.program import Program
from splitopt.families.base import Family, Method, ScaleCase
from splitopt.families.edge_cloud.bound import edge_cloud_lower_bound
from splitopt.families.edge_cloud.checks import check_edge_cloud
from splitopt.families.edge_cloud.data import uplink
from splitopt.families.edge_cloud.diagnose import diagnose
from splitopt.families.edge_cloud.enumerate import enumerate_plans
from splitopt.families.edge_cloud.evaluate import Metrics, evaluate
from splitopt.families.edge_cloud.plan import plan_from_dict, plan_to_dict
from splitopt.families.edge_cloud.methods import METHODS
from splitopt.families.edge_cloud.milp import build_milp
from splitopt.families.edge_cloud.report import report
from splitopt.families.edge_cloud.settings import EdgeCloudInstance, EdgeCloudSettings
from splitopt.families.edge_cloud.space import edge_cloud_space
from splitopt.families.edge_cloud.start import start_plan
from splitopt.search.space import SearchSpace


class EdgeCloudFamily(Family):
    name = "edge_cloud"
    problems = ("split", "split_bits")
    objectives = ("latency",)
    settings_class = EdgeCloudSettings
    plan_format = FORMAT
    program_kinds = ("linear",)
    default_backend = "milp-cbc"
    has_schedule = False
    description = "one edge/cloud cut; split_bits adds per-layer weight/activation bit-widths (AUTO-SPLIT)"

    def check(self, inst: EdgeCloudInstance) -> None:
        check_edge_cloud(inst)

    def plan_from_dict(self, inst: EdgeCloudInstance, data: Any, where: str = "plan") -> Plan:
        return plan_from_dict(inst, data, where)

    def plan_to_dict(self, inst: EdgeCloudInstance, plan: Plan) -> dict[str, Any]:
        return plan_to_dict(inst, plan)

    def plan_type(self) -> type:
        return Plan

    def evaluate(self, inst: EdgeCloudInstance, plan: Plan) -> Metrics:
        self.prepare(inst)
        return evaluate(inst, plan)

    def start_plan(self, inst: EdgeCloudInstance) -> Plan | None:
        """The better of cloud-only (where no layer is pinned to the edge) and the plan of
        the relaxation's minimum cut (``bound.py``) where it meets every limit
        (``start.py``)."""
        self.prepare(inst)
        return start_plan(inst)

    def lower_bound(self, inst: EdgeCloudInstance) -> float | None:
        """The relaxation's minimum cut: memory and error budget dropped, every edge layer
        at its fastest bit-widths and every sent tensor at its fewest bits (``bound.py``)."""
        self.prepare(inst)
        return edge_cloud_lower_bound(inst)

    def diagnose(self, inst: EdgeCloudInstance, resolve: Callable[[EdgeCloudInstance], bool]) -> str:
        return diagnose(inst, resolve)

    def build_program(self, inst: EdgeCloudInstance, kind: str, start: Plan | None) -> Program:
        if kind != "linear":
            raise NotApplicable(f"problem '{inst.problem}' builds a linear program, not '{kind}'")
        return build_milp(inst, start)

    def methods(self) -> Sequence[Method]:
        return METHODS

    def enumerate_plans(self, inst: EdgeCloudInstance, limit: int) -> Iterator[Plan]:
        return enumerate_plans(inst, limit)

    def space(self, inst: EdgeCloudInstance) -> SearchSpace:
        return edge_cloud_space(inst)

    def random_instance(self, seed: int) -> EdgeCloudInstance:
        from splitopt.families.edge_cloud.examples import small_random_data

        return self.instance_from_data(small_random_data(seed))

    def report(self, console, inst: EdgeCloudInstance, plan: Plan, metrics: Metrics, show_layers: bool = True) -> None:
        report(console, inst, plan, metrics, show_layers)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 200
    affine_objectives = ("latency",)  # edge + cloud compute + link latency + bits sent / bandwidth
    front_measure = "error"

    def pareto_front(self, inst: EdgeCloudInstance, solve: Callable[[EdgeCloudInstance], Any], points: int, mode: str) -> Any:
        """The latency / quantization-error front (``pareto.py``), on problem split_bits."""
        from splitopt.families.edge_cloud.pareto import pareto_front

        if inst.problem != "split_bits":
            inst = inst.with_settings(problem="split_bits")
        self.prepare(inst)
        return pareto_front(inst, solve, points, mode)

    def bandwidth_links(self, inst: EdgeCloudInstance) -> tuple:
        """The uplink: the one link a plan sends over."""
        return (uplink(inst),)

    def describe_plan(self, inst: EdgeCloudInstance, plan: Plan) -> str:
        """The edge layers' count and last layer (``cloud-only`` for none) and, for a
        split_bits plan, the first edge layers' bit-widths (weight/activation)."""
        edge = [layer.name for layer in inst.layers if plan.device[layer.name] == inst.settings.edge]
        if not edge:
            return f"cloud-only ({inst.settings.cloud})"
        text = f"{len(edge)} on {inst.settings.edge} (to {edge[-1]})"
        if inst.problem == "split_bits":
            bits = " ".join(f"{plan.weight_bits[n]}/{plan.activation_bits[n]}" for n in edge[:3])
            text += f", w/a {bits}{' ...' if len(edge) > 3 else ''}"
        return text

    def draws_plans(self, inst: EdgeCloudInstance) -> bool:
        return True  # as a timeline: edge compute, the uplink's transfer, cloud compute

    def plan_drawing(self, inst: EdgeCloudInstance, metrics: Metrics) -> Any:
        """The plan as a timeline: the edge computes its layers, the uplink sends the
        cut's tensors (their sizes on the bar and under the chart), the cloud computes
        the rest."""
        from splitopt.core.drawing import Timeline, human_bytes

        edge, cloud = inst.settings.edge, inst.settings.cloud
        e, t, c = metrics.edge_compute_ms, metrics.transmit_ms, metrics.cloud_compute_ms
        sent = [f"{name} ({human_bytes(size)})" for name, size in metrics.sent_tensors]
        bars = ((f"edge ({edge})", e, "compute", f"{metrics.edge_layer_count} edge layers, {e:.4g} ms"),
                (f"uplink {edge}->{cloud}", t, "transfer", f"{human_bytes(metrics.transmitted_bytes)} sent, {t:.4g} ms"),
                (f"cloud ({cloud})", c, "compute",
                 f"{len(inst.layers) - metrics.edge_layer_count} cloud layers, {c:.4g} ms"))
        return Timeline(bars, "sent: " + (", ".join(sent) if sent else "nothing (the plan runs on one side)"),
                        f"{inst.name}: {inst.problem} plan, latency {metrics.total_ms:.4g} ms")

    def scale_cases(self) -> Sequence[ScaleCase]:
        """split_bits over random layer DAGs (``examples.random_instance_data``), no layer
        pinned to the edge."""
        from splitopt.families.edge_cloud.examples import random_instance_data

        return (ScaleCase("edge_cloud_split_bits", "split_bits",
                          lambda n, seed: random_instance_data(seed, n, problem="split_bits", edge_required=False),
                          ("cpsat", "milp-highs", "auto-split", "cloud-only", "evolutionary")),)
    # ----- the torch bridge and hardware presets ------------------------------------------------
    torch_side = "splitopt.torch.edge_cloud.side:EdgeCloudSide"
    topology = "edge-cloud"
    topology_devices = (2, 2)

    def topology_settings(self, names: Sequence[str], devices: Sequence[Mapping[str, Any]],
                          bit_widths: Sequence[int], quantized: bool, reference_bits: int | None) -> dict[str, Any]:
        """The first device is the edge, the second the cloud; ``split_bits`` over the
        offered bit-widths the edge runs when error tables are measured, else the float
        ``split`` (the edge must then run the reference precision)."""
        settings: dict[str, Any] = {"problem": "split", "edge": names[0], "cloud": names[1]}
        edge_bits = [b for b in bit_widths if b in devices[0]["bit_widths"]]
        if quantized and edge_bits:
            settings.update(problem="split_bits", bit_widths=edge_bits)
        elif reference_bits is not None and reference_bits not in devices[0]["bit_widths"]:
            raise InvalidOption(f"edge '{names[0]}' cannot run the reference precision")
        return settings

    def complete_profiled(self, inst):
        """A ``split_bits`` instance's error budget: the whole network's error at W8A8."""
        if inst.problem != "split_bits":
            return inst
        w8a8 = sum(l.weight_error.get(8, 0.0) + l.activation_error.get(8, 0.0) for l in inst.layers)
        return inst.with_settings(error_budget=w8a8)

    def host_as_edge(self, links, settings, host):
        """The host becomes the edge, linked to the cloud as the preset's edge is."""
        return [*links, dict(links[0], source=host)], dict(settings, edge=host)
