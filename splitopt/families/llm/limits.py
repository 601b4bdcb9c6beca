"""The llm family's limits on time (``settings.ttft_limit_ms``, ``settings.min_tokens_per_s``)
as the methods see them: the path program and the CP-SAT model hold them as rows, the
evaluator reports a plan that breaks one. ``llm-dp`` holds a limit on a *second* measure as
a resource of ``budget.py`` (``methods.limited_tables``); a limit on the measure the
objective minimises (``ttft_limit_ms`` under ``ttft``, ``min_tokens_per_s`` under
``throughput``) it checks on its optimum: the optimum meets the limit, or no plan does."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.llm.settings import OWN_LIMIT, TIME_LIMITS, LlmSettings


def limits_set(inst: Instance[LlmSettings]) -> list[str]:
    """The names of the limits on time that ``inst`` sets."""
    return [k for k in TIME_LIMITS if getattr(inst.settings, k) is not None]


def llm_dp(inst: Instance[LlmSettings], options: SolveOptions) -> BackendOutput:
    """exact dynamic program over device choice, order, ranges and bits, every limit held."""
    from splitopt.families.llm import methods
    from splitopt.families.llm.evaluate import evaluate

    out = methods.llm_dp(inst, options)
    own = OWN_LIMIT.get(inst.objective)
    if out.plan is None or own not in limits_set(inst):
        return out
    broken = [v for v in evaluate(inst, out.plan).violations if f"settings.{own}" in v]
    if not broken:
        return out
    if out.status is Status.OPTIMAL:  # the least of the measure breaks its limit: so does every plan
        return BackendOutput(Status.INFEASIBLE, message=f"llm-dp: the optimum's {broken[0]}", extra=out.extra)
    return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"llm-dp: the time limit stopped the program before a "
                                                           f"plan within the limit was found ({broken[0]})",
                         extra=out.extra)
