"""The chain family at 300 to 10,000 layers x 8 devices on random DAGs with long skips
(``splitopt.families.chain.examples.random_chain_data``): the latency objective through
``chain-cut`` (one max-flow; OPTIMAL where its memory-free optimum meets every memory
limit) and, where a memory limit binds, ``auto`` with a time limit (its exact method there
is ``chain-bb``, the branch and bound over the priced cuts) beside ``cpsat`` with the same
limit; CP-SAT side by side on the 1,000-layer instances the cut proves (the program the
issue measured); the throughput objective through ``auto`` (``chain-bb`` there too) and
``cpsat`` with a time limit, with the bounds they report.

Wall and CPU seconds per phase: generating the JSON data is not counted; "read" is
parsing and checking it (as ``splitopt solve`` does after reading the file), "solve" is
``splitopt.solve`` (build included, its time limit counted from its call).

    python benchmarks/chain_scale.py [--sizes 300,1000,3000,10000] [--seeds 5] [--time-limit 60]
        [--cpsat-size 1000] [--throughput-sizes 1000,10000] [--throughput-seeds 2]
        [--before OLD/chain_scale.json --before-label "..."]

Writes ``chain_scale.md`` and ``chain_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitopt.api import parse_instance  # noqa: E402
from splitopt.families.chain.examples import random_chain_data  # noqa: E402
from splitopt.solve import solve  # noqa: E402


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run(n: int, seed: int, objective: str, solver: str | None, limit: float | None) -> dict:
    data = random_chain_data(seed, n, 8, objective=objective)
    inst, read_s, read_cpu = timed(lambda: parse_instance(data))
    res, wall, cpu = timed(lambda: solve(inst, solver=solver, time_limit=limit))
    row = {"layers": n, "seed": seed, "objective": objective, "solver": solver or "auto", "status": res.status.name,
           "objective_ms": res.objective, "bound_ms": res.bound, "gap": res.gap, "read_s": read_s,
           "read_cpu_s": read_cpu, "solve_s": wall, "solve_cpu_s": cpu,
           "exact_backend": res.extra.get("exact_backend"), "message": res.message[:200]}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300,1000,3000,10000")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--cpsat-size", type=int, default=1000)
    ap.add_argument("--throughput-sizes", default="1000,10000")
    ap.add_argument("--throughput-seeds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--before", type=Path, default=None,
                    help="a chain_scale.json of an earlier commit, run side by side: its rows become a 'before' column")
    ap.add_argument("--before-label", default="before",
                    help="what the 'before' column was measured on (printed above the table)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    for n in sizes:
        for seed in range(args.seeds):
            cut = run(n, seed, "latency", "chain-cut", None)
            rows.append(cut)
            if cut["status"] != "OPTIMAL":
                rows.append(run(n, seed, "latency", None, args.time_limit))
                rows.append(run(n, seed, "latency", "cpsat", args.time_limit))
            elif n == args.cpsat_size:
                rows.append(run(n, seed, "latency", "cpsat", args.time_limit))
    for n in [int(s) for s in args.throughput_sizes.split(",") if s]:
        for seed in range(args.throughput_seeds):
            rows.append(run(n, seed, "throughput", None, args.time_limit))
            rows.append(run(n, seed, "throughput", "cpsat", args.time_limit))

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    def key(r):
        return r["layers"], r["seed"], r["objective"], r["solver"]

    before = {key(r): r for r in json.loads(args.before.read_text())} if args.before else {}

    def before_cell(r) -> str:
        b = before.get(key(r))
        if b is None:
            return " - |"
        return f" {b['status']}, {f(b['objective_ms'], '.4f')}, {f(b['gap'], '.2%')}, {b['solve_s']:.2f} s |"

    lines = [
        "# The chain family at scale (random DAGs with long skips x 8 devices)",
        "",
        f"`python benchmarks/chain_scale.py --sizes {args.sizes} --seeds {args.seeds} --time-limit "
        f"{args.time_limit:g} --cpsat-size {args.cpsat_size} --throughput-sizes {args.throughput_sizes} "
        f"--throughput-seeds {args.throughput_seeds}`; {machine(shared=True)}. Instances "
        "`random_chain_data(seed, layers, 8, objective)`. Wall (CPU) seconds; read: parse and check the data; "
        "solve: `splitopt.solve` with build, limit counted from its call. `chain-cut` has no limit (one max-flow).",
        "",
        *([f"'before': {args.before_label}.", ""] if before else []),
        "| layers | seed | objective | solver | status | objective ms | bound ms | gap | read s | solve s (CPU) |"
        + (" before: status, objective ms, gap, solve s |" if before else ""),
        "|---:|---:|---|---|---|---:|---:|---:|---:|---:|" + ("---|" if before else ""),
    ]
    for r in rows:
        solver = r["solver"] + (f" ({r['exact_backend']})" if r["solver"] == "auto" and r["exact_backend"] else "")
        lines.append(f"| {r['layers']:,} | {r['seed']} | {r['objective']} | {solver} | {r['status']} | "
                     f"{f(r['objective_ms'], '.4f')} | {f(r['bound_ms'], '.4f')} | {f(r['gap'], '.2%')} | "
                     f"{r['read_s']:.2f} | {r['solve_s']:.2f} ({r['solve_cpu_s']:.2f}) |"
                     + (before_cell(r) if before else ""))
    lines += ["", "Medians of the `chain-cut` solve seconds where it proved the optimum:", ""]
    for n in sizes:
        times = [r["solve_s"] for r in rows if r["layers"] == n and r["solver"] == "chain-cut"
                 and r["status"] == "OPTIMAL"]
        proven = len(times)
        total = sum(1 for r in rows if r["layers"] == n and r["solver"] == "chain-cut")
        lines.append(f"- {n:,} layers: {proven} of {total} proven by the cut"
                     + (f", median {statistics.median(times):.2f} s" if times else ""))
    lines += ["", f"Where a memory limit binds (latency) and on throughput, by solver ({args.time_limit:g} s limit): "
              "proven, and the median gap of the rest:", ""]
    bound_by_memory = {(r["layers"], r["seed"]) for r in rows
                       if r["solver"] == "chain-cut" and r["status"] != "OPTIMAL"}
    for objective in ("latency", "throughput"):
        for solver in sorted({r["solver"] for r in rows if r["objective"] == objective and r["solver"] != "chain-cut"}):
            runs = [r for r in rows if r["objective"] == objective and r["solver"] == solver
                    and (objective == "throughput" or (r["layers"], r["seed"]) in bound_by_memory)]
            proven = sum(r["status"] == "OPTIMAL" for r in runs)
            gaps = [r["gap"] for r in runs if r["status"] != "OPTIMAL" and r["gap"] is not None]
            lines.append(f"- {objective}, {solver}: {proven} of {len(runs)} proven"
                         + (f"; the others' median gap {statistics.median(gaps):.2%}" if gaps else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "chain_scale.md").write_text("\n".join(lines) + "\n")
    (args.out / "chain_scale.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
