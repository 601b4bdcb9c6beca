"""Benchmark: the maxload family's exact max-load program (splitopt/families/maxload/) on every throughput
instance of the peer dnn-partitioning data (LayerGraphs and OperatorGraphs, inference and
training), per backend, beside the human experts' max-load.

For each instance and backend: status, objective (ms, by the evaluator), proven bound
(ms), gap, build + solve time (s); the median over ``--repeats`` runs for CP-SAT (a run
longer than ``--repeat-below`` seconds is not repeated) and over ``--milp-repeats`` runs
for the MILP backends, each under its time limit. The paper's published DP values are
not in ../shared (only the inputs ship), so that column reads "not available".

    python benchmarks/maxload.py [--repeats 3] [--cpsat-time-limit 300]
        [--milp-time-limit 120] [--solvers cpsat,milp-highs,milp-cbc] [--only NAME]

Writes ``benchmarks/results/maxload_throughput.json`` and ``.md`` (after every instance, so
a stopped run keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from splitopt.families.maxload.peer_data import data_root, expert_rows
from splitopt.families.maxload.instance import read_peer_instance  # noqa: E402
from splitopt.solve import solve  # noqa: E402

PUBLISHED_DP = "not available"  # the paper's numbers are not in ../shared


def expert_values() -> dict[str, float]:
    """instance name (e.g. LayerGraphs/bert24_training) -> the expert's max-load, ms. On
    training graphs the split derived from the inference expert (the shipped training
    splits are the same, tests/test_dnnp.py)."""
    out = {}
    for r in expert_rows():
        if r["model"] == "max-load" and r["placement"] in ("inference expert", "derived from inference expert"):
            out[r["instance"].removeprefix("throughput-inputs/")] = r["value_ms"]
    return out


def run_one(inst, solver: str, time_limit: float | None) -> dict:
    r = solve(inst, solver, time_limit=time_limit, threads=2, seed=0)
    return {
        "status": r.status.value,
        "objective_ms": r.objective,
        "bound_ms": r.bound,
        "gap": r.gap,
        "build_s": r.build_s,
        "solve_s": r.solve_s,
        "time_s": r.build_s + r.solve_s,
        "message": r.message,
        "variables": r.extra.get("variables"),
        "rows": r.extra.get("rows"),
        "tolerance_ms": r.extra.get("objective_tolerance_ms", r.extra.get("scaling_tolerance_ms")),
    }


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(runs: list[dict]) -> dict:
    statuses = sorted({r["status"] for r in runs})
    return {
        "status": "/".join(statuses),
        "objective_ms": _median([r["objective_ms"] for r in runs]),
        "bound_ms": _median([r["bound_ms"] for r in runs]),
        "gap": _median([r["gap"] for r in runs]),
        "time_s": _median([r["time_s"] for r in runs]),
        "repeats": len(runs),
    }


def _f(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def markdown(report: dict) -> str:
    a = report["args"]
    lines = [
        "# Max-load (throughput, contiguous) on the peer dnn-partitioning instances",
        "",
        f"`python benchmarks/maxload.py` ({report['started']}; {report['machine']}; 2 threads per solve). "
        f"CP-SAT: presolve off, time limit {a['cpsat_time_limit']} s, median of {a['repeats']} runs "
        f"(1 run when the first takes more than {a['repeat_below']} s); MILP (PuLP + HiGHS / CBC 2.10.3): "
        f"time limit {a['milp_time_limit']} s, median of {a['milp_repeats']} run(s). "
        "Objective: the placement's max-load by `splitopt.families.maxload.evaluate.max_load` (ms per sample); bound: the "
        "solver's proven lower bound (CP-SAT: minus its integer-scaling tolerance); gap = (objective - "
        "bound) / objective; time = build + solve (s). Expert: the human-expert split "
        "(`human-experts/`, training graphs: derived from the inference split). Published DP values "
        "of the paper: not available (not in ../shared).",
        "",
        "| instance | nodes | solver | status | objective ms | bound ms | gap | time s | runs | expert ms | published DP |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in report["rows"]:
        s = row["summary"]
        gap = "-" if s["gap"] is None else f"{100 * s['gap']:.2g} %" if s["gap"] > 1e-6 else "0"
        lines.append(
            f"| {row['instance']} | {row['nodes']} | {row['solver']} | {s['status']} | {_f(s['objective_ms'])} | "
            f"{_f(s['bound_ms'])} | {gap} | {_f(s['time_s'], '.1f')} | {s['repeats']} | "
            f"{_f(row['expert_ms'])} | {row['published_dp']} |"
        )
    lines.append("")
    lines.append("Gap `0` means below 1e-6 relative (CP-SAT's scaling tolerance is about 1e-8 relative "
                 "or less; see `tolerance_ms` in the JSON).")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="CP-SAT runs per instance (median)")
    ap.add_argument("--repeat-below", type=float, default=60.0, help="repeat CP-SAT only when its first run took less (s)")
    ap.add_argument("--milp-repeats", type=int, default=1)
    ap.add_argument("--cpsat-time-limit", type=float, default=300.0)
    ap.add_argument("--milp-time-limit", type=float, default=120.0)
    ap.add_argument("--solvers", default="cpsat,milp-highs,milp-cbc")
    ap.add_argument("--only", default="", help="comma-separated substrings of instance names")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "maxload_throughput")
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of an existing result file (a row of the same instance and solver is replaced)")
    a = ap.parse_args(argv)

    files = sorted((data_root() / "throughput-inputs").glob("*/*.json"))
    files.sort(key=lambda p: (p.parent.name != "LayerGraphs", p.stat().st_size))  # small first
    if a.only:
        files = [f for f in files if any(s in f"{f.parent.name}/{f.stem}" for s in a.only.split(","))]
    experts = expert_values()
    report = {
        "started": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "rows": [],
    }
    if a.append and a.out.with_suffix(".json").exists():
        old = json.loads(a.out.with_suffix(".json").read_text())
        report["rows"] = old["rows"]
        if "cpsat" not in a.solvers.split(","):  # the CP-SAT settings of the kept rows stay
            for key in ("repeats", "repeat_below", "cpsat_time_limit"):
                report["args"][key] = old["args"][key]
    solvers = a.solvers.split(",")
    for solver in solvers:
        for f in files:
            inst = read_peer_instance(f)
            if solver == "cpsat":
                limit, n = a.cpsat_time_limit, a.repeats
            else:
                limit, n = a.milp_time_limit, a.milp_repeats
            runs = [run_one(inst, solver, limit)]
            while len(runs) < n and (solver != "cpsat" or runs[0]["time_s"] < a.repeat_below):
                runs.append(run_one(inst, solver, limit))
            row = {
                "instance": inst.name,
                "nodes": len(inst.nodes),
                "solver": solver,
                "runs": runs,
                "summary": summarise(runs),
                "expert_ms": experts.get(inst.name),
                "published_dp": PUBLISHED_DP,
            }
            report["rows"] = [r for r in report["rows"] if (r["instance"], r["solver"]) != (inst.name, solver)]
            report["rows"].append(row)
            s = row["summary"]
            print(f"{inst.name:38s} {solver:10s} {s['status']:9s} obj {_f(s['objective_ms'])} "
                  f"bound {_f(s['bound_ms'])} gap {_f(s['gap'], '.2e')} {s['time_s']:.1f} s x{s['repeats']}",
                  flush=True)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
            a.out.with_suffix(".md").write_text(markdown(report))


if __name__ == "__main__":
    main()
