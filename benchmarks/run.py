"""Run every backend and baseline on every edge/cloud instance (problems ``split`` and
``split_bits``); write a CSV, a Markdown table and a plot of the latency breakdown per
method. The multi-device families have their own scripts (``chain.py``, ``mesh.py``,
``multiview.py``, ``maxload.py``).

    python benchmarks/run.py                       # all edge/cloud instances, exact backends and baselines
    python benchmarks/run.py --repeats 5 --instances instances/resnet50_eyeriss.json

Times are medians over ``--repeats`` runs of ``splitopt.solve.solve`` in this process:
``build`` is building the program (or the method's preprocessing), ``solve`` the solver
call, ``total`` their sum (instance loading excluded). Every plan is re-evaluated by the
evaluator inside ``solve``. The script exits non-zero if an exact backend's proven
optimum is above any other method's feasible plan (the optimum <= every baseline).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import json
import statistics
import sys
import time
from pathlib import Path

from splitopt import load_instance
from splitopt.core.errors import NotApplicable, SplitoptError
from splitopt.backends import registry
from splitopt.families.registry import family
from splitopt.solve import solve

from machine import machine  # benchmarks/, the script's folder

#: the edge/cloud family: the instances and backends this benchmark covers
EDGE_CLOUD = family("edge_cloud")
EDGE_CLOUD_PROBLEMS = EDGE_CLOUD.problems


def kind(name: str) -> str:
    """'exact', 'baseline', ... of a generic backend or an edge/cloud method."""
    return registry.get_backend(name, EDGE_CLOUD).kind

HERE = Path(__file__).parent


def run_one(inst, name: str, repeats: int, time_limit: float | None, threads: int) -> dict:
    times, builds, solves, result = [], [], [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = solve(inst, name, time_limit=time_limit, threads=threads, diagnose=False)
        times.append(time.perf_counter() - t0)
        builds.append(result.build_s)
        solves.append(result.solve_s)
    m = result.metrics
    return {
        "instance": inst.name,
        "problem": result.problem,
        "method": name,
        "kind": kind(name),
        "status": result.status.value,
        "latency_ms": result.objective,
        "bound_ms": result.bound,
        "gap": result.gap,
        "edge_ms": m.edge_compute_ms if m else None,
        "transmit_ms": m.transmit_ms if m else None,
        "cloud_ms": m.cloud_compute_ms if m else None,
        "edge_layers": m.edge_layer_count if m else None,
        "edge_memory_B": m.edge_memory_bytes if m else None,
        "error": m.error if m else None,
        "feasible": bool(m and m.feasible),
        "median_build_s": statistics.median(builds),
        "median_solve_s": statistics.median(solves),
        "median_total_s": statistics.median(times),
        "repeats": repeats,
    }


def write_markdown(rows: list[dict], path: Path, header: str) -> None:
    lines = [header, ""]
    for inst in dict.fromkeys(r["instance"] for r in rows):
        lines += [f"### {inst}", "",
                  "| method | kind | status | latency ms | ratio to best | edge / transmit / cloud ms | edge layers | edge memory B | error | median solve s | median total s |",
                  "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
        for r in (r for r in rows if r["instance"] == inst):
            def f(v, fmt):
                return "-" if v is None else format(v, fmt)
            ratio = f(r.get("ratio_to_best"), ".3f")
            breakdown = "-" if r["edge_ms"] is None else f"{r['edge_ms']:.2f} / {r['transmit_ms']:.2f} / {r['cloud_ms']:.2f}"
            lines.append(
                f"| {r['method']} | {r['kind']} | {r['status']} | {f(r['latency_ms'], '.3f')} | {ratio} | {breakdown} | "
                f"{f(r['edge_layers'], 'd')} | {f(r['edge_memory_B'], ',.0f')} | {f(r['error'], '.4g')} | "
                f"{f(r['median_solve_s'], '.4f')} | {f(r['median_total_s'], '.4f')} |"
            )
        lines.append("")
    path.write_text("\n".join(lines))


def plot_breakdown(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    instances = list(dict.fromkeys(r["instance"] for r in rows))
    fig, axes = plt.subplots(len(instances), 1, figsize=(9, 2.8 * len(instances)), squeeze=False)
    for ax, inst in zip(axes[:, 0], instances):
        rs = [r for r in rows if r["instance"] == inst and r["latency_ms"] is not None]
        names = [r["method"] + ("" if r["feasible"] else " (breaks budget)") for r in rs]
        edge = [r["edge_ms"] for r in rs]
        tx = [r["transmit_ms"] for r in rs]
        cloud = [r["cloud_ms"] for r in rs]
        ax.barh(names, edge, label="edge compute", color="tab:blue")
        ax.barh(names, tx, left=edge, label="transmit", color="tab:orange")
        ax.barh(names, cloud, left=[a + b for a, b in zip(edge, tx)], label="cloud compute", color="tab:green")
        ax.set_title(inst, fontsize=10)
        ax.set_xlabel("latency (ms)")
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
    axes[0, 0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", nargs="*", default=None, help="default: every edge/cloud instance in instances/")
    ap.add_argument("--solvers", nargs="*", default=None, help="default: every installed exact backend and every baseline")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--also-float", action="store_true",
                    help="also run every split_bits instance as its float problem (split), named '<instance> (split)'")
    args = ap.parse_args(argv)
    if args.instances is None:
        args.instances = [p for p in sorted(glob.glob(str(HERE.parent / "instances" / "*.json")))
                          if json.loads(Path(p).read_text())["settings"]["problem"] in EDGE_CLOUD_PROBLEMS]
    # the exact backends and the baselines; heuristic search is measured by heuristics.py
    names = args.solvers or [n for n in registry.names(family=EDGE_CLOUD)
                             if n in registry.BACKENDS and registry.backend_class(n).is_installed()
                             and registry.backend_class(n).kind == "exact" or n not in registry.BACKENDS]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    instances = []
    for path in args.instances:
        inst = load_instance(path)
        instances.append(inst)
        if args.also_float and inst.settings.problem != "split":
            floated = inst.with_settings(problem="split")
            instances.append(dataclasses.replace(floated, name=f"{inst.name} (split)"))
    for inst in instances:
        for name in names:
            try:
                row = run_one(inst, name, args.repeats, args.time_limit, args.threads)
            except NotApplicable as e:
                print(f"{inst.name:28s} {name:14s} not applicable: {e}", file=sys.stderr)
                continue
            except SplitoptError as e:
                print(f"{inst.name:28s} {name:14s} FAILED: {e}", file=sys.stderr)
                rows.append({"instance": inst.name, "problem": inst.settings.problem, "method": name,
                             "kind": kind(name), "status": "ERROR", "latency_ms": None,
                             "bound_ms": None, "gap": None, "edge_ms": None, "transmit_ms": None, "cloud_ms": None,
                             "edge_layers": None, "edge_memory_B": None, "error": None, "feasible": False,
                             "median_build_s": None, "median_solve_s": None, "median_total_s": None,
                             "repeats": args.repeats})
                continue
            rows.append(row)
            lat = "-" if row["latency_ms"] is None else f"{row['latency_ms']:.3f} ms"
            print(f"{inst.name:28s} {name:14s} {row['status']:18s} {lat:>14s}  solve {row['median_solve_s']:.4f} s", flush=True)
    failures = []
    for inst in dict.fromkeys(r["instance"] for r in rows):
        rs = [r for r in rows if r["instance"] == inst]
        feasible = [r["latency_ms"] for r in rs if r["feasible"] and r["latency_ms"] is not None]
        best = min(feasible) if feasible else None
        for r in rs:
            r["ratio_to_best"] = None if best is None or r["latency_ms"] is None else r["latency_ms"] / best
        proven = [r for r in rs if r["kind"] == "exact" and r["status"] == "OPTIMAL"]
        for p in proven:
            for r in rs:
                if r["feasible"] and r["latency_ms"] is not None and r["latency_ms"] < p["latency_ms"] * (1 - 1e-6):
                    if r["problem"] == p["problem"] or r["kind"] != "exact":
                        failures.append(f"{inst}: {r['method']} ({r['latency_ms']:.6f} ms, {r['problem']}) beats "
                                        f"{p['method']}'s optimum ({p['latency_ms']:.6f} ms, {p['problem']})")
    fields = list(rows[0].keys()) if rows else []
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    header = (f"Benchmark on {machine()}; medians of {args.repeats} runs; time limit {args.time_limit} s; "
              f"{args.threads} solver threads. Ratio to best: latency / the lowest latency among plans meeting every budget.")
    write_markdown(rows, out / "results.md", header)
    if rows:
        plot_breakdown(rows, out / "latency_breakdown.png")
    print(f"wrote {out / 'results.csv'}, {out / 'results.md'}, {out / 'latency_breakdown.png'}")
    for msg in failures:
        print("OPTIMUM CHECK FAILED:", msg, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
