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

from splitopt.instance import FORMAT, Instance, parse_instance

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
        "description": "random synthetic instance (splitopt.synthetic)",
        "source": {"generator": "splitopt.synthetic.random_instance", "seed": int(seed), "n_layers": n_layers},
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
    from splitopt.instance import to_dict

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
    base["source"] = {"generator": "splitopt.synthetic.random_chain_instance", "seed": int(seed),
                      "n_layers": n_layers, "n_devices": n_devices}
    base["devices"] = devices
    base["links"] = links
    base["settings"] = {"problem": "chain", "objective": objective, "chain": [d["name"] for d in devices],
                        "cloud_bits": 16, "bit_widths": [16]}
    return parse_instance(base)
