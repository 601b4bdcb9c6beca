"""Separable instances as JSON data: the paper's Sep-ResNeXt on CIFAR over G devices
(:func:`resnext_cifar_data`, with its Table 6 policies), random ones of any size for
tests and benchmarks (:func:`random_separable_data`), and small ones for the contract
suites (:func:`small_random_data`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from splitopt.families.edge_cloud.examples import loguniform

#: the paper's Table 6 decisions for Sep-ResNeXt-56 (4x16d, alpha = 2, G = 4): Table 3
#: choice ids, with Table 4 sparsity levels and float16 where the row says so
PAPER_TABLE6 = {
    "Table 6: Sep-ResNeXt-56": [12, 12, 7, 9, 10, 23, 9, 16, 18],
    "Table 6: + sparsification": [[0, 8], [10, 3], [18, 7], [22, 8], [16, 8], [18, 8], [9, 7], [13, 8], [22, 7]],
    "Table 6: + sparsification + float16": [[c, k, "float16"] for c, k in
                                            [[9, 4], [22, 6], [18, 6], [3, 6], [16, 7], [23, 8], [9, 8], [13, 8],
                                             [20, 7]]],
}
#: the paper's Table 5 transmission, in % of ring all-reduce, for the three rows above
PAPER_TABLE5_PERCENT = {"Table 6: Sep-ResNeXt-56": 31.48, "Table 6: + sparsification": 27.99,
                        "Table 6: + sparsification + float16": 14.43}


def _device(name: str, mac_per_s: float) -> dict[str, Any]:
    return {"name": name, "mac_per_s": mac_per_s, "offchip_bytes_per_s": None, "onchip_bytes": 0,
            "memory_bytes": 1e12, "bit_widths": [16, 32]}


def resnext_cifar_data(g: int = 4, blocks_per_stage: int = 6, alpha: int = 2, widths: Sequence[int] = (64, 128, 256),
                       path_width: int = 16, paths: int = 4, mac_per_s: float = 0.85e8,
                       bandwidth_bits_per_s: float = 300e6, link_ms: float = 1.0, equal_maps: bool = False,
                       name: str | None = None) -> dict[str, Any]:
    """Sep-ResNeXt on 32x32 CIFAR images over ``g`` devices (the paper's Table 1, right):
    a 3x3 stem of 16 channels every device runs, three stages of ``blocks_per_stage``
    bottleneck blocks (each device's stream has ``widths[s]`` channels at ``32 / 2**s``
    pixels a side; ``paths`` paths of ``path_width * 2**s`` channels, ``paths / g`` per
    device), and the head (pool + 100-way linear) on device 0. Devices: the paper's
    target, a Raspberry Pi 3B+ (1.7e8 FLOP/s = 0.85e8 MAC/s, 300 Mbit/s, Sec. 4.6); the
    link latency (1 ms) is assumed, the paper gives none. ``equal_maps``: every block's
    stream the size of the first stage's (the accounting that reproduces Table 5)."""
    layers = [{"name": "conv0", "op": "conv", "inputs": ["image"], "macs": 32 * 32 * 27 * 16, "weights": 27 * 16,
               "output_shape": [16, 32, 32]}]
    prev, prev_c = "conv0", 16
    for s, width in enumerate(widths):
        side = 32 >> s
        mid = path_width * (2 ** s) * paths // g  # one device's middle channels
        for b in range(blocks_per_stage):
            shape = [g * width, side, side] if not equal_maps else [g * widths[0], 32, 32]
            per_device = side * side * (prev_c * mid + 9 * mid * mid // max(1, paths // g) + mid * width)
            name_b = f"stage{s + 1}.block{b + 1}"
            layers.append({"name": name_b, "op": "sep_block", "inputs": [prev], "macs": float(g * per_device),
                           "weights": g * (prev_c * mid + 9 * mid * mid // max(1, paths // g) + mid * width), "output_shape": shape})
            prev, prev_c = name_b, width
    layers.append({"name": "head", "op": "linear", "inputs": [prev], "macs": float(widths[-1] * 100),
                   "weights": widths[-1] * 100 + 100, "output_shape": [100]})
    names = [f"pi{i}" for i in range(g)]
    links = [{"source": a, "target": b, "bandwidth_bits_per_s": bandwidth_bits_per_s, "latency_ms": link_ms}
             for a in names for b in names if a != b]
    return {
        "format": "splitopt-instance/1",
        "name": name or f"sep_resnext{9 * blocks_per_stage + 2}_g{g}_a{alpha}" + ("_equal_maps" if equal_maps else ""),
        "description": "Sep-ResNeXt on CIFAR over Raspberry Pi 3B+-class devices (Separable NN paper, Table 1 and "
                       "Sec. 4.6); per-block MACs from the architecture, 300 Mbit/s links.",
        "source": {"generator": "splitopt.families.separable.examples.resnext_cifar_data", "g": g,
                   "blocks_per_stage": blocks_per_stage, "alpha": alpha, "equal_maps": equal_maps},
        "graph": {"inputs": [{"name": "image", "shape": [3, 32, 32], "bits": 8}], "layers": layers},
        "devices": [_device(n, mac_per_s) for n in names],
        "links": links,
        "settings": {"problem": "separable", "objective": "latency", "edge": names[0], "cloud": names[-1],
                     "separable": {"devices": names, "alpha": alpha, "levels": {"min_percent": 50, "count": 9},
                                   "dtypes": ["float32", "float16"],
                                   "reference_policies": PAPER_TABLE6 if g == 4 and 3 * blocks_per_stage == 18
                                   and alpha == 2 else {}}},
    }


def random_separable_data(seed: int, g: int, blocks: int, alpha: int = 1, levels: int = 2,
                          dtypes: Sequence[str] = ("float32", "float16"), link_density: float = 1.0,
                          limits: bool = True, objective: str | None = None) -> dict[str, Any]:
    """A random valid ``separable`` instance: ``blocks`` blocks of one feature shape
    (``alpha`` blocks per step), ``g`` devices of random speeds, random links (each
    ordered pair present with probability ``link_density``, different bandwidths and
    latencies), and, with ``limits``, random limits (mixing, intensive steps, budgets,
    accuracy records)."""
    rng = np.random.default_rng([seed, g, blocks, 613])
    channels = int(rng.choice([1, 2, 4, 8])) * g
    side = int(rng.integers(2, 9))
    layers: list[dict[str, Any]] = [{"name": "stem", "op": "conv", "inputs": ["x"],
                                     "macs": float(loguniform(rng, 1e4, 1e7)), "weights": 10,
                                     "output_shape": [channels, side, side]}]
    for b in range(blocks):
        layers.append({"name": f"b{b}", "op": "sep_block", "inputs": [layers[-1]["name"]],
                       "macs": float(loguniform(rng, 1e5, 1e8)), "weights": 100,
                       "output_shape": [channels, side, side]})
    layers.append({"name": "head", "op": "linear", "inputs": [layers[-1]["name"]], "macs": 1000.0, "weights": 10,
                   "output_shape": [10]})
    names = [f"d{i}" for i in range(g)]
    links = []
    for a in range(g):
        for b in range(g):
            if a != b and rng.random() < link_density:
                links.append({"source": names[a], "target": names[b],
                              "bandwidth_bits_per_s": float(loguniform(rng, 1e5, 1e9)),
                              "latency_ms": float(rng.uniform(0.0, 2.0))})
    objective = objective or ("bytes" if rng.random() < 0.4 else "latency")
    # every level sends at least one channel: 50 % of one channel would be none
    low = 50 if channels // g >= 2 else 100
    opts: dict[str, Any] = {"devices": names, "alpha": alpha, "levels": {"min_percent": low, "count": levels},
                            "dtypes": list(dtypes)}
    if limits:
        if rng.random() < 0.4:
            opts["mixing"] = True
        if rng.random() < 0.3:
            opts["min_intensive_steps"] = int(rng.integers(0, 3))
        if rng.random() < 0.3:
            opts["byte_budget_bytes"] = float(rng.uniform(0, 2) * channels * side * side * 4)
        if rng.random() < 0.2:
            opts["latency_budget_ms"] = float(rng.uniform(0.5, 3.0) * sum(l["macs"] for l in layers) / 1e9 * 1000 / g)
        if rng.random() < 0.3:
            records = []
            for i in range(int(rng.integers(1, 4))):
                rec: dict[str, Any] = {"name": f"r{i}", "accuracy": float(rng.uniform(0.5, 1.0))}
                if rng.random() < 0.5:
                    rec["mixing"] = True
                if rng.random() < 0.5:
                    rec["min_intensive_steps"] = int(rng.integers(0, 3))
                if rng.random() < 0.5:
                    rec["max_float16_steps"] = int(rng.integers(0, 2))
                if rng.random() < 0.5 and levels > 1:
                    rec["min_level"] = int(rng.integers(0, levels))
                if rng.random() < 0.3:
                    rec["max_level"] = int(rng.integers(rec.get("min_level", 0), levels))
                records.append(rec)
            opts["accuracy"] = records
            opts["min_accuracy"] = float(rng.uniform(0.5, 1.0))
            if rng.random() < 0.5:
                opts["ring_accuracy"] = float(rng.uniform(0.5, 1.0))
    return {
        "format": "splitopt-instance/1",
        "name": f"random-separable-s{seed}-g{g}-b{blocks}",
        "source": {"generator": "splitopt.families.separable.examples.random_separable_data", "seed": int(seed)},
        "graph": {"inputs": [{"name": "x", "shape": [1, 8, 8], "bits": 8}], "layers": layers},
        "devices": [_device(n, float(loguniform(rng, 1e9, 1e11))) for n in names],
        "links": links,
        "settings": {"problem": "separable", "objective": objective, "edge": names[0], "cloud": names[-1],
                     "separable": opts},
    }


def small_random_data(seed: int) -> dict[str, Any]:
    """A random instance small enough for brute force (2-3 devices, at most 3 steps)."""
    rng = np.random.default_rng([seed, 719])
    g = int(rng.integers(2, 4))
    alpha = int(rng.integers(1, 3))
    steps = int(rng.integers(1, 4 if g == 2 else 3))
    blocks = max(1, steps * alpha - int(rng.integers(0, alpha)))
    dtypes = ["float32", "float16"] if rng.random() < 0.5 else ["float32"]
    return random_separable_data(seed, g, blocks, alpha=alpha, levels=int(rng.integers(1, 3)), dtypes=dtypes,
                                 link_density=float(rng.choice([1.0, 0.7])))
