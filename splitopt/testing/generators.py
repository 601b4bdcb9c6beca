"""Random instances for tests and benchmarks.

``random_instance(seed, n_layers)`` builds a small random layer DAG with its devices,
link and settings, deterministic for a seed (one ``numpy.random.Generator``), and returns
it validated through ``parse_instance``. The draws aim to cover what the evaluator and
the formulations must get right:

* 1 or 2 graph inputs; every layer reads 1-3 earlier tensors (skip connections,
  tensors with several consumers, now and then the same tensor twice);
* some layers weightless; error tables for every quantized candidate bit-width,
  decreasing with bits;
* latency from the analytical model (small on-chip buffers, so outputs spill; sometimes
  no off-chip bandwidth) or, in some instances, from ``latency_ms`` overrides (a number
  on the cloud, a ``w<b>a<b>`` table on the edge);
* link bandwidth and fixed latency (sometimes 0), sometimes ``transmit_bits``;
* memory limit and error budget sometimes loose, sometimes tight, sometimes so small that
  only cloud-only (no edge memory, zero error) is feasible;
* now and then one layer in ``edge_required`` (so cloud-only is not a plan, and together
  with a small budget, no plan at all is feasible).

Units as in the instance format: ms, bytes, bits, MAC/s, bytes/s, bits/s.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from splitopt.api import parse_instance
from splitopt.core.instance_io import FORMAT
from splitopt.core.instance import Instance

#: candidate edge bit-width sets drawn when none is given (small, for brute force)
BIT_SETS: tuple[tuple[int, ...], ...] = ((4, 8), (2, 4, 8))


def _loguniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def _shape(rng: np.random.Generator, elements_low: float, elements_high: float) -> list[int]:
    """A [channels, height, width] or [features] shape with about the drawn element count."""
    elements = max(1, int(_loguniform(rng, elements_low, elements_high)))
    if rng.random() < 0.5:
        return [elements]
    side = int(rng.integers(1, 9))
    channels = max(1, elements // (side * side))
    return [channels, side, side]


def _decreasing_table(rng: np.random.Generator, bits: Sequence[int], scale: float) -> dict[str, float]:
    """Error per bit-width, strictly decreasing as bits grow (dimensionless)."""
    values = sorted((scale * rng.uniform(0.05, 1.0) for _ in bits), reverse=True)
    for i in range(1, len(values)):  # strict decrease even if two draws coincide
        values[i] = min(values[i], values[i - 1] * 0.9)
    return {str(b): v for b, v in zip(sorted(bits), values)}


def random_instance(
    seed: int,
    n_layers: int,
    problem: str = "split_bits",
    bit_widths: Sequence[int] | None = None,
    cloud_bits: int | None = None,
    overrides: bool | None = None,
    n_inputs: int | None = None,
    edge_required: bool = True,
) -> Instance:
    """A random valid instance with ``n_layers`` layers named ``l0``, ``l1``, ... in
    execution order.

    ``bit_widths``: candidate edge bit-widths (default: drawn from ``BIT_SETS``);
    ``cloud_bits``: reference precision (default: 16, now and then 8);
    ``overrides``: force latency overrides on (True) or off (False) (default: drawn);
    ``n_inputs``: 1 or 2 graph inputs (default: drawn); ``edge_required``: draw it now
    and then (True, the default) or never (False). The same arguments give the same
    instance."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    if problem not in ("split", "split_bits"):
        raise ValueError(f"problem must be 'split' or 'split_bits', got {problem!r}")
    rng = np.random.default_rng(seed)

    bits = sorted(bit_widths) if bit_widths is not None else list(BIT_SETS[int(rng.integers(len(BIT_SETS)))])
    if cloud_bits is None:
        cloud_bits = 8 if rng.random() < 0.15 else 16
    quantized = [b for b in bits if b < cloud_bits]  # bit-widths that carry an error
    if n_inputs is None:
        n_inputs = 2 if rng.random() < 0.3 else 1
    if overrides is None:
        overrides = bool(rng.random() < 0.3)

    # ----- graph -------------------------------------------------------------------------
    inputs = [
        {"name": f"x{j}", "shape": _shape(rng, 50, 5e3), "bits": int(rng.choice([8, 8, 16]))}
        for j in range(n_inputs)
    ]
    tensors = [t["name"] for t in inputs]  # tensors available so far, in order
    unread = list(tensors)  # tensors no layer reads yet
    # the second input is read by a random layer so it is never left unread
    second_input_reader = int(rng.integers(n_layers)) if n_inputs == 2 else -1

    edge_pairs = sorted({(w, a) for w in bits + [cloud_bits] for a in bits + [cloud_bits]})
    layers: list[dict[str, Any]] = []
    for i in range(n_layers):
        name = f"l{i}"
        k = int(rng.integers(1, min(3, len(tensors)) + 1))
        chosen: list[str] = ["x0"] if i == 0 else []  # both inputs are always read
        if unread and rng.random() < 0.85:  # mostly keep every tensor consumed
            pick = unread[-1] if rng.random() < 0.7 else unread[int(rng.integers(len(unread)))]
            if pick not in chosen:
                chosen.append(pick)
        if i == second_input_reader and "x1" not in chosen:
            chosen.append("x1")
        while len(chosen) < k:
            cand = tensors[int(rng.integers(len(tensors)))]
            if cand not in chosen:
                chosen.append(cand)
        if rng.random() < 0.05:  # an op reading one tensor twice (x + x)
            chosen.append(chosen[0])
        for t in chosen:
            if t in unread:
                unread.remove(t)

        weights = 0.0 if rng.random() < 0.3 else float(int(_loguniform(rng, 1e2, 2e5)))
        layer: dict[str, Any] = {
            "name": name,
            "op": "add" if weights == 0 and len(set(chosen)) > 1 else ("pool" if weights == 0 else "conv"),
            "inputs": chosen,
            "macs": float(int(_loguniform(rng, 1e4, 1e8))),
            "weights": weights,
            "output_shape": _shape(rng, 50, 2e4),
        }
        if quantized:
            scale = _loguniform(rng, 1e-3, 1e-1)
            if weights > 0:
                layer["weight_error"] = _decreasing_table(rng, quantized, scale)
            layer["activation_error"] = _decreasing_table(rng, quantized, scale)
        if overrides and rng.random() < 0.8:
            base = _loguniform(rng, 0.01, 5.0)
            per_w, per_a = rng.uniform(0, 0.2) * base, rng.uniform(0, 0.2) * base
            layer["latency_ms"] = {
                "cloud": base * rng.uniform(0.001, 0.05),
                "edge": {f"w{w}a{a}": base + per_w * w + per_a * a for w, a in edge_pairs},
            }
        layers.append(layer)
        tensors.append(name)
        unread.append(name)

    # ----- hardware ----------------------------------------------------------------------
    edge_bits = sorted(set(bits) | {cloud_bits, 16})
    edge = {
        "name": "edge",
        "mac_per_s": _loguniform(rng, 1e9, 1e11),
        "offchip_bytes_per_s": None if rng.random() < 0.2 else _loguniform(rng, 1e8, 1e10),
        "onchip_bytes": _loguniform(rng, 2e2, 5e4),  # small: outputs often spill
        "memory_bytes": 1e9,
        "bit_widths": edge_bits,
    }
    cloud = {
        "name": "cloud",
        "mac_per_s": _loguniform(rng, 1e12, 1e14),
        "offchip_bytes_per_s": _loguniform(rng, 1e10, 1e11),
        "onchip_bytes": _loguniform(rng, 1e4, 3e7),
        "memory_bytes": 1e11,
        "bit_widths": sorted({8, 16, cloud_bits}),
    }
    devices = [edge, cloud]
    links = [
        {
            "source": "edge",
            "target": "cloud",
            "bandwidth_bits_per_s": _loguniform(rng, 1e5, 1e8),
            "latency_ms": 0.0 if rng.random() < 0.3 else float(rng.uniform(0.0, 20.0)),
        }
    ]
    if rng.random() < 0.2:  # an unused spare device and a downlink, to be ignored
        devices.append({"name": "spare", "mac_per_s": 1e9, "offchip_bytes_per_s": None,
                        "onchip_bytes": 1e3, "memory_bytes": 1e6, "bit_widths": [8]})
        links.append({"source": "cloud", "target": "edge", "bandwidth_bits_per_s": 1e6})

    # ----- budgets -----------------------------------------------------------------------
    input_bytes = sum(math.prod(t["shape"]) * t["bits"] / 8.0 for t in inputs)
    top = max(bits + [cloud_bits])
    weight_bytes = sum(l["weights"] for l in layers) * top / 8.0
    act_bytes = sum(math.prod(l["output_shape"]) for l in layers) * top / 8.0
    mode = rng.random()
    if mode < 0.15:  # below the raw inputs, which every edge plan holds: cloud-only only
        memory = input_bytes * rng.uniform(0.1, 0.99)
    elif mode < 0.65:  # tight
        memory = input_bytes + rng.uniform(0.02, 0.8) * (weight_bytes + act_bytes)
    else:  # loose
        memory = 10.0 * (input_bytes + weight_bytes + act_bytes)

    max_error = sum(
        max(l.get("weight_error", {"0": 0.0}).values()) + max(l.get("activation_error", {"0": 0.0}).values())
        for l in layers
    )
    mode = rng.random()
    if mode < 0.25:
        error_budget = None
    elif mode < 0.35:
        error_budget = 0.0
    else:
        error_budget = max_error * rng.uniform(0.02, 1.0)

    transmit_bits = None
    if quantized and rng.random() < 0.25:
        transmit_bits = int(rng.choice(quantized))
    required = [f"l{int(rng.integers(n_layers))}"] if rng.random() < 0.1 and edge_required else []

    data = {
        "format": FORMAT,
        "name": f"random-{problem}-s{seed}-n{n_layers}",
        "description": "random synthetic instance (splitopt.testing.generators)",
        "source": {"generator": "splitopt.testing.generators.random_instance", "seed": int(seed), "n_layers": n_layers},
        "graph": {"inputs": inputs, "layers": layers},
        "devices": devices,
        "links": links,
        "settings": {
            "problem": problem,
            "edge": "edge",
            "cloud": "cloud",
            "edge_memory_bytes": memory,
            "error_budget": error_budget,
            "bit_widths": bits,
            "cloud_bits": cloud_bits,
            "transmit_bits": transmit_bits,
            "edge_required": required,
        },
    }
    return parse_instance(data)


def random_chain_instance(seed: int, n_layers: int, n_devices: int, objective: str | None = None,
                          linear: bool = False) -> Instance:
    """A random valid ``chain`` instance: the layer DAG of ``random_instance(seed,
    n_layers)`` over ``n_devices`` devices ``d0 -> d1 -> ...`` in a line, with random
    compute rates (MAC/s), link bandwidths (bits/s) and fixed latencies (ms, sometimes 0),
    and memory limits (bytes) that are sometimes loose and sometimes bind.
    ``objective``: "latency" or "throughput" (default: drawn); ``linear``: make the layer
    graph a chain (one input, each layer reads the previous one)."""
    if n_devices < 2:
        raise ValueError(f"n_devices must be >= 2, got {n_devices}")
    from splitopt.core.instance_io import to_dict

    base = to_dict(random_instance(seed, n_layers, problem="split", overrides=False, edge_required=False, cloud_bits=16))
    rng = np.random.default_rng([seed, n_devices, 7])
    if objective is None:
        objective = "throughput" if rng.random() < 0.4 else "latency"
    for i, layer in enumerate(base["graph"]["layers"]):
        layer.pop("weight_error", None)
        layer.pop("activation_error", None)
        if linear:
            layer["inputs"] = ["x0"] if i == 0 else [f"l{i - 1}"]
    if linear:
        base["graph"]["inputs"] = base["graph"]["inputs"][:1]
    input_bytes = sum(math.prod(t["shape"]) * t["bits"] / 8.0 for t in base["graph"]["inputs"])
    weight_bytes = sum(l["weights"] for l in base["graph"]["layers"]) * 2.0
    act_bytes = sum(math.prod(l["output_shape"]) for l in base["graph"]["layers"]) * 2.0
    largest = max((l["weights"] + math.prod(l["output_shape"])) * 2.0 for l in base["graph"]["layers"])
    devices, links = [], []
    for m in range(n_devices):
        mode = rng.random()
        if mode < 0.5:
            memory = 10.0 * (input_bytes + weight_bytes + act_bytes)  # loose
        else:
            memory = max(largest, input_bytes) * 1.01 + rng.uniform(0.0, 0.6) * (weight_bytes + act_bytes)
        if m == 0 and rng.random() < 0.08:
            memory = 0.5 * input_bytes  # the input does not fit where it arrives: infeasible
        elif m == n_devices - 1:
            memory = max(memory, 2.0 * (input_bytes + weight_bytes + act_bytes))  # the cloud holds everything
        devices.append({
            "name": f"d{m}",
            "mac_per_s": _loguniform(rng, 1e9, 1e12),
            "offchip_bytes_per_s": None if rng.random() < 0.5 else _loguniform(rng, 1e8, 1e10),
            "onchip_bytes": _loguniform(rng, 2e2, 5e4),
            "memory_bytes": memory,
            "bit_widths": [8, 16],
        })
        if m > 0:
            links.append({
                "source": f"d{m - 1}",
                "target": f"d{m}",
                "bandwidth_bits_per_s": _loguniform(rng, 1e6, 1e9),
                "latency_ms": 0.0 if rng.random() < 0.4 else float(rng.uniform(0.0, 5.0)),
            })
    base["name"] = f"random-chain-s{seed}-n{n_layers}-m{n_devices}"
    base["source"] = {"generator": "splitopt.testing.generators.random_chain_instance", "seed": int(seed),
                      "n_layers": n_layers, "n_devices": n_devices}
    base["devices"] = devices
    base["links"] = links
    base["settings"] = {"problem": "chain", "objective": objective, "chain": [d["name"] for d in devices],
                        "cloud_bits": 16, "bit_widths": [16]}
    return parse_instance(base)


def _mesh_device(name: str, memory: float) -> dict[str, Any]:
    return {"name": name, "mac_per_s": 1e9, "offchip_bytes_per_s": None, "onchip_bytes": 0,
            "memory_bytes": memory, "bit_widths": [16]}


def random_mesh_instance(seed: int, n_layers: int, n_devices: int) -> Instance:
    """A random valid ``mesh`` instance: a DAG (each layer reads 1-2 earlier tensors) on a
    random connected device graph (a path-covering skeleton plus extra links, sometimes
    two links on a serial or share bus), random latencies (some zero), sizes, memories
    (sometimes binding) and options (routing, output delivery)."""
    import random

    rng = random.Random(seed)
    devs = [f"d{k}" for k in range(n_devices)]
    links: dict[tuple[str, str], dict] = {}

    def add(u: str, v: str) -> None:
        if u != v and (u, v) not in links:
            links[(u, v)] = {"source": u, "target": v, "bandwidth_bits_per_s": rng.choice([1e6, 4e6, 2e7]),
                             "latency_ms": rng.choice([0.0, 0.0, 0.05])}

    for k in range(1, n_devices):
        add(devs[rng.randrange(k)], devs[k])
    for k in range(n_devices - 1):
        add(devs[k], devs[rng.randrange(k + 1, n_devices)])
    for _ in range(rng.randrange(3)):
        add(rng.choice(devs), rng.choice(devs))
    buses = []
    if len(links) >= 2 and rng.random() < 0.5:
        buses.append({"name": "bus0", "bandwidth_bits_per_s": rng.choice([2e6, 1e7]),
                      "mode": rng.choice(["serial", "serial", "share"])})
        for pair in rng.sample(sorted(links), 2):
            links[pair]["bus"] = "bus0"
            del links[pair]["bandwidth_bits_per_s"]
    tensors, layers = ["input"], []
    for i in range(n_layers):
        inputs = sorted({rng.choice(tensors) for _ in range(1 if rng.random() < 0.6 else 2)}, key=tensors.index)
        latency = {d: (rng.choice([0.0, 0.1, 0.3, 0.5, 1.0, 2.0]) if rng.random() < 0.9 else 0.0) for d in devs}
        layers.append({"name": f"l{i}", "op": "conv", "inputs": inputs, "macs": 1e6,
                       "weights": float(rng.choice([0, 100, 1000, 5000])),
                       "output_shape": [rng.choice([10, 100, 500, 2000])], "latency_ms": latency})
        tensors.append(f"l{i}")
    total_weights = sum(l["weights"] for l in layers) * 2
    devices = [_mesh_device(d, rng.choice([1e9, 1e9, 0.5 * total_weights + 9000, 12000])) for d in devs]
    data = {"format": FORMAT, "name": f"random-mesh-s{seed}-n{n_layers}-d{n_devices}",
            "graph": {"inputs": [{"name": "input", "shape": [rng.choice([100, 1000, 3000])], "bits": 8}],
                      "layers": layers},
            "devices": devices, "links": list(links.values()), "buses": buses,
            "settings": {"problem": "mesh", "edge": devs[0], "cloud": devs[-1], "cloud_bits": 16,
                         "mesh": {"routing": rng.choice(["shortest", "shortest", "direct"]),
                                  "deliver_outputs": rng.random() < 0.8}}}
    return parse_instance(data)


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


def random_multiview_instance(seed: int) -> Instance:
    """A random small ``multiview`` instance: 2-4 layers (a chain, sometimes with a
    residual add), V in 1..3, serial or share bus, with or without compression widths,
    half the time measured accuracies per width with a ``min_accuracy`` (often binding),
    a sensor memory limit drawn among the cut points' needs (often binding), sometimes
    heterogeneous sensor speeds, a link latency, a required first layer, idle links on
    the bus, the raw input as a fusion candidate."""
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
    probe = parse_instance(multiview_instance_data(deepcopy(layers), memory=1e12, **common))
    d = mv_data(probe)
    widths = [w for w in widths if w < max(d.channels[f] for f in d.fusions)]
    fusions = ["x"] + list(d.fusions) if rng.random() < 0.2 else None
    needs = sorted({view_costs(probe, f, None, "s0", c).memory_bytes for f in d.fusions for c in d.points(f, None)})
    memory = float(needs[int(rng.integers(0, len(needs)))]) + float(rng.choice([0.0, 0.5])) if needs else 1e9
    memory = max(memory, 1.0)
    accuracy: dict[str, Any] = {}
    if rng.random() < 0.5:  # measured accuracy per width (some fusion-specific, some missing) and a limit
        levels = [0.5, 0.7, 0.9]
        records = [{"width": w, "accuracy": float(rng.choice(levels if w is not None else [0.7, 0.9, 1.0]))}
                   for w in [None] + widths if rng.random() < 0.8]
        for w in widths:
            if rng.random() < 0.3:
                records.append({"fusion": str(rng.choice(fusions or list(d.fusions))), "width": w,
                                "accuracy": float(rng.choice(levels))})
        accuracy = {"accuracy": records, "min_accuracy": [None, 0.6, 0.8, 0.95][int(rng.integers(0, 4))]}
    data = multiview_instance_data(layers, widths=widths, memory=memory, fusions=fusions, **common, **accuracy)
    data["name"] = f"random-multiview-s{seed}"
    return parse_instance(data)


def random_maxload_data(seed: int, latency: bool = False) -> dict[str, Any]:
    """A small peer dnn-partitioning file's data. Inference: 1-6 forward nodes, some of
    them sharing a colour class. Training: 1-3 forward nodes, each with a backward node of
    its class (backward edges mirror the forward ones, reversed), sometimes a backward
    node with no class, and forward -> backward edges. 1-2 accelerators, 0-1 CPU cores
    (accelerator-only instances can be infeasible), memory often binding.

    ``latency=True`` draws what the latency objective must get right besides: 1-3
    accelerators, 0-3 CPU cores (the core rule binds), and zero times and costs often
    (zero-duration accelerator calls that could wait on each other)."""
    import random

    rng = random.Random(seed * 7919 + 17)

    def ms() -> float:
        if latency and rng.random() < 0.3:
            return 0.0
        return rng.randint(0, 2000) / 100

    def node(i: int, size: int, cc: int | None = None, ok: int = 1, bw: int = 0) -> dict[str, Any]:
        n = {"id": i, "supportedOnFpga": ok, "cpuLatency": ms(), "fpgaLatency": ms(), "isBackwardNode": bw,
             "size": size, "name": f"n{i}"}
        if cc is not None:
            n["colorClass"] = cc
        return n

    training = rng.random() < 0.5
    n_fwd = rng.randint(1, 3 if training else 6)
    k = rng.randint(1, 2)
    l = rng.randint(0, 1) if k == 2 else 1
    if latency:
        k, l = rng.randint(1, 3), rng.choice([0, 1, 1, 2, 3])
    nodes, edges = [], []
    for i in range(n_fwd):
        cc = rng.choice([None, None, 100, 101]) if not training else i
        nodes.append(node(i, rng.randint(0, 60), cc=cc, ok=rng.choice([1, 1, 1, 1, 0])))
    fwd_edges = [(u, v) for u in range(n_fwd) for v in range(u + 1, n_fwd) if rng.randint(0, 2) == 0]
    edges += fwd_edges
    if training:
        back = {i: n_fwd + i for i in range(n_fwd)}
        for i in range(n_fwd):
            nodes.append(node(back[i], rng.randint(0, 30), cc=i, bw=1))
        edges += [(back[v], back[u]) for u, v in fwd_edges]
        edges.append((n_fwd - 1, back[n_fwd - 1]))  # the loss: the last forward node feeds its gradient
        if rng.random() < 0.5:  # a backward node with no forward partner
            nodes.append(node(2 * n_fwd, rng.randint(0, 30), bw=1))
            edges.append((back[0], 2 * n_fwd))
    cost = {u: ms() / 4 for u in {u for u, _ in edges}}
    return {"maxSizePerFPGA": rng.randint(40, 160), "maxFPGAs": k, "maxCPUs": l, "nodes": nodes,
            "edges": [{"sourceId": u, "destId": v, "cost": cost[u]} for u, v in edges]}


def random_maxload_instance(seed: int, objective: str = "throughput"):
    """``random_maxload_data(seed, latency=objective == "latency")`` imported as a
    ``maxload`` instance with ``objective``."""
    from splitopt.families.maxload.instance import parse_peer_instance

    return parse_peer_instance(random_maxload_data(seed, latency=objective == "latency"),
                               name=f"random-maxload-s{seed}", objective=objective)


def random_family_instance(family: str, seed: int):
    """A small random instance of ``family`` (``splitopt.families.registry`` name), small
    enough for brute force: what the contract suites run on."""
    rng = np.random.default_rng([seed, 101])
    if family == "edge_cloud":
        bits = ((4, 8), (2, 8), (2, 4, 8))[int(rng.integers(0, 3))]
        n = int(rng.integers(3, 4 if len(bits) == 3 else 6))
        problem = "split" if rng.random() < 0.3 else "split_bits"
        return random_instance(seed, n, problem=problem, bit_widths=bits)
    if family == "chain":
        return random_chain_instance(seed, int(rng.integers(2, 9)), int(rng.integers(2, 5)))
    if family == "mesh":
        return random_mesh_instance(seed, int(rng.integers(1, 5)), int(rng.integers(2, 4)))
    if family == "multiview":
        return random_multiview_instance(seed)
    if family == "maxload":  # both objectives, half each
        return random_maxload_instance(seed, "latency" if rng.random() < 0.5 else "throughput")
    raise KeyError(f"no random generator for family '{family}'")
