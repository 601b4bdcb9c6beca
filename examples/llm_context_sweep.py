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
`benchmarks/llm_context.py` runs the same sweep over more context limits and every rule,
and plots it.
"""

from pathlib import Path

import splitopt
from splitopt.families.llm.context import context_sweep, runtime_text

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instances" / "llm_llama31_8b_3dev.json"
RULES = ("memory-proportional-ring", "equal-layers")

print(f"{'context':>8}  {'optimum ms/token':>16}  {'tokens/s':>8}  "
      + "  ".join(f"{rule:>24}" for rule in RULES) + "  plan")
# the prompt fills each context limit but for the 256 tokens generated; the context limit
# sizes every device's KV cache (`splitopt solve --set settings.context_limit=...` makes the
# same edits on the command line)
inst = splitopt.load_instance(INSTANCE)
for point in context_sweep(inst, (2_048, 8_192, 32_768, 131_072), generated=256, solver="llm-dp", rules=RULES):
    best = point.optimum
    cells = [f"{point.rules[rule].objective / best.objective:.2f}x the optimum" if point.rule_fits(rule)
             else "does not fit" for rule in RULES]
    print(f"{point.context:>8,}  {best.status.name} {best.objective:>7.3f}  {1000 / best.objective:>8.2f}  "
          + "  ".join(f"{cell:>24}" for cell in cells) + f"  {runtime_text(point.inst, best.plan)}")
