"""DADS / QDMP (Hu et al. 2019; Zhang et al. 2020), float: one s-t minimum cut on the
layer DAG (AUTO-SPLIT Sec. 2.2, 5.3; on fused graphs DADS and QDMP give the same split).

Flow graph (source = edge side, sink = cloud side; capacities in ms):

* per layer v: source -> v with capacity cloud_ms(v) (cut when v runs on the cloud) and
  v -> sink with capacity edge_ms(v) (cut when v runs on the edge), both at
  ``cloud_bits``;
* each raw input pinned to the source side (an infinite source -> input arc);
* per tensor u with consumers, a fan-out node u_out: u -> u_out with capacity = the
  time to send u's bytes over the uplink (bandwidth only: the link's fixed per-transfer
  latency is not additive over tensors and the method ignores it), and u_out -> c
  infinite for every consumer c, so u is paid once however many cloud layers read it;
* c -> u infinite for every data edge u -> c, so the edge side is closed under
  predecessors.

The cut value equals the plan's true latency when the link has no fixed latency. The
method assumes the model fits on the edge: a plan that breaks the memory limit is
returned with NO_SOLUTION_FOUND. Capacities are scaled to integers (about 1e12 units in
total) for ``networkx.minimum_cut``; the reported cut value is re-summed in float ms
from the partition.
"""

from __future__ import annotations

from splitopt.families.edge_cloud.baselines.common import finish, float_latencies, sent_bytes
from splitopt.core.result import BackendOutput
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.data import uplink
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

SOURCE = ("source",)
SINK = ("sink",)


def min_cut(inst: EdgeCloudInstance) -> tuple[frozenset[str], float]:
    """The edge layer set of the minimum cut and the cut value (ms)."""
    bits = inst.settings.cloud_bits
    lat = float_latencies(inst)
    ms_per_byte = 1000.0 * 8.0 / uplink(inst).bandwidth_bits_per_s

    finite: dict[tuple, float] = {}
    infinite: list[tuple] = []
    for layer in inst.layers:
        v = ("t", layer.name)
        edge_ms, cloud_ms = lat[layer.name]
        finite[(SOURCE, v)] = cloud_ms
        finite[(v, SINK)] = edge_ms
    for t in inst.inputs:
        infinite.append((SOURCE, ("t", t.name)))
    for tensor, readers in inst.consumers.items():
        if not readers:
            continue
        u, fan = ("t", tensor), ("out", tensor)
        finite[(u, fan)] = sent_bytes(inst, tensor, bits) * ms_per_byte
        for c in readers:
            infinite.append((fan, ("t", c)))
            infinite.append((("t", c), u))

    total = sum(finite.values())
    scale = 1e12 / total if total > 0 else 1.0
    import networkx as nx  # here, not at module level: listing the methods must not load networkx

    g = nx.DiGraph()
    for (a, b), cap in finite.items():
        g.add_edge(a, b, capacity=round(cap * scale))
    for a, b in infinite:
        g.add_edge(a, b)  # no capacity attribute: infinite
    _, (source_side, _) = nx.minimum_cut(g, SOURCE, SINK)

    edge = frozenset(node[1] for node in source_side if node[0] == "t" and node[1] in inst.layer_by_name)
    value = sum(cap for (a, b), cap in finite.items() if a in source_side and b not in source_side)
    return edge, value


def run(inst: EdgeCloudInstance, options: SolveOptions) -> BackendOutput:
    """DADS/QDMP: s-t min-cut on the layer DAG with fan-out nodes (float; ignores edge memory)."""
    edge, value = min_cut(inst)
    plan = uniform_plan(inst, edge)
    # with a fixed link latency the cut value misses it: then the objective stays None
    objective = value if uplink(inst).latency_ms == 0 else None
    return finish(inst, plan, "qdmp", objective=objective, extra={"cut_value_ms": value})
