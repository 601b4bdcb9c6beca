"""Benchmark of the mesh family: every ``instances/jmsnas_mesh_*.json`` x backend.

Backends: the exact ``cpsat``, ``milp-highs``, ``milp-cbc`` (time limit ``--time-limit``
seconds, default 60) and the mesh family's ``heft`` heuristic and
``mesh-best-single-device`` baseline (``best-single-device``). Each run goes
through ``splitopt.solve.solve``, so every plan is re-evaluated by the independent
evaluator. Reported: status, makespan (ms), proven bound (ms), gap, wall time (median of
``--repeats`` runs; an exact run that hits its time limit is not repeated), and the
makespan relative to ``mesh-best-single-device``.

Run: ``python benchmarks/mesh.py [--repeats 3] [--time-limit 60] [--threads 2]``; writes
``benchmarks/results/mesh.md`` and ``benchmarks/results/mesh.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitopt.api import load_instance  # noqa: E402
from splitopt.solve import solve  # noqa: E402

BACKENDS = ["cpsat", "milp-highs", "milp-cbc", "heft", "mesh-best-single-device"]


def run(path: Path, backend: str, repeats: int, time_limit: float, threads: int) -> dict:
    inst = load_instance(path)
    times, results = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = solve(inst, backend, time_limit=time_limit, threads=threads)
        times.append(time.perf_counter() - t0)
        results.append(result)
        if backend in ("cpsat", "milp-highs", "milp-cbc") and times[-1] >= 0.9 * time_limit:
            break  # hit the time limit: a repeat would show the same
    last = results[-1]
    objectives = [r.objective for r in results if r.objective is not None]
    return {
        "instance": inst.name,
        "layers": len(inst.layers),
        "backend": backend,
        "status": last.status.value,
        "objective_ms": statistics.median(objectives) if objectives else None,
        "bound_ms": last.bound,
        "gap": last.gap,
        "time_s": statistics.median(times),
        "runs": len(times),
        "message": last.message,
        "devices_used": sorted({d for d in last.plan.device.values()}) if last.plan is not None else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--instances", nargs="*", default=None)
    args = parser.parse_args()
    paths = [Path(p) for p in args.instances] if args.instances else sorted((ROOT / "instances").glob("jmsnas_mesh_*.json"))
    rows = []
    for path in paths:
        for backend in BACKENDS:
            row = run(path, backend, args.repeats, args.time_limit, args.threads)
            rows.append(row)
            print(f"{row['instance']:32s} {backend:20s} {row['status']:10s} "
                  f"{row['objective_ms'] if row['objective_ms'] is not None else float('nan'):10.4f} ms "
                  f"gap {row['gap'] if row['gap'] is not None else float('nan'):.2e} {row['time_s']:8.2f} s", flush=True)
    for row in rows:
        base = next((r for r in rows if r["instance"] == row["instance"] and r["backend"] == "mesh-best-single-device"), None)
        if base and base["objective_ms"] and row["objective_ms"] is not None:
            row["vs_best_single_device"] = row["objective_ms"] / base["objective_ms"]
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "threads": args.threads,
            "time_limit_s": args.time_limit, "repeats": args.repeats}
    (out / "mesh.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Mesh family benchmark (JMSNAS Fig. 2(b) mesh)",
        "",
        f"`python benchmarks/mesh.py --repeats {args.repeats} --time-limit {args.time_limit:g} --threads {args.threads}`; "
        f"Python {meta['python']}, {meta['machine']}. Objective: makespan (ms) as evaluated by `splitopt.families.mesh.evaluate`; "
        "bound: the backend's proven lower bound; gap = (objective - bound) / objective; time: median wall seconds "
        "(build + solve) of the runs (an exact run that reached the time limit is run once). "
        "`vs single` = makespan / mesh-best-single-device makespan.",
        "",
        "| instance | layers | backend | status | makespan ms | bound ms | gap | time s | runs | vs single | devices used |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        def f(v, fmt):
            return "-" if v is None else format(v, fmt)
        lines.append(
            f"| {r['instance']} | {r['layers']} | {r['backend']} | {r['status']} | {f(r['objective_ms'], '.4f')} | "
            f"{f(r['bound_ms'], '.4f')} | {f(r['gap'], '.2e')} | {r['time_s']:.2f} | {r['runs']} | "
            f"{f(r.get('vs_best_single_device'), '.3f')} | {', '.join(r['devices_used'] or [])} |"
        )
    (out / "mesh.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'mesh.md'} and {out / 'mesh.json'}")


if __name__ == "__main__":
    main()
