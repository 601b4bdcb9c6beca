"""A reduction of the edge/cloud program that keeps its optimum: layers that are never
worth being the last edge layer of their branch (``formulations/edge_cloud_split.md``,
"Reduction: dominated frontier layers").

Call a layer ``u`` *dominated* when moving it from the edge to the cloud, in any plan
where ``u`` runs on the edge and every reader of ``u`` on the cloud, never makes the plan
slower, bigger in edge memory or lossier, whatever the plan's other choices:

1. ``u`` is not pinned to the edge and has at least one reader;
2. its cloud latency is at most its fastest edge latency (ms);
3. the tensors it reads would newly cross the cut, while its output no longer does: their
   most bits on the wire (each at its largest sent width) are at most ``u``'s output's
   fewest bits on the wire, and their most bits held on the edge for sending (each at its
   largest activation width) at most ``u``'s output's fewest bits held;
4. with an error budget and ``transmit_bits`` set, sending an input of ``u`` adds no
   quantization error at any of its activation widths (otherwise the move could add
   error; without ``transmit_bits`` sending adds none, and without a budget error limits
   nothing).

Moving a dominated frontier layer ``u`` to the cloud keeps every other choice: the edge
runs one layer fewer (2), the link carries ``u``'s inputs (those not sent already)
instead of ``u``'s output (3), the edge's memory at every step before ``u`` is unchanged
and at every later edge step holds those inputs instead of ``u``'s output (3), its
weights drop, and, where an error budget is set, its error drops by ``u``'s own terms (4). Each move shrinks the edge
set, so moving dominated frontier layers while there are any ends, at a plan that is no
worse in any respect and has none: some optimal plan has none. The program therefore
adds, per dominated ``u`` with readers ``R(u)``, the row ``e[u] <= sum_{j in R(u)} e[j]``
(with one reader ``v`` and the closure row ``e[v] <= e[u]``: ``e[u] = e[v]``, the two
layers contracted). Such rows (kind ``"dominance"``) cut off feasible plans that are no
better than one they keep; the check that a program and its evaluator agree on
feasibility leaves them out (``splitopt.core.program.row_violations``).
"""

from __future__ import annotations

from typing import Mapping

from splitopt.core.latency import latency_table, layer_latency_ms
from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.data import candidate_bits, cloud_device, edge_device, required_on_edge
from splitopt.families.edge_cloud.plan import edge_cloud_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def dominated_layers(inst: EdgeCloudInstance, edge_tables: Mapping[str, Mapping] | None = None) -> tuple[str, ...]:
    """The dominated layers of ``inst`` (module docstring), in execution order; cached.
    ``edge_tables``: each layer's edge latency table over the candidate bits
    (``core.latency.latency_table``) where the caller has them (a program builder)."""
    return inst.derived(("edge_cloud", "dominated_layers"), lambda: _dominated(inst, edge_tables or {}))


def _dominated(inst: EdgeCloudInstance, edge_tables: Mapping[str, Mapping]) -> tuple[str, ...]:
    s = inst.settings
    bits = candidate_bits(inst)
    fewest, most = min(bits), max(bits)
    pinned = required_on_edge(inst)
    cons = inst.consumers
    out = []
    for layer in inst.layers:  # the size conditions first: they need no latency
        u = layer.name
        if u in pinned or not cons[u]:
            continue
        inputs = list(dict.fromkeys(layer.inputs))
        n_u = inst.tensor_elements(u)
        held_in = sum(inst.tensor_elements(t) * (inst.input_by_name[t].bits if t in inst.input_by_name else most)
                      for t in inputs)
        if held_in > n_u * fewest:
            continue
        wire_in = sum(inst.tensor_elements(t) * max(inst.sent_bits(t, b) for b in bits) for t in inputs)
        if wire_in > n_u * min(inst.sent_bits(u, b) for b in bits):
            continue
        if s.error_budget is not None and s.transmit_bits is not None and not all(
                _sending_adds_no_error(inst, t, bits) for t in inputs):
            continue
        cloud_ms = layer_latency_ms(inst, layer, cloud_device(inst), s.cloud_bits, s.cloud_bits)
        table = edge_tables.get(u) or latency_table(inst, layer, edge_device(inst), bits)
        if cloud_ms > min(table.values()):
            continue
        out.append(u)
    return tuple(out)


def _sending_adds_no_error(inst: EdgeCloudInstance, tensor: str, bits) -> bool:
    """Whether ``tensor`` (a raw input, or a layer output at any of ``bits``) counts the
    same quantization error sent as kept (``evaluate.layer_error_terms``)."""
    if tensor in inst.input_by_name:
        return True
    s = inst.settings
    errors = inst.layer_by_name[tensor].activation_error

    def error(b: int) -> float:
        return errors[b] if b < s.cloud_bits else 0.0

    return all(error(min(b, s.transmit_bits)) == error(b) for b in bits)


def without_dominated_frontier(inst: EdgeCloudInstance, plan: Plan) -> Plan:
    """``plan`` with every dominated layer that ends its branch on the edge moved to the
    cloud, repeatedly (module docstring): a plan no worse in latency, memory and error that
    meets the program's dominance rows. Returns ``plan`` itself when nothing moves."""
    dominated = set(dominated_layers(inst))
    if not dominated:
        return plan
    edge = inst.settings.edge
    on_edge = {n for n, d in plan.device.items() if d == edge}
    moved = False
    for layer in reversed(inst.layers):  # readers before the layers they read: one pass moves whole runs
        u = layer.name
        if u in dominated and u in on_edge and not any(j in on_edge for j in inst.consumers[u]):
            on_edge.discard(u)
            moved = True
    if not moved:
        return plan
    return edge_cloud_plan(inst, {n: (plan.weight_bits[n], plan.activation_bits[n]) for n in on_edge})
