"""An llm plan to start from (and fall back on): the best plan that meets every limit
among the dynamic program's at the lowest and at the highest bit-widths (where it takes
the instance) and the baselines' (``methods.py``)."""

from __future__ import annotations

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.core.options import SolveOptions
from splitopt.families.llm import dp
from splitopt.families.llm.data import data
from splitopt.families.llm.evaluate import evaluate
from splitopt.families.llm.plan import LlmPlan
from splitopt.families.llm.settings import LlmSettings


def start_plan(inst: Instance[LlmSettings]) -> LlmPlan:
    return inst.derived(("llm", "start_plan"), lambda: _start_plan(inst))


def candidates(inst: Instance[LlmSettings]) -> list[LlmPlan]:
    """The plans the start is chosen from, in order of preference on ties."""
    from splitopt.families.llm import methods

    d = data(inst)
    plans: list[LlmPlan] = []
    if dp.applies(d) is None:
        for widths in (methods.lowest_widths(d), methods.highest_widths(d)):
            found = methods.dp_plan(inst, widths)
            if found is not None:
                plans.append(found)
    for run in (methods.best_single_device, methods.greedy_blocks, methods.memory_proportional_ring,
                methods.equal_layers):
        try:
            plan = run(inst, SolveOptions()).plan
        except NotApplicable:
            continue
        if plan is not None:
            plans.append(plan)
    return plans


def _start_plan(inst: Instance[LlmSettings]) -> LlmPlan:
    plans = candidates(inst)
    scored = [(not m.feasible, m.objective_ms, k) for k, m in enumerate(evaluate(inst, p) for p in plans)]
    return plans[min(scored)[2]]
