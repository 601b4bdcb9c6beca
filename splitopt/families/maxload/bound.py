"""The maxload family's relaxation bound (``formulations/maxload_models.md``, "Lower
bound"): drop contiguity, transfers and the device counts, and let every node or colour
group take its cheapest allowed device.

* throughput (max-load): a colour group g costs at least c(g) = the smaller of its
  summed fpgaLatency (only where every node may run on an accelerator and its size fits
  maxSizePerFPGA, and there is an accelerator) and its summed cpuLatency (only where
  there is a CPU core). Max-load >= max_g c(g) (the group's device carries all of it,
  transfers are >= 0) and >= sum_g c(g) / (k + l) (the largest of the k + l loads is at
  least their mean).
* latency: along any path of the graph each node adds at least min(its fpgaLatency where
  allowed, its cpuLatency where a core exists): an accelerator's block takes at least
  the sum of its nodes' times and starts after every node feeding it ends. Latency >=
  the longest path under those times.

A group with no allowed device gives no bound (None): no plan meets the limits, which
the programs prove. Linear in the graph; no program is built.
"""

from __future__ import annotations

import math

from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import MaxloadInstance


def maxload_lower_bound(inst: MaxloadInstance) -> float | None:
    """A lower bound (ms) on the objective of every placement meeting the rules."""
    if not inst.nodes or not (inst.fpgas or inst.cpus):
        return None
    return _latency_bound(inst) if inst.objective == "latency" else _max_load_bound(inst)


def _max_load_bound(inst: MaxloadInstance) -> float | None:
    gr = groups_of(inst)
    costs = []
    for g in range(len(gr.members)):
        options = []
        if inst.fpgas and gr.fpga_ok(inst, g) and gr.size(inst, g) <= inst.max_size_per_fpga:
            options.append(gr.fpga_ms(inst, g))
        if inst.cpus:
            options.append(gr.cpu_ms(inst, g))
        if not options:
            return None
        costs.append(min(options))
    return max(max(costs), math.fsum(costs) / (len(inst.fpgas) + len(inst.cpus)))


def _latency_bound(inst: MaxloadInstance) -> float | None:
    finish: dict[int, float] = {}
    for v in inst.topo_order:
        node = inst.node_by_id[v]
        options = []
        if inst.fpgas and node.on_fpga_ok and node.size_bytes <= inst.max_size_per_fpga:
            options.append(node.fpga_ms)
        if inst.cpus:
            options.append(node.cpu_ms)
        if not options:
            return None
        finish[v] = max((finish[u] for u in inst.predecessors[v]), default=0.0) + min(options)
    return max(finish.values())
