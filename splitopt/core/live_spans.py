"""Tensors' live spans over the execution steps, split for linear-size memory rows.

A program's memory row at step ``k`` sums the tensors live at ``k``. Written out, the rows
total (sum of span lengths) terms, quadratic on graphs with long skips. Instead, a tensor
live for at most ``short`` steps enters its steps' rows itself, and the longer ones enter
through a running sum ``A[k] = A[k-1] + (long ones from k) - (long ones ended at k-1)``:
O(steps * short + tensors) terms. Used by the edge/cloud and chain programs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class SplitSpans:
    """``short_at[k]``: the short-lived tensors live at step ``k``; ``long_from[k]`` /
    ``long_ended[k]``: the long-lived tensors whose span starts / ends at step ``k``."""

    short_at: Mapping[int, tuple[str, ...]]
    long_from: Mapping[int, tuple[str, ...]]
    long_ended: Mapping[int, tuple[str, ...]]


def split_spans(spans: Mapping[str, tuple[int, int]], short: int) -> SplitSpans:
    """Split ``tensor -> (first step, last step)`` (inclusive) at ``short`` steps."""
    short_at: dict[int, list[str]] = {}
    long_from: dict[int, list[str]] = {}
    long_ended: dict[int, list[str]] = {}
    for t, (first, end) in spans.items():
        if end - first <= short:
            for k in range(first, end + 1):
                short_at.setdefault(k, []).append(t)
        else:
            long_from.setdefault(first, []).append(t)
            long_ended.setdefault(end, []).append(t)

    def frozen(d: dict[int, list[str]]) -> dict[int, tuple[str, ...]]:
        return {k: tuple(v) for k, v in d.items()}

    return SplitSpans(frozen(short_at), frozen(long_from), frozen(long_ended))
