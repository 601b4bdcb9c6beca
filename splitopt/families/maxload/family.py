"""The maxload family (problem ``maxload``): the peer benchmark's device placement of DNN
graph operators (Tarnawski et al., NeurIPS 2020; ``../shared/peer-instances/
dnn-partitioning``): every node on one of ``k`` identical accelerators or ``l`` CPU
cores, colour classes together, accelerator memory, contiguous device sets (the
instance's ``contiguity`` rule, "splitopt" or the peer DP's "authors": ``contiguity.py``); objective
``throughput`` (the max-load: the time per sample of a pipeline) or ``latency`` (one
sample). Its instances are the peer's own files, read by the importer in
``splitopt.families.maxload.instance`` (the family has no ``settings.py``: the peer format
carries the devices and limits, and the instance's objective and contiguity rule are
fields of ``MaxloadInstance``). Model: ``formulations/maxload_models.md``;
max-load program: ``formulations/maxload_throughput.md``; latency programs:
``formulations/maxload_models.md``, "Latency program" (``milp_latency``, ``cpsat_latency``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.program import Program
from splitopt.families.base import Family, Method
from splitopt.families.maxload import methods
from splitopt.families.maxload.bound import maxload_lower_bound
from splitopt.families.maxload.checks import check_maxload
from splitopt.families.maxload.cpsat_latency import build_cpsat_latency
from splitopt.families.maxload.cpsat_throughput import build_cpsat_throughput
from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.diagnose import diagnose
from splitopt.families.maxload.enumerate import enumerate_plans
from splitopt.families.maxload.evaluate import MaxloadMetrics, evaluate
from splitopt.families.maxload.instance import (CONTIGUITY, OBJECTIVES, PROBLEM, MaxloadInstance, check_contiguity,
                                              is_peer_data, objective_of_path, parse_peer_instance, peer_name)
from splitopt.families.maxload.milp_latency import build_milp_latency
from splitopt.families.maxload.milp_throughput import build_milp_throughput, simple_infeasibility
from splitopt.families.maxload.plan import PLAN_FORMAT, MaxloadPlacement, parse_expert
from splitopt.families.maxload.report import report
from splitopt.families.maxload.space import maxload_space
from splitopt.families.maxload.start import start_plan
from splitopt.search.space import SearchSpace

METHODS = methods.METHODS


def _infeasible_program(kind: str, reason: str) -> Program:
    """A program with no solution (the binding limit is known before building)."""
    if kind == "cpsat":
        from ortools.sat.python import cp_model

        model = cp_model.CpModel()
        model.add_bool_or([])
        return Program(kind="cpsat", model=model, decode=lambda values: None, stats={"infeasible": reason})
    from splitopt.core.program import LinearProgram

    lp = LinearProgram()
    never = lp.var("infeasible", binary=False, lb=0.0, ub=0.0)
    lp.add({never: 1.0}, ">=", 1.0, name="infeasible")
    return Program(kind="linear", model=lp, decode=lambda values: None, stats={"infeasible": reason})


class MaxloadFamily(Family):
    name = "maxload"
    problems = (PROBLEM,)
    core_instance = False
    objectives = OBJECTIVES
    plan_format = PLAN_FORMAT
    program_kinds = ("cpsat", "linear")
    default_backend = "cpsat"
    description = "peer dnn-partitioning placement: max-load (throughput) or latency over accelerators and CPUs"

    # ----- the peer format ------------------------------------------------------------------
    def reads(self, data: Any) -> bool:
        """Whether parsed JSON is in the format this family imports (the peer files)."""
        return is_peer_data(data)

    def read(self, data: Any, path: str | Path | None) -> MaxloadInstance:
        """Import a peer file's data (its objective from its folder, see
        ``objective_of_path``; data without a path: "throughput")."""
        if path is None:
            return parse_peer_instance(data, name="peer-instance")
        path = Path(path)
        return parse_peer_instance(data, name=peer_name(path), source=str(path),
                                   objective=objective_of_path(path))

    # ----- the protocol -----------------------------------------------------------------------
    def check(self, inst: MaxloadInstance) -> None:
        """The instance's consistency (``checks.py``; the importer has checked each field's
        type and range, and ends with the same check)."""
        check_maxload(inst)

    def plan_from_dict(self, inst: MaxloadInstance, data: Any, where: str = "plan") -> MaxloadPlacement:
        return parse_expert(inst, data, source=where)

    def plan_type(self) -> type:
        return MaxloadPlacement

    def evaluate(self, inst: MaxloadInstance, plan: MaxloadPlacement) -> MaxloadMetrics:
        return evaluate(inst, plan)

    def start_plan(self, inst: MaxloadInstance) -> MaxloadPlacement | None:
        """Throughput: every node on cpu0. Latency: the better of that and a greedy that
        fills accelerators with consecutive blocks (``start.py``)."""
        return start_plan(inst)

    def diagnose(self, inst: MaxloadInstance, resolve: Callable[[Any], bool]) -> str:
        return diagnose(inst)

    def proven_infeasible(self, inst: MaxloadInstance) -> str | None:
        reason = simple_infeasibility(inst, groups_of(inst))  # no device, or a node that fits none
        return None if reason is None else f"infeasible: {reason}"

    def build_program(self, inst: MaxloadInstance, kind: str, start: MaxloadPlacement | None) -> Program:
        """The program of ``kind`` for the instance's objective: ``milp_throughput.py`` /
        ``cpsat_throughput.py`` (max-load) or ``milp_latency.py`` / ``cpsat_latency.py``;
        a program with no solution where a simple limit already rules out every
        placement."""
        reason = simple_infeasibility(inst, groups_of(inst))
        if reason is not None:
            return _infeasible_program(kind, reason)
        builders = {("throughput", "linear"): build_milp_throughput, ("throughput", "cpsat"): build_cpsat_throughput,
                    ("latency", "linear"): build_milp_latency, ("latency", "cpsat"): build_cpsat_latency}
        build = builders.get((inst.objective, kind))
        if build is None:
            raise NotApplicable(f"problem 'maxload' builds no program of kind '{kind}'")
        return build(inst, start)

    def methods(self) -> Sequence[Method]:
        return METHODS

    def exact_method(self, inst: MaxloadInstance) -> str | None:
        """``ideal-dp`` for the throughput objective where the forward DAG has at most
        ``AUTO_MAX_IDEALS`` ideals (counted up to that cap, milliseconds) and every colour
        group has a forward node: exact by its DP where no placement's devices can wait
        on each other in a cycle, else by the DP over acyclic orders and CP-SAT's proof
        (``ideal_dp.py``, ``certify.py``); else None (CP-SAT). Of the peer graphs it takes
        the bert24 graphs (the DP alone), the resnet50 graphs but the operator training
        one, and the BERT operator inference graphs (benchmarks/results/maxload_peer_dp.md)."""
        if inst.objective != "throughput":
            return None
        from splitopt.families.maxload.ideal_dp import AUTO_MAX_IDEALS, ideal_dp_applies

        applies = ideal_dp_applies(inst, AUTO_MAX_IDEALS) or ideal_dp_applies(inst, AUTO_MAX_IDEALS, acyclic_only=True)
        return "ideal-dp" if applies else None

    def enumerate_plans(self, inst: MaxloadInstance, limit: int) -> Iterator[MaxloadPlacement]:
        return enumerate_plans(inst, limit)

    def space(self, inst: MaxloadInstance) -> SearchSpace:
        return maxload_space(inst)

    def lower_bound(self, inst: MaxloadInstance) -> float | None:
        return maxload_lower_bound(inst)

    def random_instance(self, seed: int) -> MaxloadInstance:
        """A small random peer file, with either objective (half each)."""
        import numpy as np

        from splitopt.families.maxload.examples import random_maxload_data

        latency = np.random.default_rng([seed, 101]).random() < 0.5
        return parse_peer_instance(random_maxload_data(seed, latency=latency), name=f"random-maxload-s{seed}",
                                   objective="latency" if latency else "throughput")

    def report(self, console, inst: MaxloadInstance, plan: MaxloadPlacement, metrics: MaxloadMetrics,
               show_layers: bool = True) -> None:
        report(console, inst, plan, metrics, show_layers)

    def breakdown(self, inst: MaxloadInstance, metrics: MaxloadMetrics) -> list[tuple[str, float, float]]:
        return metrics.breakdown()

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 150
    instance_options = {"contiguity": CONTIGUITY}

    def with_objective(self, inst: MaxloadInstance, objective: str) -> MaxloadInstance:
        return inst.with_objective(objective)

    def with_option(self, inst: MaxloadInstance, name: str, value: str, where: str) -> MaxloadInstance:
        """``contiguity``: the contiguity rule (``contiguity.py``)."""
        if name != "contiguity":
            return super().with_option(inst, name, value, where)
        return inst.with_contiguity(check_contiguity(value, where))

    def default_solvers(self, problem: str, objective: str) -> tuple[str, ...]:
        """The exact backends, ``all-on-cpu`` and, for the max-load (throughput) objective,
        its baselines ``intervals`` and ``group-moves`` (``ideal-dp`` applies to some graphs
        only: run it with ``-s``)."""
        extra = ("intervals", "group-moves") if objective == "throughput" else ()
        return ("cpsat", "milp-highs", *extra, "all-on-cpu")

    def plan_drawing(self, inst: MaxloadInstance, metrics: MaxloadMetrics) -> Any:
        """A max-load (throughput) placement as its pipeline (each loaded device a stage:
        its load less its transfers, then its transfers); a latency placement as its
        schedule. Nothing (None) for a placement without a schedule: its latency is
        undefined (a device's node set is not convex, so no order runs it)."""
        from splitopt.core.drawing import Pipeline

        if not metrics.schedule:
            return None
        stages = tuple((device, compute, transfer, "") for device, compute, transfer in metrics.breakdown())
        if metrics.objective == "throughput" and stages:
            return Pipeline(stages)
        return super().plan_drawing(inst, metrics)

    def foreign_report(self, inst: MaxloadInstance, metrics: MaxloadMetrics) -> dict[str, Any]:
        """The peer evaluator's view: max-load, loads, latency ("undefined" where the
        placement has none) and the broken rules (latency's own problems left out)."""
        return {"instance": inst.name, "max_load_ms": metrics.max_load_ms, "loads_ms": dict(metrics.loads_ms),
                "latency_ms": metrics.latency_ms if metrics.latency_ms is not None else "undefined",
                "violations": [v for v in metrics.violations if not v.startswith("latency:")]}
