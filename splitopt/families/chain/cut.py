"""The chain family's memory-free optimum as one minimum s-t cut (``chain-cut``; math in
``formulations/chain_split.md``, "The latency objective is a minimum cut").

Without memory limits, a chain plan is a nested sequence of down-sets of the layer DAG,
``S_0 <= S_1 <= ... <= S_{M-2}`` (``S_m``: the layers at positions ``<= m``), and every
term of a weighted sum of stage times ``sum_m w_m S[m]`` is a cut term of one level or
a unary term of one layer (Ishikawa's layered graph):

* node ``v[l,m]`` on the source side iff ``Y[l,m] = 1`` (``l`` runs at a position
  ``<= m``); arcs ``v[l,m-1] -> v[l,m]`` and ``v[c,m] -> v[p,m]`` (for a DAG edge
  ``p -> c``) of unbounded capacity keep ``Y`` monotone in ``m`` and data flowing forward;
* compute: arc ``v[l,m] -> v[l,m-1]`` of capacity ``w_m tau[l,m]`` (cut exactly where
  ``l``'s position is ``m``), ``v[l,0] -> sink`` and ``source -> v[l,M-2]`` at the ends;
* transfer of tensor ``t`` on link ``m``: arc ``v[p,m] -> a[t,m]`` of capacity
  ``w_m c[t,m]`` and ``a[t,m] -> v[c,m]`` unbounded for each consumer ``c`` (a direct arc
  for one consumer; a raw input leaves from the source): cut iff ``t`` is produced at
  ``<= m`` and read after ``m``, once however many consumers lie beyond;
* fixed link latency: ``source -> b[m]`` of capacity ``w_m lat_m`` and ``b[m] -> v[l,m]``
  unbounded for every layer no one reads: cut iff ``S_m`` is not every layer, which is
  iff link ``m`` carries something when every layer reads a tensor of positive size
  (the method refuses instances where one does not).

The graph and its solution are ``splitopt.core.layered_cut`` (labels = chain positions);
this module states the chain's costs.

Weights ``w_m = 1`` give the latency optimum without memory; weights on a simplex give
the Lagrangian bound of the throughput objective (``min_Y sum_m w_m S[m] <= max_m
S[m]`` for every plan).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.layered_cut import CutSolution, DagTerms, dag_terms, layered_cut, solve_layered_cut
from splitopt.core.plan import Plan
from splitopt.families.chain.data import chain_links, chain_tensors, compute_table
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.chain.settings import ChainInstance

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class CutTemplate:
    """The weight-independent part of an instance's layered graph: the DAG's terms (tensor
    sizes in bits), the compute table (n, M) ms, and per link its ms per bit and fixed
    latency (ms)."""

    terms: DagTerms
    compute: np.ndarray
    link_ms_per_bit: np.ndarray
    link_latency_ms: np.ndarray


def cut_refusal(inst: ChainInstance) -> str | None:
    """Why ``chain-cut``'s graph would not be exact for ``inst`` (None: it is): a fixed
    link latency is modelled as "the link carries something unless every layer is at or
    before it", true when every layer reads at least one tensor of positive size. Cached."""
    return inst.derived(("chain", "cut_refusal"), lambda: _cut_refusal(inst))


def _cut_refusal(inst: ChainInstance) -> str | None:
    links = chain_links(inst)
    if not any(link.latency_ms > 0 for link in links):
        return None
    tensors = chain_tensors(inst)
    for layer in inst.layers:
        if not any(tensors.sent_bytes[t] > 0 for t in layer.inputs):
            return (f"layer '{layer.name}' reads no tensor of positive size, so a link with a fixed latency may "
                    f"carry nothing while it lies beyond it")
    return None


def cut_template(inst: ChainInstance) -> CutTemplate:
    return inst.derived(("chain", "cut_template"), lambda: _cut_template(inst))


def _cut_template(inst: ChainInstance) -> CutTemplate:
    import numpy as np

    tensors = chain_tensors(inst)
    table = compute_table(inst)
    links = chain_links(inst)
    M = len(inst.settings.chain)
    return CutTemplate(
        terms=dag_terms(inst.layers, tensors.consumers, lambda t: 8.0 * tensors.sent_bytes[t]),
        compute=np.array([table[layer.name] for layer in inst.layers], dtype=float).reshape(len(inst.layers), M),
        link_ms_per_bit=np.array([1000.0 / inst.link_rate_bits_per_s(link) for link in links]),
        link_latency_ms=np.array([link.latency_ms for link in links]))


def cut_plan(inst: ChainInstance, cut: CutSolution) -> Plan:
    """The chain plan of a cut's labels (chain positions, layers in file order)."""
    return plan_from_indices(inst, {layer.name: int(p) for layer, p in zip(inst.layers, cut.labels)})


def min_weighted_stages(inst: ChainInstance, weights: Sequence[float] | None = None,
                        penalty: np.ndarray | None = None, occupancy: np.ndarray | None = None,
                        positions: tuple[np.ndarray, np.ndarray] | None = None) -> CutSolution:
    """The placement minimising ``sum_m weights[m] * S[m] + sum_l penalty[l, position(l)]
    + sum_{t,m} occupancy[t, m] [t occupies device m]`` (stage times in ms; weights >= 0,
    default all 1: the latency; ``penalty``: an extra cost >= 0 of each layer (file order)
    on each device, e.g. a Lagrangian price of its weights; ``occupancy``: a cost >= 0 per
    tensor (``chain_tensors(inst).names`` order) and device it occupies, from its
    producer's device to its farthest reader's, e.g. a price of its activation bytes),
    ignoring memory limits; ``positions``: per layer (file order) the least and the largest
    chain position it may take (a branch; ``LabelBoundsConflict`` where no placement meets
    them); ``labels`` are the chain positions. Raises NotApplicable where ``cut_refusal``
    says the graph is not exact."""
    import numpy as np

    why = cut_refusal(inst)
    if why is not None:
        raise NotApplicable(f"chain-cut: {why}")
    g = cut_template(inst)
    n, M = len(inst.layers), len(inst.settings.chain)
    w = np.ones(M) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (M,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be {M} finite numbers >= 0, got {weights!r}")
    unary = g.compute * w[None, :]
    if penalty is not None:
        penalty = np.asarray(penalty, dtype=float)
        if penalty.shape != unary.shape or not np.all(np.isfinite(penalty)) or np.any(penalty < 0):
            raise ValueError(f"penalty must be a ({n}, {M}) array of finite numbers >= 0")
        unary = unary + penalty
    problem = layered_cut(g.terms, unary, w[:-1] * g.link_ms_per_bit, w[:-1] * g.link_latency_ms)
    constant = 0.0
    if occupancy is not None:
        problem, constant = _with_occupancy(inst, problem, np.asarray(occupancy, dtype=float))
    if positions is not None:
        problem = dataclasses.replace(problem, label_min=np.asarray(positions[0], dtype=np.int64),
                                      label_max=np.asarray(positions[1], dtype=np.int64))
    cut = solve_layered_cut(problem)
    return CutSolution(cut.bound_ms + constant, cut.slack_ms, cut.labels) if constant else cut


def _with_occupancy(inst: ChainInstance, problem, occupancy: np.ndarray):
    """``problem`` with the occupancy costs of :func:`min_weighted_stages` as unary and
    span terms, and the constant part (a raw input always occupies the first device).
    Tensor ``t`` occupies device ``m`` iff its producer's position ``<= m`` and its farthest
    reader's ``>= m`` (``evaluate``; readers never precede producers): at ``m = 0`` that is
    the producer at position 0 (a unary cost; a raw input: always); at ``m >= 1`` a span
    term of the producer and the readers; a tensor no one reads occupies its producer's
    device only (unary)."""
    import numpy as np

    tensors = chain_tensors(inst)
    M = len(inst.settings.chain)
    if occupancy.shape != (len(tensors.names), M) or not np.all(np.isfinite(occupancy)) or np.any(occupancy < 0):
        raise ValueError(f"occupancy must be a ({len(tensors.names)}, {M}) array of finite numbers >= 0")
    producer, reader_tensor, reader_layer, has_readers = inst.derived(("chain", "occupancy_arrays"), lambda: (
        _tensor_readers(inst)))
    unary = problem.unary.copy()
    raw = producer < 0
    # no reader: the producer's device only (a raw input: a constant on the first device)
    alone = ~has_readers
    np.add.at(unary, producer[alone & ~raw], occupancy[alone & ~raw])
    # with readers: device 0 iff the producer is at position 0 (unary); a raw input always
    np.add.at(unary[:, 0], producer[has_readers & ~raw], occupancy[has_readers & ~raw, 0])
    constant = float(occupancy[raw, 0].sum())
    # devices m >= 1: a span term per (tensor with readers, m) of positive cost
    spanned = occupancy[:, 1:] * has_readers[:, None] > 0
    term_tensor, term_level = np.nonzero(spanned)
    term_level = term_level + 1
    # each term's heads: the readers of its tensor (reader pairs grouped by tensor)
    order = np.argsort(reader_tensor, kind="stable")
    starts = np.searchsorted(reader_tensor[order], np.arange(len(producer) + 1))
    counts = starts[term_tensor + 1] - starts[term_tensor]
    term_of_head = np.repeat(np.arange(len(term_tensor)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    head_layer = reader_layer[order][np.repeat(starts[term_tensor], counts) + offsets]
    return dataclasses.replace(problem, unary=unary, span_tail=producer[term_tensor], span_level=term_level,
                               span_cost=occupancy[term_tensor, term_level], span_head_term=term_of_head,
                               span_head_layer=head_layer), constant


def _tensor_readers(inst: ChainInstance):
    """Per tensor (``chain_tensors(inst).names`` order) its producer's layer index (-1: a
    raw input); its distinct (tensor, reader layer index) pairs; whether it has a reader."""
    import numpy as np

    tensors = chain_tensors(inst)
    index = {layer.name: i for i, layer in enumerate(inst.layers)}
    producer = np.array([-1 if tensors.producer[t] is None else index[t] for t in tensors.names], dtype=np.int64)
    pairs = [(i, index[c]) for i, t in enumerate(tensors.names) for c in dict.fromkeys(tensors.consumers[t])]
    reader_tensor = np.array([p[0] for p in pairs], dtype=np.int64)
    reader_layer = np.array([p[1] for p in pairs], dtype=np.int64)
    has_readers = np.bincount(reader_tensor, minlength=len(tensors.names)) > 0
    return producer, reader_tensor, reader_layer, has_readers
