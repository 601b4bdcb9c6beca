"""Run every backend and baseline on every edge/cloud instance (problems ``split`` and
``split_bits``); write a CSV, a Markdown table and a plot of the latency breakdown per
method. The multi-device families have their own scripts (``chain.py``, ``mesh.py``,
``multiview.py``, ``maxload.py``).

    python benchmarks/run.py                       # all edge/cloud instances, exact backends and baselines
    python benchmarks/run.py --repeats 5 --instances instances/resnet50_eyeriss.json
    python benchmarks/run.py --quick               # one instance, one run, 5 s limit (a smoke test)
    python benchmarks/run.py -j 2 --executor ray   # the runner's options (benchmarks/runner_support.py)

Every solve runs on the sweep runner (``benchmarks/runner_support.py``): its own process,
killed at ``limit x 1.1 + 10 s``, its record kept in a JSONL store (``--store``, default
``benchmarks/results/cache/run.jsonl``) that the same command resumes. Times are medians
over ``--repeats`` runs (seeds 0 .. N-1): ``build`` is building the program (or the
method's preprocessing), ``solve`` the solver call, ``total`` their sum (instance loading
and process start-up excluded). Every plan is re-evaluated by the evaluator inside
``solve``. ``--also-float`` writes each split_bits instance as a split instance to
``benchmarks/results/cache/instances/``. The script exits non-zero if an exact backend's
proven optimum is above any other method's feasible plan (the optimum <= every baseline).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import sys
from pathlib import Path

from splitopt.backends import registry
from splitopt.families.registry import family
from splitopt.sweep.jobs import Job

from machine import machine  # benchmarks/, the script's folder
from runner_support import (add_runner_options, cached_instance, median, not_applicable, run_repeated, runner_line,
                            total_s)

#: the edge/cloud family: the instances and backends this benchmark covers
EDGE_CLOUD = family("edge_cloud")
EDGE_CLOUD_PROBLEMS = EDGE_CLOUD.problems


def kind(name: str) -> str:
    """'exact', 'baseline', ... of a generic backend or an edge/cloud method."""
    return registry.get_backend(name, EDGE_CLOUD).kind

HERE = Path(__file__).parent


def row_of(records: list[dict], name: str, instance: tuple[str, str]) -> dict:
    """The table row of a method's runs on one instance (``instance``: its name and
    problem): the last run's status, latency and metrics, the medians of the times."""
    last = records[-1]
    m = last.get("metrics") or {}
    return {
        "instance": instance[0],
        "problem": instance[1],
        "method": name,
        "kind": kind(name),
        "status": last.get("status"),
        "latency_ms": last.get("objective"),
        "bound_ms": last.get("bound"),
        "gap": last.get("gap"),
        "edge_ms": m.get("edge_compute_ms"),
        "transmit_ms": m.get("transmit_ms"),
        "cloud_ms": m.get("cloud_compute_ms"),
        "edge_layers": m.get("edge_layer_count"),
        "edge_memory_B": m.get("edge_memory_bytes"),
        "error": m.get("error"),
        "feasible": bool(m.get("feasible")),
        "median_build_s": median(r.get("build_s") for r in records),
        "median_solve_s": median(r.get("solve_s") for r in records),
        "median_total_s": median(total_s(r) for r in records),
        "repeats": len(records),
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
    ap.add_argument("--quick", action="store_true",
                    help="a smoke test: the first instance, one run, a 5 s limit, into a temporary folder unless --out is given")
    add_runner_options(ap, "run")
    args = ap.parse_args(argv)
    if args.instances is None:
        args.instances = [p for p in sorted(glob.glob(str(HERE.parent / "instances" / "*.json")))
                          if json.loads(Path(p).read_text())["settings"]["problem"] in EDGE_CLOUD_PROBLEMS]
    if args.quick:
        args.instances, args.repeats, args.time_limit = args.instances[:1], 1, 5.0
        if args.out == str(HERE / "results"):
            args.out = str(HERE / "results" / "cache" / "quick")
    # the exact backends and the baselines; heuristic search is measured by heuristics.py
    names = args.solvers or [n for n in registry.names(family=EDGE_CLOUD)
                             if n in registry.BACKENDS and registry.backend_class(n).is_installed()
                             and registry.backend_class(n).kind == "exact" or n not in registry.BACKENDS]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    instances: dict[str, tuple[str, str]] = {}  # file -> the instance's name and problem
    for path in args.instances:
        data = json.loads(Path(path).read_text())
        instances[str(path)] = (data["name"], data["settings"]["problem"])
        if args.also_float and data["settings"]["problem"] != "split":
            floated = {**data, "name": f"{data['name']} (split)", "settings": {**data["settings"], "problem": "split"}}
            instances[str(cached_instance(floated, f"{Path(path).stem}_split"))] = (floated["name"], "split")
    jobs = [Job(path, name, 0, args.time_limit, args.threads) for path in instances for name in names]
    rows: list[dict] = []
    for job, records in zip(jobs, run_repeated(jobs, args, args.repeats)):
        if not_applicable(records[0]):
            print(f"{Path(job.instance).stem:28s} {job.solver:14s} not applicable: {records[0]['message']}", file=sys.stderr)
            continue
        if any(r.get("status") in ("ERROR", "KILLED") for r in records):
            failed = next(r for r in records if r.get("status") in ("ERROR", "KILLED"))
            print(f"{Path(job.instance).stem:28s} {job.solver:14s} FAILED: {failed.get('message')}", file=sys.stderr)
            rows.append({**row_of([failed], job.solver, instances[job.instance]), "status": failed["status"],
                         "latency_ms": None, "feasible": False, "repeats": args.repeats})
            continue
        rows.append(row_of(records, job.solver, instances[job.instance]))
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
              f"{args.threads} solver threads; {runner_line(args)}. Ratio to best: latency / the lowest latency among plans meeting every budget.")
    write_markdown(rows, out / "results.md", header)
    if rows:
        plot_breakdown(rows, out / "latency_breakdown.png")
    print(f"wrote {out / 'results.csv'}, {out / 'results.md'}, {out / 'latency_breakdown.png'}")
    for msg in failures:
        print("OPTIMUM CHECK FAILED:", msg, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
