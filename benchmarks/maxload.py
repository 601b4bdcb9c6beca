"""Benchmark: the maxload family's exact programs (splitopt/families/maxload/) on the peer
dnn-partitioning data, per backend.

* ``--objective throughput`` (default): the max-load program on every throughput
  instance (LayerGraphs and OperatorGraphs, inference and training), beside the human
  experts' max-load. Writes ``benchmarks/results/maxload_throughput.{json,md}``.
* ``--objective latency``: the latency programs on every latency instance, beside the
  all-CPU latency, the family's start plan (the better of all-CPU and its greedy), the
  human experts' latency (their placements break the rules on these graphs) and, with
  ``--greedy PATH``, the peer's own latency greedy (``code/latency-greedy/greedy.cpp``,
  built by the user: ``g++ -O2 -std=c++17 -I code/nlohmann``; its placement is judged
  by splitopt's evaluator). Writes ``benchmarks/results/maxload_latency.{json,md}``.

For each instance and backend: status, objective (ms, by the evaluator), proven bound
(ms), gap, build + solve time (s); the median over ``--repeats`` runs for CP-SAT (a run
longer than ``--repeat-below`` seconds is not repeated) and over ``--milp-repeats`` runs
for the MILP backends, each under its time limit. The paper's published DP values are
not in ../shared (only the inputs ship), so that column reads "not available".

    python benchmarks/maxload.py [--objective throughput|latency] [--repeats N]
        [--cpsat-time-limit S] [--milp-time-limit S] [--solvers cpsat,milp-highs,...]
        [--only NAME] [--greedy /tmp/greedy]

Every solve runs on the sweep runner (``benchmarks/runner_support.py``): its own process
(2 threads, pinned to 2 CPUs), killed at ``limit x 1.1 + 10 s``, its record kept in a
JSONL store (``--store``, default ``benchmarks/results/cache/maxload.jsonl``) as it ends,
so a stopped run keeps what it measured and the same command resumes it (``--fresh``
starts over; ``--executor ray``, ``-j`` as in ``splitopt sweep``). Repeats are seeds
0 .. N-1. Each run records build + solve time and CPU time (the solve's process and its
solver subprocesses, from reading the instance): on a shared machine the two differ. The
baselines (all-CPU, start plan, peer greedy) are evaluations, computed in this process.
``--quick``: the smallest instance, one run, a 5 s limit, into
``benchmarks/results/cache/quick/`` unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from machine import machine  # noqa: E402
from runner_support import add_runner_options, run_repeated, runner_line, total_s  # noqa: E402

from splitopt.core.errors import InvalidPlan  # noqa: E402
from splitopt.families.maxload.evaluate import check_placement, latency  # noqa: E402
from splitopt.families.maxload.instance import read_peer_instance  # noqa: E402
from splitopt.families.maxload.methods import all_on_cpu_placement  # noqa: E402
from splitopt.families.maxload.peer_data import data_root, expert_rows  # noqa: E402
from splitopt.families.maxload.plan import parse_expert  # noqa: E402
from splitopt.families.registry import family_of  # noqa: E402
from splitopt.sweep.jobs import Job  # noqa: E402

#: per objective: input folder, result file, default time limits (s) and CP-SAT repeats
MODES = {
    "throughput": {"inputs": "throughput-inputs", "out": "maxload_throughput", "cpsat_time_limit": 300.0,
                   "milp_time_limit": 120.0, "repeats": 3, "solvers": "cpsat,milp-highs,milp-cbc"},
    "latency": {"inputs": "latency-inputs", "out": "maxload_latency", "cpsat_time_limit": 60.0,
                "milp_time_limit": 60.0, "repeats": 1, "solvers": "cpsat,milp-highs"},
}

PUBLISHED_DP = "not available"  # the paper's numbers are not in ../shared
#: solver threads per solve
THREADS = 2


def expert_values(objective: str = "throughput") -> dict[str, float]:
    """instance name (e.g. LayerGraphs/bert24_training) -> the expert's max-load (or
    latency), ms. On training graphs the split derived from the inference expert (the
    shipped training splits are the same, tests/test_dnnp.py)."""
    out = {}
    model, prefix = ("max-load", "throughput-inputs/") if objective == "throughput" else ("latency", "latency-inputs/")
    for r in expert_rows():
        if r["model"] == model and r["placement"] in ("inference expert", "derived from inference expert"):
            out[r["instance"].removeprefix(prefix)] = r["value_ms"]
    return out


def cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its finished children (the peer greedy)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run_of(record: dict) -> dict:
    """One run's entry from its sweep record (the program's size and tolerances from the
    result's extras)."""
    extra = record.get("extra") or {}
    return {
        "cpu_s": record.get("cpu_s"),
        "status": record.get("status"),
        "objective_ms": record.get("objective"),
        "bound_ms": record.get("bound"),
        "gap": record.get("gap"),
        "build_s": record.get("build_s"),
        "solve_s": record.get("solve_s"),
        "time_s": total_s(record),
        "message": record.get("message"),
        "variables": extra.get("variables"),
        "rows": extra.get("rows"),
        "tolerance_ms": extra.get("objective_tolerance_ms", extra.get("scaling_tolerance_ms")),
        "returned": extra.get("returned"),
        "presolve": extra.get("presolve"),
    }


def peer_greedy(path: Path, inst, greedy: str) -> dict:
    """The peer's latency greedy on the file: its own value, its placement judged by
    splitopt's evaluator (latency, broken rules), wall and CPU time."""
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    with open(path) as f:
        proc = subprocess.run([greedy], stdin=f, capture_output=True, text=True, timeout=3600)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    if proc.returncode != 0:
        return {"error": (proc.stdout + proc.stderr).strip().splitlines()[-1][:200], "time_s": wall, "cpu_s": cpu}
    data = json.loads(proc.stdout)
    placement = parse_expert(inst, data, source="peer greedy")
    violations = check_placement(inst, placement)
    try:
        value = latency(inst, placement)
    except InvalidPlan as e:
        value = None
        violations.append(str(e))
    return {"own_ms": data.get("totalLatency"), "latency_ms": value, "violations": violations,
            "accelerators": sum(1 for d in placement.nodes_on if d.startswith("fpga")), "time_s": wall, "cpu_s": cpu}


def latency_baselines(path: Path, inst, greedy: str | None) -> dict:
    """All-CPU latency, the family's start plan, the peer greedy (when given)."""
    fam = family_of(inst)
    start = fam.start_plan(inst)
    out = {"all_cpu_ms": latency(inst, all_on_cpu_placement(inst)) if inst.cpus else None,
           "start_ms": None if start is None else fam.evaluate(inst, start).objective_ms}
    if greedy:
        out["peer_greedy"] = peer_greedy(path, inst, greedy)
    return out


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
        "cpu_s": _median([r.get("cpu_s") for r in runs]),
        "repeats": len(runs),
    }


def _f(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def markdown(report: dict) -> str:
    if report["args"].get("objective") == "latency":
        return markdown_latency(report)
    a = report["args"]
    lines = [
        "# Max-load (throughput, contiguous) on the peer dnn-partitioning instances",
        "",
        f"`python benchmarks/maxload.py` ({report['started']}; {report['machine']}; 2 threads per solve; "
        f"{report.get('runner', 'in one process')}). "
        f"CP-SAT: presolve off, time limit {a['cpsat_time_limit']} s, median of {a['repeats']} runs "
        f"(1 run when the first takes more than {a['repeat_below']} s); MILP (HiGHS through highspy / CBC 2.10.3 through PuLP's MPS file): "
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


def _gap(g) -> str:
    return "-" if g is None else f"{100 * g:.2g} %" if g > 1e-6 else "0"


def markdown_latency(report: dict) -> str:
    a = report["args"]
    lines = [
        "# Latency (single sample) on the peer dnn-partitioning latency instances",
        "",
        f"`python benchmarks/maxload.py --objective latency` ({report['started']}; {report['machine']}; "
        f"2 threads per solve; {report.get('runner', 'in one process')}; load average at the start "
        f"{report.get('load', '-')}). CP-SAT (native latency "
        f"model, presolve on where no row can reach 2**31) with time limit {a['cpsat_time_limit']} s, "
        f"milp-highs (the latency LinearProgram through highspy) with {a['milp_time_limit']} s; one run each. "
        "Objective: the placement's latency by `splitopt.families.maxload.evaluate.latency` (ms); bound: the "
        "solver's proven lower bound (CP-SAT: minus its rounding tolerance); gap = (objective - bound) / "
        "objective; time: wall (build + solve), cpu: CPU seconds of the solve (the machine is shared: a run "
        "given 2 threads for 60 s wall had up to 120 CPU s). `start` marks a solve that returned the family's "
        "start plan (the solver found no better plan of its own).",
        "",
        "Baselines: all-CPU (every node on one core); start plan (the better of all-CPU and the family's "
        "greedy of consecutive blocks); peer greedy (`code/latency-greedy/greedy.cpp`, its placement "
        "judged by splitopt's evaluator; `*` = it breaks a placement rule, see below); expert (the "
        "human-expert split of `human-experts/`, which breaks the rules on every latency graph: "
        "its latency is that of an infeasible placement).",
        "",
        "| instance | nodes | solver | status | objective ms | bound ms | gap | time s | cpu s | all-CPU ms | "
        "start ms | peer greedy ms | expert ms |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for row in report["rows"]:
        s = row["summary"]
        b = row.get("baselines", {})
        g = b.get("peer_greedy")
        if g is None:
            greedy = "not run"
        elif "error" in g:
            greedy = "failed"
        else:
            greedy = _f(g["latency_ms"]) + (" *" if g["violations"] else "")
            if g["violations"] and (row["instance"], "greedy") not in notes:
                notes.append((row["instance"], "greedy"))
        returned = " (start)" if any(r.get("returned") for r in row["runs"]) else ""
        lines.append(
            f"| {row['instance']} | {row['nodes']} | {row['solver']} | {s['status']}{returned} | "
            f"{_f(s['objective_ms'])} | {_f(s['bound_ms'])} | {_gap(s['gap'])} | {_f(s['time_s'], '.1f')} | "
            f"{_f(s.get('cpu_s'), '.1f')} | {_f(b.get('all_cpu_ms'))} | {_f(b.get('start_ms'))} | {greedy} | "
            f"{_f(row.get('expert_ms'))} |"
        )
    lines.append("")
    lines.append("Gap `0` means below 1e-6 relative.")
    seen = set()
    for row in report["rows"]:
        g = row.get("baselines", {}).get("peer_greedy")
        if g and "error" not in g and row["instance"] not in seen:
            seen.add(row["instance"])
            rules = "; ".join(v[:160] for v in g["violations"][:2]) or "none broken"
            lines.append(f"* peer greedy on {row['instance']}: its own value {_f(g['own_ms'])} ms, "
                         f"{g['accelerators']} accelerators, {_f(g['time_s'], '.1f')} s; rules: {rules}"
                         + (f" (and {len(g['violations']) - 2} more)" if len(g['violations']) > 2 else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objective", choices=tuple(MODES), default="throughput")
    ap.add_argument("--repeats", type=int, default=None, help="CP-SAT runs per instance (median; default 3 "
                    "for throughput, 1 for latency)")
    ap.add_argument("--repeat-below", type=float, default=60.0, help="repeat CP-SAT only when its first run took less (s)")
    ap.add_argument("--milp-repeats", type=int, default=1)
    ap.add_argument("--cpsat-time-limit", type=float, default=None, help="default 300 (throughput), 60 (latency)")
    ap.add_argument("--milp-time-limit", type=float, default=None, help="default 120 (throughput), 60 (latency)")
    ap.add_argument("--solvers", default=None, help="default cpsat,milp-highs,milp-cbc (throughput), "
                    "cpsat,milp-highs (latency)")
    ap.add_argument("--only", default="", help="comma-separated substrings of instance names")
    ap.add_argument("--greedy", default=None, help="latency: the peer's compiled latency greedy, run on each file")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of an existing result file (a row of the same instance and solver is replaced)")
    ap.add_argument("--quick", action="store_true", help="the smallest instance, one run, a 5 s limit; writes to "
                    "benchmarks/results/cache/quick/ unless --out is given")
    add_runner_options(ap, "maxload")
    a = ap.parse_args(argv)
    mode = MODES[a.objective]
    if a.quick:
        a.repeats, a.milp_repeats, a.cpsat_time_limit, a.milp_time_limit = 1, 1, 5.0, 5.0
    for key in ("cpsat_time_limit", "milp_time_limit", "repeats", "solvers"):
        if getattr(a, key) is None:
            setattr(a, key, mode[key])
    if a.out is None:
        a.out = REPO / "benchmarks" / "results" / ("cache/quick" if a.quick else "") / mode["out"]

    files = sorted((data_root() / mode["inputs"]).glob("*/*.json"))
    files.sort(key=lambda p: (p.parent.name != "LayerGraphs", p.stat().st_size))  # small first
    if a.only:
        files = [f for f in files if any(s in f"{f.parent.name}/{f.stem}" for s in a.only.split(","))]
    if a.quick:
        files = files[:1]
    experts = expert_values(a.objective)
    report = {
        "started": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(shared=True),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "runner": runner_line(a),
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
    jobs = [Job(str(f), solver, 0, a.cpsat_time_limit if solver == "cpsat" else a.milp_time_limit, THREADS)
            for solver in solvers for f in files]

    def repeats(job: Job, first: dict) -> int:
        if job.solver != "cpsat":
            return a.milp_repeats
        t = total_s(first)
        return a.repeats if t is not None and t < a.repeat_below else 1

    runs_of = run_repeated(jobs, a, repeats)
    baselines: dict[str, dict] = {}
    for job, records in zip(jobs, runs_of):
        f = Path(job.instance)
        inst = read_peer_instance(f)
        if a.objective == "latency" and inst.name not in baselines:
            baselines[inst.name] = latency_baselines(f, inst, a.greedy)
        runs = [run_of(r) for r in records]
        row = {
            "instance": inst.name,
            "nodes": len(inst.nodes),
            "solver": job.solver,
            "runs": runs,
            "summary": summarise(runs),
            "expert_ms": experts.get(inst.name),
            "published_dp": PUBLISHED_DP,
        }
        if a.objective == "latency":
            row["baselines"] = baselines[inst.name]
        report["rows"] = [r for r in report["rows"] if (r["instance"], r["solver"]) != (inst.name, job.solver)]
        report["rows"].append(row)
        s = row["summary"]
        print(f"{inst.name:38s} {job.solver:10s} {s['status']:9s} obj {_f(s['objective_ms'])} "
              f"bound {_f(s['bound_ms'])} gap {_f(s['gap'], '.2e')} {_f(s['time_s'], '.1f')} s "
              f"(cpu {_f(s['cpu_s'], '.1f')} s) x{s['repeats']}", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    a.out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {a.out.with_suffix('.md')} and {a.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
