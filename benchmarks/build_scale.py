"""Building the edge/cloud ``split_bits`` program at 300 to 10,000 layers: this version
against the one before the linear-size build (commit 4dca100: per-step memory rows and one
networkx ancestor walk per layer), side by side in one process, wall and CPU seconds, rows
and nonzeros; the builder of commit 4148834 (before the one-row-per-width q rows and the
nested closure sums) too, the median of ``--repeats`` builds; then, at the largest size, a
solve with a 60 s limit (build included).

Instances: ``splitopt.families.edge_cloud.examples.random_instance(seed, n, edge_required=False)``
(random DAGs with long skips, 2-4 candidate bit-widths). The earlier builder is read from
git (``git show 4dca100:...``) and run only up to ``--old-max`` layers (at 10,000 it took
230 s and 2.95 GB).

    python benchmarks/build_scale.py [--sizes 300,1000,3000,10000] [--old-max 3000] [--repeats 5] [--solve-limit 60]

Writes ``build_scale.md`` and ``build_scale.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitopt.core.gcpause import paused_gc  # noqa: E402
from splitopt.families.edge_cloud.milp import build_milp  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.families.edge_cloud.examples import random_instance  # noqa: E402

OLD_COMMIT = "4dca100"
#: the commit before this table's last change to the builder
PREVIOUS_COMMIT = "4148834"


def old_builder(commit: str = OLD_COMMIT):
    """The builder as it was at ``commit`` (None where git or the commit is missing)."""
    try:
        text = subprocess.run(["git", "show", f"{commit}:splitopt/families/edge_cloud/program.py"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / f"edge_cloud_program_{commit}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"edge_cloud_program_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_split_program


def timed_build(build, inst, repeats: int = 1) -> dict:
    """Builds as the backends run them: with the cyclic garbage collector paused
    (``splitopt.core.gcpause``; for the earlier builders too, so they compare); the
    medians of ``repeats`` builds, and their range."""
    walls, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        with paused_gc():
            lp = build(inst)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "wall_range_s": [min(walls), max(walls)],
            "repeats": repeats, "rows": len(lp.rows), "nonzeros": sum(len(r.coeffs) for r in lp.rows),
            "variables": len(lp.variables)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300,1000,3000,10000")
    ap.add_argument("--old-max", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5, help="builds per size for this and the previous builder")
    ap.add_argument("--solve-limit", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    old = old_builder()
    previous = old_builder(PREVIOUS_COMMIT)
    load_before = os.getloadavg()[0]
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        t0 = time.perf_counter()
        inst = random_instance(0, n, edge_required=False)
        row = {"layers": n, "load_s": time.perf_counter() - t0}
        if previous is not None:  # alternating would be fairer; one after the other, in one process
            row["previous"] = timed_build(previous, inst, args.repeats)
        row["new"] = timed_build(lambda inst: build_milp(inst, None).model, inst, args.repeats)
        if old is not None and n <= args.old_max:
            row["old"] = timed_build(old, inst)
        rows.append(row)
        print(row, flush=True)
    solves = []
    if args.solve_limit > 0:
        n = rows[-1]["layers"]
        inst = random_instance(0, n, edge_required=False)
        for solver in ("cpsat", "milp-highs", "qdmp"):
            t0, c0 = time.perf_counter(), time.process_time()
            r = solve(inst, solver, time_limit=args.solve_limit, threads=2, seed=0)
            solves.append({"layers": n, "solver": solver, "status": r.status.value, "objective_ms": r.objective,
                           "bound_ms": r.bound, "gap": r.gap, "wall_s": time.perf_counter() - t0,
                           "cpu_s": time.process_time() - c0, "build_s": r.build_s})
            print(solves[-1], flush=True)
    lines = ["# Building the split_bits program at scale", "",
             f"Machine: {machine(shared=True)}. `python benchmarks/build_scale.py --sizes {args.sizes} --old-max "
             f"{args.old_max} --repeats {args.repeats} --solve-limit {args.solve_limit:g}`; wall (CPU) seconds, "
             f"medians of {args.repeats} builds (range of the wall times); 1-minute load average "
             f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after. \"generate\": making the random "
             f"instance. \"{PREVIOUS_COMMIT}\": the builder of that commit, same process, same instance. "
             f"\"before\": the builder at commit {OLD_COMMIT} (quadratic), one build.", "",
             f"| layers | generate s | build s (CPU) | wall range s | rows | nonzeros | {PREVIOUS_COMMIT}: build s (CPU) | "
             f"{PREVIOUS_COMMIT}: rows | before: build s (CPU) | before: rows | before: nonzeros | before / now (CPU) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        new, prev, last = r["new"], r.get("old"), r.get("previous")
        before = (f"{prev['wall_s']:.2f} ({prev['cpu_s']:.2f}) | {prev['rows']:,} | {prev['nonzeros']:,} | "
                  f"{prev['cpu_s'] / new['cpu_s']:.1f}x" if prev else "- | - | - | -")
        recent = f"{last['wall_s']:.2f} ({last['cpu_s']:.2f}) | {last['rows']:,}" if last else "- | -"
        lines.append(f"| {r['layers']:,} | {r['load_s']:.2f} | {new['wall_s']:.2f} ({new['cpu_s']:.2f}) | "
                     f"{new['wall_range_s'][0]:.2f}-{new['wall_range_s'][1]:.2f} | {new['rows']:,} | {new['nonzeros']:,} | "
                     f"{recent} | {before} |")
    if solves:
        lines += ["", f"Solves of the {solves[0]['layers']:,}-layer instance, {args.solve_limit:g} s limit (build "
                      "included; `qdmp` is the min-cut baseline on the float problem):", "",
                  "| solver | status | objective ms | bound ms | gap | wall s (CPU) | build s |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        def fmt(v, d=4):
            return "-" if v is None else f"{v:.{d}f}"

        for s in solves:
            gap = "-" if s["gap"] is None else f"{100 * s['gap']:.1f} %"
            lines.append(f"| {s['solver']} | {s['status']} | {fmt(s['objective_ms'])} | {fmt(s['bound_ms'])} | {gap} | "
                         f"{s['wall_s']:.1f} ({s['cpu_s']:.1f}) | {fmt(s['build_s'], 2)} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "build_scale.md").write_text("\n".join(lines) + "\n")
    (args.out / "build_scale.json").write_text(json.dumps({"machine": machine(shared=True), "builds": rows,
                                                           "solves": solves}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
