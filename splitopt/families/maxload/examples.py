"""Small peer dnn-partitioning files (as JSON data) for the contract suites and tests."""

from __future__ import annotations

from typing import Any


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
