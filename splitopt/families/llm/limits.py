"""The llm family's limits on time (``settings.ttft_limit_ms``, ``settings.min_tokens_per_s``)
as the methods see them: the path program and the CP-SAT model hold them as rows, the
evaluator reports a plan that breaks one; the dynamic program of ``dp.py`` minimises one
sum (or the throughput) over device sets, order and ranges and cannot hold a second
measure within a limit, so ``llm-dp`` refuses an instance with such a limit and ``auto``
runs ``milp-highs`` there."""

from __future__ import annotations

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput
from splitopt.families.llm.settings import LlmSettings


def time_limit_refusal(inst: Instance[LlmSettings]) -> str | None:
    """Why ``llm-dp`` does not take ``inst`` because of a time limit (None: no such limit)."""
    texts = inst.settings.limit_texts()
    if not texts:
        return None
    return f"a limit on a second measure ({' and '.join(texts)}) is not a dynamic program over one sum"


def llm_dp(inst: Instance[LlmSettings], options: SolveOptions) -> BackendOutput:
    """exact dynamic program over device choice, order and ranges (bits at each device's
    lowest), where no time limit is set."""
    from splitopt.families.llm import methods

    reason = time_limit_refusal(inst)
    if reason is not None:
        raise NotApplicable(f"llm-dp: {reason}; use milp-highs or cpsat")
    return methods.llm_dp(inst, options)
