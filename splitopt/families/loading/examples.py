"""Loading instances as JSON data: random ones for the contract suites, tests and
benchmarks (:func:`random_loading_data`), and a loading instance made from any profiled
splitopt instance (:func:`loading_data_from`)."""

from __future__ import annotations

import copy
from typing import Any, Mapping

import numpy as np

from splitopt.families.edge_cloud.examples import loguniform


def random_loading_data(seed: int, n_blocks: int, threads: int | None = None, k_max: int | None = None,
                        objective: str | None = None, skips: bool = True) -> dict[str, Any]:
    """A random valid ``loading`` instance of ``n_blocks`` blocks: a chain of layers (with
    some skip inputs when ``skips``) of random weights (elements) and MACs, one device,
    ``threads`` threads (default drawn in 1..4), bounds on k (``k_max`` default drawn),
    a trainable tail, a per-child fixed cost, sometimes a storage cap below the threads'
    total rate, and sometimes measured block load times."""
    rng = np.random.default_rng([seed, n_blocks, 211])
    threads = int(rng.integers(1, 5)) if threads is None else threads
    if k_max is None:
        k_max = int(rng.integers(1, min(n_blocks, threads + 3) + 1))
    k_min = int(rng.integers(1, k_max + 1)) if rng.random() < 0.3 else 1
    objective = objective or ("balance" if rng.random() < 0.35 else "latency")
    layers = []
    for i in range(n_blocks):
        inputs = ["x"] if i == 0 else [f"b{i - 1}"]
        if skips and i >= 2 and rng.random() < 0.25:
            inputs.append(f"b{int(rng.integers(0, i - 1))}")
        weights = 0 if rng.random() < 0.15 else int(loguniform(rng, 1e3, 5e6))
        layers.append({"name": f"b{i}", "op": "conv" if weights else "add", "inputs": inputs,
                       "macs": float(loguniform(rng, 1e5, 1e9)), "weights": weights, "output_shape": [16, 8, 8]})
    thread_rate = loguniform(rng, 2e8, 2e9)
    options: dict[str, Any] = {
        "threads": threads,
        "children": {"min": k_min, "max": k_max},
        "trainable_tail": int(rng.integers(0, max(1, n_blocks // 2) + 1)) if rng.random() < 0.6 else 0,
        "weight_bits": 32,
        "child_fixed_ms": 0.0 if rng.random() < 0.25 else float(rng.uniform(0.0, 3.0)),
        "thread_bytes_per_s": thread_rate,
        "storage_bytes_per_s": None if rng.random() < 0.5 else thread_rate * float(rng.uniform(0.8, threads + 0.5)),
    }
    if rng.random() < 0.3:
        options["block_load_ms"] = {l["name"]: float(rng.uniform(0.0, 5.0)) for l in layers if rng.random() < 0.5}
    if rng.random() < 0.1 and n_blocks >= 3:  # a tail that forbids k_min children: infeasible
        options["children"]["min"] = options["children"]["max"] = k = min(n_blocks, max(2, k_max))
        options["trainable_tail"] = n_blocks - k + 2
    return {
        "format": "splitopt-instance/1",
        "name": f"random-loading-s{seed}-n{n_blocks}",
        "source": {"generator": "splitopt.families.loading.examples.random_loading_data", "seed": int(seed),
                   "n_blocks": n_blocks},
        "graph": {"inputs": [{"name": "x", "shape": [3, 32, 32], "bits": 8}], "layers": layers},
        "devices": [{"name": "host", "mac_per_s": loguniform(rng, 2e9, 2e11), "offchip_bytes_per_s": None,
                     "onchip_bytes": 0, "memory_bytes": 1e12, "bit_widths": [8, 16, 32]}],
        "links": [],
        "settings": {"problem": "loading", "objective": objective, "edge": "host", "cloud": "host",
                     "loading": options},
    }


def small_random_data(seed: int) -> dict[str, Any]:
    """A random instance small enough for brute force (2-6 blocks, 1-3 threads)."""
    rng = np.random.default_rng([seed, 307])
    n = int(rng.integers(2, 7))
    return random_loading_data(seed, n, threads=int(rng.integers(1, 4)), k_max=int(rng.integers(1, min(n, 5) + 1)))


def loading_data_from(instance_data: Mapping[str, Any], device: str, options: Mapping[str, Any],
                      objective: str = "latency", name: str | None = None) -> dict[str, Any]:
    """A loading instance from a profiled splitopt instance's JSON data: its layer graph
    (blocks = layers in file order) and ``device`` (one of its devices, which runs
    inference), with ``settings.loading`` = ``options``."""
    out = copy.deepcopy(dict(instance_data))
    out["name"] = name or f"{out['name']}_loading"
    out["devices"] = [d for d in out["devices"] if d["name"] == device]
    if not out["devices"]:
        raise ValueError(f"no device '{device}' in instance '{instance_data.get('name')}'")
    out.pop("buses", None)
    out["links"] = []
    out["settings"] = {"problem": "loading", "objective": objective, "edge": device, "cloud": device,
                       "loading": dict(options)}
    for layer in out["graph"]["layers"]:
        layer.pop("weight_error", None), layer.pop("activation_error", None)
        if "latency_ms" in layer:
            layer["latency_ms"] = {k: v for k, v in layer["latency_ms"].items() if k == device}
    return out
