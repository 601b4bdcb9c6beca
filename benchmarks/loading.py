"""Loading balance (problem ``loading``): the exact methods against the issue's targets, and
the baselines (the paper's Q-learning unit included) against the optimum.

1. ``balance`` on 10,000 blocks (up to 16 children, T = 4 and 8): ``partition-search``;
   ``cpsat`` on 1,000 blocks beside it for scale (3 seeds, 30 s).
2. ``latency`` (first response) on 1,000 blocks, up to 16 children, T = 2, 4, 8 (Case 1 and
   Case 2): ``cpsat``, ``count-search`` (the exact search over child counts) and ``auto``
   (which runs ``count-search`` here), each with a 10 s limit. ``--previous FILE`` carries
   an earlier run's rows of this part into the report as "before".
3. The shipped instances measured on this machine (``instances/loading_*_host.json``):
   ``auto`` (30 s) against the monolithic model, equal-count, equal-bytes, the paper's
   Table 2 cut positions and the paper's Q-learning unit.

Random instances: ``splitopt.families.loading.examples.random_loading_data`` (blocks of
random weights and MACs, a per-child fixed cost, sometimes a storage cap). Wall and CPU
seconds are both given: the machine may be shared.

    python benchmarks/loading.py [--seeds 3] [--out benchmarks/results] [--parts balance,latency,shipped]
                                 [--previous OLD_loading.json]
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


LATENCY_EXACT = ("cpsat", "count-search", "auto")


def part_latency(seeds: int) -> list[dict]:
    rows = []
    for threads in (2, 4, 8):
        for seed in range(seeds):
            inst = instance(seed, 1_000, threads, 16, "latency")
            for solver in LATENCY_EXACT:
                rows.append({"blocks": 1_000, "threads": threads, "seed": seed, **timed(inst, solver, 10.0)})
                print(rows[-1], flush=True)
            best = min(r["objective_ms"] for r in rows[-len(LATENCY_EXACT):])
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


def gap_text(gap) -> str:
    """A gap in %, with enough digits to show a small one."""
    if gap is None:
        return "-"
    pct = 100 * gap
    return "0 %" if pct == 0 else (f"{pct:.2f} %" if pct >= 0.01 else f"{pct:.1e} %")


def render(results: dict) -> str:
    out = [f"# Loading balance: exact methods and baselines\n\nMachine: {results['machine']}. "
           f"`python benchmarks/loading.py --seeds {results['seeds']}`; wall (CPU) seconds.\n"]
    out.append("## Balance (heaviest child), `partition-search`\n\n| blocks | T | seeds | status | median wall s | max wall s |\n|---:|---:|---:|---|---:|---:|")
    bal = results.get("balance", [])
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
    lat = results.get("latency", [])
    out.append("## First response, 1,000 blocks, up to 16 children\n\n10 s limit per run. `auto` runs "
               "`count-search` as its exact method here.\n")
    for solver in LATENCY_EXACT:
        rs = [r for r in lat if r["solver"] == solver]
        if rs:
            proven = sum(r["status"] == "OPTIMAL" for r in rs)
            under = sum(r["status"] == "OPTIMAL" and r["time_s"] < 10.0 for r in rs)
            out.append(f"* `{solver}`: {proven} of {len(rs)} OPTIMAL ({under} under 10 s wall)")
    before = {(r["threads"], r["seed"], r["solver"]): r for r in results.get("before", [])}
    out.append("\n| T | seed | solver | status | k (case) | objective ms | gap | wall s (CPU) | before: status, objective ms, gap |"
               "\n|---:|---:|---|---|---|---:|---:|---:|---|")
    for r in lat:
        if r["solver"] in LATENCY_EXACT:
            b = before.get((r["threads"], r["seed"], r["solver"]))
            was = (f"{b['status']}, {fmt(b['objective_ms'])}, {gap_text(b['gap'])}"
                   if b else "-")
            out.append(f"| {r['threads']} | {r['seed']} | {r['solver']} | {r['status']} | {r['k']} ({r['case']}) | "
                       f"{fmt(r['objective_ms'])} | {gap_text(r['gap'])} | "
                       f"{r['time_s']:.1f} ({r['cpu_s']:.1f}) | {was} |")
    if before:
        out.append(f"\n\"before\": {results.get('before_note', 'an earlier run')}.")
    out.append("\nBaselines on the same instances, objective over the best of the exact runs (median, max):\n")
    for solver in ("monolithic", "equal-bytes", "paper-rlu"):
        ratios = [r["ratio_to_best"] for r in lat if r["solver"] == solver]
        if ratios:
            out.append(f"* `{solver}`: {statistics.median(ratios):.3f}x, {max(ratios):.3f}x")
    out.append("\n## Shipped instances (measured on this machine), `auto` 30 s against the baselines\n\n"
               "| instance | solver | status | k (case) | first response ms | x best |\n|---|---|---|---|---:|---:|")
    for r in results.get("shipped", []):
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
    ap.add_argument("--parts", default="balance,latency,shipped",
                    help="comma-separated parts to run (the others keep their results from --out's loading.json)")
    ap.add_argument("--previous", type=Path, default=None,
                    help="an earlier loading.json whose first-response rows the report shows as 'before'")
    ap.add_argument("--previous-note", default=None, help="what the earlier run was (one line)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    results = {"machine": machine(shared=True), "seeds": args.seeds}
    if "balance" in parts:
        results["balance"] = part_balance(args.seeds)
    if "latency" in parts:
        results["latency"] = part_latency(args.seeds)
    if "shipped" in parts:
        results["shipped"] = part_shipped()
    existing = args.out / "loading.json"
    if existing.exists():  # parts not run now keep their last results
        last = json.loads(existing.read_text())
        for part in ("balance", "latency", "shipped"):
            if part not in results and part in last:
                results[part] = last[part]
    if args.previous is not None:
        old = json.loads(args.previous.read_text())
        results["before"] = [r for r in old.get("latency", []) if r["solver"] in LATENCY_EXACT]
        results["before_note"] = args.previous_note or f"{args.previous.name}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "loading.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "loading.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
