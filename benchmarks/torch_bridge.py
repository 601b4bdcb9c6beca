"""Benchmark of the torch bridge: profile time per model and split-run overhead.

For each model built in code (``resnet50``, ``mobilenet_v2``, ``googlenet``,
``tiny_gpt2``):

* profile time (s): ``splitopt.torch.profile`` with ``--calibration`` calibration inputs
  (error tables at 2/4/6/8 bits) and, separately, the per-layer host latency measurement
  (median of ``--repeats`` runs per layer);
* split-run overhead: median wall time per sample of the unsplit module against the
  partitioned model (``splitopt.torch.partition``) for a middle cut (half of the layers on
  the edge, a float plan), over ``--samples`` inputs, and the largest absolute output
  difference (must be <= 1e-5);
* a mesh plan: GoogLeNet on ``instances/jmsnas_mesh_googlenet.json`` with inception4a's
  branches on the three MBSs and the SBS, the layers before on the SBS and after on the
  cloud (five parts), the same medians and the routed per-link bytes against the mesh
  evaluator's.

Run: ``python benchmarks/torch_bridge.py [--calibration 4] [--repeats 3] [--samples 8]``;
writes ``benchmarks/results/torch_bridge.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from splitopt.core import presets  # noqa: E402
from splitopt.torch.partition import partition  # noqa: E402
from splitopt.torch.profile import measure_layer_latency, profile  # noqa: E402
from splitopt.torch.models import build_model  # noqa: E402
from splitopt.families.edge_cloud.plan import uniform_plan

MODELS = ["resnet50", "mobilenet_v2", "googlenet", "tiny_gpt2"]
SETTINGS = {"problem": "split_bits", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [2, 4, 6, 8],
            "cloud_bits": 16, "edge_memory_bytes": 4e6, "error_budget": None}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def time_split_run(module, split, inputs: torch.Tensor) -> tuple[list[float], list[float], float]:
    """Wall seconds per sample of the unsplit ``module`` and of the ``split`` model, one
    sample at a time after one warm-up run each, and the largest absolute output
    difference over the samples."""
    unsplit_t, split_t, diff = [], [], 0.0
    with torch.no_grad():
        module.eval()(inputs[:1])
        split.run(inputs[:1])
        for i in range(inputs.shape[0]):
            x = inputs[i:i + 1]
            ref, t = timed(lambda: module(x))
            unsplit_t.append(t)
            out, t = timed(lambda: split.run(x))
            split_t.append(t)
            ref_t = ref if isinstance(ref, torch.Tensor) else ref[0]
            out_t = out if isinstance(out, torch.Tensor) else out[0]
            diff = max(diff, float((out_t.double() - ref_t.double()).abs().max()))
    return unsplit_t, split_t, diff


def bench(model: str, calibration: int, repeats: int, samples: int) -> dict:
    module, rename, example, sampler, calibration_fn = build_model(model, seed=0)
    devices, links = [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()]
    inst, profile_s = timed(lambda: profile(module, example, devices, links, SETTINGS, name=model,
                                            calibration=calibration_fn()[:calibration], rename=rename))
    from splitopt.torch.capture import capture

    cap = capture(module, example, rename=rename)
    _, latency_s = timed(lambda: measure_layer_latency(cap, example, repeats=repeats))
    half = [l.name for l in inst.layers[: len(inst.layers) // 2]]
    plan = uniform_plan(inst, half)
    split, partition_s = timed(lambda: partition(module, example, plan, inst, capture=cap))
    unsplit_t, split_t, diff = time_split_run(module, split, sampler(samples))
    return {"model": model, "layers": len(inst.layers), "profile_s": profile_s, "calibration_inputs": calibration,
            "latency_measure_s": latency_s, "latency_repeats": repeats, "partition_s": partition_s,
            "unsplit_ms": 1000 * statistics.median(unsplit_t), "split_ms": 1000 * statistics.median(split_t),
            "overhead": statistics.median(split_t) / statistics.median(unsplit_t), "max_abs_diff": diff,
            "edge_layers": len(half), "transmitted_bytes": split.transmitted_bytes}


def bench_mesh(samples: int) -> dict:
    import splitopt
    from splitopt.families.mesh.plan import MeshPlan
    from splitopt.torch.mesh.compare import evaluator_link_bytes, link_bytes

    module, rename, example, sampler, _ = build_model("googlenet", seed=0)
    inst = splitopt.load_instance(ROOT / "instances" / "jmsnas_mesh_googlenet.json")
    device, after = {}, False
    for layer in inst.layers:
        after |= layer.name == "inception4a.concat"
        branch = next((k for k in (1, 2, 3) if layer.name.startswith(f"inception4a.branch{k}")), None)
        device[layer.name] = "cloud" if after else f"MBS{branch}" if branch else "SBS"
    plan = MeshPlan(device)
    split, partition_s = timed(lambda: partition(module, example, plan, inst, rename=rename))
    unsplit_t, split_t, diff = time_split_run(module, split, sampler(samples))
    ours, theirs = link_bytes(split), evaluator_link_bytes(inst, plan)
    return {"model": "googlenet (mesh, 5 parts)", "layers": len(inst.layers), "partition_s": partition_s,
            "parts": [p.device for p in split.parts], "unsplit_ms": 1000 * statistics.median(unsplit_t),
            "split_ms": 1000 * statistics.median(split_t),
            "overhead": statistics.median(split_t) / statistics.median(unsplit_t), "max_abs_diff": diff,
            "transmitted_bytes": split.transmitted_bytes, "link_bytes": ours, "evaluator_link_bytes": theirs,
            "links_match": all(abs(ours.get(k, 0.0) - v) <= 1e-6 * max(1.0, v) for k, v in theirs.items())
            and set(ours) <= set(theirs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--cpu", default="Intel Xeon (2 cores)")
    a = ap.parse_args()
    rows = []
    for model in a.models:
        row = bench(model, a.calibration, a.repeats, a.samples)
        rows.append(row)
        print(json.dumps(row), flush=True)
    mesh = bench_mesh(a.samples)
    print(json.dumps(mesh), flush=True)
    out = ROOT / "benchmarks" / "results"
    (out / "torch_bridge.json").write_text(json.dumps({"cpu": a.cpu, "torch": torch.__version__,
                                                       "threads": torch.get_num_threads(), "rows": rows, "mesh": mesh},
                                                      indent=1) + "\n")
    lines = [
        "# Torch bridge benchmark",
        "",
        f"`python benchmarks/torch_bridge.py --calibration {a.calibration} --repeats {a.repeats} --samples {a.samples}`; "
        f"{a.cpu}, torch {torch.__version__} ({torch.get_num_threads()} threads). Profile: capture + error tables on "
        f"{a.calibration} calibration inputs; host latency: every layer timed over {a.repeats} runs of the exported "
        "graph; split run: a float plan with the first half of the layers on the edge, medians per sample over "
        f"{a.samples} inputs (the split runs the parts one after the other in this process, no transfer).",
        "",
        "| model | layers | profile s | host latency s | partition s | unsplit ms/sample | split ms/sample | overhead | max abs diff | bytes sent |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {r['layers']} | {r['profile_s']:.1f} | {r['latency_measure_s']:.1f} | "
                     f"{r['partition_s']:.1f} | {r['unsplit_ms']:.1f} | {r['split_ms']:.1f} | {r['overhead']:.2f}x | "
                     f"{r['max_abs_diff']:.1e} | {r['transmitted_bytes']:,.0f} |")
    lines += ["", f"Mesh plan (GoogLeNet on `jmsnas_mesh_googlenet.json`, inception4a's branches on MBS1-3 and the SBS; "
              f"parts {' -> '.join(mesh['parts'])}): partition {mesh['partition_s']:.1f} s, unsplit "
              f"{mesh['unsplit_ms']:.1f} ms/sample, split {mesh['split_ms']:.1f} ms/sample ({mesh['overhead']:.2f}x), "
              f"max abs diff {mesh['max_abs_diff']:.1e}, {mesh['transmitted_bytes']:,.0f} B per sample between devices; "
              f"bytes per link equal the mesh evaluator's: {mesh['links_match']} "
              f"({', '.join(f'{k} {v:,.0f} B' for k, v in sorted(mesh['link_bytes'].items()))})."]
    (out / "torch_bridge.md").write_text("\n".join(lines) + "\n")
    print("wrote", out / "torch_bridge.md")


if __name__ == "__main__":
    main()
