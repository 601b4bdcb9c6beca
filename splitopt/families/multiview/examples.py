"""Small multiview instances (as JSON data) for the contract suites and tests."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from splitopt.core.instance_io import FORMAT

def multiview_instance_data(layers: list[dict], V: int = 2, mode: str = "serial", widths: Sequence[int] = (),
                            memory: float = 1e9, bus_bits: float = 8e6, sensor_macs: Any = 1e9,
                            agg_macs: float = 1e10, link_latency: float = 0.0, input_shape: Sequence[int] = (1000,),
                            required: Sequence[str] = (), extra_links: int = 0, fusions: Sequence[str] | None = None,
                            **multiview: Any) -> dict[str, Any]:
    """A small ``multiview`` instance as JSON data: sensors s0..s{V-1} at ``sensor_macs``
    (a number or one per sensor), aggregator 'agg'; one bus at ``bus_bits`` bits/s
    (8e6: 1000 B take 1 ms) in ``mode``; 8-bit tensors; compute-only devices."""
    sensors = [f"s{i}" for i in range(V + extra_links)]
    speeds = sensor_macs if isinstance(sensor_macs, (list, tuple)) else [sensor_macs] * len(sensors)
    speeds = list(speeds) + [speeds[-1]] * (len(sensors) - len(speeds))
    devices = [{"name": s, "mac_per_s": r, "offchip_bytes_per_s": None, "onchip_bytes": 1e5, "memory_bytes": 1e12,
                "bit_widths": [8]} for s, r in zip(sensors, speeds)]
    devices.append({"name": "agg", "mac_per_s": agg_macs, "offchip_bytes_per_s": None, "onchip_bytes": 1e5,
                    "memory_bytes": 1e12, "bit_widths": [8]})
    for l in layers:
        l.setdefault("op", "conv")
        l.setdefault("weights", 0.0)
    options = {"sensors": sensors[:V], "compression_widths": list(widths), **multiview}
    if fusions is not None:
        options["fusion_candidates"] = list(fusions)
    return {
        "format": FORMAT, "name": "small-multiview",
        "graph": {"inputs": [{"name": "x", "shape": list(input_shape), "bits": 8}], "layers": layers},
        "devices": devices,
        "buses": [{"name": "bus", "bandwidth_bits_per_s": bus_bits, "mode": mode}],
        "links": [{"source": s, "target": "agg", "bus": "bus", "latency_ms": link_latency} for s in sensors],
        "settings": {"problem": "multiview", "edge": "s0", "cloud": "agg", "cloud_bits": 8, "bit_widths": [8],
                     "edge_memory_bytes": memory, "error_budget": None, "edge_required": list(required),
                     "multiview": options},
    }


def random_multiview_data(seed: int, parse: Callable[[dict], Any]) -> dict[str, Any]:
    """A random small ``multiview`` instance: 2-4 layers (a chain, sometimes with a
    residual add), V in 1..3, serial or share bus, with or without compression widths,
    half the time measured accuracies per width with a ``min_accuracy`` (often binding),
    a sensor memory limit drawn among the cut points' needs (often binding), sometimes
    heterogeneous sensor speeds, a link latency, a required first layer, idle links on
    the bus, the raw input as a fusion candidate. ``parse`` turns JSON data into an
    instance (the memory limit is drawn among the needs of a probe instance)."""
    from copy import deepcopy

    from splitopt.families.multiview.data import data as mv_data
    from splitopt.families.multiview.evaluate import view_costs

    rng = np.random.default_rng([seed, 31])
    n = int(rng.integers(2, 5))
    V = int(rng.choice([1, 2, 2, 3]))
    mode = str(rng.choice(["serial", "share"]))
    choices = [[], [1], [1, 3]] if (V < 3 or mode == "share") else [[], [2]]
    widths = choices[int(rng.integers(0, len(choices)))]
    layers: list[dict] = []
    prev = "x"
    for i in range(n):
        c = int(rng.integers(2, 9))
        side = int(rng.choice([1, 2, 3]))
        if i >= 2 and rng.random() < 0.3:  # residual: add(prev, the one before)
            layers.append({"name": f"l{i}", "op": "add", "inputs": [prev, layers[-2]["name"]],
                           "macs": float(rng.integers(1, 50) * 1e3), "weights": 0.0,
                           "output_shape": list(layers[-1]["output_shape"])})
        else:
            layers.append({"name": f"l{i}", "op": "conv", "inputs": [prev], "macs": float(rng.integers(1, 400) * 1e4),
                           "weights": float(rng.integers(0, 200)), "output_shape": [c, side, side]})
        prev = f"l{i}"
    speeds: Any = [float(rng.choice([1e9, 2e9, 5e8])) for _ in range(V)] if rng.random() < 0.4 else 1e9
    common = dict(V=V, mode=mode, bus_bits=float(rng.choice([8e4, 8e5, 8e6])), sensor_macs=speeds,
                  agg_macs=float(rng.choice([2e9, 1e10])), input_shape=(3, 3, 3),
                  link_latency=float(rng.choice([0.0, 0.0, 0.05])),
                  required=["l0"] if rng.random() < 0.2 else [], extra_links=int(rng.integers(0, 2)))
    probe = parse(multiview_instance_data(deepcopy(layers), memory=1e12, **common))
    d = mv_data(probe)
    widths = [w for w in widths if w < max(d.channels[f] for f in d.fusions)]
    fusions = ["x"] + list(d.fusions) if rng.random() < 0.2 else None
    needs = sorted({view_costs(probe, f, None, "s0", c).memory_bytes for f in d.fusions for c in d.points(f, None)})
    memory = float(needs[int(rng.integers(0, len(needs)))]) + float(rng.choice([0.0, 0.5])) if needs else 1e9
    memory = max(memory, 1.0)
    accuracy: dict[str, Any] = {}
    if rng.random() < 0.5:  # measured accuracy per width (some fusion-specific, some missing) and a limit
        levels = [0.5, 0.7, 0.9]
        records: list[dict[str, Any]] = [
            {"width": w, "accuracy": float(rng.choice(levels if w is not None else [0.7, 0.9, 1.0]))}
            for w in [None] + widths if rng.random() < 0.8]
        for w in widths:
            if rng.random() < 0.3:
                records.append({"fusion": str(rng.choice(fusions or list(d.fusions))), "width": w,
                                "accuracy": float(rng.choice(levels))})
        accuracy = {"accuracy": records, "min_accuracy": [None, 0.6, 0.8, 0.95][int(rng.integers(0, 4))]}
    data = multiview_instance_data(layers, widths=widths, memory=memory, fusions=fusions, **common, **accuracy)
    data["name"] = f"random-multiview-s{seed}"
    return data
