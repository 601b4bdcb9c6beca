"""Random edge/cloud instances (as JSON data) for the contract suites, tests and
benchmarks.

``random_instance_data(seed, n_layers)`` builds a small random layer DAG with its devices,
link and settings, deterministic for a seed (one ``numpy.random.Generator``), as the
instance's JSON data (``Family.instance_from_data`` checks it). The draws aim to cover what the evaluator and
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

from splitopt.core.instance_io import FORMAT

#: candidate edge bit-width sets drawn when none is given (small, for brute force)
BIT_SETS: tuple[tuple[int, ...], ...] = ((4, 8), (2, 4, 8))


def loguniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def _shape(rng: np.random.Generator, elements_low: float, elements_high: float) -> list[int]:
    """A [channels, height, width] or [features] shape with about the drawn element count."""
    elements = max(1, int(loguniform(rng, elements_low, elements_high)))
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


def random_instance_data(
    seed: int,
    n_layers: int,
    problem: str = "split_bits",
    bit_widths: Sequence[int] | None = None,
    cloud_bits: int | None = None,
    overrides: bool | None = None,
    n_inputs: int | None = None,
    edge_required: bool = True,
) -> dict[str, Any]:
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
    inputs: list[dict[str, Any]] = [
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

        weights = 0.0 if rng.random() < 0.3 else float(int(loguniform(rng, 1e2, 2e5)))
        layer: dict[str, Any] = {
            "name": name,
            "op": "add" if weights == 0 and len(set(chosen)) > 1 else ("pool" if weights == 0 else "conv"),
            "inputs": chosen,
            "macs": float(int(loguniform(rng, 1e4, 1e8))),
            "weights": weights,
            "output_shape": _shape(rng, 50, 2e4),
        }
        if quantized:
            scale = loguniform(rng, 1e-3, 1e-1)
            if weights > 0:
                layer["weight_error"] = _decreasing_table(rng, quantized, scale)
            layer["activation_error"] = _decreasing_table(rng, quantized, scale)
        if overrides and rng.random() < 0.8:
            base = loguniform(rng, 0.01, 5.0)
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
        "mac_per_s": loguniform(rng, 1e9, 1e11),
        "offchip_bytes_per_s": None if rng.random() < 0.2 else loguniform(rng, 1e8, 1e10),
        "onchip_bytes": loguniform(rng, 2e2, 5e4),  # small: outputs often spill
        "memory_bytes": 1e9,
        "bit_widths": edge_bits,
    }
    cloud = {
        "name": "cloud",
        "mac_per_s": loguniform(rng, 1e12, 1e14),
        "offchip_bytes_per_s": loguniform(rng, 1e10, 1e11),
        "onchip_bytes": loguniform(rng, 1e4, 3e7),
        "memory_bytes": 1e11,
        "bit_widths": sorted({8, 16, cloud_bits}),
    }
    devices = [edge, cloud]
    links = [
        {
            "source": "edge",
            "target": "cloud",
            "bandwidth_bits_per_s": loguniform(rng, 1e5, 1e8),
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
    return data


def small_random_data(seed: int) -> dict[str, Any]:
    """A random instance small enough for brute force (3-5 layers, 2-3 candidate
    bit-widths, a third of them the float problem ``split``)."""
    rng = np.random.default_rng([seed, 101])
    bits = ((4, 8), (2, 8), (2, 4, 8))[int(rng.integers(0, 3))]
    n = int(rng.integers(3, 4 if len(bits) == 3 else 6))
    problem = "split" if rng.random() < 0.3 else "split_bits"
    return random_instance_data(seed, n, problem=problem, bit_widths=bits)


def random_instance(seed: int, n_layers: int, problem: str = "split_bits", bit_widths: Sequence[int] | None = None,
                    cloud_bits: int | None = None, overrides: bool | None = None, n_inputs: int | None = None,
                    edge_required: bool = True) -> Any:
    """The instance of :func:`random_instance_data` (same arguments), parsed and checked."""
    from splitopt.families.registry import family

    return family("edge_cloud").instance_from_data(random_instance_data(
        seed, n_layers, problem=problem, bit_widths=bit_widths, cloud_bits=cloud_bits, overrides=overrides,
        n_inputs=n_inputs, edge_required=edge_required))
