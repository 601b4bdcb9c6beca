"""Sums over each layer's *closure*: the layer and all its ancestors (``anc*(i)``), for
every layer at once.

The closure bounds of the edge/cloud program (``formulations/edge_cloud_split.md``, rows
7b and 8b) need, per layer, the weights and the least error of its closure. Asking
networkx for each layer's ancestors (``nx.ancestors``) walks the graph once per layer: a
Python loop over ``n^2 / 2`` pairs on a chain, 230 s at 10,000 layers. Here each
closure is a bitset (a Python int, OR-ed from the inputs' closures in the graph's
topological order: ``n^2 / 64`` machine words of C work) and the sums are table lookups,
one per byte of a bitset, a block of rows at a time, in numpy. No library computes
weighted ancestor sums of a DAG; this is the short way to do it at C speed. Memory:
``n^2 / 8`` bytes for the bitsets (12.5 MB at 10,000 layers), ``n / 8 * 256`` sums per
value, and one block of looked-up rows.

A node's closure is its latest predecessor's plus what that one lacks: the node itself and
the other predecessors' ancestors outside it, usually none or few (a chain link, a residual
add whose shortcut starts upstream of its branch) and rarely more (concatenations of long
parallel branches). So each node's sum is its latest predecessor's plus, where the
difference holds more than the node, a lookup over the bytes it spans: 0.24 -> 0.11 s at
10,000 layers of ``random_instance``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: bitsets looked up at a time (at most ``ROWS * n / 8`` values per value column)
ROWS = 512


def closure_masks(inputs: Sequence[Sequence[int]]) -> list[int]:
    """Per node ``i`` (nodes in a topological order; ``inputs[i]`` the positions of its
    predecessors, all ``< i``), the bitset of its closure: bit ``j`` set when ``j`` is
    ``i`` or an ancestor of ``i``."""
    masks: list[int] = []
    for i, preds in enumerate(inputs):
        m = 1 << i
        for p in preds:
            m |= masks[p]
        masks.append(m)
    return masks


def closure_sums(inputs: Sequence[Sequence[int]], values: Sequence[Sequence[float]]) -> np.ndarray:
    """``out[i, c] = sum over j in closure(i) of values[c][j]`` (an ``n x len(values)``
    float64 array), the nodes as in :func:`closure_masks`: the latest predecessor's sum
    plus the sum over the difference of the two closures (where it holds more than the
    node), looked up per byte of its bitset in a table of the 256 sums of that byte's 8
    nodes' values. Sums of integers below ``2**53`` are exact; others are rounded as
    float sums round."""
    n = len(inputs)
    c = len(values)
    if n == 0:
        return np.zeros((0, c))
    own = np.asarray(values, dtype=np.float64).reshape(c, n).T
    masks = closure_masks(inputs)
    latest = [max(preds) if preds else -1 for preds in inputs]
    differences = [m & ~masks[p] if p >= 0 else m for m, p in zip(masks, latest)]
    # a difference of the node alone (the usual case) needs no lookup
    looked_up = [i for i, d in enumerate(differences) if d != 1 << i]
    sums = own.copy()  # each node's own part first
    if looked_up:
        sums[looked_up] = _sums_over_bits([differences[i] for i in looked_up], own)
    columns = [sums[:, j].tolist() for j in range(c)]
    for column in columns:
        for i, p in enumerate(latest):  # predecessors come first: their sums are final here
            if p >= 0:
                column[i] += column[p]
    return np.array(columns, dtype=np.float64).reshape(c, n).T.copy()


def _sums_over_bits(masks: Sequence[int], own: np.ndarray) -> np.ndarray:
    """Per bitset of ``masks``, the sum of ``own``'s rows (``n x c``) over its nodes: one
    table lookup per byte, over the bytes its block of ``ROWS`` bitsets spans."""
    n, c = own.shape
    width = (n + 7) // 8
    padded = np.zeros((width * 8, c))
    padded[:n] = own
    byte_bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(np.float64)  # 256 x 8
    # tables[j][256 w + b]: the sum of column j over the nodes 8w + i whose bit i is set in b
    tables = np.ascontiguousarray((byte_bits @ padded.reshape(width, 8, c)).transpose(2, 0, 1)).reshape(c, width * 256)
    out = np.zeros((len(masks), c))
    for lo in range(0, len(masks), ROWS):
        block = masks[lo:lo + ROWS]
        # the bytes any bitset of the block has bits in, from the lowest to the highest
        first = min(((m & -m).bit_length() - 1) // 8 for m in block if m) if any(block) else 0
        end = max((m.bit_length() + 7) // 8 for m in block)
        if end <= first:
            continue
        packed = np.frombuffer(b"".join((m >> (8 * first)).to_bytes(end - first, "little") for m in block),
                               dtype=np.uint8).reshape(len(block), end - first)
        at = (np.arange(first, end) * 256)[None, :] + packed
        for j in range(c):
            out[lo:lo + len(block), j] = np.take(tables[j], at).sum(axis=1)
    return out
