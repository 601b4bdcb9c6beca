"""Plan a decoder language model over the devices you have, and see how the plan moves with
the context length.

Llama-3.1-8B (built from its public config, no download) over a Raspberry Pi 5, an Apple
M1 Max laptop and an RTX 4090 desktop GPU (`instances/llm_llama31_8b_3dev.json`, problem
`llm`; the devices' figures are presets, marked as assumptions): which devices to use, in
which order, and which contiguous layers each runs, so that the time per generated token of
one stream is least, with every device's weights and KV cache (at the context limit) in its
memory. Each row is a longer prompt (256 tokens generated after it, the context limit just
above both): decode reads a KV cache that grows with the context, and the cache must fit. The exact dynamic program (`llm-dp`) proves each
plan; two rules of thumb that tools in the field use, layers in proportion to memory
around a ring and equal layer counts, are judged by the same evaluator beside it.
"""

from pathlib import Path

import splitopt

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instances" / "llm_llama31_8b_3dev.json"
RULES = ("memory-proportional-ring", "equal-layers")


def describe(inst, plan) -> str:
    """The plan as runtimes take it: per device in pipeline order, its blocks [first, end)
    and whether it holds the embedding and the output head."""
    parts = []
    for stage in splitopt.plan_to_dict(inst, plan)["runtime"]:
        extra = "".join(f" +{name}" for name in ("embedding", "head") if stage[name])
        parts.append(f"{stage['device']} blocks [{stage['first_block']}, {stage['end_block']}){extra}")
    return "; ".join(parts)


print(f"{'context':>8}  {'optimum ms/token':>16}  {'tokens/s':>8}  "
      + "  ".join(f"{rule:>24}" for rule in RULES) + "  plan")
for context in (2_048, 8_192, 32_768, 131_072):
    # the prompt fills the context but for the tokens generated; the context limit sizes every
    # device's KV cache (`splitopt solve --set` makes the same edits on the command line)
    inst = splitopt.load_instance(INSTANCE, overrides=[f"settings.context_limit={context}",
                                                       f"settings.prompt_tokens={context - 256}",
                                                       "settings.generated_tokens=256"])
    best = splitopt.solve(inst, solver="llm-dp", time_limit=30)
    cells = []
    for rule in RULES:
        res = splitopt.solve(inst, solver=rule, time_limit=30)
        if res.plan is None or not res.metrics.feasible:
            cells.append("does not fit")
        else:
            cells.append(f"{res.objective / best.objective:.2f}x the optimum")
    line = (f"{context:>8,}  {best.status.name} {best.objective:>7.3f}  {1000 / best.objective:>8.2f}  "
            + "  ".join(f"{cell:>24}" for cell in cells) + f"  {describe(inst, best.plan)}")
    print(line)
