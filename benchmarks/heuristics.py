"""Benchmark: heuristic search against the proven optimum, and ``auto`` against an exact
backend alone (issue 10).

* ``heuristics``: on every shipped instance (``instances/*.json``) and, with ``--peer``,
  the 16 throughput instances of ``../shared/peer-instances/dnn-partitioning``: each
  heuristic (``evolutionary``, ``q-learning``, ``reinforce``) at the same evaluation
  budget (``--evaluations``, default 10^4) and a wall-clock cap (``--time-limit``), seed
  0, beside the reference: ``cpsat`` with ``--exact-time-limit`` (its objective and
  proven bound). Ratio = heuristic objective / the reference objective (the optimum
  where the reference is OPTIMAL).
* ``auto``: on ``--auto-instances``, ``auto`` and each exact backend alone at the same
  time limit (``--auto-time-limit``).
* ``anytime``: the best objective over time of each heuristic on three instances
  (``--anytime-instances``), one plot: ``benchmarks/results/heuristics_anytime.png``.

    python benchmarks/heuristics.py [--peer] [--methods evolutionary q-learning reinforce]
        [--evaluations 10000] [--time-limit 60] [--part heuristics seeds auto anytime] [--append]

Writes ``benchmarks/results/heuristics.{json,md}`` after every row (a stopped run keeps
what it measured). Wall and CPU seconds are both given: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitopt.api import load_instance  # noqa: E402
from splitopt.solve import solve  # noqa: E402

OUT = ROOT / "benchmarks" / "results"
PEER = ROOT.parent / "shared" / "peer-instances" / "dnn-partitioning" / "throughput-inputs"
METHODS = ["evolutionary", "q-learning", "reinforce"]
AUTO_INSTANCES = [str(ROOT / "instances" / "transformer1000_chain8_throughput.json"),
                  str(PEER / "OperatorGraphs" / "bert_L-12_training.json"),
                  str(ROOT / "instances" / "jmsnas_mesh_googlenet.json")]
ANYTIME_INSTANCES = [str(ROOT / "instances" / "googlenet_eyeriss.json"),
                     str(ROOT / "instances" / "jmsnas_mesh_threebranch_tight.json"),
                     str(ROOT / "instances" / "resnet50_eyeriss.json")]


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run(path: str, solver: str, time_limit: float | None, options: dict | None = None) -> dict:
    inst = load_instance(path)
    c0, t0 = cpu_s(), time.perf_counter()
    r = solve(inst, solver, time_limit=time_limit, threads=2, seed=0, options=options or {})
    return {"status": r.status.value, "objective_ms": r.objective, "bound_ms": r.bound, "gap": r.gap,
            "time_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0, "message": r.message[:300],
            "evaluations": r.extra.get("evaluations"), "stopped_by": r.extra.get("stopped_by"),
            "seed_best_ms": r.extra.get("seed_best_ms"),
            "anytime": r.extra.get("anytime")}


def seed_best(path: str) -> float | None:
    """The best objective (ms) among the plans every heuristic starts from (the family's
    start plan and its baselines' plans), as the heuristic backends compute it."""
    from splitopt.backends.heuristic import best_seed_objective, seed_genomes
    from splitopt.core.options import SolveOptions
    from splitopt.families.registry import family_of
    from splitopt.heuristics.search import Search, Termination

    inst = load_instance(path)
    fam = family_of(inst)
    fam.prepare(inst)
    space = fam.space(inst)
    seeds, _, _ = seed_genomes(fam, inst, SolveOptions(time_limit_s=120), space)
    search = Search(fam, inst, space, SolveOptions(), Termination(evaluations=None))
    search.score(seeds)
    return best_seed_objective(search, seeds)


def name_of(path: str) -> str:
    p = Path(path)
    return f"{p.parent.name}/{p.stem}" if p.parent.parent.name == "throughput-inputs" else p.stem


def instances(peer: bool, only: str) -> list[str]:
    paths = [str(p) for p in sorted((ROOT / "instances").glob("*.json"))]
    if peer:
        paths += [str(p) for p in sorted(PEER.glob("*/*.json"), key=lambda p: (p.parent.name, p.stat().st_size))]
    if only:
        paths = [p for p in paths if any(s in name_of(p) for s in only.split(","))]
    return paths


def fmt(x, spec=".4f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(report: dict) -> str:
    a = report["args"]
    lines = ["# Heuristic search against the optimum", "",
             f"`python benchmarks/heuristics.py` ({report['started']}; {report['machine']}; load average at the start "
             f"{report['load']}). Each heuristic: seed 0, at most {a['evaluations']} evaluations (distinct plans "
             f"judged by the family's evaluator) and {a['time_limit']} s; reference: `cpsat` with "
             f"{a['exact_time_limit']} s (OPTIMAL: the optimum). Ratio: heuristic objective / reference objective "
             "(1.000 = the optimum); best seed: the best of the plans every heuristic starts from (the family's start "
             "plan and its baselines' plans), so a heuristic's ratio below it is what the search added. `evals`: "
             "distinct plans judged (a search stops early when 25 generations in a row meet no new plan).", "",
             "| instance | reference ms | status | best seed ratio | " + " | ".join(f"{m} ratio | {m} s | {m} evals"
                                                                          for m in a["methods"]) + " |",
             "|---|---:|---|---:|" + "---:|---:|---:|" * len(a["methods"])]
    for name, row in report["heuristics"].items():
        ref = row.get("reference", {})
        seed = row.get("seed_best_ms")
        cells = [name, fmt(ref.get("objective_ms")), ref.get("status", "-"),
                 fmt(seed / ref["objective_ms"] if seed is not None and ref.get("objective_ms") else None, ".3f")]
        for m in a["methods"]:
            r = row.get(m)
            if r is None:
                cells += ["-", "-", "-"]
                continue
            ratio = (r["objective_ms"] / ref["objective_ms"] if r["objective_ms"] is not None and
                     ref.get("objective_ms") else None)
            mark = "" if r["status"] == "FEASIBLE" else f" ({r['status']})"
            cells += [fmt(ratio, ".3f") + mark, fmt(r["time_s"], ".1f"), str(r["evaluations"])]
        lines.append("| " + " | ".join(cells) + " |")
    if report.get("auto"):
        lines += ["", f"## `auto` against an exact backend alone, {a['auto_time_limit']} s each", "",
                  "| instance | solver | status | objective ms | bound ms | gap | time s | CPU s |",
                  "|---|---|---|---:|---:|---:|---:|---:|"]
        for name, rows in report["auto"].items():
            for solver, r in rows.items():
                lines.append(f"| {name} | {solver} | {r['status']} | {fmt(r['objective_ms'])} | {fmt(r['bound_ms'])} | "
                             f"{fmt(None if r['gap'] is None else 100 * r['gap'], '.3g')} % | {r['time_s']:.1f} | "
                             f"{r['cpu_s']:.1f} |")
    if report.get("anytime"):
        lines += ["", "Anytime curves (best objective against time, per method): "
                  "[heuristics_anytime.png](heuristics_anytime.png)."]
    return "\n".join(lines) + "\n"


def plot(report: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = report["anytime"]
    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, (name, by_method) in zip(axes[0], curves.items()):
        for method, r in by_method.items():
            points = [(t, obj) for t, _, obj, feasible in (r.get("anytime") or []) if feasible]
            if points:
                xs, ys = zip(*points)
                ax.step(list(xs) + [r["time_s"]], list(ys) + [ys[-1]], where="post", label=method)
        ref = report["heuristics"].get(name, {}).get("reference", {}).get("objective_ms")
        if ref:
            ax.axhline(ref, color="k", linestyle=":", label="cpsat (reference)")
        ax.set_title(name)
        ax.set_xlabel("seconds")
        ax.set_ylabel("best objective (ms)")
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlim(left=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "heuristics_anytime.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", action="store_true", help="also the 16 peer throughput instances")
    ap.add_argument("--only", default="", help="comma-separated substrings of instance names")
    ap.add_argument("--methods", nargs="*", default=METHODS)
    ap.add_argument("--evaluations", type=int, default=10_000)
    ap.add_argument("--time-limit", type=float, default=60.0, help="wall-clock cap per heuristic run (s)")
    ap.add_argument("--exact-time-limit", type=float, default=120.0)
    ap.add_argument("--auto-time-limit", type=float, default=30.0)
    ap.add_argument("--auto-instances", nargs="*", default=AUTO_INSTANCES)
    ap.add_argument("--anytime-instances", nargs="*", default=ANYTIME_INSTANCES)
    ap.add_argument("--part", nargs="*", default=["heuristics", "auto", "anytime"])
    ap.add_argument("--append", action="store_true", help="keep the rows of an existing result file")
    a = ap.parse_args()
    path = OUT / "heuristics.json"
    report = {"started": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(shared=True),
              "load": " ".join(f"{x:.1f}" for x in os.getloadavg()), "args": vars(a),
              "heuristics": {}, "auto": {}, "anytime": {}}
    if a.append and path.exists():
        old = json.loads(path.read_text())
        for key in ("heuristics", "auto", "anytime"):
            report[key] = old.get(key, {})
        report["args"]["methods"] = sorted(set(old["args"]["methods"]) | set(a.methods), key=METHODS.index)

    def save() -> None:
        path.write_text(json.dumps(report, indent=1) + "\n")
        (OUT / "heuristics.md").write_text(markdown(report))

    budget = {"evaluations": a.evaluations}
    if "heuristics" in a.part:
        for p in instances(a.peer, a.only):
            name = name_of(p)
            row = report["heuristics"].setdefault(name, {})
            if "reference" not in row:
                row["reference"] = run(p, "cpsat", a.exact_time_limit)
                row["reference"].pop("anytime", None)
            row["seed_best_ms"] = seed_best(p)
            for m in a.methods:
                row[m] = run(p, m, a.time_limit, budget)
                r, ref = row[m], row["reference"]
                print(f"{name:45s} {m:12s} {r['status']:9s} {fmt(r['objective_ms'])} ms (ref {fmt(ref['objective_ms'])}) "
                      f"{r['time_s']:.1f} s {r['evaluations']} evals, {r['stopped_by']}", flush=True)
                save()
    if "seeds" in a.part:  # fill in the best seed of rows measured without it
        for p in instances(a.peer, a.only):
            row = report["heuristics"].get(name_of(p))
            if row is not None and row.get("seed_best_ms") is None:
                row["seed_best_ms"] = seed_best(p)
        save()
    if "auto" in a.part:
        for p in a.auto_instances:
            name = name_of(p)
            report["auto"][name] = {}
            for solver in ("auto", "cpsat", "milp-highs", "milp-cbc"):
                r = run(p, solver, a.auto_time_limit)
                r.pop("anytime", None)
                report["auto"][name][solver] = r
                print(f"{name:45s} {solver:12s} {r['status']:9s} {fmt(r['objective_ms'])} ms bound "
                      f"{fmt(r['bound_ms'])} {r['time_s']:.1f} s", flush=True)
                save()
    if "anytime" in a.part:
        for p in a.anytime_instances:
            name = name_of(p)
            done = report["heuristics"].get(name, {})
            report["anytime"][name] = {m: done.get(m) or run(p, m, a.time_limit, budget) for m in a.methods}
            save()
        plot(report)
    save()


if __name__ == "__main__":
    main()
