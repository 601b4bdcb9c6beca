"""The llm family (problem ``llm``): a decoder language model (embedding, blocks, head)
split over heterogeneous devices as a pipeline. Decisions: which of the devices to use,
their order (a chain, or a ring that returns each sampled token to the first device), the
contiguous range of parts each runs and the bit-width of its weights. Objectives: time to
first token (``ttft``), one stream's time per generated token (``token_latency``) and the
pipeline's time per token over its streams (``throughput``); limits: memory with the KV
cache at the context limit, links, pins and an error budget. Formulation:
``formulations/llm.md``."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.core.program import Program
from splitopt.families.base import Family, Method, deferred
from splitopt.families.llm.settings import PLAN_FORMAT, PROBLEM, LlmSettings
from splitopt.search.space import SearchSpace

# The family's modules need numpy; they are imported where used, so that listing the
# families (``splitopt solvers``, ``splitopt schema``) loads none of it.
_M = "splitopt.families.llm.methods:"

METHODS = (
    Method("llm-dp", "exact dynamic program over device choice, order, contiguous ranges and bit-widths (where "
           "the error budget binds: a Lagrangian bound and a search that closes its gap)", deferred(_M + "llm_dp"),
           kind="exact"),
    Method("memory-proportional-ring", "exo's rule: the fewest devices whose memory holds the weights, layers in "
           "proportion to memory (largest remainder); no compute, bandwidth or KV cache input",
           deferred(_M + "memory_proportional_ring"), hint=True),
    Method("equal-layers", "every device in instance order, equal layer counts (distributed-llama, vLLM's default)",
           deferred(_M + "equal_layers"), hint=True),
    Method("greedy-blocks", "Petals-like: devices by memory bandwidth, each taking as many next layers as fit its "
           "memory with their KV cache", deferred(_M + "greedy_blocks"), hint=True),
    Method("layer-dp", "the dynamic program blind to the KV cache and to bit-widths (PipeEdge/EdgeShard style), "
           "judged by the full cost model", deferred(_M + "layer_dp")),
    Method("best-single-device", "the whole model on the one device (and bit-width) where it is best",
           deferred(_M + "best_single_device"), hint=True),
)


class LlmFamily(Family):
    name = "llm"
    problems = (PROBLEM,)
    objectives = ("ttft", "token_latency", "throughput")
    settings_class = LlmSettings
    plan_format = PLAN_FORMAT
    program_kinds = ("cpsat", "linear")
    torch_side = "splitopt.torch.llm.side:LlmSide"
    default_backend = "cpsat"
    description = ("a decoder language model over heterogeneous devices: prefill, decode and the KV cache; device "
                   "choice, order, layer ranges and bits")

    def check(self, inst: Instance) -> None:
        from splitopt.families.llm.checks import check_llm

        check_llm(inst)

    def build_data(self, inst: Instance) -> Any:
        from splitopt.families.llm.data import data

        return data(inst)

    def plan_from_dict(self, inst: Instance, raw: Any, where: str = "plan") -> Any:
        from splitopt.families.llm.plan import plan_from_dict

        self.prepare(inst)
        return plan_from_dict(inst, raw, where)

    def plan_type(self) -> type:
        from splitopt.families.llm.plan import LlmPlan

        return LlmPlan

    def evaluate(self, inst: Instance, plan: Any) -> Any:
        from splitopt.families.llm.evaluate import evaluate

        self.prepare(inst)
        return evaluate(inst, plan)

    def start_plan(self, inst: Instance) -> Any:
        from splitopt.families.llm.start import start_plan

        self.prepare(inst)
        return start_plan(inst)

    def diagnose(self, inst: Instance, resolve: Callable[[Instance], bool]) -> str:
        from splitopt.families.llm.diagnose import diagnose

        self.prepare(inst)
        return diagnose(inst, resolve)

    def proven_infeasible(self, inst: Instance) -> str | None:
        from splitopt.families.llm.diagnose import proven_infeasible

        self.prepare(inst)
        return proven_infeasible(inst)

    def build_program(self, inst: Instance, kind: str, start: Any) -> Program:
        self.prepare(inst)
        if kind == "cpsat":
            from splitopt.families.llm.cpsat import build_cpsat

            return build_cpsat(inst, start)
        if kind == "linear":
            from splitopt.families.llm.milp import build_milp

            return build_milp(inst, start)
        raise NotApplicable(f"problem 'llm' builds no program of kind '{kind}'")

    def methods(self) -> Sequence[Method]:
        # llm-dp runs behind its refusal of a limit on time it cannot hold (``limits.py``)
        limited = deferred("splitopt.families.llm.limits:llm_dp")
        return tuple(dataclasses.replace(m, run=limited) if m.name == "llm-dp" else m for m in METHODS)

    def enumerate_plans(self, inst: Instance, limit: int) -> Iterator[Any]:
        from splitopt.families.llm.enumerate import enumerate_plans

        self.prepare(inst)
        return enumerate_plans(inst, limit)

    def space(self, inst: Instance) -> SearchSpace:
        from splitopt.families.llm.space import llm_space

        self.prepare(inst)
        return llm_space(inst)

    def exact_method(self, inst: Instance) -> str | None:
        """``llm-dp`` where it takes the devices (at most 10, 8 in a ring); else
        ``milp-highs``, whose path program proves what CP-SAT's model proves slower or not
        at all (``benchmarks/results/llm_solve.md``)."""
        from splitopt.families.llm.methods import dp_refusal

        self.prepare(inst)
        return "llm-dp" if dp_refusal(inst) is None else "milp-highs"

    def random_instance(self, seed: int) -> Instance:
        from splitopt.families.llm.examples import random_data

        return self.instance_from_data(random_data(seed))

    def summary(self, inst: Instance) -> str:
        s = inst.settings
        weights = sum(layer.weights for layer in inst.layers)
        return (f"{inst.name}: {len(inst.layers)} parts, {weights / 1e9:,.3f} B weights, {len(inst.devices)} devices, "
                f"problem llm, objective {inst.objective}, {s.describe()}")

    def report(self, console, inst: Instance, plan: Any, metrics: Any, show_layers: bool = True) -> None:
        from splitopt.families.llm.report import report

        report(console, inst, plan, metrics, show_layers)

    def describe_plan(self, inst: Instance, plan: Any) -> str:
        return " | ".join(f"{st.device} {st.end - st.start}@{st.bits}b" for st in plan.stages)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 60
    # ttft and token_latency are sums of stage times and link times (latency + bits / bandwidth)
    affine_objectives = ("ttft", "token_latency")
    # time to first token against the pipeline's tokens/s (default), tokens/s against error
    front_measure = "throughput"
    front_measures = ("throughput", "error")
    # auto: llm-dp where it is exact, else milp-highs (cpsat proves the large fronts' points slower)
    front_backend = "auto"

    def pareto_front(self, inst: Instance, solve: Callable[[Instance], Any], points: int, mode: str,
                     against: str = "throughput") -> Any:
        """Time to first token against tokens/s, or (``against="error"``) tokens/s against
        the weight error (``pareto.py``)."""
        from splitopt.families.llm.pareto import pareto_front

        self.prepare(inst)
        return pareto_front(inst, solve, points, mode, against)
