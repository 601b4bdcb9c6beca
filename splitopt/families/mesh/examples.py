"""Random mesh instances (as JSON data) for the contract suites and tests."""

from __future__ import annotations

from typing import Any

from splitopt.core.instance_io import FORMAT


def mesh_device(name: str, memory: float) -> dict[str, Any]:
    return {"name": name, "mac_per_s": 1e9, "offchip_bytes_per_s": None, "onchip_bytes": 0,
            "memory_bytes": memory, "bit_widths": [16]}


def random_mesh_data(seed: int, n_layers: int, n_devices: int) -> dict[str, Any]:
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
    tensors = ["input"]
    layers: list[dict[str, Any]] = []
    for i in range(n_layers):
        inputs = sorted({rng.choice(tensors) for _ in range(1 if rng.random() < 0.6 else 2)}, key=tensors.index)
        latency = {d: (rng.choice([0.0, 0.1, 0.3, 0.5, 1.0, 2.0]) if rng.random() < 0.9 else 0.0) for d in devs}
        layers.append({"name": f"l{i}", "op": "conv", "inputs": inputs, "macs": 1e6,
                       "weights": float(rng.choice([0, 100, 1000, 5000])),
                       "output_shape": [rng.choice([10, 100, 500, 2000])], "latency_ms": latency})
        tensors.append(f"l{i}")
    total_weights = sum(l["weights"] for l in layers) * 2
    devices = [mesh_device(d, rng.choice([1e9, 1e9, 0.5 * total_weights + 9000, 12000])) for d in devs]
    data = {"format": FORMAT, "name": f"random-mesh-s{seed}-n{n_layers}-d{n_devices}",
            "graph": {"inputs": [{"name": "input", "shape": [rng.choice([100, 1000, 3000])], "bits": 8}],
                      "layers": layers},
            "devices": devices, "links": list(links.values()), "buses": buses,
            "settings": {"problem": "mesh", "edge": devs[0], "cloud": devs[-1], "cloud_bits": 16,
                         "mesh": {"routing": rng.choice(["shortest", "shortest", "direct"]),
                                  "deliver_outputs": rng.random() < 0.8}}}
    return data


def small_random_data(seed: int) -> dict[str, Any]:
    """A random instance small enough for brute force (1-4 layers, 2-3 devices)."""
    import numpy as np

    rng = np.random.default_rng([seed, 101])
    return random_mesh_data(seed, int(rng.integers(1, 5)), int(rng.integers(2, 4)))


def random_mesh_instance(seed: int, n_layers: int, n_devices: int) -> Any:
    """The instance of :func:`random_mesh_data` (same arguments), parsed and checked."""
    from splitopt.families.registry import family

    return family("mesh").instance_from_data(random_mesh_data(seed, n_layers, n_devices))
