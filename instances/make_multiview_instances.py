"""Generate the multiview (shared-bus) instances from real PyTorch models.

    python instances/make_multiview_instances.py [--out instances/] [--only NAME ...]

Per backbone: build it (random init, seeded, batch-norm statistics re-estimated on
synthetic images; see ``splitopt/torch/architectures.py``), capture the fused layer graph
of ONE view (``splitopt/torch/capture.py``, 3x224x224 input, 8-bit), attach SplitNets'
hardware (``splitopt/presets.py``) and ``settings.multiview``, write the JSON and reload it
with ``splitopt.load_instance``. No quantization-error tables: every layer runs at 8 bits
(SplitNets assumes 8-bit weights and activations without loss).

Hardware (SplitNets Sec. 3.2, App. G, Tables 4 and 6; rates assumed as stated there):

* sensors: ``presets.splitnets_sensor()`` renamed ``sensor0``, ``sensor1``, ...:
  125 GOP/s (one MAC counted as one OP, see ``presets``), 2 MB memory (the limit on
  weights + peak activations, App. G);
* aggregator: ``presets.splitnets_aggregator()``: 1.25 TOP/s, memory not limiting;
* bus ``hmd_bus``: 1.2 Gb/s (150 MB/s decimal), one link per sensor to the aggregator.
  ``share`` mode: each of the bus's links owns 1/links of it at all times: 12 links give
  100 Mb/s = 12.5 MB/s per sensor (Table 6); the single-sensor instance keeps four
  sensors' links on the bus (Table 4: "each of the four sensors is allocated 25 %"), so
  its one working sensor gets 300 Mb/s = 37.5 MB/s. ``serial`` mode (the 12-sensor
  variants named ``_serial``): one transfer at a time at the full 150 MB/s, so a raw view
  takes 1.0035 ms and 12 of them 12.04 ms, as in share mode, but a transfer that is done
  early lets the aggregator start early.

Instances (``settings.multiview`` in brackets):

* ``splitnets_mobilenetv2_single_bus25``: MobileNetV2, one view (V=1) on 25 % of the bus;
  fusion candidates: every single-tensor cut; widths d in {4, 8, 16, 24};
* ``splitnets_resnet18_multiview12_{share,serial}``: ResNet-18, 12 views; fusion candidates:
  every single-tensor cut (block outputs, stem, pool, fc); widths {4, 8, 16, 32};
* ``splitnets_mobilenetv2_multiview12_{share,serial}``: MobileNetV2, 12 views; fusion
  candidates: stem and block outputs, ``conv_last``, ``avgpool``, ``classifier``
  (inside-block tensors remain cut points); widths {4, 8, 16, 24}.
"""

from __future__ import annotations

import argparse
import json
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
from splitopt.torch.architectures import (  # noqa: E402
    BN_IMAGES, BN_SEED, MODELS, RESNET_RENAME, LogitsOnly, finish_model,
)
from splitopt.torch.capture import capture  # noqa: E402

SCRIPT = "instances/make_multiview_instances.py"
SEED = 0
INPUT_SHAPE = (1, 3, 224, 224)
BUS_BITS_PER_S = 1.2e9

MODEL_SOURCES = {
    "resnet18": "transformers ResNetForImageClassification(ResNetConfig(layer_type='basic', depths=[2,2,2,2], "
                "hidden_sizes=[64,128,256,512], embedding_size=64, num_labels=1000)) (ResNet-18), wrapped to "
                "return .logits",
    "mobilenet_v2": "transformers MobileNetV2ForImageClassification(MobileNetV2Config(num_labels=1000, "
                    "tf_padding=False)) (MobileNetV2 1.0/224), wrapped to return .logits",
}

#: name: (model, views, bus mode, sensors on the bus, widths, fusion rule)
INSTANCES = {
    "splitnets_mobilenetv2_single_bus25": ("mobilenet_v2", 1, "share", 4, [4, 8, 16, 24], "all"),
    "splitnets_resnet18_multiview12_share": ("resnet18", 12, "share", 12, [4, 8, 16, 32], "all"),
    "splitnets_resnet18_multiview12_serial": ("resnet18", 12, "serial", 12, [4, 8, 16, 32], "all"),
    "splitnets_mobilenetv2_multiview12_share": ("mobilenet_v2", 12, "share", 12, [4, 8, 16, 24], "blocks"),
    "splitnets_mobilenetv2_multiview12_serial": ("mobilenet_v2", 12, "serial", 12, [4, 8, 16, 24], "blocks"),
}


def resnet18(seed: int = SEED):
    """ResNet-18 from transformers' ResNetConfig (basic blocks), random init, BN recalibrated."""
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(seed)
    config = ResNetConfig(layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512],
                          embedding_size=64, num_labels=1000)
    return finish_model(LogitsOnly(ResNetForImageClassification(config)), True), RESNET_RENAME


BUILDERS = {"resnet18": resnet18, "mobilenet_v2": lambda seed=SEED: MODELS["mobilenet_v2"](seed=seed)}


def build_graph(model: str) -> dict[str, Any]:
    t0 = time.time()
    module, rename = BUILDERS[model](seed=SEED)
    cap = capture(module, torch.zeros(INPUT_SHAPE), rename=rename)
    graph = cap.graph_dict()
    print(f"  {model}: {len(graph['layers'])} layers, {cap.total_macs / 1e9:.4f} GMAC, "
          f"{cap.total_weights / 1e6:.4f} M weights ({time.time() - t0:.1f} s)", flush=True)
    return {"graph": graph, "macs": cap.total_macs, "weights": cap.total_weights}


def fusion_candidates(graph: dict[str, Any], rule: str) -> list[str] | None:
    """None: every single-tensor cut (the family's default); "blocks": MobileNetV2's stem
    and block outputs (``*.project``/``*.add`` not followed by an add of the same block)
    and the head tensors."""
    if rule == "all":
        return None
    names = [l["name"] for l in graph["layers"]]
    out = []
    for n in names:
        block = n.rsplit(".", 1)[0]
        if n.endswith(".add") or n == "stem.project":
            out.append(n)
        elif n.endswith(".project") and f"{block}.add" not in names:
            out.append(n)
        elif n in ("conv_last", "avgpool", "classifier"):
            out.append(n)
    return out


def make_instance(name: str, captured: dict[str, Any]) -> dict[str, Any]:
    model, views, mode, on_bus, widths, rule = INSTANCES[name]
    graph = captured["graph"]
    sensors = [f"sensor{i}" for i in range(on_bus)]
    devices = []
    for s in sensors:
        dev = presets.splitnets_sensor()
        dev["name"] = s
        devices.append(dev)
    devices.append(presets.splitnets_aggregator())
    links = [{"source": s, "target": "aggregator", "bus": "hmd_bus", "latency_ms": 0.0} for s in sensors]
    mv: dict[str, Any] = {"sensors": sensors[:views], "views": views, "compression_widths": widths}
    fusions = fusion_candidates(graph, rule)
    if fusions is not None:
        mv["fusion_candidates"] = fusions
    share = BUS_BITS_PER_S / on_bus if mode == "share" else BUS_BITS_PER_S
    source = {
        "script": SCRIPT,
        "model": MODEL_SOURCES[model],
        "weights": (f"random initialisation under torch.manual_seed({SEED}) (no pretrained weights can be "
                    f"downloaded); batch-norm statistics re-estimated on {BN_IMAGES} synthetic images (seed {BN_SEED})"),
        "input_shape": list(INPUT_SHAPE),
        "capture": "splitopt.torch.capture.capture: torch.export (strict=False), BN folded, activations fused",
        "layers": len(graph["layers"]),
        "total_macs": captured["macs"],
        "total_weights": captured["weights"],
        "hardware": {
            "sensors": "presets.splitnets_sensor(): SplitNets Sec. 3.2 / App. G (125 GOP/s, 2 MB)",
            "aggregator": "presets.splitnets_aggregator(): 1.25 TOP/s",
            "bus": f"1.2 Gb/s shared bus, mode '{mode}', {on_bus} sensor links on it: "
                   f"{share / 8e6:g} MB/s per transfer",
        },
        "fusion_rule": "every single-tensor cut" if rule == "all" else "stem, block outputs and head tensors",
        "torch": torch.__version__,
    }
    try:
        import transformers
        source["transformers"] = transformers.__version__
    except ImportError:
        pass
    if views == 1:
        description = (f"{model} on SplitNets' single-sensor system (Table 4): one view, 16 nm sensor NPU and 7 nm "
                       "aggregator, 25 % of the 1.2 Gb/s bus (four sensors share it), 8 bits everywhere.")
    else:
        description = (f"{model} on SplitNets' 12-sensor multi-view system (Table 6): 12 views, bus in {mode} mode "
                       f"({share / 8e6:g} MB/s per transfer), 8 bits everywhere.")
    return {
        "format": FORMAT,
        "name": name,
        "description": description,
        "source": source,
        "graph": graph,
        "devices": devices,
        "buses": [{"name": "hmd_bus", "bandwidth_bits_per_s": BUS_BITS_PER_S, "mode": mode}],
        "links": links,
        "settings": {"problem": "multiview", "edge": "sensor0", "cloud": "aggregator", "cloud_bits": 8,
                     "bit_widths": [8], "transmit_bits": None, "edge_memory_bytes": 2e6, "error_budget": None,
                     "multiview": mv},
    }


def report(inst: splitopt.Instance) -> None:
    from splitopt.solve import solve

    for name in ("all-on-aggregator", "all-on-sensor", "common-split"):
        out = solve(inst, name)
        m = out.metrics
        print(f"    {name:18s} makespan {m.makespan_ms:9.3f} ms, fusion '{out.plan.fusion}', "
              f"{'feasible' if m.feasible else 'INFEASIBLE: ' + m.violations[0]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="output folder")
    p.add_argument("--only", nargs="*", choices=sorted(INSTANCES), help="write only these instances")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    t0 = time.time()
    graphs: dict[str, dict[str, Any]] = {}
    for name in args.only or list(INSTANCES):
        model = INSTANCES[name][0]
        if model not in graphs:
            graphs[model] = build_graph(model)
        data = make_instance(name, graphs[model])
        parse_instance(data)  # fail before writing
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        inst = splitopt.load_instance(path)
        print(f"  wrote {path} ({len(inst.layers)} layers)", flush=True)
        report(inst)
    print(f"done in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
