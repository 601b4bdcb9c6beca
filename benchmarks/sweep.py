"""The sweep runner on this machine: the same jobs on the local process pool and on Ray
(a local Ray instance), wall and CPU time side by side, and whether the two gave the same
records (status, objective, bound, plan).

Jobs: ``--instances`` random edge/cloud split_bits instances of ``--layers`` layers
(``splitopt.families.edge_cloud.examples.random_instance_data``, written to a temporary
folder) x ``cpsat`` and ``milp-highs`` x ``--seeds`` seeds, each with a 10 s limit and one
thread: 10 x 2 x 10 = 200 jobs by default. Each job is its own process (start-up and
reading included in its wall time), as ``splitopt sweep`` runs it.

    python benchmarks/sweep.py [--instances 10] [--seeds 10] [--layers 30] [--workers 2]
                               [--out benchmarks/results]

Writes ``sweep.md`` and ``sweep.json``. Needs the ``ray`` extra for the Ray half (else it
reports the local pool alone).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitopt.families.edge_cloud.examples import random_instance_data  # noqa: E402
from splitopt.sweep.jobs import expand  # noqa: E402
from splitopt.sweep.report import summary_rows, to_markdown  # noqa: E402
from splitopt.sweep.runner import run_sweep  # noqa: E402

SAME = ("key", "status", "objective", "bound", "plan")


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_sweep(jobs, store: Path, executor: str, workers: int) -> dict:
    c0, t0 = children_cpu_s(), time.perf_counter()
    records = run_sweep(jobs, store, executor, workers)
    return {"executor": executor, "jobs": len(records), "wall_s": time.perf_counter() - t0,
            "children_cpu_s": children_cpu_s() - c0, "records": records}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    executors = ["local", "ray"] if importlib.util.find_spec("ray") is not None else ["local"]
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for seed in range(args.instances):
            path = Path(tmp) / f"random{seed}_n{args.layers}.json"
            path.write_text(json.dumps(random_instance_data(seed, args.layers, edge_required=False)))
            files.append(path)
        jobs = expand(files, ["cpsat", "milp-highs"], range(args.seeds), 10.0, 1)
        runs = [timed_sweep(jobs, Path(tmp) / f"{ex}.jsonl", ex, args.workers) for ex in executors]
    same = None
    if len(runs) == 2:
        same = [{k: r.get(k) for k in SAME} for r in runs[0]["records"]] == \
               [{k: r.get(k) for k in SAME} for r in runs[1]["records"]]
    load = os.getloadavg()
    lines = [
        "# Sweeps: the local process pool and Ray, side by side", "",
        f"Machine: {machine(shared=True)}. `python benchmarks/sweep.py --instances {args.instances} --seeds "
        f"{args.seeds} --layers {args.layers} --workers {args.workers}`; load average after: "
        f"{load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.", "",
        f"{len(jobs)} jobs: {args.instances} random split_bits instances of {args.layers} layers x cpsat, milp-highs "
        f"x {args.seeds} seeds; 10 s limit, 1 thread, {args.workers} at a time; each job its own process "
        "(Python start-up, imports and reading included).", "",
        "| executor | jobs | wall s | jobs/s | CPU s of the job processes |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(f"| {r['executor']} | {r['jobs']} | {r['wall_s']:.1f} | {r['jobs'] / r['wall_s']:.2f} | "
                     f"{r['children_cpu_s']:.1f} |")
    if len(runs) == 2:
        lines += ["", f"Ray / local wall: {runs[1]['wall_s'] / runs[0]['wall_s']:.2f}x. Same records (status, "
                      f"objective, bound, plan) on both: {'yes' if same else 'NO'}. (The CPU of Ray's own workers "
                      "and raylet is counted where they are the children of this process.)"]
    else:
        lines += ["", "Ray is not installed here (`pip install '.[ray]'`): the local pool alone."]
    lines += ["", "Per instance and solver (local pool):", "", to_markdown(summary_rows(runs[0]["records"]))]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.md").write_text("\n".join(lines) + "\n")
    (args.out / "sweep.json").write_text(json.dumps({
        "machine": machine(shared=True), "jobs": len(jobs), "same_records": same,
        "runs": [{k: v for k, v in r.items() if k != "records"} for r in runs],
    }, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
