"""The chain family (problem ``chain``, JMSNAS Eq. 1, HiveMind): devices in a line (UE ->
small cell -> macro cell -> cloud, ``settings.chain``), each layer on one device, the
device index never decreasing along a DAG edge; objective ``latency`` (sum of stage
times) or ``throughput`` (the bottleneck stage of a pipelined stream). Formulation:
``formulations/chain_split.md``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.plan import FORMAT, Plan
from splitopt.core.program import Program
from splitopt.families.base import Family, Method, ScaleCase
from splitopt.families.chain import branch, methods
from splitopt.families.chain.bound import chain_lower_bound, memory_free_latency, memory_free_optimum_fits
from splitopt.families.chain.checks import check_chain
from splitopt.families.chain.enumerate import enumerate_plans
from splitopt.families.chain.evaluate import ChainMetrics, evaluate
from splitopt.families.chain.plan import plan_from_dict
from splitopt.families.chain.milp import build_milp
from splitopt.families.chain.report import report
from splitopt.families.chain.settings import ChainInstance, ChainSettings
from splitopt.families.chain.space import chain_space
from splitopt.families.chain.diagnose import diagnose
from splitopt.families.chain.start import start_plan
from splitopt.search.space import SearchSpace

METHODS = (
    Method("chain-dp", "exact DP over contiguous segments for chain-shaped graphs (DNNPipe/PipeDream style)",
           methods.chain_dp, kind="exact"),
    Method("chain-cut", "exact minimum cut for the latency objective on any layer DAG, where no memory limit binds "
           "(otherwise a lower bound)", methods.chain_cut, kind="exact"),
    Method("chain-bb", "exact branch and bound over the memory-priced minimum cuts (Lagrangian bound) on any "
           "layer DAG: the latency or throughput objective with memory limits", branch.chain_branch_and_bound,
           kind="exact", optimal_rtol=branch.OPTIMAL_RTOL, anytime=True),
    Method("segments-dp", "best contiguous segments of the file order by DP on any layer DAG (PipeDream-style; "
           "memory left to the evaluator)", methods.segments_dp),
    Method("chain-scan", "HiveMind-style linear search: one split point per device, greedy along the chain",
           methods.chain_scan),
    Method("best-single-device", "all layers on the one device that is best (the input forwarded to it)",
           methods.best_single_device, hint=True),
)


class ChainFamily(Family):
    name = "chain"
    problems = ("chain",)
    objectives = ("latency", "throughput")
    settings_class = ChainSettings
    plan_format = FORMAT
    program_kinds = ("linear",)
    default_backend = "cpsat"
    description = "layers over devices in a line (JMSNAS Eq. 1): latency or pipelined throughput"

    def check(self, inst: ChainInstance) -> None:
        check_chain(inst)

    def plan_from_dict(self, inst: ChainInstance, data: Any, where: str = "plan") -> Plan:
        return plan_from_dict(inst, data, where)

    def plan_to_dict(self, inst: ChainInstance, plan: Plan) -> dict[str, Any]:
        """The JSON form (``splitopt-plan/1``), the bit-widths of the first device's layers
        written (all at ``cloud_bits``)."""
        return plan.to_dict(inst, bits_on=inst.settings.first)

    def plan_type(self) -> type:
        return Plan

    def evaluate(self, inst: ChainInstance, plan: Plan) -> ChainMetrics:
        self.prepare(inst)
        return evaluate(inst, plan)

    def start_plan(self, inst: ChainInstance) -> Plan | None:
        self.prepare(inst)
        return start_plan(inst)

    def diagnose(self, inst: ChainInstance, resolve: Callable[[ChainInstance], bool]) -> str:
        return diagnose(inst)

    def build_program(self, inst: ChainInstance, kind: str, start: Plan | None) -> Program:
        if kind != "linear":
            raise NotApplicable(f"problem 'chain' builds a linear program, not '{kind}'")
        return build_milp(inst, start)

    def methods(self) -> Sequence[Method]:
        return METHODS

    def enumerate_plans(self, inst: ChainInstance, limit: int) -> Iterator[Plan]:
        return enumerate_plans(inst, limit)

    def space(self, inst: ChainInstance) -> SearchSpace:
        return chain_space(inst)

    def lower_bound(self, inst: ChainInstance) -> float | None:
        self.prepare(inst)
        return chain_lower_bound(inst)

    def exact_method(self, inst: ChainInstance) -> str | None:
        """Where the minimum cut applies: for the latency objective ``chain-cut`` where its
        memory-free optimum meets every memory limit (decided by solving the cut, cached on
        the instance), else ``chain-bb`` (its branch and bound over the memory-priced cuts);
        for throughput ``chain-bb`` (on the 1,000-layer throughput instances it proves two
        of three within 60 s and ends at 0.06 % on the third, where CP-SAT leaves 54 % on
        one: ``benchmarks/results/chain_scale.md``). None where the cut does not apply."""
        self.prepare(inst)
        if memory_free_latency(inst) is None:
            return None
        return "chain-cut" if memory_free_optimum_fits(inst) else "chain-bb"

    def random_instance(self, seed: int) -> ChainInstance:
        from splitopt.families.chain.examples import small_random_data

        return self.instance_from_data(small_random_data(seed))

    def report(self, console, inst: ChainInstance, plan: Plan, metrics: ChainMetrics, show_layers: bool = True) -> None:
        report(console, inst, plan, metrics, show_layers)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 150
    affine_objectives = ("latency",)  # a sum of stage times: compute + link latency + bits sent / bandwidth

    def bandwidth_links(self, inst: ChainInstance) -> tuple:
        """The links between consecutive devices of the chain."""
        chain = inst.settings.chain
        return tuple(inst.link_between[(a, b)] for a, b in zip(chain, chain[1:]))

    def not_affine_reason(self, inst: ChainInstance) -> str:
        if inst.objective == "throughput":
            return ("the bottleneck stage is a max of affine functions of 1/bandwidth per plan, so the optimum is not "
                    "concave in it")
        return super().not_affine_reason(inst)

    def plan_drawing(self, inst: ChainInstance, metrics: ChainMetrics) -> Any:
        """A throughput plan as its pipeline (each device with work a stage: its compute,
        then its send to the next device); a latency plan as its schedule."""
        from splitopt.core.drawing import Pipeline

        stages = tuple((d.device, d.compute_ms, d.send_ms, f"{d.layers} layers") for d in metrics.devices
                       if d.stage_ms > 0)
        if metrics.objective == "throughput" and stages:
            return Pipeline(stages)
        return super().plan_drawing(inst, metrics)

    def scale_cases(self) -> Sequence[ScaleCase]:
        """8 devices, latency objective, over random layer DAGs with long skips
        (``examples.random_chain_data``)."""
        from splitopt.families.chain.examples import random_chain_data

        devices = 8
        return (ScaleCase(f"chain{devices}_latency", "chain",
                          lambda n, seed: random_chain_data(seed, n, devices, "latency"),
                          ("chain-cut", "cpsat", "milp-highs", "segments-dp", "chain-scan", "evolutionary")),)
    # ----- the torch bridge and hardware presets ------------------------------------------------
    torch_side = "splitopt.torch.chain.side:ChainSide"
    topology = "chain"

    def topology_settings(self, names, devices, bit_widths, quantized, reference_bits):
        """The devices in the given order are the chain."""
        return {"problem": "chain", "chain": list(names)}
