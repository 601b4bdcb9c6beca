"""The mesh family's relaxation bound (``formulations/mesh_schedule.md``, "Lower bound"):
drop the links, the routes and the memories, and give every layer the compute time of
the device where it is fastest, tau_min(i) = min over devices d of tau[i, d].

* makespan >= the longest path of the layer DAG weighted by tau_min (a layer starts
  after its inputs exist; transfers only add time);
* makespan >= sum of tau_min over layers / number of devices (a device computes one layer
  at a time, so some device computes for at least the mean).

Linear in the DAG and the compute table; no program is built.
"""

from __future__ import annotations

import math

from splitopt.families.mesh.data import mesh_data
from splitopt.families.mesh.settings import MeshInstance


def mesh_lower_bound(inst: MeshInstance) -> float | None:
    """A lower bound (ms) on every mesh plan's makespan; None without layers."""
    data = mesh_data(inst)
    if not data.layers or not data.devices:
        return None
    fastest = {n: min(data.compute_ms[(n, d)] for d in data.devices) for n in data.layers}
    finish: dict[str, float] = {}
    for n in data.layers:  # instance order is topological (checked when the instance is read)
        ready = max((finish[t] for t in data.layer_inputs[n] if t in finish), default=0.0)
        finish[n] = ready + fastest[n]
    return max(max(finish.values()), math.fsum(fastest.values()) / len(data.devices))
