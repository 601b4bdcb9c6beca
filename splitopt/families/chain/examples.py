"""Random chain instances (as JSON data) for the contract suites, tests and benchmarks:
the random layer DAGs of the edge/cloud examples over a line of devices."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from splitopt.families.edge_cloud.examples import loguniform, random_instance_data


def random_chain_data(seed: int, n_layers: int, n_devices: int, objective: str | None = None,
                          linear: bool = False) -> dict[str, Any]:
    """A random valid ``chain`` instance: the layer DAG of ``random_instance(seed,
    n_layers)`` over ``n_devices`` devices ``d0 -> d1 -> ...`` in a line, with random
    compute rates (MAC/s), link bandwidths (bits/s) and fixed latencies (ms, sometimes 0),
    and memory limits (bytes) that are sometimes loose and sometimes bind.
    ``objective``: "latency" or "throughput" (default: drawn); ``linear``: make the layer
    graph a chain (one input, each layer reads the previous one)."""
    if n_devices < 2:
        raise ValueError(f"n_devices must be >= 2, got {n_devices}")
    base = random_instance_data(seed, n_layers, problem="split", overrides=False, edge_required=False, cloud_bits=16)
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
            "mac_per_s": loguniform(rng, 1e9, 1e12),
            "offchip_bytes_per_s": None if rng.random() < 0.5 else loguniform(rng, 1e8, 1e10),
            "onchip_bytes": loguniform(rng, 2e2, 5e4),
            "memory_bytes": memory,
            "bit_widths": [8, 16],
        })
        if m > 0:
            links.append({
                "source": f"d{m - 1}",
                "target": f"d{m}",
                "bandwidth_bits_per_s": loguniform(rng, 1e6, 1e9),
                "latency_ms": 0.0 if rng.random() < 0.4 else float(rng.uniform(0.0, 5.0)),
            })
    base["name"] = f"random-chain-s{seed}-n{n_layers}-m{n_devices}"
    base["source"] = {"generator": "splitopt.families.chain.examples.random_chain_data", "seed": int(seed),
                      "n_layers": n_layers, "n_devices": n_devices}
    base["devices"] = devices
    base["links"] = links
    base["settings"] = {"problem": "chain", "objective": objective, "chain": [d["name"] for d in devices],
                        "cloud_bits": 16, "bit_widths": [16]}
    return base


def small_random_data(seed: int) -> dict[str, Any]:
    """A random instance small enough for brute force (2-8 layers, 2-4 devices)."""
    rng = np.random.default_rng([seed, 101])
    return random_chain_data(seed, int(rng.integers(2, 9)), int(rng.integers(2, 5)))


def random_chain_instance(seed: int, n_layers: int, n_devices: int, objective: str | None = None,
                          linear: bool = False) -> Any:
    """The instance of :func:`random_chain_data` (same arguments), parsed and checked."""
    from splitopt.families.registry import family

    return family("chain").instance_from_data(random_chain_data(seed, n_layers, n_devices, objective, linear))


def first_chain_instance_for(method: str, n_layers: int, n_devices: int, objective: str,
                             seeds: Sequence[int] = range(40)) -> Any | None:
    """The first random chain instance (:func:`random_chain_instance`, ``seeds`` in
    order) whose ``auto`` exact method (``Family.exact_method``) is ``method``; None if
    none is."""
    from splitopt.families.registry import family

    chain = family("chain")
    for seed in seeds:
        inst = random_chain_instance(seed, n_layers, n_devices, objective=objective)
        if chain.exact_method(inst) == method:
            return inst
    return None


def random_chain_plan(inst: Any, rng: Any) -> Any:
    """A random monotone chain plan of ``inst`` (each layer on a device at or after its
    inputs'; ``rng`` a numpy Generator)."""
    from splitopt.families.chain.plan import plan_from_indices

    index: dict[str, int] = {}
    for layer in inst.layers:
        low = max([index[s] for s in layer.inputs if s in index], default=0)
        index[layer.name] = int(rng.integers(low, len(inst.settings.chain)))
    return plan_from_indices(inst, index)
