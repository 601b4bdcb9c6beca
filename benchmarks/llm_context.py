"""How the optimal plan of a language model and its tokens/s move with the context length:
Llama-3.1-8B over a Raspberry Pi 5, an Apple M1 Max laptop and an RTX 4090
(``instances/llm_llama31_8b_3dev.json``, objective: one stream's time per token) at context
limits of 2k to 128k tokens, 256 of them generated and the rest the prompt
(``splitopt.families.llm.context``, the sweep ``examples/llm_context_sweep.py`` runs). At
each: the proven optimum (``auto``) with its devices, layer ranges and bits, and each rule
of the field judged by the same evaluator (its tokens/s, or the limit its plan breaks).

Run: ``python benchmarks/llm_context.py``; writes ``benchmarks/results/llm_context.md`` and
``benchmarks/results/llm_context.png``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from llm_baselines import short_reason  # noqa: E402
from machine import machine  # noqa: E402
from splitopt.api import load_instance  # noqa: E402
from splitopt.families.llm.context import RULES, context_sweep, runtime_text  # noqa: E402
from splitopt.families.llm.plan import runtime_assignment  # noqa: E402

INSTANCE = ROOT / "instances" / "llm_llama31_8b_3dev.json"
CONTEXTS = (2_048, 4_096, 8_192, 16_384, 32_768, 65_536, 131_072)
GENERATED = 256
OUT = ROOT / "benchmarks" / "results"


def table(points, seconds: float) -> str:
    head = ["context", "optimum ms/token", "tokens/s", "plan (blocks per device, bits)", *RULES]
    lines = ["# llm: the optimal plan against the context length\n",
             f"`python benchmarks/llm_context.py` on {machine()} ({sys.platform}), {seconds:.1f} s in all: "
             f"`{INSTANCE.relative_to(ROOT)}` (objective `{points[0].inst.objective}`: one stream's time per "
             f"token) at each context limit, {GENERATED} tokens generated and the rest the prompt; the optimum by "
             "`auto` (status in the column), each rule's one-stream tokens/s judged by the same evaluator, or the "
             "limit its plan breaks.\n",
             "| " + " | ".join(head) + " |", "|" + "---:|" * 3 + "---|" + "---:|" * len(RULES)]
    for p in points:
        best = p.optimum
        cells = [f"{p.context:,}", f"{best.objective:.3f} ({best.status.value})", f"{1000 / best.objective:.1f}",
                 runtime_text(p.inst, best.plan, bits=True)]
        for rule in RULES:
            res = p.rules[rule]
            if p.rule_fits(rule):
                cells.append(f"{1000 / res.objective:.1f}")
            elif res.metrics is not None:
                cells.append(f"does not fit: {short_reason(res.metrics.violations[0])}")
            else:
                cells.append("no plan")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(points, path: Path) -> None:
    """Top: tokens/s of the optimum and of each rule where its plan fits; bottom: the
    optimum's layer ranges per device (bars over the model's blocks) with their bits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(len(points)))
    labels = [f"{p.context // 1024}k" for p in points]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 7.0), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    from matplotlib.patches import Patch
    from matplotlib.ticker import ScalarFormatter

    top.plot(xs, [1000 / p.optimum.objective for p in points], "o-", color="black", linewidth=3, alpha=0.35,
             markersize=10, label="optimum (proven)", zorder=1)
    for rule, marker in zip(RULES, ("s", "^", "v", "D", "x")):
        fit = [(x, 1000 / p.rules[rule].objective) for x, p in zip(xs, points) if p.rule_fits(rule)]
        if fit:
            top.plot([a for a, _ in fit], [b for _, b in fit], marker=marker, linestyle="--", alpha=0.8,
                     label=f"{rule} ({len(fit)} of {len(points)} fit)", zorder=3)
    top.set_yscale("log")
    top.yaxis.set_major_formatter(ScalarFormatter())
    top.yaxis.set_minor_formatter(ScalarFormatter())
    top.set_ylabel("tokens/s (one stream)")
    top.set_title(f"{points[0].inst.name}: the optimum and the rules against the context length")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    devices = list(dict.fromkeys(st.device for p in points for st in p.optimum.plan.stages))
    colours = dict(zip(devices, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for x, p in zip(xs, points):
        for stage in runtime_assignment(p.inst, p.optimum.plan):
            low, high = stage["start"], stage["end"]
            bottom.bar(x, high - low, bottom=low, width=0.6, color=colours[stage["device"]], edgecolor="black")
            bottom.text(x, (low + high) / 2, f"{stage['weight_bits']}b", ha="center", va="center", fontsize=7)
    bottom.legend(handles=[Patch(color=colours[name], label=name) for name in devices], fontsize=8, loc="upper left")
    bottom.set_ylabel("parts (embedding, blocks, head)")
    bottom.set_xlabel("context limit (tokens)")
    bottom.set_xticks(xs, labels)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    inst = load_instance(INSTANCE)
    t0 = time.perf_counter()
    points = context_sweep(inst, CONTEXTS, generated=GENERATED, solver="auto")
    seconds = time.perf_counter() - t0
    for p in points:
        print(f"{p.context:>8,} {p.optimum.status.value} {p.optimum.objective:.4f} ms  "
              f"{runtime_text(p.inst, p.optimum.plan, bits=True)}", flush=True)
    (OUT / "llm_context.md").write_text(table(points, seconds))
    plot(points, OUT / "llm_context.png")
    print("wrote benchmarks/results/llm_context.md and benchmarks/results/llm_context.png")


if __name__ == "__main__":
    main()
