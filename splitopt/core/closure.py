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
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: closures looked up at a time (``ROWS * n / 8`` values per value column)
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
    float64 array), the nodes as in :func:`closure_masks`. Per byte of the bitsets, a
    table of the 256 sums of its 8 nodes' values; a closure's sum is then one lookup per
    byte. Sums of integers below ``2**53`` are exact; others are rounded as numpy's sums
    round."""
    n = len(inputs)
    c = len(values)
    out = np.zeros((n, c))
    if n == 0:
        return out
    width = (n + 7) // 8
    padded = np.zeros((width * 8, c))
    padded[:n] = np.asarray(values, dtype=np.float64).reshape(c, n).T
    byte_bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(np.float64)  # 256 x 8
    # tables[c][256 w + b]: the sum of values[c] over the nodes 8w + i whose bit i is set in b
    tables = np.einsum("bi,wic->cwb", byte_bits, padded.reshape(width, 8, c)).reshape(c, width * 256)
    offsets = (np.arange(width) * 256)[None, :]
    masks = closure_masks(inputs)
    for lo in range(0, n, ROWS):
        hi = min(n, lo + ROWS)
        packed = np.frombuffer(b"".join(m.to_bytes(width, "little") for m in masks[lo:hi]), dtype=np.uint8)
        at = offsets + packed.reshape(hi - lo, width)
        for j in range(c):
            out[lo:hi, j] = np.take(tables[j], at).sum(axis=1)
    return out
