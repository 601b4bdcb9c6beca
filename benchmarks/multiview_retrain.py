"""Benchmark of multi-view splitting on the digits: accuracy and bytes per view for a few
compression widths d, V = 2 and 3 views, over several seeds; and the latency / accuracy
front the solver finds on the resulting instances.

    python benchmarks/multiview_retrain.py [--views 2,3] [--widths 1,2,4,8] [--seeds 0,1,2]

Per (V, seed): :func:`splitopt.torch.multiview.retrain_views.multiview_retrain_table` (View-Pool
model trained 20 epochs, then per d Conv-Reduce per view + View-Fuse retrained 10 epochs
by distillation, split-aware init); medians over the seeds. For seed 0 the table becomes
an instance (:func:`splitopt.torch.multiview.width_instance.widths_instance`: V wearables on one
1 Mbit/s serial link, assumed hardware) and ``splitopt.analysis.pareto.pareto_front`` (cpsat)
gives the latency-optimal plan per accuracy level. Writes
``benchmarks/results/multiview_retrain.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.retrain import cpu_name  # noqa: E402
from splitopt.analysis.pareto import pareto_front  # noqa: E402
from splitopt.torch.multiview.retrain_views import multiview_retrain_table  # noqa: E402
from splitopt.torch.multiview.width_instance import widths_instance  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--views", default="2,3")
    p.add_argument("--widths", default="1,2,4,8")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "multiview_retrain"))
    a = p.parse_args(argv)
    views = [int(v) for v in a.views.split(",")]
    widths = [int(w) for w in a.widths.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    t0 = time.perf_counter()
    tables, rows, fronts = {}, [], {}
    for V in views:
        for seed in seeds:
            print(f"V={V} seed {seed} ...", file=sys.stderr, flush=True)
            tables[(V, seed)] = multiview_retrain_table(views=V, widths=widths, seed=seed, progress=False)
        ts = [tables[(V, s)] for s in seeds]
        med = lambda xs: statistics.median(xs)  # noqa: E731
        rows.append({"views": V, "d": None, "accuracy_before": None,
                     "accuracy_after": med([t["unsplit_accuracy"] for t in ts]),
                     "accuracy_after_packed": med([t["unsplit_accuracy_packed"] for t in ts]),
                     "min": min(t["unsplit_accuracy"] for t in ts), "max": max(t["unsplit_accuracy"] for t in ts),
                     "payload_bytes": ts[0]["unsplit_bytes"], "train_seconds": med([t["base_train_seconds"] for t in ts])})
        for d in widths:
            rs = [r for t in ts for r in t["rows"] if r["d"] == d]
            rows.append({"views": V, "d": d, "accuracy_before": med([r["accuracy_before"] for r in rs]),
                         "accuracy_after": med([r["accuracy_after"] for r in rs]),
                         "accuracy_after_packed": med([r["accuracy_after_packed"] for r in rs]),
                         "min": min(r["accuracy_after"] for r in rs), "max": max(r["accuracy_after"] for r in rs),
                         "payload_bytes": rs[0]["payload_bytes"], "train_seconds": med([r["train_seconds"] for r in rs])})
        inst = widths_instance(tables[(V, seeds[0])], None, name=f"digits_cnn_widths_{V}views")
        s0 = time.perf_counter()
        front = pareto_front(inst, solver="cpsat").points
        fronts[V] = {"seconds": time.perf_counter() - s0,
                     "points": [{"accuracy": pt.measure, "latency_ms": pt.latency_ms, "width": pt.result.plan.width,
                                 "status": pt.result.status.value,
                                 "sent_bytes": sum(v.sent_bytes for v in pt.result.metrics.views)} for pt in front]}
    machine = f"{cpu_name()}, {len(os.sched_getaffinity(0))} cores; torch {torch.__version__}, 1 torch thread"
    result = {"machine": machine, "views": views, "widths": widths, "seeds": seeds, "rows": rows, "fronts": fronts,
              "total_seconds": time.perf_counter() - t0,
              "data": {str(V): tables[(V, seeds[0])]["data"] for V in views}}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}"  # noqa: E731
    lines = [
        "# Multi-view splitting (Conv-Reduce per view + View-Fuse) on the digits",
        "",
        f"Machine: {machine}. Produced by `python benchmarks/multiview_retrain.py` in {result['total_seconds']:.0f} s.",
        "",
        "Views: view v of V keeps a column band of each 8x8 digit ("
        + "; ".join(f"V = {V}: {result['data'][str(V)].split(' views: ')[-1]}" for V in views)
        + "). `none`: the View-Pool model (max over the views' block2 outputs), trained 20 epochs from scratch; "
        "d: Conv-Reduce 32 -> d per view, View-Fuse, 1x1 conv V*d -> 32, retrained 10 epochs by distillation from "
        f"the View-Pool model (split-aware init). Medians over seeds {seeds} (the seed draws the model, the "
        "splitting module and the batch order), [min, max] of the float accuracy after; `sent`: with each view's "
        "tensor packed at 8 bits. Bytes: payload per view and sample.",
        "",
        "| V | d | before % | after % [min, max] | sent (8-bit) % | payload B/view | train s |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['views']} | {'none' if r['d'] is None else r['d']} | {pct(r['accuracy_before'])} | "
                     f"{pct(r['accuracy_after'])} [{pct(r['min'])}, {pct(r['max'])}] | {pct(r['accuracy_after_packed'])} "
                     f"| {r['payload_bytes']} | {r['train_seconds']:.1f} |")
    lines += ["", "Latency / accuracy front (seed 0's accuracies; V wearables at 250 M MAC/s on one 1 Mbit/s serial "
              "link to a phone at 100 G MAC/s, assumed; raw images stay on the wearables; cpsat, every point proven "
              "optimal unless marked):", "",
              "| V | accuracy % | width d | bytes sent (all views) | latency ms | status |", "|---:|---:|---|---:|---:|---|"]
    for V in views:
        for pt in fronts[V]["points"]:
            lines.append(f"| {V} | {pct(pt['accuracy'])} | {'none' if pt['width'] is None else pt['width']} | "
                         f"{pt['sent_bytes']:,.0f} | {pt['latency_ms']:.3f} | {pt['status']} |")
    lines += ["", "Front solve time (all levels): " + ", ".join(f"V = {V}: {fronts[V]['seconds']:.2f} s" for V in views)]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
