"""A real split, measured: the edge part and the cloud part of the shipped models' plans
run as two processes on this host that exchange the crossing tensors over TCP through
a paced link (``splitopt run --transport tcp``, :mod:`splitopt.netrun`), against the evaluator's
prediction, with THIS HOST as the device profile of both sides.

Per model (``--models``, default ResNet-50, MobileNetV2, GoogLeNet) and problem
(``--problems``, default ``split_bits`` and ``split``):

1. ``splitopt profile MODEL -o F --measure --edge-host`` (the eyeriss scenario's
   settings: split_bits over {2, 4, 6, 8}, the W8A8 error as budget, 4 MB edge memory;
   every layer's latency measured on this host, median of ``--repeats``);
2. the instance made host-to-host: the edge is the measured host, the cloud a copy of it
   (``host_cloud``, the same per-layer latencies), one link host -> host_cloud at
   ``--bandwidth`` bits/s and ``--latency-ms`` ms; ``--problems split`` also keeps it as the
   float split (every layer at 16 bits, tensors sent as float16);
3. ``splitopt solve`` (CBC, optimal) -> the plan;
4. :func:`splitopt.netrun.runner.run_tcp`: edge and cloud processes, ``--warmup``
   samples then ``--samples`` measured ones, one at a time (closed loop); medians of the
   edge part, the link (sender's transfer start to the receiver's last byte: the pacer's
   latency and rate plus loopback TCP), the cloud part, packing + unpacking, and the
   end-to-end latency; the outputs are checked against the single-process split with
   the same packing and the bytes on the wire against the evaluator's.

Writes ``benchmarks/results/two_process.json`` (every report), ``.md`` (the table) and
``.png`` (measured vs predicted, stacked edge / link / cloud). Run:
``python benchmarks/two_process.py [--samples 10] [--bandwidth 20e6] [--latency-ms 5]``;
about 10 minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitopt.api import load_instance, parse_instance, plan_to_dict  # noqa: E402
from splitopt.netrun.runner import run_tcp  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.families.edge_cloud.plan import edge_layers

MODELS = ("resnet50", "mobilenet_v2", "googlenet")
LABEL = {"resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2", "googlenet": "GoogLeNet"}


def splitopt(*args: str, threads: int = 1) -> None:
    """Run ``splitopt ARGS`` (this checkout's) with ``threads`` torch threads and fail loudly."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.run([sys.executable, "-m", "splitopt", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"splitopt {' '.join(map(str, args))}: exit {proc.returncode}\n{proc.stderr[-2000:]}")


def host_to_host(profiled: dict, bandwidth: float, latency_ms: float, problem: str) -> dict:
    """The profiled instance with the measured host as the edge and a copy of it as the
    cloud, one link between them."""
    data = json.loads(json.dumps(profiled))
    host = next(d for d in data["devices"] if d["name"] == "host")
    cloud = dict(host, name="host_cloud", description="this host again, as the cloud (same measured latencies)")
    data["devices"] = [host, cloud]
    data["links"] = [{"source": "host", "target": "host_cloud", "bandwidth_bits_per_s": bandwidth,
                      "latency_ms": latency_ms}]
    for layer in data["graph"]["layers"]:
        layer["latency_ms"] = {"host": layer["latency_ms"]["host"], "host_cloud": layer["latency_ms"]["host"]}
    data["settings"].update(edge="host", cloud="host_cloud", problem=problem)
    data["name"] = f"{data['name']}_host2host_{problem}"
    parse_instance(data)  # checked
    return data


def plan_text(inst, plan, report: dict) -> str:
    """E.g. "17 edge layers (w/a 4-8 bits), sends layer3.0 (8 b): 25,088 B"."""
    edge = edge_layers(inst, plan)
    link = report["plans"][0]["links"][0]
    sent = ", ".join(t["tensor"] for t in link["tensors"]) or "nothing"
    if not edge:
        return f"cloud only, sends {sent}: {link['payload_bytes']:,} B"
    bits = sorted({plan.weight_bits[n] for n in edge} | {plan.activation_bits[n] for n in edge})
    bits_text = f"{bits[0]}" if len(bits) == 1 else f"{bits[0]}-{bits[-1]}"
    return f"{len(edge)} edge layers ({bits_text} bits), sends {sent}: {link['payload_bytes']:,} B"


def unsplit_ms(model: str, inst, samples: int, warmup: int, threads: int) -> tuple[float, float]:
    """(median ms of the whole model's forward in one process, one sample at a time; the
    sum of the instance's per-layer host latencies, ms): how far the per-layer profile
    is from a whole forward pass, before any split."""
    import statistics

    import torch

    from splitopt.torch.models import build_model

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        module, _, _, inputs, _ = build_model(model, 0, inst)
        module.eval()
        x = inputs(warmup + samples)
        times = []
        with torch.no_grad():
            for i in range(x.shape[0]):
                t0 = time.perf_counter()
                module(x[i:i + 1])
                if i >= warmup:
                    times.append(1000.0 * (time.perf_counter() - t0))
    finally:
        torch.set_num_threads(before)
    layers = sum(float(l.latency_ms["host"]) for l in inst.layers)
    return statistics.median(times), layers


def plot(rows: list[dict], title: str):
    """Measured vs predicted per run, stacked edge / link / cloud (ms): a Figure (no
    pyplot, so the caller's backend is left alone)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 1.6 * len(rows)), 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    colors = {"edge": "#4c72b0", "link": "#dd8452", "cloud": "#55a868", "pack": "#c44e52"}
    for i, r in enumerate(rows):
        for j, (kind, alpha) in enumerate((("predicted", 0.45), ("measured", 1.0))):
            x = i + (j - 0.5) * 0.36
            bottom = 0.0
            parts = [("edge", r[f"{kind}_edge_ms"]), ("link", r[f"{kind}_link_ms"]), ("cloud", r[f"{kind}_cloud_ms"])]
            if kind == "measured":
                parts.append(("pack", r["measured_pack_ms"]))
            for name, v in parts:
                ax.bar(x, v, 0.34, bottom=bottom, color=colors[name], alpha=alpha,
                       label=name if i == 0 and j == 1 else None)
                bottom += v
            top = r[f"{kind}_total_ms"]
            if kind == "measured":  # the median total: the medians of the pieces need not add up to it
                ax.hlines(top, x - 0.17, x + 0.17, colors="black", linewidth=1.2,
                          label="measured total (median)" if i == 0 else None)
            ax.text(x, max(bottom, top), "P" if kind == "predicted" else f"M\n{r['ratio']:.2f}x", ha="center",
                    va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['model']}\n{r['problem']}" for r in rows], fontsize=8)
    ax.set_ylabel("latency per sample, ms")
    ax.margins(y=0.15)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, title="P predicted (pale) / M measured", title_fontsize=7)
    fig.tight_layout()
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--problems", default="split_bits,split")
    ap.add_argument("--bandwidth", type=float, default=20e6, help="link bandwidth, bits/s")
    ap.add_argument("--latency-ms", type=float, default=5.0, help="link latency, ms")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="profile: runs per layer latency")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the profile and of each process")
    ap.add_argument("--work", type=Path, default=Path("/tmp/splitopt_two_process"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--replot", action="store_true", help="only redraw the .md and .png from --out's two_process.json")
    args = ap.parse_args()
    if args.replot:
        saved = json.loads((args.out / "two_process.json").read_text())
        for k, v in saved["args"].items():
            if k in ("samples", "warmup", "repeats", "threads"):
                setattr(args, k, int(v))
            elif k in ("bandwidth", "latency_ms"):
                setattr(args, k, float(v))
        write_results([r["row"] for r in saved["runs"]], args, saved["machine"], saved.get("load_average_1min"),
                      spread(saved["runs"]))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    rows, reports = [], []
    for model in args.models.split(","):
        profiled_path = args.work / f"{model}_host.json"
        t0 = time.perf_counter()
        splitopt("profile", model, "-o", profiled_path, "--measure", "--edge-host", "--repeats", args.repeats,
                 threads=args.threads)
        profile_s = time.perf_counter() - t0
        profiled = json.loads(profiled_path.read_text())
        whole_ms = layers_ms = None
        for problem in args.problems.split(","):
            path = args.work / f"{model}_host2host_{problem}.json"
            path.write_text(json.dumps(host_to_host(profiled, args.bandwidth, args.latency_ms, problem), indent=1))
            inst = load_instance(path)
            if whole_ms is None:
                whole_ms, layers_ms = unsplit_ms(model, inst, args.samples, args.warmup, args.threads)
            result = solve(inst, solver="milp-cbc", time_limit=120)
            plan_path = args.work / f"{model}_host2host_{problem}_plan.json"
            plan_path.write_text(json.dumps(plan_to_dict(inst, result.plan)))
            t0 = time.perf_counter()
            rep = run_tcp(path, plan_to_dict(inst, result.plan), model=model, samples=args.samples,
                          warmup=args.warmup, threads=args.threads)
            run_s = time.perf_counter() - t0
            seg = rep["segments"][0]
            p, m = seg["predicted"], seg["measured"]
            row = {"model": LABEL.get(model, model), "problem": problem, "status": result.status.value,
                   "plan": plan_text(inst, result.plan, rep),
                   "predicted_edge_ms": p["parts_ms"][0], "predicted_link_ms": p["links_ms"][0],
                   "predicted_cloud_ms": p["parts_ms"][1], "predicted_total_ms": p["total_ms"],
                   "measured_edge_ms": m["parts_ms"][0], "measured_link_ms": m["links_ms"][0],
                   "measured_cloud_ms": m["parts_ms"][1], "measured_pack_ms": m["pack_ms"] + m["unpack_ms"],
                   "measured_total_ms": m["total_ms"], "ratio": seg["ratio"],
                   "measured_link_sender_ms": m["sender_links_ms"][0],
                   "unsplit_forward_ms": whole_ms, "layers_sum_ms": layers_ms,
                   "wire_bytes": rep["plans"][0]["links"][0]["wire_bytes"],
                   "payload_bytes": rep["plans"][0]["links"][0]["payload_bytes"],
                   "evaluator_bytes": rep["plans"][0]["links"][0]["evaluator_bytes"],
                   "ok": rep["ok"], "max_abs_diff": rep["max_abs_diff"],
                   "relative_mse_vs_unsplit": rep["relative_mse_vs_unsplit"],
                   "profile_s": profile_s, "run_s": run_s}
            rows.append(row)
            reports.append({"row": row, "report": rep})
            print(f"{row['model']} {problem}: predicted {row['predicted_total_ms']:.1f} ms, measured "
                  f"{row['measured_total_ms']:.1f} ms, ratio {row['ratio']:.3f}, ok {row['ok']}", flush=True)

    where = machine(shared=True)
    load = {"before": load_before, "after": os.getloadavg()[0]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "two_process.json").write_text(json.dumps({"machine": where, "load_average_1min": load, "args": {
        k: str(v) for k, v in vars(args).items()}, "runs": reports}, indent=1) + "\n")
    write_results(rows, args, where, load, spread(reports))


def spread(reports: list[dict]) -> float:
    """The largest ratio of a run's slowest to its fastest measured sample (end to end)."""
    out = 1.0
    for run in reports:
        totals = [s["total_ms"] for s in run["report"]["per_sample"] if not s["warmup"]]
        if totals and min(totals) > 0:
            out = max(out, max(totals) / min(totals))
    return out


def write_results(rows: list[dict], args, where: str, load: dict | None, widest: float) -> None:
    """The plot and the Markdown table of ``rows``, in ``args.out`` (``load``: the 1-minute
    load average before and after the runs; ``widest``: the samples' largest spread)."""
    title = (f"edge and cloud as two processes over paced TCP ({args.bandwidth / 1e6:g} Mbit/s, "
             f"{args.latency_ms:g} ms), {where}")
    fig = plot(rows, title)
    fig.savefig(args.out / "two_process.png", dpi=130)
    text = table(rows, args, where, load, widest)
    (args.out / "two_process.md").write_text(text)
    print(text)


def table(rows: list[dict], args, where: str, load: dict | None, widest: float) -> str:
    state = ("load unknown" if load is None else
             f"1-minute load average {load['before']:.2f} before the runs" +
             ("" if load.get("after") is None else f", {load['after']:.2f} after"))
    lines = [
        "# Two processes over TCP: measured vs predicted",
        "",
        f"Machine: {where} ({state}). `python benchmarks/two_process.py "
        f"--threads {args.threads} --samples {args.samples} --warmup {args.warmup} --bandwidth {args.bandwidth:g} --latency-ms "
        f"{args.latency_ms:g}`. Device profile: this host for both sides (`splitopt profile MODEL --measure "
        f"--edge-host`, median of {args.repeats} runs per layer, {args.threads} torch thread(s) as in each "
        "process of the run; the cloud is a copy of the host), link "
        f"{args.bandwidth / 1e6:g} Mbit/s, {args.latency_ms:g} ms, shaped by the sender's pacer. Medians of "
        f"{args.samples} samples after {args.warmup} warm-up, one sample in flight; ms. `pack` = packing + "
        "unpacking (not in the evaluator's model, included in the measured total). Ratio = measured total / "
        "predicted total. Per sample, the parts, the link and `pack` add up to the total within 0.1 ms; "
        f"their medians need not add up to the median total (samples spread up to {widest:.2f}x here).",
        "",
        "| model | problem | plan | pred. edge | pred. link | pred. cloud | pred. total | meas. edge | meas. link "
        "| meas. cloud | meas. pack | meas. total | ratio | outputs / bytes |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {r['problem']} | {r['plan']} | {r['predicted_edge_ms']:.1f} | "
                     f"{r['predicted_link_ms']:.1f} | {r['predicted_cloud_ms']:.1f} | {r['predicted_total_ms']:.1f} | "
                     f"{r['measured_edge_ms']:.1f} | {r['measured_link_ms']:.1f} | {r['measured_cloud_ms']:.1f} | "
                     f"{r['measured_pack_ms']:.1f} | {r['measured_total_ms']:.1f} | {r['ratio']:.2f} | "
                     f"{'equal' if r['ok'] else 'MISMATCH'} |")
    lines += ["", "Where the ratio comes from, per run: the link at the sender (transfer start until its last write "
              "returned: a preemption of the sender right after that write shows here only; the link at the "
              "receiver, to its last byte read, is the one in the table above), and, before any split, the whole model's forward "
              "in one process (median, same inputs and threads) against the sum of the profiled per-layer "
              "latencies the evaluator adds up.", "",
              "| model | problem | link pred. | link at sender | link at receiver | unsplit forward | sum of layers "
              "| forward / layers |", "|---|---|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['problem']} | {r['predicted_link_ms']:.1f} | "
                     f"{r['measured_link_sender_ms']:.1f} | {r['measured_link_ms']:.1f} | "
                     f"{r['unsplit_forward_ms']:.1f} | {r['layers_sum_ms']:.1f} | "
                     f"{r['unsplit_forward_ms'] / r['layers_sum_ms']:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
