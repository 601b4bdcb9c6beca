"""The llm family's limits on time (``settings.ttft_limit_ms``, ``settings.min_tokens_per_s``)
as the methods see them: the path program and the CP-SAT model hold them as rows, the
evaluator reports a plan that breaks one. The dynamic program of ``dp.py`` minimises one
sum (or the throughput) and cannot hold a *second* measure within a limit, so ``llm-dp``
refuses such an instance and ``auto`` runs ``milp-highs`` there. A limit on the measure the
objective minimises (``ttft_limit_ms`` under ``ttft``, ``min_tokens_per_s`` under
``throughput``) it takes: its optimum meets the limit, or no plan does."""

from __future__ import annotations

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.llm.settings import LlmSettings


#: the limit on the measure each objective minimises
OWN_LIMIT = {"ttft": "ttft_limit_ms", "throughput": "min_tokens_per_s"}


def limits_set(inst: Instance[LlmSettings]) -> list[str]:
    """The names of the limits on time that ``inst`` sets."""
    return [k for k in ("ttft_limit_ms", "min_tokens_per_s") if getattr(inst.settings, k) is not None]


def time_limit_refusal(inst: Instance[LlmSettings]) -> str | None:
    """Why ``llm-dp`` does not take ``inst`` because of a time limit (None: no such limit,
    or only one on the measure the objective minimises)."""
    texts = inst.settings.limit_texts()
    if not texts or limits_set(inst) == [OWN_LIMIT.get(inst.objective)]:
        return None
    return f"a limit on a second measure ({' and '.join(texts)}) is not a dynamic program over one sum"


def llm_dp(inst: Instance[LlmSettings], options: SolveOptions) -> BackendOutput:
    """exact dynamic program over device choice, order and ranges (bits at each device's
    lowest), where no time limit is set on a second measure."""
    from splitopt.families.llm import methods
    from splitopt.families.llm.evaluate import evaluate

    reason = time_limit_refusal(inst)
    if reason is not None:
        raise NotApplicable(f"llm-dp: {reason}; use milp-highs or cpsat")
    out = methods.llm_dp(inst, options)
    if out.plan is None or not limits_set(inst):
        return out
    broken = [v for v in evaluate(inst, out.plan).violations if "settings." + OWN_LIMIT[inst.objective] in v]
    if not broken:
        return out
    if out.status is Status.OPTIMAL:  # the least of the measure breaks its limit: so does every plan
        return BackendOutput(Status.INFEASIBLE, message=f"llm-dp: the optimum's {broken[0]}", extra=out.extra)
    return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"llm-dp: the time limit stopped the program before a "
                                                           f"plan within the limit was found ({broken[0]})",
                         extra=out.extra)
