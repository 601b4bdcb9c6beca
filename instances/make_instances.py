"""Generate the project's instances from real PyTorch models.

    python instances/make_instances.py [--out instances/] [--calibration-images 8]
        [--error-factor 1.0] [--edge-memory-bytes 4e6] [--only NAME ...]

Per model: build it (random init, seeded, batch-norm statistics re-estimated on synthetic
images; see ``splitopt/torch/architectures.py``), capture the fused layer graph
(``splitopt/torch/capture.py``), measure weight and activation quantization-error tables
at 2/4/6/8 bits on synthetic calibration images (``splitopt/torch/quant_error.py``), attach
the paper's hardware (``splitopt/presets.py``) and settings, write the JSON and reload it
with ``splitopt.load_instance``.

Rules for the limits of the ``split_bits`` (Eyeriss) instances, recorded in each file's
``source``:

* edge memory M = ``--edge-memory-bytes`` (default 4e6 B = 4 MB);
* error budget E = ``--error-factor`` (default 1.0) x sum over all layers of
  (weight_error[8] + activation_error[8]): the error of running the whole network at
  W8A8, so that W8A8 everywhere fits the budget and a split may spend the slack of its
  cloud layers on lower bit-widths of its edge layers.

The SplitNets instance uses the paper's own limits (2 MB sensor memory, 8 bits lossless).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import splitopt  # noqa: E402
from splitopt.core import presets  # noqa: E402
from splitopt.api import parse_instance  # noqa: E402
from splitopt.core.instance_io import FORMAT  # noqa: E402
from splitopt.torch.architectures import BN_IMAGES, BN_SEED, MODELS, synthetic_images  # noqa: E402
from splitopt.torch.capture import capture  # noqa: E402
from splitopt.torch.quant_error import layer_dicts_with_errors  # noqa: E402
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.families.edge_cloud.data import candidate_bits

SCRIPT = "instances/make_instances.py"
SEED = 0
CALIBRATION_SEED = 1234
INPUT_SHAPE = (1, 3, 224, 224)
BITS = (2, 4, 6, 8)

MODEL_SOURCES = {
    "resnet50": "transformers ResNetForImageClassification(ResNetConfig(num_labels=1000)) (ResNet-50 v1.5), "
                "wrapped to return .logits",
    "mobilenet_v2": "transformers MobileNetV2ForImageClassification(MobileNetV2Config(num_labels=1000, "
                    "tf_padding=False)) (MobileNetV2 1.0/224), wrapped to return .logits",
    "googlenet": "splitopt.torch.architectures.GoogLeNet (Inception v1, torchvision layout: BN after each conv, "
                 "3x3 conv in the '5x5' branch, no aux classifiers), plain torch",
}

INSTANCES = {
    # name: (model, kind)
    "resnet50_eyeriss": ("resnet50", "eyeriss"),
    "mobilenetv2_eyeriss": ("mobilenet_v2", "eyeriss"),
    "googlenet_eyeriss": ("googlenet", "eyeriss"),
    "splitnets_mobilenetv2_sensor": ("mobilenet_v2", "splitnets"),
}

HARDWARE_SOURCES = {
    "eyeriss": {
        "edge": "presets.eyeriss_edge(): AUTO-SPLIT Table 1 (Eyeriss: 192 KB on-chip, 4 GB off-chip, 1 GB/s, 34 GOPs)",
        "cloud": "presets.tpu_cloud(): AUTO-SPLIT Table 1 (TPU: 28 MB on-chip, 16 GB off-chip, 13 GB/s, 96 TOPs)",
        "link": "presets.uplink_3mbps(): AUTO-SPLIT Table 1 uplink 3 Mbps",
    },
    "splitnets": {
        "edge": "presets.splitnets_sensor(): SplitNets Sec. 3.2 / App. G (16 nm sensor NPU, 125 GOP/s, 2 MB memory)",
        "cloud": "presets.splitnets_aggregator(): SplitNets Sec. 3.2 / App. G (7 nm aggregator, 1.25 TOP/s)",
        "link": "presets.splitnets_bus_share(0.25): 25 % of the 1.2 Gb/s bus (SplitNets Table 4, 37.5 MB/s)",
    },
}


def build_graph(model: str, n_calibration: int) -> dict[str, Any]:
    """Capture ``model`` and measure its error tables; returns the graph and totals."""
    t0 = time.time()
    module, rename = MODELS[model](seed=SEED)
    cap = capture(module, torch.zeros(INPUT_SHAPE), rename=rename)
    calibration = synthetic_images(n_calibration, size=INPUT_SHAPE[-1], seed=CALIBRATION_SEED)
    layers = layer_dicts_with_errors(cap, calibration, BITS)
    w8a8 = sum(l.get("weight_error", {}).get("8", 0.0) + l["activation_error"]["8"] for l in layers)
    print(f"  {model}: {len(layers)} layers, {cap.total_macs / 1e9:.4f} GMAC, {cap.total_weights / 1e6:.4f} M weights, "
          f"W8A8 error sum {w8a8:.6g} ({time.time() - t0:.1f} s)", flush=True)
    return {"inputs": [cap.graph_input], "layers": layers, "macs": cap.total_macs,
            "weights": cap.total_weights, "w8a8_error": w8a8}


def make_instance(name: str, model: str, kind: str, graph: dict[str, Any], args) -> dict[str, Any]:
    """The instance JSON of ``name``."""
    calibration = (f"{args.calibration_images} synthetic 224x224 RGB images (splitopt.torch.architectures."
                   f"synthetic_images, seed {CALIBRATION_SEED}): smooth random fields (Gaussian noise at 4x4, 16x16 "
                   "and 56x56 upsampled bilinearly, plus pixel noise) rescaled to [0, 1] and normalised with the "
                   "ImageNet mean/std; no data set can be downloaded here")
    source: dict[str, Any] = {
        "script": SCRIPT,
        "model": MODEL_SOURCES[model],
        "builder": f"splitopt.torch.architectures.{model}(seed={SEED})",
        "weights": (f"random initialisation under torch.manual_seed({SEED}) (no pretrained weights can be "
                    f"downloaded); batch-norm running statistics re-estimated on {BN_IMAGES} synthetic images "
                    f"(seed {BN_SEED}) so that activations have a trained-like scale"),
        "input_shape": list(INPUT_SHAPE),
        "seed": SEED,
        "capture": "splitopt.torch.capture.capture: torch.export (strict=False), BN folded into conv/linear, "
                   "activations/dropout/reshape fused into their single-consumer producer",
        "quantization_error": "relative MSE; weights (BN-folded) symmetric uniform per output channel; activations "
                              "(fused layer outputs) asymmetric uniform per tensor, min/max calibrated and measured "
                              "on the calibration images (splitopt.torch.quant_error)",
        "calibration_inputs": calibration,
        "layers": len(graph["layers"]),
        "total_macs": graph["macs"],
        "total_weights": graph["weights"],
        "hardware": HARDWARE_SOURCES[kind],
        "torch": torch.__version__,
    }
    try:
        import transformers
        source["transformers"] = transformers.__version__
    except ImportError:
        pass

    if kind == "eyeriss":
        devices = [presets.eyeriss_edge(), presets.tpu_cloud()]
        links = [presets.uplink_3mbps()]
        budget = args.error_factor * graph["w8a8_error"]
        settings = {"problem": "split_bits", "edge": "eyeriss", "cloud": "tpu", "bit_widths": list(BITS),
                    "cloud_bits": 16, "transmit_bits": None, "edge_memory_bytes": float(args.edge_memory_bytes),
                    "error_budget": budget}
        source["edge_memory_rule"] = f"M = {args.edge_memory_bytes:g} B (option --edge-memory-bytes)"
        source["error_budget_rule"] = (f"E = {args.error_factor:g} x sum over layers of (weight_error[8] + "
                                       f"activation_error[8]) = {args.error_factor:g} x {graph['w8a8_error']:.6g} "
                                       f"= {budget:.6g} (option --error-factor): W8A8 everywhere fits the budget")
        description = (f"{model} 224x224 split between an Eyeriss edge accelerator and a TPU cloud over a 3 Mbps "
                       "uplink, with per-layer edge bit-widths (AUTO-SPLIT setting). Random-init weights (no "
                       "pretrained weights available), synthetic calibration images.")
    else:
        devices = [presets.splitnets_sensor(), presets.splitnets_aggregator()]
        links = [presets.splitnets_bus_share(0.25)]
        settings = {"problem": "split", "edge": "sensor", "cloud": "aggregator", "bit_widths": [8],
                    "cloud_bits": 8, "transmit_bits": None, "edge_memory_bytes": 2e6, "error_budget": None}
        source["edge_memory_rule"] = "M = 2e6 B: the sensor's 2 MB peak memory (SplitNets Sec. 3.2)"
        source["error_budget_rule"] = "none: SplitNets assumes 8-bit weights and activations without loss"
        description = ("MobileNetV2 224x224 on SplitNets' single-sensor system: 16 nm sensor NPU and 7 nm "
                       "aggregator over a 25 % share of the 1.2 Gb/s bus, 8 bits everywhere (SplitNets Table 4). "
                       "Random-init weights (no pretrained weights available).")
    return {
        "format": FORMAT,
        "name": name,
        "description": description,
        "source": source,
        "graph": {"inputs": graph["inputs"], "layers": graph["layers"]},
        "devices": devices,
        "links": links,
        "settings": settings,
    }


def report(inst: splitopt.Instance) -> None:
    """Print cloud-only and edge-only metrics of a loaded instance."""
    every = [l.name for l in inst.layers]
    bits = 8 if 8 in candidate_bits(inst) else candidate_bits(inst)[-1]
    for label, plan in (("cloud-only", uniform_plan(inst, [])),
                        (f"edge-only@{bits}", uniform_plan(inst, every, bits))):
        m = splitopt.evaluate(inst, plan)
        print(f"    {label:14s} total {m.total_ms:9.3f} ms (edge {m.edge_compute_ms:.3f}, tx {m.transmit_ms:.3f}, "
              f"cloud {m.cloud_compute_ms:.3f}); edge memory {m.edge_memory_bytes:,.0f} B; error {m.error:.4g}; "
              f"{'feasible' if m.feasible else 'INFEASIBLE: ' + '; '.join(m.violations)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="output folder")
    p.add_argument("--calibration-images", type=int, default=8, help="synthetic calibration images (default 8)")
    p.add_argument("--error-factor", type=float, default=1.0,
                   help="E = factor x sum of W8A8 layer errors (default 1.0)")
    p.add_argument("--edge-memory-bytes", type=float, default=4e6, help="Eyeriss edge memory limit M (default 4e6)")
    p.add_argument("--only", nargs="*", choices=sorted(INSTANCES), help="write only these instances")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(min(2, torch.get_num_threads()))

    names = args.only or list(INSTANCES)
    graphs: dict[str, dict[str, Any]] = {}
    t0 = time.time()
    for name in names:
        model, kind = INSTANCES[name]
        if model not in graphs:
            graphs[model] = build_graph(model, args.calibration_images)
        data = make_instance(name, model, kind, graphs[model], args)
        parse_instance(data)  # fail before writing
        path = args.out / f"{name}.json"
        path.write_text(_dumps(data))
        inst = splitopt.load_instance(path)
        print(f"  wrote {path} ({len(inst.layers)} layers)", flush=True)
        report(inst)
    print(f"done in {time.time() - t0:.1f} s")
    return 0


def _dumps(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, indent=1) + "\n"


if __name__ == "__main__":
    sys.exit(main())
