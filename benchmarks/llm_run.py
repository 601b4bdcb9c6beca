"""Benchmark of the llm family's torch bridge: decoders profiled on this host, solved, and run
split over two processes; measured time to first token and tokens/s against the
evaluator's prediction.

For each model (``gpt2``: the configuration of openai-community/gpt2, 124 M weights; the
Llama-architecture ``llama-l6-h384-a6-kv2-i1024-v4096`` (12.6 M) and
``llama-l8-h768-a12-kv4-i2048-v8192`` (63 M, more work per stage so that the per-hop
costs are a smaller share); random weights, float32, one torch thread per process):

1. ``splitopt profile MODEL --devices host,host2`` (two processes of this host, times
   measured here, the loopback link measured between two processes);
2. solved by ``splitopt solve`` for the throughput of two streams (objective
   ``throughput``, ``streams`` 2: the exact method balances the two stages; for one stream
   on two equal devices the optimum is one device, as a loopback link only adds time);
3. ``splitopt run INSTANCE PLAN --json`` (one stream): the median of ``--repeats``
   generations after one untimed.

Steps 1-3 are one round, repeated ``--rounds`` times (a fresh profile each round, so that
the profile and the run see the same load on a shared host); the table gives the median
over rounds of measured / predicted time to first token and tokens/s, and per stage and
link.

The host is shared with other jobs: the load average before and after each model and
each run is reported, and per stage the CPU time of the run's steps (``process_time`` of
the stage process) beside the profile's CPU time of the same parts: where these agree
while the wall times do not, the stage waited for a core (other jobs), it did not do more
work than the profile measured. Run: ``python benchmarks/llm_run.py [--rounds 3] [--repeats 5] [--wait-load 2.5] [--docs]``; writes
``benchmarks/results/llm_run.md`` (``--docs``: and the tables of the README and the llm guide).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import machine  # noqa: E402

MODELS = ("gpt2", "llama-l6-h384-a6-kv2-i1024-v4096", "llama-l8-h768-a12-kv4-i2048-v8192")
#: the scenario (tokens)
PROMPT, GENERATED = 64, 32
OUT = ROOT / "benchmarks" / "results" / "llm_run.md"
#: the header lines of the tables ``--docs`` rewrites
README_HEADER = "| model, split over 2 processes | time to first token | tokens/s (one stream) |"
GUIDE_HEADER = ("| model | split | time to first token, measured / predicted | tokens/s, measured / predicted |")


def splitopt(*args: str) -> str:
    """Run ``python -m splitopt ARGS`` (this checkout), its stdout; exits on a failure."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"splitopt {' '.join(args)}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def round_trip(model: str, repeats: int, workdir: Path) -> tuple[dict[str, Any], dict[str, Any], float]:
    """One round: profile, solve, run; the run's report, the instance's data, the profile's seconds."""
    instance, balanced, plan = (workdir / f"{model}{s}.json" for s in ("", "_balanced", "_plan"))
    t0 = time.perf_counter()
    splitopt("profile", model, "-o", str(instance), "--devices", "host,host2", "--prompt-tokens", str(PROMPT),
             "--generated-tokens", str(GENERATED), "--quiet")
    profile_s = time.perf_counter() - t0
    data = json.loads(instance.read_text())
    data["settings"].update(objective="throughput", streams=2)
    balanced.write_text(json.dumps(data, indent=1))
    splitopt("solve", str(balanced), "-o", str(plan), "--quiet")
    report = json.loads(splitopt("run", str(balanced), str(plan), "--repeats", str(repeats), "--json"))
    return report, data, profile_s


def model_weights(data: dict[str, Any]) -> float:
    """The model's weights: the parts' sum, a tied embedding matrix once (the head's part
    holds a copy of it)."""
    layers = data["graph"]["layers"]
    tied = min(layers[0]["weights"], layers[-1]["weights"]) if data["settings"]["model"].get("tied_embeddings") else 0
    return sum(layer["weights"] for layer in layers) - tied


def bench(model: str, rounds: int, repeats: int, workdir: Path) -> dict[str, Any]:
    before = load()
    done = [round_trip(model, repeats, workdir) for _ in range(rounds)]
    reports, data, profile_s = [r for r, _, _ in done], done[0][1], done[0][2]
    after = load()
    return {"model": model, "profile_s": profile_s, "load_before": before, "load_after": after, "reports": reports,
            "weights": model_weights(data),
            "stages": [f"{s['device']} {s['first']}..{s['last']}" for s in reports[0]["stages"]],
            "splits": [" / ".join(f"{s['first']}..{s['last']}" for s in r["stages"]) for r in reports]}


def median(values: list[float]) -> float:
    return statistics.median(values)


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | split | ttft measured ms | predicted ms | ratio | tokens/s measured | predicted | ratio | "
             "greedy tokens equal |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        reps = r["reports"]
        m_ttft = median([x["measured"]["ttft_ms"] for x in reps])
        p_ttft = median([x["predicted"]["ttft_ms"] for x in reps])
        m_tps = median([x["measured"]["tokens_per_s"] for x in reps])
        p_tps = median([x["predicted"]["tokens_per_s"] for x in reps])
        lines.append(f"| {r['model']} ({r['weights'] / 1e6:.1f} M) | {' / '.join(r['stages'])} | {m_ttft:.2f} | "
                     f"{p_ttft:.2f} | {median([x['ratios']['ttft'] for x in reps]):.2f} | {m_tps:.1f} | {p_tps:.1f} | "
                     f"{median([x['ratios']['tokens_per_s'] for x in reps]):.2f} | "
                     f"{all(x['tokens_equal'] for x in reps)} |")
    return lines


def pieces(r: dict[str, Any]) -> list[str]:
    """Per stage and link of one model: medians over the rounds, measured and predicted;
    per stage the CPU times of the run and of the profile."""
    reps = r["reports"]
    lines = [f"**{r['model']}** (load average before {r['load_before']}, after {r['load_after']}; profile "
             f"{r['profile_s']:.0f} s; the first round's split, predicted figures of its profile; CPU: the run's / "
             "the profile's CPU time of the stage's parts):", "",
             "| piece | prefill measured ms | predicted | prefill CPU run / profile | decode step measured ms | "
             "predicted | decode CPU run / profile |", "|---|---|---|---|---|---|---|"]
    for k, st in enumerate(reps[0]["stages"]):
        m = [x["stages"][k]["measured"] for x in reps]
        p = st["predicted"]
        pc = [x["stages"][k]["profiled_cpu"] for x in reps]
        cpu_pre = cpu_dec = "-"
        if all(pc):
            cpu_pre = (f"{median([v['prefill_cpu_ms'] for v in m]):.3f} / "
                       f"{median([v['prefill_cpu_ms'] for v in pc]):.3f}")
            cpu_dec = (f"{median([v['decode_cpu_ms'] for v in m]):.3f} / "
                       f"{median([v['decode_cpu_ms'] for v in pc]):.3f}")
        lines.append(f"| stage {st['device']} ({st['first']}..{st['last']}) | {median([v['prefill_ms'] for v in m]):.3f} "
                     f"| {p['prefill_ms']:.3f} | {cpu_pre} | {median([v['decode_ms'] for v in m]):.3f} | "
                     f"{p['decode_ms']:.3f} | {cpu_dec} |")
    for k, link in enumerate(reps[0]["links"]):
        m = [x["links"][k]["measured"] for x in reps]
        p = link["predicted"] or {"prefill_ms": float("nan"), "decode_ms": float("nan")}
        lines.append(f"| link {link['source']}->{link['target']} ({link['carries']}) | "
                     f"{median([v['prefill_ms'] for v in m]):.3f} | {p['prefill_ms']:.3f} | - | "
                     f"{median([v['decode_ms'] for v in m]):.3f} | {p['decode_ms']:.3f} | - |")
    rounds = ", ".join(f"{x['ratios']['ttft']:.2f}/{x['ratios']['tokens_per_s']:.2f} (1-min load "
                       f"{x['load_average']['before'][0]:.2f})" for x in reps)
    return lines + ["", f"Rounds (ttft ratio / tokens/s ratio, the load as the run started): {rounds}; splits: "
                        f"{'; '.join(r['splits'])}.", ""]


def doc_rows(results: list[dict[str, Any]], with_split: bool) -> list[str]:
    """The rows of the "Run it for real" tables of the README (``with_split`` False) and
    the llm guide (True): medians over the rounds, measured / predicted (ratio)."""
    rows = []
    for r in results:
        reps = r["reports"]
        m_ttft, p_ttft = (median([x[k]["ttft_ms"] for x in reps]) for k in ("measured", "predicted"))
        m_tps, p_tps = (median([x[k]["tokens_per_s"] for x in reps]) for k in ("measured", "predicted"))
        name = f"{r['model']} ({r['weights'] / 1e6:.0f} M{', random weights' if not with_split else ''})"
        split = f" {r['splits'][0]} |" if with_split else ""
        rows.append(f"| {name} |{split} {m_ttft:.1f} / {p_ttft:.1f} ms "
                    f"({median([x['ratios']['ttft'] for x in reps]):.2f}) | {m_tps:.1f} / {p_tps:.1f} "
                    f"({median([x['ratios']['tokens_per_s'] for x in reps]):.2f}) |")
    return rows


def update_table(path: Path, header: str, rows: list[str]) -> None:
    """Replace the rows of the table under the line ``header`` in ``path`` by ``rows``."""
    lines = path.read_text().split("\n")
    start = lines.index(header) + 2  # the header and its |---| line
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    path.write_text("\n".join(lines[:start] + rows + lines[end:]))


#: what came before the profile measured passes after a wait and hand-overs after compute
EARLIER = ("Earlier (commit bd866df, before the profile timed each pass after a wait and each hand-over after "
           "the sender computed; load average 4-7.5): gpt2 1.01 / 0.99, llama-l6-h384-a6-kv2-i1024-v4096 1.05 / "
           "0.68 (ttft / tokens/s ratios): its decode stages took about twice their profiled time in the run "
           "(12.2 against 6.5 ms) and each hand-over 2-3 ms against 0.7 ms profiled. With the profile as it is "
           "now, at a 1-minute load average of 1.4-3.8 (commit 56e9473): gpt2 0.94 / 0.87, "
           "llama-l6-h384-a6-kv2-i1024-v4096 1.08 / 1.16, llama-l8-h768-a12-kv4-i2048-v8192 1.00 / 1.00 (its "
           "rounds 0.86-1.03 / 0.93-1.23).")


def wait_for_load(below: float, max_wait_s: float) -> str:
    """Wait until the 1-minute load average is below ``below`` (polled every 15 s), at most
    ``max_wait_s``; what happened, for the results."""
    t0 = time.monotonic()
    while os.getloadavg()[0] >= below and time.monotonic() - t0 < max_wait_s:
        time.sleep(15)
    waited = time.monotonic() - t0
    now = os.getloadavg()[0]
    if now < below:
        return f"started after waiting {waited:.0f} s for a 1-minute load average below {below:g} ({now:.2f})"
    return f"the 1-minute load average stayed at or above {below:g} for {waited:.0f} s; started at {now:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--docs", action="store_true",
                        help="also rewrite the tables of README.md and docs/guide/llm.md ('Run it for real')")
    parser.add_argument("--wait-load", type=float, default=0.0,
                        help="first wait (up to --max-wait s) for the 1-minute load average below this")
    parser.add_argument("--max-wait", type=float, default=900.0)
    args = parser.parse_args()
    waited = wait_for_load(args.wait_load, args.max_wait) if args.wait_load > 0 else ""
    with tempfile.TemporaryDirectory(prefix="splitopt-llm-run-") as tmp:
        results = [bench(m, args.rounds, args.repeats, Path(tmp)) for m in args.models.split(",")]
    lines = ["# llm: measured against predicted, split over two processes", "",
             f"Machine: {machine(shared=True)}. Written by `python benchmarks/llm_run.py --rounds {args.rounds} "
             f"--repeats {args.repeats}` ({time.strftime('%Y-%m-%d')}).", "",
             f"Each model profiled on this host (`splitopt profile MODEL --devices host,host2`, prompt {PROMPT} + "
             f"{GENERATED} generated tokens, one torch thread per process, float32, random weights), solved for the "
             "throughput of two streams (the exact method balances the stages), then run with one stream as two "
             f"processes over loopback TCP (`splitopt run`): the median of {args.repeats} generations after one "
             f"untimed; {args.rounds} such rounds, each with its own profile; below the median over the rounds. Ratio: "
             "measured / predicted (tokens/s: of one stream, the sampled token's way back included).", "",
             *table(results), "", *([f"Load: {waited}."] if waited else []), "", EARLIER, ""]
    for r in results:
        lines += pieces(r)
    OUT.write_text("\n".join(lines))
    if args.docs:
        update_table(ROOT / "README.md", README_HEADER, doc_rows(results, with_split=False))
        update_table(ROOT / "docs" / "guide" / "llm.md", GUIDE_HEADER, doc_rows(results, with_split=True))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
