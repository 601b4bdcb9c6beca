"""Separable communication policies (problem ``separable``): the paper's Table 5 from its own
Table 6 decisions, the exact backends against the issue's targets, and the baselines
(ring all-reduce, no communication, all-intensive, the paper's Table 6, random sampling,
the generic heuristics with the paper's REINFORCE controller) against the optimum.

Instances: ``instances/separable_resnext56_pi4.json`` (G = 4, alpha = 2: 9 steps),
``instances/separable_resnext110_pi8.json`` (G = 8, alpha = 1: 36 steps), and the G = 4
network with alpha = 1 over heterogeneous links (20-300 Mbit/s, seeded), where transfers
are not hidden behind compute and latency trades against bytes. Each under four limit
sets (``CONFIGS``). Wall and CPU seconds are both given: the machine may be shared.

    python benchmarks/separable.py [--out benchmarks/results] [--limit 60] [--heuristic-limit 20]
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitopt.families.registry import family  # noqa: E402
from splitopt.families.separable.data import data  # noqa: E402
from splitopt.families.separable.examples import PAPER_TABLE5_PERCENT, resnext_cifar_data  # noqa: E402
from splitopt.families.separable.plan import SeparablePlan, step_from_dict  # noqa: E402
from splitopt.solve import solve  # noqa: E402

FAM = family("separable")
RECORDS = [{"name": "5 intensive, level >= 4", "accuracy": 0.79, "min_intensive_steps": 5, "min_level": 4},
           {"name": "3 intensive, <= 3 float16", "accuracy": 0.785, "min_intensive_steps": 3, "max_float16_steps": 3}]
CONFIGS = {
    "latency | mixing": ("latency", {}),
    "bytes | mixing": ("bytes", {}),
    "latency | mixing, 3 intensive, byte budget": ("latency", {"min_intensive_steps": 3, "byte_budget": 0.05}),
    "bytes | mixing, accuracy >= 0.785": ("bytes", {"accuracy": RECORDS, "min_accuracy": 0.785}),
}
BASELINES = ("ring-allreduce", "no-communication", "all-intensive", "reference-policies", "random-sampling",
             "evolutionary", "reinforce")


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def heterogeneous(seed: int = 0) -> dict:
    raw = resnext_cifar_data(g=4, alpha=1, name="sep_resnext56_g4_a1_hetero")
    rng = np.random.default_rng(seed)
    for link in raw["links"]:
        link["bandwidth_bits_per_s"] = float(rng.uniform(20e6, 300e6))
    raw["settings"]["separable"]["mixing"] = True
    raw["settings"]["separable"]["reference_policies"] = {}
    return raw


def configured(raw: dict, objective: str, extra: dict):
    raw = copy.deepcopy(raw)
    raw["settings"]["objective"] = objective
    opts = raw["settings"]["separable"]
    opts["mixing"] = True
    for key, value in extra.items():
        if key == "byte_budget":  # a fraction of the ring all-reduce reference
            opts["byte_budget_bytes"] = value * data(FAM.instance_from_data(raw)).ring_bytes
        else:
            opts[key] = value
    return FAM.instance_from_data(raw)


def timed(inst, solver: str, time_limit: float) -> dict:
    c0, t0 = cpu_s(), time.perf_counter()
    try:
        r = solve(inst, solver, time_limit=time_limit, threads=2, seed=0)
    except Exception as e:  # a baseline that does not apply (NotApplicable) is reported as such
        return {"solver": solver, "status": f"skipped: {e}", "time_s": time.perf_counter() - t0}
    m = r.metrics
    return {"solver": solver, "status": r.status.value, "objective": r.objective, "bound": r.bound, "gap": r.gap,
            "feasible": bool(m and m.feasible), "latency_ms": m.latency_ms if m else None,
            "bytes": m.total_bytes if m else None, "ratio_to_ring": m.ratio_to_ring if m else None,
            "time_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0}


def table5() -> list[dict]:
    rows = []
    for equal in (False, True):
        inst = FAM.instance_from_data(resnext_cifar_data(equal_maps=equal))
        d = data(inst)
        for name, steps in d.reference_policies.items():
            plan = SeparablePlan(tuple(step_from_dict(d, s, name) for s in steps))
            rows.append({"policy": name, "equal_maps": equal, "percent": 100 * FAM.evaluate(inst, plan).ratio_to_ring,
                         "paper_percent": PAPER_TABLE5_PERCENT[name]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--heuristic-limit", type=float, default=20.0)
    args = ap.parse_args()
    out = {"machine": machine(shared=True), "table5": table5(), "runs": []}
    sources = {
        "resnext56 G=4 alpha=2 (9 steps)": json.loads((ROOT / "instances" / "separable_resnext56_pi4.json").read_text()),
        "resnext56 G=4 alpha=1 hetero links (18 steps)": heterogeneous(),
        "resnext110 G=8 alpha=1 (36 steps)": json.loads(
            (ROOT / "instances" / "separable_resnext110_pi8.json").read_text()),
    }
    for source, raw in sources.items():
        for config, (objective, extra) in CONFIGS.items():
            inst = configured(raw, objective, extra)
            exact = ("cpsat", "milp-highs") + (("milp-cbc",) if "G=4 alpha=2" in source else ())
            rows = [timed(inst, s, args.limit) for s in exact]
            rows += [timed(inst, s, args.heuristic_limit) for s in BASELINES]
            best = min((r["objective"] for r in rows if r.get("feasible")), default=None)
            for r in rows:
                r["x_best"] = r["objective"] / best if best and r.get("feasible") else None
                print(source, "|", config, "|", r["solver"], r["status"], r.get("objective"),
                      f"{r['time_s']:.2f}s", flush=True)
            out["runs"].append({"instance": source, "config": config, "objective": objective, "rows": rows})
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "separable.json").write_text(json.dumps(out, indent=1) + "\n")
    (Path(args.out) / "separable.md").write_text(report(out))


def report(out: dict) -> str:
    lines = ["# Separable communication policies: exact backends and baselines", "",
             f"Machine: {out['machine']}. `python benchmarks/separable.py`; wall (CPU) seconds.", "",
             "## Table 5 from the paper's Table 6 decisions", "",
             "| policy | real feature sizes % | equal feature maps % | paper % |", "|---|---:|---:|---:|"]
    by = {(r["policy"], r["equal_maps"]): r for r in out["table5"]}
    for name in PAPER_TABLE5_PERCENT:
        lines.append(f"| {name} | {by[(name, False)]['percent']:.3f} | {by[(name, True)]['percent']:.3f} | "
                     f"{PAPER_TABLE5_PERCENT[name]:.2f} |")
    for run in out["runs"]:
        unit = "bytes" if run["objective"] == "bytes" else "ms"
        lines += ["", f"## {run['instance']}: {run['config']}", "",
                  f"| solver | status | objective ({unit}) | x best | latency ms | % of ring | gap | wall s (CPU) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in run["rows"]:
            if r["status"].startswith("skipped"):
                lines.append(f"| {r['solver']} | {r['status']} | | | | | | |")
                continue
            obj = "-" if r["objective"] is None else f"{r['objective']:,.3f}"
            xb = "-" if r["x_best"] is None else f"{r['x_best']:.3f}"
            status = r["status"] + ("" if r["feasible"] or r["objective"] is None else " (breaks a limit)")
            lat = "-" if r["latency_ms"] is None else f"{r['latency_ms']:,.2f}"
            ratio = "-" if r["ratio_to_ring"] is None else f"{100 * r['ratio_to_ring']:.3f}"
            gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f} %"
            lines.append(f"| {r['solver']} | {status} | {obj} | {xb} | {lat} | {ratio} | {gap} | "
                         f"{r['time_s']:.2f} ({r['cpu_s']:.2f}) |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
