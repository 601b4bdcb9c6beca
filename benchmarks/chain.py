"""Benchmark of the chain family: ``instances/jmsnas_chain_*.json`` and
``instances/transformer1000_chain8*.json`` x backend.

Backends: the exact ``cpsat``, ``milp-highs``, ``milp-cbc`` (time limit ``--time-limit``
seconds, default 120), ``chain-dp`` where the layer graph is a chain, and the
``chain-scan`` (HiveMind-style) and ``best-single-device`` baselines. Every run goes
through ``splitopt.solve.solve`` (the independent evaluator re-checks each plan).
Reported: status, objective (ms: Eq. 1 latency or the throughput bottleneck), proven
bound, gap, median wall time (build + solve) of ``--repeats`` runs (an exact run that
reaches its time limit is run once), layers per device, and the objective relative to
``best-single-device``. Target: the 1,000-layer x 8-device chain proven optimal in < 30 s.

Every solve runs on the sweep runner (``benchmarks/runner_support.py``: its own process, a
JSONL store that a re-run resumes, ``--executor``, ``-j``, ``--store``, ``--fresh``); the
rows come from ``mesh.py``'s ``run_rows`` (the same repeat rule).

Run: ``python benchmarks/chain.py [--repeats 3] [--time-limit 120]``; writes
``benchmarks/results/chain.md`` and ``benchmarks/results/chain.json``. ``--quick`` (the
first instance, one run, a 5 s limit) writes them to ``benchmarks/results/cache/quick/``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import machine  # noqa: E402
from mesh import run_rows  # noqa: E402  (the same rows, through the sweep runner)
from runner_support import add_runner_options, fmt, runner_line  # noqa: E402

from splitopt.families.chain.methods import is_chain_graph  # noqa: E402
from splitopt.api import load_instance  # noqa: E402

BACKENDS = ["cpsat", "milp-highs", "milp-cbc", "chain-dp", "chain-scan", "best-single-device"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--instances", nargs="*", default=None)
    parser.add_argument("--backends", nargs="*", default=BACKENDS)
    parser.add_argument("--cpu", default="", help="CPU model, for the report (default: benchmarks/machine.py's line)")
    parser.add_argument("--append", action="store_true",
                        help="keep the rows of benchmarks/results/chain.json, replacing those run again")
    parser.add_argument("--quick", action="store_true", help="the first instance, one run, a 5 s limit; "
                        "writes to benchmarks/results/cache/quick/")
    add_runner_options(parser, "chain")
    args = parser.parse_args()
    paths = ([Path(p) for p in args.instances] if args.instances else
             sorted((ROOT / "instances").glob("jmsnas_chain_*.json")) + sorted((ROOT / "instances").glob("transformer1000_chain8*.json")))
    out = ROOT / "benchmarks" / "results"
    if args.quick:
        paths, args.repeats, args.time_limit, out = paths[:1], 1, 5.0, out / "cache" / "quick"
    rows = []
    if args.append and (out / "chain.json").exists():
        rows = json.loads((out / "chain.json").read_text())["rows"]
    # the instance's devices and objective (for the table), and chain-dp only where the graph is a chain
    instances = {str(path): load_instance(path) for path in paths}
    pairs = [(path, backend) for path in paths for backend in args.backends
             if not (backend == "chain-dp" and is_chain_graph(instances[str(path)]) is not None)]
    new = []
    for (path, _), row in zip(pairs, run_rows(pairs, args)):
        inst = instances[str(path)]
        row["devices"] = len(inst.settings.chain)
        row["objective"] = inst.objective
        new.append(row)
    for row in new:
        at = next((i for i, r in enumerate(rows) if (r["instance"], r["backend"]) == (row["instance"], row["backend"])), None)
        if at is None:
            rows.append(row)
        else:
            rows[at] = row
        print(f"{row['instance']:36s} {row['backend']:20s} {row['status']:18s} "
              f"{row['objective_ms'] if row['objective_ms'] is not None else float('nan'):10.4f} ms "
              f"gap {row['gap'] if row['gap'] is not None else float('nan'):.2e} {fmt(row['time_s'], '8.2f')} s", flush=True)
    for row in rows:
        base = next((r for r in rows if r["instance"] == row["instance"] and r["backend"] == "best-single-device"), None)
        if base and base["objective_ms"] and row["objective_ms"] is not None and base["status"] == "FEASIBLE":
            row["vs_best_single_device"] = row["objective_ms"] / base["objective_ms"]
    out.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": machine(), "cpu": args.cpu,
            "threads": args.threads, "time_limit_s": args.time_limit, "repeats": args.repeats,
            "executor": args.executor, "workers": args.workers}
    (out / "chain.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")

    f = fmt
    lines = [
        "# Chain family benchmark (JMSNAS Eq. 1 chains, 1,000-layer x 8-device transformer)",
        "",
        f"`python benchmarks/chain.py --repeats {args.repeats} --time-limit {args.time_limit:g} --threads {args.threads}`; "
        f"{args.cpu + '; ' if args.cpu else ''}{meta['machine']}. Objective: Eq. 1 latency or the throughput "
        "bottleneck (ms) as evaluated by `splitopt.families.chain.evaluate`; bound: the backend's proven lower bound; "
        "time: median seconds (build + solve) of the runs (an exact run that reached the time limit is run "
        f"once); {runner_line(args)}. `vs single` = objective / best-single-device objective (`-` where no single device fits). "
        "NO_SOLUTION_FOUND rows are plans that break a memory limit.",
        "",
        "| instance | layers | objective | backend | status | objective ms | bound ms | gap | time s | runs | vs single |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['instance']} | {r['layers']} | {r['objective']} | {r['backend']} | {r['status']} | "
            f"{f(r['objective_ms'], '.4f')} | {f(r['bound_ms'], '.4f')} | {f(r['gap'], '.2e')} | {f(r['time_s'], '.2f')} | "
            f"{r['runs']} | {f(r.get('vs_best_single_device'), '.3f')} |"
        )
    (out / "chain.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'chain.md'} and {out / 'chain.json'}")


if __name__ == "__main__":
    main()
