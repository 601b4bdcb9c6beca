"""The compression width ``d`` as a solver decision with its measured accuracy: turn a
:func:`splitopt.torch.multiview.retrain.retrain_table` result into a ``multiview`` instance with one
view (SplitNets' single-view split: Conv-Reduce on the sensor, Conv-Recover on the
aggregator), or a :func:`splitopt.torch.multiview.retrain_views.multiview_retrain_table` result
into one with ``V`` sensors (Conv-Reduce per view, View-Fuse on the aggregator; no
compression: View-Pool), whose ``settings.multiview.accuracy`` holds the measured
accuracies.

The graph is the digits CNN profiled by :func:`splitopt.torch.profile.profile` (shapes,
MACs and weights do not depend on the trained values); the fusion candidate is the output
of the table's split block (where the splitting module was inserted and measured); the
compression widths are the table's widths; each width's record is its test accuracy
after retraining with the split tensor packed at the table's bits
(``accuracy_after_packed``), and the uncompressed record is the unsplit model's accuracy
with the same tensor sent at those bits. The solver then picks the cut, whether to
compress and the width, for the least latency with accuracy >= ``min_accuracy``.

Default hardware (assumed, stated here; no paper prints it): a wearable sensor with a
microcontroller-class NPU at 250 M MAC/s and 256 KiB of memory for weights and
activations, a phone as aggregator at 100 G MAC/s, and a 1 Mbit/s Bluetooth-LE-class
serial link; the raw image must not leave the wearable (``edge_required``: the first
layer), so the choices are which tensor to send and how much to compress it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from splitopt.core.instance import Instance
from splitopt.api import parse_instance
from splitopt.core.instance_io import to_dict

SENSOR = "wearable"
AGGREGATOR = "phone"
BUS = "ble"


def wearable() -> dict[str, Any]:
    """Assumed wearable sensor: 250 M MAC/s, 256 KiB memory, 8-bit."""
    return {"name": SENSOR, "description": "wearable microcontroller NPU (assumed: 250 M MAC/s, 256 KiB)",
            "mac_per_s": 250e6, "offchip_bytes_per_s": None, "onchip_bytes": 262144.0,
            "memory_bytes": 262144.0, "bit_widths": [8]}


def phone() -> dict[str, Any]:
    """Assumed phone aggregator: 100 G MAC/s, memory not limiting, 8-bit."""
    return {"name": AGGREGATOR, "description": "phone NPU (assumed: 100 G MAC/s)", "mac_per_s": 100e9,
            "offchip_bytes_per_s": None, "onchip_bytes": 1e9, "memory_bytes": 1e12, "bit_widths": [8]}


def ble_bus() -> dict[str, Any]:
    """Assumed 1 Mbit/s Bluetooth-LE-class link, one transfer at a time."""
    return {"name": BUS, "bandwidth_bits_per_s": 1e6, "mode": "serial"}


def split_tensor(layer_names: Sequence[str], block: str) -> str:
    """The captured layer whose output is block ``block``'s output: the last layer
    captured under the block's module path (``block2`` -> ``block2.2``, its max-pool)."""
    inside = [n for n in layer_names if n == block or n.startswith(block + ".")]
    if not inside:
        raise ValueError(f"no captured layer belongs to block '{block}'")
    return inside[-1]


def accuracy_records(table: Mapping[str, Any], fusion: str) -> list[dict[str, Any]]:
    """``settings.multiview.accuracy`` records of a retrain table at tensor ``fusion``:
    one per retrained width (accuracy after retraining, split tensor packed) and one for
    no compression (the unsplit model, the same tensor packed)."""
    rows = table["rows"]
    inits = {r["init"] for r in rows}
    if len(inits) > 1:
        raise ValueError(f"the table holds several initialisations {sorted(inits)}; give one per instance")
    views = int(table.get("views", 1))
    model = table["model"] if views == 1 else f"{table['model']} x {views} views"
    note = (f"{model} on {table['data']}, split after {table['split']}, {table['settings']['loss']} "
            f"retraining {table['settings']['epochs']} epochs, seed {table['settings']['seed']}, "
            f"sent at {table['bits']} bits")
    unsplit = "unsplit model" if views == 1 else "View-Pool (max over views) model"
    out = [{"fusion": fusion, "width": None, "accuracy": table["unsplit_accuracy_packed"],
            "note": f"{unsplit}; {note}"}]
    for r in rows:
        out.append({"fusion": fusion, "width": r["d"], "accuracy": r["accuracy_after_packed"],
                    "note": f"init {r['init']}; {note}"})
    return out


def widths_instance(table: Mapping[str, Any], min_accuracy: float | None = None, *, name: str = "digits_cnn_widths",
                    sensor: Mapping[str, Any] | None = None, aggregator: Mapping[str, Any] | None = None,
                    bus: Mapping[str, Any] | None = None, required_first_layer: bool = True) -> Instance:
    """A ``multiview`` instance of the digits CNN whose widths carry the measured
    accuracies of ``table`` (:func:`~splitopt.torch.multiview.retrain.retrain_table`: one view;
    :func:`~splitopt.torch.multiview.retrain_views.multiview_retrain_table`: ``table["views"]``
    sensors, named ``wearable0``, ``wearable1``, ... on one serial bus), with
    ``min_accuracy`` (None: no limit). Hardware defaults: :func:`wearable`,
    :func:`phone`, :func:`ble_bus`; ``required_first_layer``: the raw image stays on the
    sensor. Raises ValueError for a table this cannot describe, InvalidInstance (one
    line) for a bad ``min_accuracy``."""
    import torch

    from splitopt.torch.architectures import digits_cnn
    from splitopt.torch.profile import profile

    if table.get("model") != "digits_cnn":
        raise ValueError(f"widths_instance: expected a digits_cnn retrain table, got model {table.get('model')!r}")
    sensor, aggregator, bus = dict(sensor or wearable()), dict(aggregator or phone()), dict(bus or ble_bus())
    views = int(table.get("views", 1))
    sensors = [sensor] if views == 1 else [{**sensor, "name": f"{sensor['name']}{v}"} for v in range(views)]
    links = [{"source": s["name"], "target": aggregator["name"], "bus": bus["name"], "latency_ms": 0.0}
             for s in sensors]
    sensor = sensors[0]
    bits = int(table["bits"])
    settings = {"problem": "split", "edge": sensor["name"], "cloud": aggregator["name"], "bit_widths": [8],
                "cloud_bits": 8, "edge_memory_bytes": sensor["memory_bytes"], "error_budget": None}
    base = profile(digits_cnn(table["settings"]["seed"]), torch.zeros(1, 1, 8, 8), [*sensors, aggregator],
                   [{"source": sensor["name"], "target": aggregator["name"], "latency_ms": 0.0,
                     "bandwidth_bits_per_s": bus["bandwidth_bits_per_s"]}], settings,
                   name=name, input_bits=8)
    fusion = split_tensor([l.name for l in base.layers], table["split"])
    data = to_dict(base)
    what = "one view" if views == 1 else f"{views} views ({table['data'].split(' views: ')[-1]}), View-Pool or View-Fuse"
    # the text as the instances written so far have it (instances/digits_cnn_widths*.json), word for word:
    # a regenerated instance is byte-identical (the module was splitopt/torch/width_instance.py then)
    data["description"] = (
        f"digits CNN on {views} wearable(s) sending to a phone over a 1 Mbit/s serial link (assumed hardware, "
        f"splitopt/torch/width_instance.py); {what}; the SplitNets splitting module after {table['split']} "
        f"('{fusion}') with widths {[r['d'] for r in table['rows']]} whose accuracies were measured by "
        f"splitopt retrain; the raw image stays on the wearable")
    data["source"]["retrain"] = {k: table[k] for k in ("model", "data", "split", "channels", "height", "width", "bits")}
    data["source"]["retrain"]["views"] = views
    data["source"]["retrain"]["settings"] = dict(table["settings"])
    data["buses"] = [bus]
    data["links"] = links
    data["settings"].update({
        "problem": "multiview",
        "edge_required": [base.layers[0].name] if required_first_layer else [],
        "transmit_bits": None if bits == 8 else bits,
        "multiview": {"sensors": [s["name"] for s in sensors], "fusion_candidates": [fusion],
                      "compression_widths": sorted(r["d"] for r in table["rows"] if r["d"] < table["channels"]),
                      "accuracy": [r for r in accuracy_records(table, fusion)
                                   if r["width"] is None or r["width"] < table["channels"]],
                      "min_accuracy": min_accuracy},
    })
    return parse_instance(data)
