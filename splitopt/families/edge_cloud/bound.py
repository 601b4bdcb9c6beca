"""The edge/cloud family's relaxation bound and the plan it suggests
(``formulations/edge_cloud_split.md``, "Lower bound: a minimum cut").

Drop the memory limit and the error budget, and give every edge layer its fastest
bit-width pair and every layer output it sends its fewest bits: what is left is a
monotone two-label problem on the layer DAG (edge = label 0, closed under predecessors;
cloud = label 1), one minimum cut (``splitopt.core.layered_cut``):

* a layer costs ``min_p Le[l,p]`` on the edge and ``Lc[l]`` on the cloud (ms);
* a tensor produced on the edge (a raw input always is) and read on the cloud costs its
  elements x (its fewest bits: a raw input its own, a layer output ``min(B)``, or
  ``min(min(B), transmit_bits)``) / bandwidth, once;
* the link's fixed latency is paid when some layer runs on the cloud, which is when
  something is sent where every layer reads a tensor of at least one element (otherwise
  it is left out, which keeps the bound valid); ``settings.edge_required`` layers are
  pinned to the edge.

Every plan costs at least its edge set's relaxed cost, so the minimum cut bounds every
plan. Its edge set, each layer at its fastest pair (at the fewest activation bits where
its output is sent), is a plan; where that plan meets the limits and costs the bound,
it is optimal. At 10,000 layers the cut takes about a second; solved once per instance.
"""

from __future__ import annotations

from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.data import candidate_bits, cloud_device, edge_device, uplink
from splitopt.families.edge_cloud.plan import edge_cloud_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def relaxed_cut(inst: EdgeCloudInstance):
    """The minimum cut of the relaxation (a ``CutSolution``: labels 0 = edge, 1 = cloud),
    cached; None without layers."""
    if not inst.layers:
        return None
    return inst.derived(("edge_cloud", "relaxed_cut"), lambda: _relaxed_cut(inst))


def _fastest_pairs(inst: EdgeCloudInstance) -> dict[str, dict[int, tuple[float, int]]]:
    """Per layer and activation bits: the least edge latency (ms) over weight bits, and
    those weight bits."""
    from splitopt.core.latency import layer_latency_ms

    bits = candidate_bits(inst)
    edge = edge_device(inst)
    out: dict[str, dict[int, tuple[float, int]]] = {}
    for layer in inst.layers:
        out[layer.name] = {ab: min((layer_latency_ms(inst, layer, edge, wb, ab), wb) for wb in bits) for ab in bits}
    return out


def _fewest_sent_bits(inst: EdgeCloudInstance, tensor: str) -> int:
    if tensor in inst.input_by_name:
        return inst.input_by_name[tensor].bits
    fewest = min(candidate_bits(inst))
    tb = inst.settings.transmit_bits
    return fewest if tb is None else min(fewest, tb)


def _relaxed_cut(inst: EdgeCloudInstance):
    import numpy as np

    from splitopt.core.latency import layer_latency_ms
    from splitopt.core.layered_cut import dag_terms, layered_cut, solve_layered_cut

    c = inst.settings.cloud_bits
    pairs = _fastest_pairs(inst)
    unary = np.array([[min(t for t, _ in pairs[l.name].values()),
                       layer_latency_ms(inst, l, cloud_device(inst), c, c)] for l in inst.layers], dtype=float)
    terms = dag_terms(inst.layers, inst.consumers,
                      lambda t: inst.tensor_elements(t) * _fewest_sent_bits(inst, t))  # bits
    sent = {l for l in inst.consumers if inst.consumers[l] and inst.tensor_elements(l) > 0}
    exact_fixed = all(any(t in sent for t in layer.inputs) for layer in inst.layers)
    index = {layer.name: i for i, layer in enumerate(inst.layers)}
    return solve_layered_cut(layered_cut(
        terms, unary, np.array([1000.0 / uplink(inst).bandwidth_bits_per_s]),
        np.array([uplink(inst).latency_ms if exact_fixed else 0.0]),
        pinned=np.array(sorted(index[n] for n in inst.settings.edge_required), dtype=np.int64)))


def edge_cloud_lower_bound(inst: EdgeCloudInstance) -> float | None:
    """The relaxation's minimum cut (ms), a lower bound on every plan; None without layers."""
    cut = relaxed_cut(inst)
    return None if cut is None else cut.bound_ms


def relaxed_cut_plan(inst: EdgeCloudInstance) -> Plan | None:
    """The cut's edge set as a plan: each edge layer at its fastest weight bits, at the
    fewest activation bits where a cloud layer reads its output, else at its fastest pair."""
    cut = relaxed_cut(inst)
    if cut is None:
        return None
    pairs = _fastest_pairs(inst)
    fewest = min(candidate_bits(inst))
    edge = {l.name for l, label in zip(inst.layers, cut.labels) if label == 0}
    edge_bits = {}
    for name in edge:
        sent = any(r not in edge for r in inst.consumers[name])
        if sent:
            edge_bits[name] = (pairs[name][fewest][1], fewest)
        else:
            ab = min(pairs[name], key=lambda a: pairs[name][a])
            edge_bits[name] = (pairs[name][ab][1], ab)
    return edge_cloud_plan(inst, edge_bits)
