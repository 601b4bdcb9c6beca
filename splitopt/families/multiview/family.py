"""The multi-view shared-bus family (problem ``multiview``, SplitNets Sec. 3.1.3, 4.2,
Tables 4 and 6): V sensors each run the sensor part of one backbone on their own view
and send over one shared bus; the aggregator finishes each view's pre-fusion part, fuses
the V views and runs the rest once. Data model: ``splitopt.families.multiview.data``;
formulation: ``formulations/multiview_bus.md``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.program import Program
from splitopt.families.base import Family, Method
from splitopt.families.multiview import methods
from splitopt.families.multiview.cpsat import build_cpsat
from splitopt.families.multiview.checks import check_multiview
from splitopt.families.multiview.data import data
from splitopt.families.multiview.diagnose import diagnose
from splitopt.families.multiview.enumerate import enumerate_plans
from splitopt.families.multiview.evaluate import MultiviewMetrics, evaluate
from splitopt.families.multiview.milp import build_milp
from splitopt.families.multiview.plan import PLAN_FORMAT, MultiviewPlan, plan_from_dict
from splitopt.families.multiview.report import report
from splitopt.families.multiview.space import multiview_space
from splitopt.families.multiview.start import start_plan
from splitopt.families.multiview.settings import MultiviewInstance, MultiviewSettings
from splitopt.families.multiview.tables import build_tables
from splitopt.search.space import SearchSpace

METHODS = (
    Method("all-on-aggregator", "raw views sent, fusion at the last candidate, all compute on the aggregator",
           methods.all_on_aggregator, hint=True),
    Method("all-on-sensor", "each sensor runs everything before the last fusion candidate", methods.all_on_sensor, hint=True),
    Method("common-split", "best common cut at the fusion point, no compression (SplitNets 'split at fusion')",
           methods.common_split, hint=True),
)

class MultiviewFamily(Family):
    name = "multiview"
    problems = ("multiview",)
    objectives = ("latency",)
    settings_class = MultiviewSettings
    plan_format = PLAN_FORMAT
    program_kinds = ("cpsat", "linear")
    default_backend = "cpsat"
    description = "V sensors send over a shared bus; fusion point, Conv-Reduce width and cut per view (SplitNets)"

    def check(self, inst: MultiviewInstance) -> None:
        check_multiview(inst)

    def build_data(self, inst: MultiviewInstance) -> Any:
        return data(inst)

    def plan_from_dict(self, inst: MultiviewInstance, raw: Any, where: str = "plan") -> MultiviewPlan:
        self.prepare(inst)
        return plan_from_dict(inst, raw, where)

    def plan_type(self) -> type:
        return MultiviewPlan

    def evaluate(self, inst: MultiviewInstance, plan: MultiviewPlan) -> MultiviewMetrics:
        self.prepare(inst)
        return evaluate(inst, plan)

    def start_plan(self, inst: MultiviewInstance) -> MultiviewPlan | None:
        """The best plan with one common cut point for every view (the programs' incumbent),
        else the earliest allowed common cut."""
        self.prepare(inst)
        best = build_tables(inst).incumbent
        return best if best is not None else start_plan(inst)

    def diagnose(self, inst: MultiviewInstance, resolve: Callable[[MultiviewInstance], bool]) -> str:
        self.prepare(inst)
        return diagnose(inst)

    def build_program(self, inst: MultiviewInstance, kind: str, start: MultiviewPlan | None) -> Program:
        self.prepare(inst)
        if kind == "cpsat":
            return build_cpsat(inst, start)
        if kind == "linear":
            return build_milp(inst, start)
        raise NotApplicable(f"problem 'multiview' builds no program of kind '{kind}'")

    def methods(self) -> Sequence[Method]:
        return METHODS

    def enumerate_plans(self, inst: MultiviewInstance, limit: int) -> Iterator[MultiviewPlan]:
        self.prepare(inst)
        return enumerate_plans(inst, limit)

    def space(self, inst: MultiviewInstance) -> SearchSpace:
        self.prepare(inst)
        return multiview_space(inst)

    def random_instance(self, seed: int) -> MultiviewInstance:
        from splitopt.families.multiview.examples import random_multiview_data

        return self.instance_from_data(random_multiview_data(seed, self.instance_from_data))

    def report(self, console, inst: MultiviewInstance, plan: MultiviewPlan, metrics: MultiviewMetrics,
               show_layers: bool = True) -> None:
        report(console, inst, plan, metrics, show_layers)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 80
    front_measure = "accuracy"

    def pareto_front(self, inst: MultiviewInstance, solve: Callable[[MultiviewInstance], Any], points: int, mode: str) -> Any:
        """The latency / accuracy front over the measured widths (``pareto.py``); one
        sweep only (every measured level), so ``mode`` is not used."""
        from splitopt.families.multiview.pareto import pareto_front

        self.prepare(inst)
        return pareto_front(inst, solve, points)
    # ----- the torch bridge and hardware presets ------------------------------------------------
    torch_side = "splitopt.torch.multiview.side:MultiviewSide"
