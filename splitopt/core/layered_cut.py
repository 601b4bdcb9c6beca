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
<= label_max`` (where given; a branch of ``families/chain/branch.py``) put ``v[l, m]`` on
the source side for ``m >= label_max`` and on the sink side for ``m < label_min`` in every
labelling that meets them, so those nodes are merged into the source and the sink (the
same minimum cut as with unbounded arcs ``source -> v[l, label_max]`` and ``v[l, label_min
- 1] -> sink``, on a graph that shrinks as a branch narrows; arcs between the merged ends
are constants); bounds that no monotone labelling meets make every cut unbounded
(:class:`LabelBoundsConflict`).

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
    single_p: list[int] = []
    single_r: list[int] = []
    single_s: list[float] = []
    multi_p: list[int] = []
    multi_s: list[float] = []
    reader_t: list[int] = []
    reader_l: list[int] = []
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

    def v(layer, m):
        """Node ``v[layer, m]`` (the source for a raw input, ``layer < 0``); ``m`` an int or
        an array of levels (then one row per level)."""
        layer = np.asarray(layer, dtype=np.int64)
        if np.ndim(m):
            m = np.asarray(m, dtype=np.int64)[:, None]
        return np.where(layer < 0, SOURCE, 2 + m * n + layer)

    def aux(a, m):
        return 2 + K * n + np.asarray(m, dtype=np.int64)[:, None] * A + np.asarray(a, dtype=np.int64)

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
    every, upper = np.arange(K), np.arange(1, K)  # levels; levels with one below
    # per level (rows), vectorised over the levels
    arcs(v(layers, upper - 1), v(layers, upper))  # monotone
    arcs(v(layers, upper), v(layers, upper - 1), unary[:, 1:K].T)  # label m
    arcs(v(problem.flow_reader, every), v(problem.flow_producer, every))  # forward flow
    arcs(v(problem.single_producer, every), v(problem.single_reader, every), problem.single_cost[:, :K].T)
    if A:
        arcs(v(problem.multi_producer, every), aux(np.arange(A), every), problem.multi_cost[:, :K].T)
        arcs(aux(problem.multi_reader_tensor, every), v(problem.multi_reader_layer, every))
    for m in np.flatnonzero(np.asarray(problem.fixed) > 0):
        arcs(SOURCE, b(int(m)), problem.fixed[m])
        arcs(np.full(len(problem.sinks), b(int(m))), v(problem.sinks, int(m)))
    arcs(v(layers, 0), SINK, unary[:, 0])
    arcs(SOURCE, v(layers, K - 1), unary[:, K])
    if len(problem.pinned):
        arcs(np.full(len(problem.pinned), SOURCE), v(problem.pinned, 0))
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
    # label bounds: v[l, m] lies on the source side for m >= label_max[l] and on the sink
    # side for m < label_min[l] in every labelling that meets them, so those nodes are
    # merged into the source and the sink (the graph shrinks as a branch narrows; the
    # minimum cut is the one with the bounds as unbounded arcs)
    node = np.arange(spans_at + E)
    label = np.tile(np.arange(K), (n, 1))  # (n, K): the level of v[l, m]
    fixed_source = np.zeros((n, K), dtype=bool)
    fixed_sink = np.zeros((n, K), dtype=bool)
    if problem.label_max is not None:
        fixed_source = label >= np.asarray(problem.label_max, dtype=np.int64)[:, None]
    if problem.label_min is not None:
        fixed_sink = label < np.asarray(problem.label_min, dtype=np.int64)[:, None]
    if np.any(fixed_source & fixed_sink):
        raise LabelBoundsConflict("layered cut: a layer's least label exceeds its largest")
    levels = node[2:2 + K * n].reshape(K, n)
    node[2:2 + K * n] = np.where(fixed_source.T, SOURCE, np.where(fixed_sink.T, SINK, levels)).ravel()
    tail, head = node[tail], node[head]
    if np.any(inf & (tail == SOURCE) & (head == SINK)):
        raise LabelBoundsConflict("layered cut: no monotone labelling meets the layers' label bounds")
    always_cut = (tail == SOURCE) & (head == SINK)  # finite arcs every labelling in the bounds cuts
    direct = float(cap[always_cut].sum())
    keep = (inf | (cap > 0)) & (tail != head) & (tail != SINK) & (head != SOURCE) & ~always_cut
    tail, head, cap, inf = tail[keep], head[keep], cap[keep], inf[keep]
    # the nodes some arc still touches, numbered in order (SOURCE, SINK keep ids 0, 1)
    present = np.zeros(len(node), dtype=bool)
    present[tail] = present[head] = present[SOURCE] = present[SINK] = True
    compact = np.cumsum(present) - 1
    tail, head = compact[tail], compact[head]
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
    side = np.zeros(int(compact[-1]) + 1, dtype=bool)
    side[np.asarray(solver.get_source_side_min_cut(), dtype=np.int64)] = True
    side[SOURCE], side[SINK] = True, False  # also where no arc is left
    # every node of the original graph: merged ones by their terminal, the rest by the cut
    # (a node left without arcs lies on the sink side, as the source cannot reach it)
    source_side = present[node] & side[compact[node]]
    Y = source_side[2:2 + K * n].reshape(K, n)  # Y[m, l]: label(l) <= m
    labels = np.where(Y.any(axis=0), Y.argmax(axis=0), K)
    finite_in_cut = int(np.count_nonzero(side[tail] & ~side[head] & ~inf))
    return CutSolution(solver.optimal_flow() / scale + direct, finite_in_cut / scale, tuple(labels.tolist()))
