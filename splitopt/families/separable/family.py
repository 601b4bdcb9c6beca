"""The separable family (problem ``separable``; the Separable NN paper): a grouped network
whose paths are divided among G devices, and the communication policy that decides, at
each transmission step, who sends to whom (a permutation), how much (a sparsification
level) and at what precision (a dtype); objective ``latency`` or ``bytes``. Data model:
:mod:`splitopt.families.separable.data`; formulation: ``formulations/separable_policies.md``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.program import Program
from splitopt.families.base import Family, Method, deferred
from splitopt.families.separable.settings import PLAN_FORMAT, SeparableInstance, SeparableSettings
from splitopt.search.space import SearchSpace

# The family's modules need numpy; they are imported where used, so that listing the
# families (``splitopt solvers``, ``splitopt schema``) loads none of it: its methods too
# (``deferred``).

METHODS = (
    Method("ring-allreduce", "the unseparated model, features all-reduced around the ring after every block (the "
           "paper's 100 % reference)", deferred("splitopt.families.separable.methods:ring_allreduce"), hint=True),
    Method("no-communication", "every step silent: each device runs on its own paths",
           deferred("splitopt.families.separable.methods:no_communication"), hint=True),
    Method("all-intensive", "every device sends its whole stream to the next device at every step",
           deferred("splitopt.families.separable.methods:all_intensive"), hint=True),
    Method("reference-policies", "the best published policy the instance carries (paper Table 6)",
           deferred("splitopt.families.separable.methods:reference_policies"), hint=True),
    Method("random-sampling", "the best of 1,000 uniformly random policies (the paper's random sampler), seeded",
           deferred("splitopt.families.separable.methods:random_sampling")),
)


class SeparableFamily(Family):
    name = "separable"
    problems = ("separable",)
    objectives = ("latency", "bytes")
    settings_class = SeparableSettings
    plan_format = PLAN_FORMAT
    program_kinds = ("linear",)
    default_backend = "cpsat"
    description = "a grouped network over G devices: per step who sends to whom, how much, at what precision " \
                  "(Separable NN)"

    def check(self, inst: SeparableInstance) -> None:
        from splitopt.families.separable.checks import check_separable

        check_separable(inst)

    def plan_from_dict(self, inst: SeparableInstance, raw: Any, where: str = "plan") -> Any:
        from splitopt.families.separable.plan import plan_from_dict

        self.prepare(inst)
        return plan_from_dict(inst, raw, where)

    def plan_type(self) -> type:
        from splitopt.families.separable.plan import SeparablePlan

        return SeparablePlan

    def evaluate(self, inst: SeparableInstance, plan: Any) -> Any:
        from splitopt.families.separable.evaluate import evaluate

        self.prepare(inst)
        return evaluate(inst, plan)

    def start_plan(self, inst: SeparableInstance) -> Any:
        """The best of ``start.start_plan`` and the gossip constructions: through the head
        (:func:`gossip.star_spread_plans`: mixing with a single transfer's delay at the
        head) and with a 3-cycle (:func:`gossip.cycle_gossip_plans`: mixing in ``4 G - 9``
        messages on the cheapest steps)."""
        from splitopt.families.separable.data import data
        from splitopt.families.separable.gossip import cycle_gossip_plans, star_spread_plans
        from splitopt.families.separable.methods import best_of
        from splitopt.families.separable.start import start_plan

        self.prepare(inst)
        d = data(inst)
        return best_of(inst, [start_plan(inst), *star_spread_plans(d), *cycle_gossip_plans(d)])[1]

    def diagnose(self, inst: SeparableInstance, resolve: Callable[[SeparableInstance], bool]) -> str:
        from splitopt.families.separable.diagnose import diagnose

        self.prepare(inst)
        return diagnose(inst, resolve)

    def build_program(self, inst: SeparableInstance, kind: str, start: Any) -> Program:
        self.prepare(inst)
        if kind == "linear":
            from splitopt.families.separable.milp import build_milp

            return build_milp(inst, start)
        raise NotApplicable(f"problem 'separable' builds no program of kind '{kind}'")

    def methods(self) -> Sequence[Method]:
        return METHODS

    def enumerate_plans(self, inst: SeparableInstance, limit: int) -> Iterator[Any]:
        from splitopt.families.separable.enumerate import enumerate_plans

        self.prepare(inst)
        return enumerate_plans(inst, limit)

    def space(self, inst: SeparableInstance) -> SearchSpace:
        from splitopt.families.separable.space import separable_space

        self.prepare(inst)
        return separable_space(inst)

    def lower_bound(self, inst: SeparableInstance) -> float | None:
        """From the counting arguments of the gossip constructions (``bound.py``):
        ``latency`` the silent policy's latency raised by the transfers mixing and
        intensive steps force; ``bytes`` the cheapest messages they force."""
        from splitopt.families.separable.bound import separable_lower_bound

        self.prepare(inst)
        return separable_lower_bound(inst)

    def random_instance(self, seed: int) -> SeparableInstance:
        from splitopt.families.separable.examples import small_random_data

        return self.instance_from_data(small_random_data(seed))

    def objective_unit(self, inst: SeparableInstance) -> str:
        return "bytes" if inst.objective == "bytes" else "ms"

    def summary(self, inst: SeparableInstance) -> str:
        from splitopt.families.separable.data import data

        d = data(inst)
        return (f"{inst.name}: {len(d.blocks)} separable blocks over {d.g} devices, alpha = {d.alpha}: {d.steps} "
                f"transmission steps, {d.levels} sparsity levels, dtypes {', '.join(d.dtypes)}, problem separable")

    def report(self, console, inst: SeparableInstance, plan: Any, metrics: Any, show_layers: bool = True) -> None:
        from splitopt.families.separable.report import report

        report(console, inst, plan, metrics, show_layers)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 100
    front_measure = "bytes"

    def pareto_front(self, inst: SeparableInstance, solve: Callable[[SeparableInstance], Any], points: int, mode: str) -> Any:
        """The latency / bytes front (``pareto.py``); one sweep only (every corner, each
        lexicographic), so ``mode`` is not used."""
        from splitopt.families.separable.pareto import pareto_front

        self.prepare(inst)
        return pareto_front(inst, solve, points)

    def default_solvers(self, problem: str, objective: str) -> tuple[str, ...]:
        """The exact backends and the baselines but ``reference-policies`` (only where the
        instance carries published policies: run it with ``-s``)."""
        return ("cpsat", "milp-highs", "ring-allreduce", "no-communication", "all-intensive", "random-sampling")
    # ----- the torch bridge and hardware presets ------------------------------------------------
    torch_side = "splitopt.torch.separable.side:SeparableSide"
