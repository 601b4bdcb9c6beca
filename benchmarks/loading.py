"""Loading balance (problem ``loading``): the exact methods against the issue's targets, and
the baselines (the paper's Q-learning unit included) against the optimum.

1. ``balance`` on 10,000 blocks (up to 16 children, T = 4 and 8): ``partition-search``;
   ``cpsat`` on 1,000 blocks beside it for scale (3 seeds, 30 s).
2. ``latency`` (first response) on 1,000 blocks, up to 16 children, T = 2, 4, 8 (Case 1 and
   Case 2): ``cpsat`` with a 10 s limit, then ``auto`` with 10 s.
3. The shipped instances measured on this machine (``instances/loading_*_host.json``):
   ``auto`` (30 s) against the monolithic model, equal-count, equal-bytes, the paper's
   Table 2 cut positions and the paper's Q-learning unit.

Random instances: ``splitopt.families.loading.examples.random_loading_data`` (blocks of
random weights and MACs, a per-child fixed cost, sometimes a storage cap). Wall and CPU
seconds are both given: the machine may be shared.

    python benchmarks/loading.py [--seeds 3] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitopt.api import load_instance  # noqa: E402
from splitopt.families.loading.examples import random_loading_data  # noqa: E402
from splitopt.families.registry import family  # noqa: E402
from splitopt.solve import solve  # noqa: E402


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def instance(seed: int, blocks: int, threads: int, k_max: int, objective: str):
    raw = random_loading_data(seed, blocks, threads=threads, k_max=k_max, objective=objective)
    raw["settings"]["loading"]["children"] = {"min": 1, "max": k_max}
    return family("loading").instance_from_data(raw)


def timed(inst, solver: str, time_limit: float | None = None) -> dict:
    c0, t0 = cpu_s(), time.perf_counter()
    r = solve(inst, solver, time_limit=time_limit, threads=2, seed=0)
    return {"solver": solver, "status": r.status.value, "objective_ms": r.objective, "bound_ms": r.bound,
            "gap": r.gap, "k": r.metrics.k if r.metrics else None, "case": r.metrics.case if r.metrics else None,
            "time_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0}


def part_balance(seeds: int) -> list[dict]:
    rows = []
    for threads in (4, 8):
        for seed in range(seeds):
            inst = instance(seed, 10_000, threads, 16, "balance")
            rows.append({"blocks": 10_000, "threads": threads, "seed": seed, **timed(inst, "partition-search")})
            print(rows[-1], flush=True)
    for seed in range(min(seeds, 3)):
        inst = instance(seed, 1_000, 4, 16, "balance")
        exact = timed(inst, "partition-search")
        cp = timed(inst, "cpsat", 30)
        rows += [{"blocks": 1_000, "threads": 4, "seed": seed, **exact}, {"blocks": 1_000, "threads": 4, "seed": seed, **cp}]
        print(rows[-2:], flush=True)
    return rows


def part_latency(seeds: int) -> list[dict]:
    rows = []
    for threads in (2, 4, 8):
        for seed in range(seeds):
            inst = instance(seed, 1_000, threads, 16, "latency")
            for solver in ("cpsat", "auto"):
                rows.append({"blocks": 1_000, "threads": threads, "seed": seed, **timed(inst, solver, 10.0)})
                print(rows[-1], flush=True)
            best = min(r["objective_ms"] for r in rows[-2:])
            for solver in ("monolithic", "equal-bytes", "paper-rlu"):
                r = timed(inst, solver)
                r["ratio_to_best"] = r["objective_ms"] / best
                rows.append({"blocks": 1_000, "threads": threads, "seed": seed, **r})
    return rows


def part_shipped() -> list[dict]:
    rows = []
    for path in sorted((ROOT / "instances").glob("loading_*_host.json")):
        inst = load_instance(path)
        best = timed(inst, "auto", 30.0)
        rows.append({"instance": path.stem, **best})
        for solver in ("monolithic", "equal-count", "equal-bytes", "reference-plans", "paper-rlu"):
            try:
                r = timed(inst, solver)
            except Exception as e:  # reference-plans: an instance without published cuts
                rows.append({"instance": path.stem, "solver": solver, "skipped": str(e)})
                continue
            r["ratio_to_best"] = r["objective_ms"] / best["objective_ms"]
            rows.append({"instance": path.stem, **r})
        print(rows[-6:], flush=True)
    return rows


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def render(results: dict) -> str:
    out = [f"# Loading balance: exact methods and baselines\n\nMachine: {results['machine']}. "
           f"`python benchmarks/loading.py --seeds {results['seeds']}`; wall (CPU) seconds.\n"]
    out.append("## Balance (heaviest child), `partition-search`\n\n| blocks | T | seeds | status | median wall s | max wall s |\n|---:|---:|---:|---|---:|---:|")
    bal = results["balance"]
    for blocks, threads in sorted({(r["blocks"], r["threads"]) for r in bal}):
        rs = [r for r in bal if r["blocks"] == blocks and r["threads"] == threads and r["solver"] == "partition-search"]
        out.append(f"| {blocks:,} | {threads} | {len(rs)} | {', '.join(sorted({r['status'] for r in rs}))} | "
                   f"{statistics.median(r['time_s'] for r in rs):.3f} | {max(r['time_s'] for r in rs):.3f} |")
    cps = [r for r in bal if r["solver"] == "cpsat"]
    if cps:
        ex = {r["seed"]: r for r in bal if r["blocks"] == 1_000 and r["solver"] == "partition-search"}
        out.append("\nSame 1,000-block balance instances by `cpsat` (30 s limit): " + "; ".join(
            f"seed {r['seed']}: {r['status']} {r['time_s']:.1f} s, objective ratio to partition-search "
            f"{r['objective_ms'] / ex[r['seed']]['objective_ms']:.6f}" for r in cps) + ".\n")
    out.append("## First response, 1,000 blocks, up to 16 children\n\n| T | seed | solver | status | k (case) | objective ms | gap | wall s (CPU) |\n|---:|---:|---|---|---|---:|---:|---:|")
    for r in results["latency"]:
        if r["solver"] in ("cpsat", "auto"):
            out.append(f"| {r['threads']} | {r['seed']} | {r['solver']} | {r['status']} | {r['k']} ({r['case']}) | "
                       f"{fmt(r['objective_ms'])} | {fmt(100 * r['gap'] if r['gap'] is not None else None, 2)} % | "
                       f"{r['time_s']:.1f} ({r['cpu_s']:.1f}) |")
    out.append("\nBaselines on the same instances, objective over the best of `cpsat`/`auto` (median, max):\n")
    for solver in ("monolithic", "equal-bytes", "paper-rlu"):
        ratios = [r["ratio_to_best"] for r in results["latency"] if r["solver"] == solver]
        out.append(f"* `{solver}`: {statistics.median(ratios):.3f}x, {max(ratios):.3f}x")
    out.append("\n## Shipped instances (measured on this machine), `auto` 30 s against the baselines\n\n"
               "| instance | solver | status | k (case) | first response ms | x best |\n|---|---|---|---|---:|---:|")
    for r in results["shipped"]:
        if "skipped" in r:
            out.append(f"| {r['instance']} | {r['solver']} | skipped: no published cuts | | | |")
            continue
        out.append(f"| {r['instance']} | {r['solver']} | {r['status']} | {r['k']} ({r['case']}) | "
                   f"{fmt(r['objective_ms'])} | {fmt(r.get('ratio_to_best', 1.0), 3)} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    results = {"machine": machine(shared=True), "seeds": args.seeds, "balance": part_balance(args.seeds),
               "latency": part_latency(args.seeds), "shipped": part_shipped()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "loading.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "loading.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
