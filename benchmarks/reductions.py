"""The edge/cloud program with and without its reduction (the dominance rows of
``splitopt/families/edge_cloud/dominance.py``), side by side: per shipped Eyeriss instance
(split_bits), per exact backend, the median whole solve time over ``--repeats`` runs,
alternating with and without, and the number of dominated layers. The optima must agree
(the script stops if they do not).

    python benchmarks/reductions.py [--repeats 3] [--time-limit 60]

Writes ``benchmarks/results/reductions.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import splitopt.families.edge_cloud.family as edge_cloud_family  # noqa: E402
from splitopt.api import load_instance  # noqa: E402
from splitopt.families.edge_cloud.dominance import dominated_layers  # noqa: E402
from splitopt.solve import solve  # noqa: E402

INSTANCES = ("resnet50_eyeriss", "mobilenetv2_eyeriss", "googlenet_eyeriss")
SOLVERS = ("milp-cbc", "milp-highs", "cpsat")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    builder = edge_cloud_family.build_milp
    load = os.getloadavg()[0]
    lines = []
    try:
        for name in INSTANCES:
            path = ROOT / "instances" / f"{name}.json"
            n_dominated = len(dominated_layers(load_instance(path)))
            for solver in SOLVERS:
                times: dict[bool, list[float]] = {True: [], False: []}
                optima: dict[bool, float] = {}
                for _ in range(args.repeats):
                    for reductions in (True, False):
                        edge_cloud_family.build_milp = functools.partial(builder, reductions=reductions)
                        inst = load_instance(path)  # afresh: nothing cached from the other run
                        t0 = time.perf_counter()
                        result = solve(inst, solver, time_limit=args.time_limit)
                        times[reductions].append(time.perf_counter() - t0)
                        optima[reductions] = result.objective
                if abs(optima[True] - optima[False]) > 1e-6 * max(1.0, abs(optima[False])):
                    raise SystemExit(f"{name} {solver}: {optima[True]} with the rows, {optima[False]} without")
                with_s, without_s = statistics.median(times[True]), statistics.median(times[False])
                row = (f"| {name} | {len(inst.layers)} | {n_dominated} | {solver} | {optima[True]:.3f} | "
                       f"{with_s:.2f} | {without_s:.2f} | {with_s / without_s:.2f} |")
                print(row, flush=True)
                lines.append(row)
    finally:
        edge_cloud_family.build_milp = builder
    text = "\n".join([
        "# The edge/cloud reduction (dominance rows): solve time with and without",
        "",
        f"`python benchmarks/reductions.py --repeats {args.repeats} --time-limit {args.time_limit:g}`; "
        f"{machine(shared=True)}, 1-minute load average {load:.2f} at the start. Whole `solve` calls "
        "(build included) in one process, medians of the repeats, with and without alternating; "
        "split_bits as shipped; the optima agree in every row.",
        "",
        "| instance | layers | dominated layers | solver | optimum ms | with s | without s | with / without |",
        "|---|--:|--:|---|--:|--:|--:|--:|",
        *lines, ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "reductions.md").write_text(text)


if __name__ == "__main__":
    main()
