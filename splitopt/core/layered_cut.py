"""Monotone labellings of a layer DAG as one minimum s-t cut (Ishikawa's layered graph),
for the families whose memory-free objective is a sum of per-layer and per-cut costs: the
chain (labels = chain positions, ``families/chain/cut.py``) and the edge/cloud split
(labels edge = 0, cloud = 1, ``families/edge_cloud/bound.py``). Math in
``formulations/chain_split.md``, "The latency objective is a minimum cut".

A labelling gives every layer a label ``0..K`` that never decreases along a DAG edge;
with ``S_m`` the layers labelled ``<= m`` (a down-set), its cost is

* ``unary[l, label(l)]`` per layer (ms, >= 0);
* per tensor ``t`` and level ``m < K``: ``cost[t, m]`` when ``t`` is produced in ``S_m``
  (a raw input always is) and some reader lies outside, once however many readers do;
* per level ``m``: ``fixed[m]`` when ``S_m`` is not every layer (a link's fixed latency:
  exact when every layer reads a tensor of positive cost, see the callers);
* span terms: a cost when one layer is labelled ``<= m`` and some layer of a set
  ``>= m`` (a tensor occupying chain device ``m``: produced at or before it, read at or
  after it; node ``s -> heads`` as for a tensor, from ``v[tail, m]`` to ``v[head, m-1]``).

Node ``v[l, m]`` (``m < K``) is on the source side iff ``label(l) <= m``; unbounded arcs
``v[l, m-1] -> v[l, m]`` and ``v[reader, m] -> v[producer, m]`` keep labellings
monotone; ``v[l, m] -> v[l, m-1]`` (``unary[l, m]``), ``v[l, 0] -> sink``
(``unary[l, 0]``), ``source -> v[l, K-1]`` (``unary[l, K]``) price the label; a tensor
read by several layers goes through a node of its own (``producer -> a`` at its cost,
``a -> reader`` unbounded); ``source -> b[m]`` (``fixed[m]``) with ``b[m] -> v[l, m]``
unbounded for every layer no one reads prices the fixed cost; ``pinned`` layers get
``source -> v[l, 0]`` unbounded (label 0); a layer's label bounds ``label_min <= label(l)
<= label_max`` (where given) are unbounded arcs ``v[l, label_min - 1] -> sink`` and
``source -> v[l, label_max]`` (a branch of ``families/chain/branch.py``); bounds that no
monotone labelling meets make every cut unbounded (:class:`LabelBoundsConflict`).

OR-Tools' ``SimpleMaxFlow`` (push-relabel, C++) takes int64 capacities: each is scaled by
``2^60 / (sum of finite capacities)`` and rounded down, so the flow divided by the scale
is a proven lower bound and the cut found is within (its arcs) / scale of it (written by
hand: no well-kept package builds Ishikawa graphs over a DAG with hyperedges).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: the integer total the finite capacities are scaled to (OR-Tools takes int64)
CAPACITY_SCALE_TOTAL = float(2 ** 60)


@dataclass(frozen=True)
class LayeredCut:
    """The data of one cut problem (layer indices ``0..n-1``; ``-1`` as a producer: a raw
    input, always on the source side). Arrays are numpy; costs in ms, all >= 0."""

    unary: np.ndarray  # (n, K + 1)
    flow_reader: np.ndarray  # data edges producer -> reader, as reader / producer indices
    flow_producer: np.ndarray
    single_producer: np.ndarray  # tensors with one reader: producer (-1: raw input)
    single_reader: np.ndarray
    single_cost: np.ndarray  # (tensors, K)
    multi_producer: np.ndarray  # tensors with several readers
    multi_cost: np.ndarray  # (tensors, K)
    multi_reader_tensor: np.ndarray  # (tensor index into multi_*, reader) pairs
    multi_reader_layer: np.ndarray
    fixed: np.ndarray  # (K,)
    sinks: np.ndarray  # layers no one reads
    pinned: np.ndarray  # layers forced to label 0
    #: span terms ``e``: ``span_cost[e]`` when ``span_tail[e]`` (-1: always) is labelled
    #: ``<= span_level[e]`` (``K``: always) and some layer of ``e`` (the pairs
    #: ``span_head_term``/``span_head_layer``) is labelled ``>= span_level[e]``; levels
    #: ``1..K`` (a tensor that occupies device ``m`` of a chain). None: no such terms
    span_tail: np.ndarray | None = None
    span_level: np.ndarray | None = None
    span_cost: np.ndarray | None = None
    span_head_term: np.ndarray | None = None
    span_head_layer: np.ndarray | None = None
    #: per layer, the least and the largest label it may take (None: ``0`` and ``K``)
    label_min: np.ndarray | None = None
    label_max: np.ndarray | None = None


class LabelBoundsConflict(ValueError):
    """No monotone labelling meets the layers' label bounds (``label_min``, ``label_max``)."""


@dataclass(frozen=True)
class DagTerms:
    """The weight-independent arrays of a :class:`LayeredCut` built from a layer DAG: its
    data edges, and per tensor with readers and a positive size its producer (-1: a raw
    input), its readers and its size (any unit: the caller turns it into costs per level),
    split into tensors with one reader and tensors with several."""

    flow_reader: np.ndarray
    flow_producer: np.ndarray
    single_producer: np.ndarray
    single_reader: np.ndarray
    single_size: np.ndarray
    multi_producer: np.ndarray
    multi_size: np.ndarray
    multi_reader_tensor: np.ndarray
    multi_reader_layer: np.ndarray
    sinks: np.ndarray


def dag_terms(layers, consumers, size) -> DagTerms:
    """``DagTerms`` of the layers ``layers`` (objects with ``name`` and ``inputs``, in a
    topological order), ``consumers`` (tensor -> the layers that read it) and ``size``
    (tensor -> its size; tensors of size <= 0 are left out). A tensor that is not a layer's
    output is a raw input."""
    import numpy as np

    index = {layer.name: i for i, layer in enumerate(layers)}
    flow_r, flow_p = [], []
    for layer in layers:
        for src in dict.fromkeys(layer.inputs):
            if src in index:
                flow_r.append(index[layer.name])
                flow_p.append(index[src])
    single_p, single_r, single_s, multi_p, multi_s, reader_t, reader_l = ([] for _ in range(7))
    for tensor, readers in consumers.items():
        readers = list(dict.fromkeys(readers))
        amount = size(tensor)
        if not readers or amount <= 0:
            continue
        p = index.get(tensor, -1)
        if len(readers) == 1:
            single_p.append(p)
            single_r.append(index[readers[0]])
            single_s.append(amount)
        else:
            reader_t.extend([len(multi_p)] * len(readers))
            reader_l.extend(index[r] for r in readers)
            multi_p.append(p)
            multi_s.append(amount)
    ints = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    return DagTerms(ints(flow_r), ints(flow_p), ints(single_p), ints(single_r), np.array(single_s, dtype=float),
                    ints(multi_p), np.array(multi_s, dtype=float), ints(reader_t), ints(reader_l),
                    ints([i for i, layer in enumerate(layers) if not consumers.get(layer.name)]))


def layered_cut(terms: DagTerms, unary: np.ndarray, cost_per_size: np.ndarray, fixed: np.ndarray,
                pinned: np.ndarray | None = None) -> LayeredCut:
    """The :class:`LayeredCut` of ``terms`` with ``unary`` (n, K+1) ms, a tensor's cost on
    level m = its size x ``cost_per_size[m]``, and ``fixed`` (K,) ms per level."""
    import numpy as np

    return LayeredCut(
        unary=unary, flow_reader=terms.flow_reader, flow_producer=terms.flow_producer,
        single_producer=terms.single_producer, single_reader=terms.single_reader,
        single_cost=terms.single_size[:, None] * cost_per_size[None, :],
        multi_producer=terms.multi_producer, multi_cost=terms.multi_size[:, None] * cost_per_size[None, :],
        multi_reader_tensor=terms.multi_reader_tensor, multi_reader_layer=terms.multi_reader_layer,
        fixed=fixed, sinks=terms.sinks, pinned=np.zeros(0, dtype=np.int64) if pinned is None else pinned)


@dataclass(frozen=True)
class CutSolution:
    """A minimum cut: ``bound_ms`` a proven lower bound on the least cost (ms), and each
    layer's label in a labelling whose cost is within ``slack_ms`` of it."""

    bound_ms: float
    slack_ms: float
    labels: tuple[int, ...]


def solve_layered_cut(problem: LayeredCut) -> CutSolution:
    """The least-cost monotone labelling of ``problem`` (see the module docstring)."""
    import numpy as np
    from ortools.graph.python import max_flow

    n, K = problem.unary.shape[0], problem.unary.shape[1] - 1
    if n == 0:
        return CutSolution(0.0, 0.0, ())
    if K == 0:
        return CutSolution(float(problem.unary.sum()), 0.0, (0,) * n)
    SOURCE, SINK = 0, 1
    A = len(problem.multi_producer)

    def v(layer, m: int):
        return np.where(np.asarray(layer) < 0, SOURCE, 2 + m * n + np.asarray(layer))

    def aux(a, m: int):
        return 2 + K * n + m * A + np.asarray(a)

    def b(m: int) -> int:
        return 2 + K * n + K * A + m

    E = 0 if problem.span_cost is None else len(problem.span_cost)
    spans_at = 2 + K * n + K * A + K  # span term e's node: spans_at + e

    layers = np.arange(n)
    tails, heads, caps, unbounded = [], [], [], []

    def arcs(t, h, c=None) -> None:
        t, h = np.broadcast_arrays(np.asarray(t, dtype=np.int64), np.asarray(h, dtype=np.int64))
        tails.append(t.ravel())
        heads.append(h.ravel())
        if c is None:
            caps.append(np.zeros(t.size))
            unbounded.append(np.ones(t.size, dtype=bool))
        else:
            caps.append(np.broadcast_to(np.asarray(c, dtype=float), t.shape).ravel())
            unbounded.append(np.zeros(t.size, dtype=bool))

    unary = problem.unary
    for m in range(K):
        if m > 0:
            arcs(v(layers, m - 1), v(layers, m))  # monotone
            arcs(v(layers, m), v(layers, m - 1), unary[:, m])  # label m
        arcs(v(problem.flow_reader, m), v(problem.flow_producer, m))  # forward flow
        arcs(v(problem.single_producer, m), v(problem.single_reader, m), problem.single_cost[:, m])
        if A:
            arcs(v(problem.multi_producer, m), aux(np.arange(A), m), problem.multi_cost[:, m])
            arcs(aux(problem.multi_reader_tensor, m), v(problem.multi_reader_layer, m))
        if problem.fixed[m] > 0:
            arcs(SOURCE, b(m), problem.fixed[m])
            arcs(np.full(len(problem.sinks), b(m)), v(problem.sinks, m))
    arcs(v(layers, 0), SINK, unary[:, 0])
    arcs(SOURCE, v(layers, K - 1), unary[:, K])
    if len(problem.pinned):
        arcs(np.full(len(problem.pinned), SOURCE), v(problem.pinned, 0))
    if problem.label_max is not None:
        capped = layers[np.asarray(problem.label_max) < K]
        arcs(np.full(len(capped), SOURCE), v(capped, 0) + np.asarray(problem.label_max)[capped] * n)
    if problem.label_min is not None:
        raised = layers[np.asarray(problem.label_min) > 0]
        arcs(v(raised, 0) + (np.asarray(problem.label_min)[raised] - 1) * n, np.full(len(raised), SINK))
    if E:
        level = np.asarray(problem.span_level, dtype=np.int64)
        tail_layer = np.asarray(problem.span_tail, dtype=np.int64)
        if np.any(level < 1) or np.any(level > K):
            raise ValueError(f"layered cut: span levels must lie in 1..{K}")
        # the tail is on the source side iff its label <= level: node v[tail, level], the
        # source where that always holds (a raw input, or the last level)
        always = (tail_layer < 0) | (level >= K)
        tail_node = np.where(always, SOURCE, 2 + np.minimum(level, K - 1) * n + np.maximum(tail_layer, 0))
        arcs(tail_node, spans_at + np.arange(E), problem.span_cost)
        # a head labelled >= level is on the sink side of v[head, level - 1]
        term = np.asarray(problem.span_head_term, dtype=np.int64)
        arcs(spans_at + term, 2 + (level[term] - 1) * n + np.asarray(problem.span_head_layer, dtype=np.int64))

    tail, head = np.concatenate(tails), np.concatenate(heads)
    cap, inf = np.concatenate(caps), np.concatenate(unbounded)
    if np.any(cap < 0) or not np.all(np.isfinite(cap)):
        raise ValueError("layered cut: every cost must be a finite number >= 0")
    keep = inf | (cap > 0)
    tail, head, cap, inf = tail[keep], head[keep], cap[keep], inf[keep]
    total = float(cap[~inf].sum())
    scale = CAPACITY_SCALE_TOTAL / total if total > 0 else 1.0
    icap = np.floor(cap * scale).astype(np.int64)
    finite_total = int(icap[~inf].sum())
    icap[inf] = finite_total + 1  # more than any cut of finite arcs
    solver = max_flow.SimpleMaxFlow()
    solver.add_arcs_with_capacity(tail, head, icap)
    status = solver.solve(SOURCE, SINK)
    if status != solver.OPTIMAL:
        raise RuntimeError(f"layered cut: OR-Tools max-flow ended with status {status}")
    if solver.optimal_flow() > finite_total:
        raise LabelBoundsConflict("layered cut: no monotone labelling meets the layers' label bounds")
    source_side = np.zeros(spans_at + E, dtype=bool)
    source_side[np.asarray(solver.get_source_side_min_cut(), dtype=np.int64)] = True
    Y = source_side[2:2 + K * n].reshape(K, n)  # Y[m, l]: label(l) <= m
    labels = np.where(Y.any(axis=0), Y.argmax(axis=0), K)
    finite_in_cut = int(np.count_nonzero(source_side[tail] & ~source_side[head] & ~inf))
    return CutSolution(solver.optimal_flow() / scale, finite_in_cut / scale, tuple(int(x) for x in labels))
