"""The llm family's optimum against the rules the field's tools use: on every shipped
``instances/llm_*.json`` and for each objective (time to first token, one stream's time per
token, the pipeline's time per token), the proven optimum (``auto``: ``llm-dp`` where it is
exact, else ``milp-highs``) and each baseline's plan judged by the same evaluator: its
value, its ratio to the optimum, or why it breaks a limit.

Run: ``python benchmarks/llm_baselines.py [--time-limit 120]``; writes
``benchmarks/results/llm_baselines.md`` and the compact table between the markers of the
README's "Language models: the optimum against the field's rules" section. ``--quick``
(the instances that ``llm-dp`` solves outright, a 10 s limit) prints the table only.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import machine  # noqa: E402
from splitopt.api import load_instance  # noqa: E402
from splitopt.families.llm.context import RULES  # noqa: E402
from splitopt.solve import solve  # noqa: E402

OBJECTIVES = ("ttft", "token_latency", "throughput")
#: what each objective's tokens/s is (none for the time to first token)
RATE = {"ttft": None, "token_latency": "one stream", "throughput": "pipeline"}
README = ROOT / "README.md"
MARKERS = ("<!-- llm-baselines:start -->", "<!-- llm-baselines:end -->")


def short_reason(violation: str) -> str:
    """The first limit a plan breaks, in a few words for a table cell."""
    device = re.match(r"device '([^']+)' memory", violation)
    if device:
        return f"{device.group(1)}'s memory"
    if violation.startswith("no link"):
        return "a missing link"
    if "pinned" in violation:
        return "a pin"
    if "error budget" in violation:
        return "the error budget"
    return violation.split(" (")[0]


def value_text(objective: str, ms: float) -> str:
    """An objective's value: ms, and tokens/s where the objective has them."""
    if RATE[objective] is None:
        return f"{ms:,.4g} ms"
    rate = 1000.0 / ms
    return f"{ms:,.4g} ms, {rate:,.0f} tok/s" if rate >= 100 else f"{ms:,.4g} ms, {rate:.1f} tok/s"


def run_case(inst, objective: str, limit: float) -> dict:
    """The optimum and each rule on ``inst`` at ``objective``."""
    variant = inst.with_settings(objective=objective)
    t0 = time.perf_counter()
    best = solve(variant, "auto", time_limit=limit, threads=2)
    row = {"optimum": best, "seconds": time.perf_counter() - t0, "rules": {}}
    for rule in RULES:
        res = solve(variant, rule, time_limit=limit, threads=2)
        row["rules"][rule] = res
    return row


def rule_cell(objective: str, best, res, compact: bool) -> str:
    """A rule's value and ratio to the optimum, or why it has no plan that meets the limits."""
    if res.plan is None or res.metrics is None:
        return "no plan" + ("" if compact else f": {res.message}")
    if not res.metrics.feasible:
        return f"infeasible: {short_reason(res.metrics.violations[0])}"
    if best.objective is None:
        return value_text(objective, res.objective)
    ratio = f"{res.objective / best.objective:.2f}x"
    return ratio if compact else f"{ratio} ({value_text(objective, res.objective)})"


def optimum_cell(best, compact: bool) -> str:
    if best.objective is None:
        return best.status.value
    text = value_text(best.metrics.objective, best.objective)
    if best.status.value != "OPTIMAL":
        text += f" ({best.status.value}, gap {100 * (best.gap or 0):.2g} %)"
    return text


def table(rows: list, compact: bool) -> list[str]:
    head = ["instance", "objective", "optimum", *RULES] if compact else \
        ["instance", "objective", "optimum", "method, s", *RULES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, objective, r in rows:
        best = r["optimum"]
        method = best.message.split(":")[1].strip().split(" ")[0] if best.message.startswith("auto:") else best.backend
        cells = [name, objective, optimum_cell(best, compact)]
        if not compact:
            cells.append(f"{method}, {r['seconds']:.2f}")
        cells += [rule_cell(objective, best, r["rules"][rule], compact) for rule in RULES]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def reasons(rows: list) -> list[str]:
    """Every rule's broken limits in full, one line each."""
    out = []
    for name, objective, r in rows:
        for rule in RULES:
            res = r["rules"][rule]
            if res.metrics is not None and not res.metrics.feasible:
                out.append(f"* {name}, {objective}, `{rule}`: " + "; ".join(res.metrics.violations))
    return out


def write_readme(compact: list[str], header: str) -> None:
    """The compact table between the README's markers."""
    text = README.read_text()
    start, end = (text.index(m) for m in MARKERS)
    body = "\n".join([MARKERS[0], header, "", *compact, MARKERS[1]])
    README.write_text(text[:start] + body + text[end + len(MARKERS[1]):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    limit = 10.0 if args.quick else args.time_limit
    rows = []
    for path in sorted((ROOT / "instances").glob("llm_*.json")):
        inst = load_instance(path)
        if args.quick and inst.settings.error_budget is not None:
            continue  # the error budget binds: milp-highs takes seconds to minutes
        for objective in OBJECTIVES:
            r = run_case(inst, objective, limit)
            rows.append((path.stem, objective, r))
            print(f"{path.stem} {objective}: {r['optimum'].status.value} {r['optimum'].objective} ms in "
                  f"{r['seconds']:.2f} s", flush=True)
    command = f"python benchmarks/llm_baselines.py --time-limit {limit:g}"
    header = (f"`{command}` on {machine()} ({sys.platform}); each cell is the rule's value over the optimum's on "
              "the same instance and objective, judged by the one evaluator (ttft: time to first token; "
              "token_latency: one stream's ms per token; throughput: the pipeline's ms per token over its streams).")
    full = ["# llm: the optimum against the field's rules\n", header + " Optimum by `auto` (`llm-dp` where it is "
            f"exact, else `milp-highs`), time limit {limit:g} s; method, s: the method `auto` ran and the seconds "
            "it took. Rules: `memory-proportional-ring` (exo), `equal-layers` (distributed-llama, vLLM's default), "
            "`greedy-blocks` (Petals), `layer-dp` (PipeEdge / EdgeShard: blind to the KV cache and to bits), "
            "`best-single-device`.\n", *table(rows, compact=False), "", "## The limits the rules break\n",
            *reasons(rows)]
    text = "\n".join(full) + "\n"
    if args.quick:
        print(text)
        return
    out = ROOT / "benchmarks" / "results" / "llm_baselines.md"
    out.write_text(text)
    write_readme(table(rows, compact=True), header)
    print(f"wrote {out.relative_to(ROOT)} and the table in README.md")


if __name__ == "__main__":
    main()
