"""Benchmark of the mesh family: every ``instances/jmsnas_mesh_*.json`` x backend.

Backends: the exact ``cpsat``, ``milp-highs``, ``milp-cbc`` (time limit ``--time-limit``
seconds, default 60) and the mesh family's ``heft`` heuristic and
``mesh-best-single-device`` baseline (``best-single-device``). Each run goes
through ``splitopt.solve.solve``, so every plan is re-evaluated by the independent
evaluator. Reported: status, makespan (ms), proven bound (ms), gap, time (build + solve,
median of ``--repeats`` runs; an exact run that hits its time limit is not repeated), and
the makespan relative to ``mesh-best-single-device``. Every solve runs on the sweep runner
(``benchmarks/runner_support.py``: its own process, a JSONL store that a re-run resumes,
``--executor``, ``-j``, ``--store``, ``--fresh``).

Run: ``python benchmarks/mesh.py [--repeats 3] [--time-limit 60] [--threads 2]``; writes
``benchmarks/results/mesh.md`` and ``benchmarks/results/mesh.json``. ``--quick`` (the first
instance, one run, a 5 s limit) writes them to ``benchmarks/results/cache/quick/`` instead.
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
from runner_support import (add_runner_options, instance_name, median, repeat_unless_at_limit,  # noqa: E402
                            run_repeated, runner_line, total_s)
from splitopt.sweep.jobs import Job  # noqa: E402

BACKENDS = ["cpsat", "milp-highs", "milp-cbc", "heft", "mesh-best-single-device"]
EXACT = ("cpsat", "milp-highs", "milp-cbc")


def row_of(records: list[dict]) -> dict:
    """A backend's row on one instance from its runs' records: the last run's status,
    bound, gap and plan, the medians of objective and time (build + solve)."""
    last = records[-1]
    plan = last.get("plan") or {}
    devices = {v["device"] for v in plan.get("layers", {}).values()} if plan else None
    return {
        "instance": instance_name(last["instance"]),
        "layers": next((r["size"] for r in records if r.get("size") is not None), "-"),
        "backend": last["solver"],
        "status": last.get("status"),
        "objective_ms": median(r.get("objective") for r in records),
        "bound_ms": last.get("bound"),
        "gap": last.get("gap"),
        "time_s": median(total_s(r) for r in records),
        "runs": len(records),
        "message": last.get("message"),
        "devices_used": sorted(devices) if devices else None,
    }


def run_rows(pairs: list[tuple[Path, str]], args: argparse.Namespace) -> list[dict]:
    """The row of each (instance file, backend), in one sweep (``args``: the runner's
    options, ``repeats``, ``time_limit``, ``threads``); used by ``chain.py`` too."""
    jobs = [Job(str(path), backend, 0, args.time_limit, args.threads) for path, backend in pairs]
    return [row_of(records) for records in run_repeated(jobs, args, repeat_unless_at_limit(args.repeats, EXACT))]


def f(v, fmt):
    return "-" if v is None else format(v, fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--instances", nargs="*", default=None)
    parser.add_argument("--quick", action="store_true", help="the first instance, one run, a 5 s limit; "
                        "writes to benchmarks/results/cache/quick/")
    add_runner_options(parser, "mesh")
    args = parser.parse_args()
    paths = [Path(p) for p in args.instances] if args.instances else sorted((ROOT / "instances").glob("jmsnas_mesh_*.json"))
    out = ROOT / "benchmarks" / "results"
    if args.quick:
        paths, args.repeats, args.time_limit, out = paths[:1], 1, 5.0, out / "cache" / "quick"
    rows = run_rows([(path, backend) for path in paths for backend in BACKENDS], args)
    for row in rows:
        print(f"{row['instance']:32s} {row['backend']:20s} {row['status']:10s} "
              f"{row['objective_ms'] if row['objective_ms'] is not None else float('nan'):10.4f} ms "
              f"gap {row['gap'] if row['gap'] is not None else float('nan'):.2e} {f(row['time_s'], '8.2f')} s", flush=True)
    for row in rows:
        base = next((r for r in rows if r["instance"] == row["instance"] and r["backend"] == "mesh-best-single-device"), None)
        if base and base["objective_ms"] and row["objective_ms"] is not None:
            row["vs_best_single_device"] = row["objective_ms"] / base["objective_ms"]
    out.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": machine(), "threads": args.threads,
            "time_limit_s": args.time_limit, "repeats": args.repeats, "executor": args.executor, "workers": args.workers}
    (out / "mesh.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Mesh family benchmark (JMSNAS Fig. 2(b) mesh)",
        "",
        f"`python benchmarks/mesh.py --repeats {args.repeats} --time-limit {args.time_limit:g} --threads {args.threads}`; "
        f"{meta['machine']}. Objective: makespan (ms) as evaluated by `splitopt.families.mesh.evaluate`; "
        "bound: the backend's proven lower bound; gap = (objective - bound) / objective; time: median seconds "
        "(build + solve) of the runs (an exact run that reached the time limit is run once); "
        f"{runner_line(args)}. "
        "`vs single` = makespan / mesh-best-single-device makespan.",
        "",
        "| instance | layers | backend | status | makespan ms | bound ms | gap | time s | runs | vs single | devices used |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['instance']} | {r['layers']} | {r['backend']} | {r['status']} | {f(r['objective_ms'], '.4f')} | "
            f"{f(r['bound_ms'], '.4f')} | {f(r['gap'], '.2e')} | {f(r['time_s'], '.2f')} | {r['runs']} | "
            f"{f(r.get('vs_best_single_device'), '.3f')} | {', '.join(r['devices_used'] or [])} |"
        )
    (out / "mesh.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'mesh.md'} and {out / 'mesh.json'}")


if __name__ == "__main__":
    main()
