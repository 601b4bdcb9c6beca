"""The edge/cloud search space: one gene per layer, in execution order, choosing the
cloud or the edge at a (weight bits, activation bits) pair of the candidates.

Repair, in two steps:

1. Down-set: in execution order, an edge layer that reads a cloud layer's output moves to
   the cloud (the edge set must be closed under predecessors).
2. Error budget (``split_bits`` with ``settings.error_budget``): while the plan's
   quantization error (the evaluator's sum, ``formulations/edge_cloud_split.md``)
   exceeds the budget, raise one edge layer's weight or activation bits to the next
   candidate, the raise that removes the most error per ms of latency it adds (edge
   compute, and the uplink for a tensor that crosses the cut); a raise that adds no
   latency goes first. This is the compound move a deeper cut needs: the layers it adds
   to the edge spend error that other layers must give back (``googlenet_eyeriss``: the
   search stopped at 1.234x the optimum without it). A genome no raise can bring within
   the budget is left to the evaluator.

Memory and pinned layers are left to the evaluator (the search ranks plans that meet
every limit first).
"""

from __future__ import annotations

from splitopt.core.latency import layer_latency_ms
from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.evaluate import ERROR_RTOL, layer_error_terms, transfer_ms
from splitopt.families.edge_cloud.settings import EdgeCloudInstance
from splitopt.search.space import ChoiceGene, Genome, SearchSpace
from splitopt.families.edge_cloud.data import candidate_bits, edge_device, uplink
from splitopt.families.edge_cloud.plan import edge_cloud_plan

CLOUD = "cloud"


def edge_cloud_space(inst: EdgeCloudInstance) -> SearchSpace:
    bits = candidate_bits(inst)
    options = (CLOUD,) + tuple((w, a) for w in bits for a in bits)
    genes = tuple(ChoiceGene(layer.name, options) for layer in inst.layers)
    budget = inst.settings.error_budget

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        on_edge: set[str] = set()
        for layer in inst.layers:
            n = layer.name
            if out[n] != CLOUD:
                if any(src in inst.layer_by_name and src not in on_edge for src in layer.inputs):
                    out[n] = CLOUD
            if out[n] != CLOUD:
                on_edge.add(n)
        if budget is not None and len(bits) > 1:
            within_error_budget(inst, out, bits, budget)
        return out

    def to_plan(genome: Genome) -> Plan:
        return edge_cloud_plan(inst, {n: v for n, v in genome.items() if v != CLOUD})

    def from_plan(plan: Plan) -> Genome:
        edge = inst.settings.edge
        return {l.name: (plan.weight_bits[l.name], plan.activation_bits[l.name]) if plan.device[l.name] == edge
                else CLOUD for l in inst.layers}

    notes = "per layer: cloud, or edge at (weight bits, activation bits); repaired to a down-set"
    if budget is not None and len(bits) > 1:
        notes += ", then bits raised greedily until the error budget holds"
    # the budget repair changes only plans over the error budget: every plan that meets it decodes to itself
    budgeted = budget is not None and len(bits) > 1
    return SearchSpace(genes, to_plan, from_plan, repair, notes=notes,
                       meta={"represents_every_plan": not budgeted, "represents_every_feasible_plan": True})


def _sent(inst: EdgeCloudInstance, genome: Genome, n: str) -> bool:
    """Whether edge layer ``n``'s output crosses the cut (a consumer on the cloud)."""
    return any(genome[r] == CLOUD for r in inst.consumers[n])


def _layer_error(inst: EdgeCloudInstance, n: str, wb: int, ab: int, sent: bool) -> float:
    """The evaluator's error of edge layer ``n`` at (wb, ab) bits."""
    return sum(layer_error_terms(inst, n, wb, ab, sent))


def _layer_ms(inst: EdgeCloudInstance, n: str, wb: int, ab: int, sent: bool) -> float:
    """Edge compute of ``n`` at (wb, ab) plus, when its output crosses the cut, the
    uplink time of its bytes (ms; the link's fixed latency is paid once either way)."""
    ms = layer_latency_ms(inst, inst.layer_by_name[n], edge_device(inst), wb, ab)
    sent_bytes = inst.tensor_elements(n) * inst.sent_bits(n, ab) / 8.0 if sent else 0.0
    return ms + (transfer_ms(inst, sent_bytes) - uplink(inst).latency_ms if sent_bytes > 0 else 0.0)


def _terms(inst: EdgeCloudInstance) -> dict:
    """(layer, wb, ab, sent) -> (error, ms), filled as asked, kept with the instance."""
    return inst.derived(("edge_cloud", "raise-terms"), dict)


def _term(inst: EdgeCloudInstance, table: dict, n: str, bits: tuple[int, int], sent: bool) -> tuple[float, float]:
    wb, ab = bits
    key = (n, wb, ab, sent)
    if key not in table:
        table[key] = (_layer_error(inst, n, wb, ab, sent), _layer_ms(inst, n, wb, ab, sent))
    return table[key]


def within_error_budget(inst: EdgeCloudInstance, genome: Genome, bits: tuple[int, ...], budget: float) -> None:
    """Raise edge layers' bits in ``genome`` (in place), best error removed per ms added
    first, until its quantization error is within ``budget`` or no raise is left. A heap
    holds each edge layer's best next raise (a layer's raises change only when it is
    raised)."""
    import heapq

    table = _terms(inst)
    higher = {b: min((c for c in bits if c > b), default=None) for b in bits}
    edge = [l.name for l in inst.layers if genome[l.name] != CLOUD]
    sent = {n: _sent(inst, genome, n) for n in edge}
    error = sum(_term(inst, table, n, genome[n], sent[n])[0] for n in edge)
    limit = budget * (1 + ERROR_RTOL)
    if error <= limit:
        return

    def best_raise(i: int, n: str):
        wb, ab = genome[n]
        now_error, now_ms = _term(inst, table, n, (wb, ab), sent[n])
        best = None
        for w, a in ((higher[wb], ab), (wb, higher[ab])):
            if w is None or a is None:
                continue
            pair = (w, a)
            new_error, new_ms = _term(inst, table, n, pair, sent[n])
            gain = now_error - new_error
            if gain <= 0:
                continue
            cost = max(0.0, new_ms - now_ms)
            key = (cost > 0, cost / gain if cost > 0 else -gain, i)
            if best is None or key < best[0]:
                best = (key, n, pair, gain)
        return best

    heap = [b for i, n in enumerate(edge) if (b := best_raise(i, n)) is not None]
    heapq.heapify(heap)
    index = {n: i for i, n in enumerate(edge)}
    while error > limit and heap:
        _, n, pair, gain = heapq.heappop(heap)
        genome[n] = pair
        error -= gain
        nxt = best_raise(index[n], n)
        if nxt is not None:
            heapq.heappush(heap, nxt)
