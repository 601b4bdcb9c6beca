"""How the optimal plan of an llm instance moves with the context length: the instance at
each context limit (the prompt fills it but for the tokens generated, so the KV cache to
hold and the attention to compute both grow), solved to optimality and beside it the
rules of thumb (``methods.py``'s baselines), each judged by the one evaluator. Used by
``examples/llm_context_sweep.py`` and ``benchmarks/llm_context.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from splitopt.core.instance import Instance
from splitopt.core.result import SolveResult
from splitopt.families.llm.plan import LlmPlan, runtime_assignment
from splitopt.families.llm.settings import LlmSettings

#: the context limits the sweeps use by default (tokens)
CONTEXTS = (2_048, 8_192, 32_768, 131_072)
#: the baselines, the rules the field's tools use (``methods.py``)
RULES = ("memory-proportional-ring", "equal-layers", "greedy-blocks", "layer-dp", "best-single-device")


@dataclass(frozen=True)
class ContextPoint:
    """One context limit (tokens): the instance at it, the optimum's solve and each rule's
    solve (by name)."""

    context: int
    inst: Instance[LlmSettings]
    optimum: SolveResult
    rules: Mapping[str, SolveResult]

    def rule_fits(self, rule: str) -> bool:
        """Whether the rule's plan meets every limit."""
        res = self.rules[rule]
        return res.plan is not None and res.metrics is not None and res.metrics.feasible


def at_context(inst: Instance[LlmSettings], context: int, generated: int) -> Instance[LlmSettings]:
    """``inst`` with a context limit of ``context`` tokens, ``generated`` of them generated
    and the rest the prompt, checked (InvalidInstance names a field out of range)."""
    from splitopt.families.registry import family_of

    changed = inst.with_settings(context_limit=context, prompt_tokens=context - generated, generated_tokens=generated)
    family_of(changed).prepare(changed)
    return changed


def context_sweep(inst: Instance[LlmSettings], contexts: Sequence[int] = CONTEXTS, generated: int = 256,
                  solver: str = "auto", rules: Sequence[str] = RULES, time_limit: float | None = 30.0
                  ) -> list[ContextPoint]:
    """``inst`` at each of ``contexts`` (``at_context``) solved by ``solver`` and by each
    of ``rules``, within ``time_limit`` seconds each."""
    from splitopt.solve import solve

    out = []
    for context in contexts:
        variant = at_context(inst, context, generated)
        best = solve(variant, solver, time_limit)
        out.append(ContextPoint(context, variant, best, {rule: solve(variant, rule, time_limit) for rule in rules}))
    return out


def runtime_text(inst: Instance[LlmSettings], plan: LlmPlan, bits: bool = False) -> str:
    """The plan as runtimes take it: per device in pipeline order, its blocks ``[first,
    end)``, whether it holds the embedding and the output head, and (``bits``) its weight
    bits."""
    parts = []
    for stage in runtime_assignment(inst, plan):
        extra = "".join(f" +{name}" for name in ("embedding", "head") if stage[name])
        width = f" at {stage['weight_bits']} bits" if bits else ""
        parts.append(f"{stage['device']} blocks [{stage['first_block']}, {stage['end_block']}){extra}{width}")
    return "; ".join(parts)

