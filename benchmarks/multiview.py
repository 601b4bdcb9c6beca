"""Benchmark of the multiview (shared-bus) family: every multiview instance x every
backend (cpsat, milp-highs, milp-cbc with a time limit) and the baselines, through
``splitopt.solve.solve`` (each plan re-evaluated by the independent evaluator), every
solve on the sweep runner (``benchmarks/runner_support.py``: its own process, a JSONL store
that a re-run resumes, ``--executor``, ``-j``, ``--store``, ``--fresh``).

    python benchmarks/multiview.py [--repeats 5] [--time-limit 60] [--threads 2] [--only NAME ...]
    python benchmarks/multiview.py --quick    # the first instance, one run, 5 s: into benchmarks/results/cache/quick/

Per (instance, backend): the median over ``--repeats`` runs (seeds 0 .. N-1) of the total
time (build + solve, s; each run a fresh process on a freshly loaded instance, so the
parameter tables and memory walks are recomputed), the objective (makespan, ms, the
evaluator's), the bound and the status. A backend whose first run stops at the time limit
is not repeated (its time is the limit).
Writes ``benchmarks/results/multiview.md`` and ``.json`` and states whether the target
"12-sensor multi-view schedule with a shared bus optimal in < 10 s" is met (median total
time of cpsat, status OPTIMAL, on every 12-sensor instance; "not measured" where the run
has no such instance).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import machine  # noqa: E402
from runner_support import add_runner_options, median, run_repeated, runner_line, total_s  # noqa: E402

from splitopt import load_instance  # noqa: E402
from splitopt.families.multiview.data import data  # noqa: E402
from splitopt.sweep.jobs import Job  # noqa: E402

INSTANCES = [
    "splitnets_mobilenetv2_single_bus25",
    "splitnets_resnet18_multiview12_share",
    "splitnets_resnet18_multiview12_serial",
    "splitnets_mobilenetv2_multiview12_share",
    "splitnets_mobilenetv2_multiview12_serial",
]
EXACT = ["cpsat", "milp-highs", "milp-cbc"]
BASELINES = ["all-on-aggregator", "all-on-sensor", "common-split"]
TARGET_S = 10.0


def run_of(record: dict) -> dict:
    """One run's entry (``all_runs``) from its sweep record."""
    plan = record.get("plan")
    metrics = record.get("metrics")
    return {"status": record.get("status"), "objective_ms": record.get("objective"), "bound_ms": record.get("bound"),
            "gap": record.get("gap"), "total_s": total_s(record), "wall_s": record.get("wall_s"),
            "fusion": plan.get("fusion") if plan else None, "width": plan.get("width") if plan else None,
            "cuts": sorted(set(plan["cuts"].values())) if plan else None,
            "feasible": metrics.get("feasible") if metrics else None}


def row_of(backend: str, records: list[dict]) -> dict:
    runs = [run_of(r) for r in records]
    last = runs[-1]
    return {"backend": backend, "runs": len(runs), "median_total_s": median(r["total_s"] for r in runs),
            "status": last["status"], "objective_ms": last["objective_ms"], "bound_ms": last["bound_ms"],
            "gap": last["gap"], "fusion": last["fusion"], "width": last["width"], "cuts": last["cuts"],
            "feasible": last["feasible"], "all_runs": runs}


def repeats_of(repeats: int):
    """A backend's runs: ``repeats``, but one for an exact backend that did not prove
    optimality (stopped at the time limit: a repeat says nothing new)."""
    return lambda job, record: 1 if job.solver in EXACT and record.get("status") != "OPTIMAL" else repeats


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--time-limit", type=float, default=60.0, help="per exact solve, s")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", nargs="*", choices=INSTANCES)
    p.add_argument("--backends", nargs="*", default=EXACT + BASELINES)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--quick", action="store_true", help="the first instance, one run, a 5 s limit; writes to "
                   "benchmarks/results/cache/quick/ unless --out is given")
    add_runner_options(p, "multiview")
    args = p.parse_args(argv)
    names = args.only or INSTANCES
    if args.quick:
        names, args.repeats, args.time_limit = names[:1], 1, 5.0
        if args.out == ROOT / "benchmarks" / "results":
            args.out = args.out / "cache" / "quick"
    paths = {name: ROOT / "instances" / f"{name}.json" for name in names}
    jobs = [Job(str(paths[name]), backend, 0, args.time_limit if backend in EXACT else None, args.threads)
            for name in names for backend in args.backends]
    records = run_repeated(jobs, args, repeats_of(args.repeats))
    described = {name: data(load_instance(path)) for name, path in paths.items()}  # views, bus, architectures
    rows = []
    for job, runs in zip(jobs, records):
        name = Path(job.instance).stem
        d = described[name]
        r = row_of(job.solver, runs)
        r.update(instance=name, views=d.views, bus_mode=d.bus.mode, archs=len(d.archs))
        rows.append(r)
        print(f"{name:42s} {job.solver:18s} {r['status']:18s} obj {fmt(r['objective_ms'], '.4f'):>9s} ms "
              f"bound {fmt(r['bound_ms'], '.4f'):>9s} median {fmt(r['median_total_s'], '.2f')} s ({r['runs']} runs)",
              flush=True)
    target_rows = [r for r in rows if r["backend"] == "cpsat" and r["views"] == 12]
    met = None if not target_rows else all(r["status"] == "OPTIMAL" and r["median_total_s"] is not None
                                           and r["median_total_s"] < TARGET_S for r in target_rows)
    meta = {"python": platform.python_version(), "machine": machine(), "processor": platform.processor(),
            "repeats": args.repeats, "time_limit_s": args.time_limit, "threads": args.threads,
            "executor": args.executor, "workers": args.workers, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "multiview.json").write_text(json.dumps({"meta": meta, "target_met": met, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Multiview (shared bus) benchmark",
        "",
        f"`python benchmarks/multiview.py --repeats {args.repeats} --time-limit {args.time_limit:g} "
        f"--threads {args.threads}`; {meta['date']}, {meta['machine']}. Time: median over "
        f"the runs of build + solve (s), each run on a freshly loaded instance; {runner_line(args)}; objective: the evaluator's makespan (ms) of the returned plan; bound: the "
        "backend's proven lower bound (ms). A time-limited exact run is not repeated.",
        "",
        f"**Target \"12-sensor multi-view schedule with a shared bus optimal in < {TARGET_S:g} s\" (cpsat, "
        f"median): {'not measured (no 12-sensor instance with cpsat in this run)' if met is None else 'met' if met else 'NOT met'}.**",
        "",
        "| instance | V | bus | backend | status | makespan ms | bound ms | median s | runs | fusion | d | cut points |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['instance']} | {r['views']} | {r['bus_mode']} | {r['backend']} | {r['status']} | "
                     f"{fmt(r['objective_ms'], '.4f')} | {fmt(r['bound_ms'], '.4f')} | {fmt(r['median_total_s'], '.2f')} | "
                     f"{r['runs']} | {r['fusion']} | {r['width'] if r['width'] is not None else '-'} | "
                     f"{', '.join(r['cuts'] or [])} |")
    lines.append("")
    (args.out / "multiview.md").write_text("\n".join(lines) + "\n")
    print(f"target met: {met}; wrote {args.out / 'multiview.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
