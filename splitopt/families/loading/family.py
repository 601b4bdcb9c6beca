"""The loading-balance family (problem ``loading``; the RL modularization paper): split a
model's blocks into child models that load in parallel on ``T`` threads, inference of a
loaded child overlapping the loading of the rest; objective ``latency`` (the first
response, load plus inference) or ``balance`` (the heaviest child's load time). Data
model: :mod:`splitopt.families.loading.data`; formulation:
``formulations/loading_balance.md``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.program import Program
from splitopt.families.base import Family, Method, deferred
from splitopt.families.loading.settings import PLAN_FORMAT, LoadingInstance, LoadingSettings
from splitopt.search.space import SearchSpace

# The family's modules need numpy; they are imported where used, so that listing the
# families (``splitopt solvers``, ``splitopt schema``) loads none of it: its methods too
# (``deferred``).

METHODS = (
    Method("partition-search", "exact min-max contiguous partition by parametric search: balance, and latency "
           "when every child has its own thread (Case 1)",
           deferred("splitopt.families.loading.methods:partition_search"), kind="exact"),
    Method("count-search", "exact first response over every allowed child count: Case 1 by the min-max "
           "partition, Case 2 by a staircase relaxation bound and an exact depth-first search (balance: as "
           "partition-search)", deferred("splitopt.families.loading.methods:count_search"), kind="exact",
           anytime=True),
    Method("monolithic", "the whole model as one child (the paper's 'Original')",
           deferred("splitopt.families.loading.methods:monolithic"), hint=True),
    Method("equal-count", "k children of equal block counts, the best allowed k, paper load order",
           deferred("splitopt.families.loading.methods:equal_count"), hint=True),
    Method("equal-bytes", "k children of equal bytes, the best allowed k, paper load order",
           deferred("splitopt.families.loading.methods:equal_bytes"), hint=True),
    Method("reference-plans", "the best published cut positions the instance carries (paper Tables 1-2)",
           deferred("splitopt.families.loading.methods:reference_plans"), hint=True),
    Method("paper-rlu", "the paper's tabular Q-learning unit (state (C_split, I_split, n_p, n_r), reward 0 within "
           "+-e of T/C_split)", deferred("splitopt.families.loading.methods:paper_rlu")),
)


class LoadingFamily(Family):
    name = "loading"
    problems = ("loading",)
    objectives = ("latency", "balance")
    settings_class = LoadingSettings
    plan_format = PLAN_FORMAT
    program_kinds = ("cpsat", "linear")
    default_backend = "cpsat"
    description = "child models loaded in parallel on T threads, inference overlapping the loads (RL modularization)"

    def check(self, inst: LoadingInstance) -> None:
        from splitopt.families.loading.checks import check_loading

        check_loading(inst)

    def plan_from_dict(self, inst: LoadingInstance, raw: Any, where: str = "plan") -> Any:
        from splitopt.families.loading.plan import plan_from_dict

        self.prepare(inst)
        return plan_from_dict(inst, raw, where)

    def plan_type(self) -> type:
        from splitopt.families.loading.plan import LoadingPlan

        return LoadingPlan

    def evaluate(self, inst: LoadingInstance, plan: Any) -> Any:
        from splitopt.families.loading.evaluate import evaluate

        self.prepare(inst)
        return evaluate(inst, plan)

    def start_plan(self, inst: LoadingInstance) -> Any:
        from splitopt.families.loading.start import start_plan

        self.prepare(inst)
        return start_plan(inst)

    def diagnose(self, inst: LoadingInstance, resolve: Callable[[LoadingInstance], bool]) -> str:
        from splitopt.families.loading.data import data
        from splitopt.families.loading.diagnose import diagnose

        return diagnose(data(inst))

    def proven_infeasible(self, inst: LoadingInstance) -> str | None:
        from splitopt.families.loading.data import data
        from splitopt.families.loading.diagnose import no_child_count_message

        d = data(inst)
        return None if d.child_counts() else no_child_count_message(d)

    def build_program(self, inst: LoadingInstance, kind: str, start: Any) -> Program:
        self.prepare(inst)
        if kind == "cpsat":
            from splitopt.families.loading.cpsat import build_cpsat

            return build_cpsat(inst, start)
        if kind == "linear":
            from splitopt.families.loading.milp import build_milp

            return build_milp(inst, start)
        raise NotApplicable(f"problem 'loading' builds no program of kind '{kind}'")

    def methods(self) -> Sequence[Method]:
        return METHODS

    def enumerate_plans(self, inst: LoadingInstance, limit: int) -> Iterator[Any]:
        from splitopt.families.loading.enumerate import enumerate_plans

        self.prepare(inst)
        return enumerate_plans(inst, limit)

    def space(self, inst: LoadingInstance) -> SearchSpace:
        from splitopt.families.loading.space import loading_space

        self.prepare(inst)
        return loading_space(inst)

    def exact_method(self, inst: LoadingInstance) -> str | None:
        """``partition-search`` where it is exact (balance; latency with every allowed child
        count <= T): microseconds to a second where CP-SAT needs seconds to minutes; else
        (latency with a count above T) ``count-search`` (benchmarks/results/loading.md: it
        closes or nearly closes instances where CP-SAT left gaps of 16-71 %)."""
        from splitopt.families.loading.data import data

        self.prepare(inst)
        d = data(inst)
        counts = list(d.child_counts())
        if inst.objective == "balance" or not counts or max(counts) <= d.threads:
            return "partition-search"
        return "count-search"

    def lower_bound(self, inst: LoadingInstance) -> float | None:
        from splitopt.families.loading.bound import loading_lower_bound
        from splitopt.families.loading.data import data

        self.prepare(inst)
        return loading_lower_bound(data(inst), inst.objective)

    def random_instance(self, seed: int) -> LoadingInstance:
        from splitopt.families.loading.examples import small_random_data

        return self.instance_from_data(small_random_data(seed))

    def breakdown(self, inst: LoadingInstance, metrics: Any) -> list[tuple[str, float, float]]:
        """Per thread its loading time (as 'communication': storage to memory), and the
        inference device's compute."""
        rows: dict[str, list[float]] = {}
        for t in metrics.schedule:
            row = rows.setdefault(t.resource, [0.0, 0.0])
            row[0 if t.kind == "compute" else 1] += t.duration_ms
        return [(name, a, b) for name, (a, b) in rows.items()]

    def summary(self, inst: LoadingInstance) -> str:
        from splitopt.families.loading.data import data

        d = data(inst)
        return (f"{inst.name}: {d.n} blocks, {float(d.block_bytes.sum()) / 1e6:,.3f} MB of weights, problem loading, "
                f"{d.threads} threads, {d.k_min}..{d.k_max} children, trainable tail {d.tail}, inference on "
                f"'{d.device}'")

    def report(self, console, inst: LoadingInstance, plan: Any, metrics: Any, show_layers: bool = True) -> None:
        from splitopt.families.loading.report import report

        report(console, inst, plan, metrics, show_layers)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 150

    def default_solvers(self, problem: str, objective: str) -> tuple[str, ...]:
        """The exact backends, the count search and the simple baselines (``partition-search``,
        ``reference-plans`` and ``paper-rlu`` apply to some instances only: run them with
        ``-s``)."""
        return ("cpsat", "milp-highs", "count-search", "monolithic", "equal-count", "equal-bytes")
    # ----- the torch bridge and hardware presets ------------------------------------------------
    torch_side = "splitopt.torch.loading.side:LoadingSide"
