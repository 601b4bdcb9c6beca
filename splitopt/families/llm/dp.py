"""The llm family's dynamic program (``formulations/llm.md``, "Dynamic program"): with the
bit-width of every device fixed, the best pipeline over the choice of devices, their order
and their contiguous ranges, exactly.

States ``(U, e, b)``: the devices in ``U`` run parts ``0 .. b-1``, ``e`` last. A state's
value is the least sum of its stages and links; the next device ``e' not in U`` runs
``[b, b')``::

    V[U + e', e', b'] = min over e in U, b < b' of V[U, e, b] + link[b, e, e'] + stage[e', b, b']

with ``stage = inf`` where the stage breaks the device's memory or a pin. A ring adds the
first device to the state (the last one's return of the sampled token to it). Each step
is two numpy reductions over every boundary pair, ``O(2^D D^2 n^2)`` in all (times ``D``
for a ring). The sum objectives (``ttft``, ``token_latency``) are one run. ``throughput``
minimises ``max(largest stage or link, round trip / S)``: with the busiest resource held to
at most ``v`` (stages and links above it removed), the least round trip ``T(v)`` falls as
``v`` grows, so the optimum is ``min(v_k, T(v_{k-1}) / S)`` at the least candidate ``v_k``
(a stage's or link's time) with ``T(v_k) / S <= v_k``, found by bisection over the
candidates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from splitopt.families.llm.data import LlmData
from splitopt.families.llm.evaluate import RTOL

#: the most devices the program takes (2^D device sets), chain and ring
MAX_DEVICES = 10
MAX_RING_DEVICES = 8

Stop = Callable[[], bool]
#: ``after[e'] = e``: device ``e'`` joins a pipeline only after its twin ``e`` (None: no twins)
Twins = Mapping[int, int] | None


@dataclass(frozen=True)
class Pipeline:
    """The program's answer: its value (ms) and stages as ``(device index, start, end)``."""

    value: float
    stages: tuple[tuple[int, int, int], ...]


def applies(d: LlmData) -> str | None:
    """None where the program takes the instance's devices, else why not."""
    most = MAX_RING_DEVICES if d.ring else MAX_DEVICES
    if d.D > most:
        return f"{d.D} usable devices, more than the {most} it takes ({2 ** d.D:,} device sets)"
    return None


def stage_mask(d: LlmData, widths: Sequence[int]) -> np.ndarray:
    """``ok[e, a, b]``: device ``e`` at width index ``widths[e]`` may run parts ``[a, b)``:
    its weights, KV cache and largest activations fit its memory, and the pins allow it."""
    n, N1 = d.n, d.n + 1
    largest = np.zeros((N1, N1), dtype=np.int64)
    for a in range(n):
        largest[a, a + 1:] = np.maximum.accumulate(d.activation_bits[a:])
    a_idx, b_idx = np.meshgrid(np.arange(N1), np.arange(N1), indexing="ij")
    ok = np.zeros((d.D, N1, N1), dtype=bool)
    for e in range(d.D):
        held = d.weight_bits[:, widths[e]] + d.kv_bits
        prefix = np.concatenate([[0], np.cumsum(held)])
        memory = (prefix[None, :] - prefix[:, None] + largest).astype(float)
        memory[0, n] -= d.tied_bits[widths[e]]
        ok[e] = (b_idx > a_idx) & (memory <= d.memory_bits[e] * (1 + RTOL))
    for owner, (p, q) in d.pins.items():
        ok[owner] &= (a_idx <= p) & (b_idx > q)
        for e in range(d.D):
            if e != owner:
                ok[e] &= (b_idx <= p) | (a_idx > q)
    return ok


def stage_costs(part_ms: np.ndarray, widths: Sequence[int], ok: np.ndarray) -> np.ndarray:
    """``cost[e, a, b]``: the sum of ``part_ms[a:b, e, widths[e]]`` where ``ok``, else inf."""
    n, D = part_ms.shape[0], part_ms.shape[1]
    cost = np.full((D, n + 1, n + 1), np.inf)
    for e in range(D):
        per = part_ms[:, e, widths[e]]
        for a in range(n):
            cost[e, a, a + 1:] = np.cumsum(per[a:])
    cost[~ok] = np.inf
    return cost


def required_mask(d: LlmData) -> int:
    """The device set every plan uses: the pinned devices."""
    return sum(1 << e for e in d.pins)


def cheapest_pipeline(cost: np.ndarray, link: np.ndarray, back: np.ndarray | None, required: int,
                      stop: Stop | None = None, after: Twins = None) -> Pipeline | None:
    """The least ``sum of stages + links (+ the return, where back is given)`` over every
    device set holding ``required``, order and ranges (module docstring); None where no
    pipeline exists or ``stop()`` said to stop. ``cost[e, a, b]``: stage; ``link[b, e, e']``:
    the boundary before part ``b``; ``back[e_last, e_first]``: a ring's return; ``after``:
    see :func:`pipeline_table`."""
    V = pipeline_table(cost, link, back is not None, stop, after)
    if V is None:
        return None
    return _best_end(V, cost, link, back, required)


def pipeline_table(cost: np.ndarray, link: np.ndarray, ring: bool, stop: Stop | None = None,
                   after: Twins = None) -> np.ndarray | None:
    """The program's table ``V[f, U, e, b]``: the least sum of stages and links that runs
    parts ``[0, b)`` on the devices ``U``, ``e`` last (``f``: the first device in a ring,
    else 0); None where ``stop()`` said to stop. (No argmins are kept: the walk back
    recomputes the one state's choice it needs, ``_best_end``.) ``after[e'] = e``: device ``e'`` joins only after ``e``, its twin (two
    devices no plan can tell apart, ``data.identical_pairs``): every plan has a mirror image
    that keeps this order and costs the same, so only those are built."""
    after = after or {}
    D, N1 = cost.shape[0], cost.shape[1]
    F, full = (D if ring else 1), 1 << D
    V = np.full((F, full, D, N1), np.inf)
    for e in range(D):
        if e not in after:
            V[e if ring else 0, 1 << e, e] = cost[e, 0]
    link_t = np.transpose(link, (1, 2, 0))  # [e, e', b]
    for U in sorted(range(1, full), key=lambda m: bin(m).count("1")):
        if stop is not None and stop():
            return None
        others = [e for e in range(D) if not U >> e & 1 and (e not in after or U >> after[e] & 1)]
        fs = [e for e in range(D) if U >> e & 1] if ring else [0]
        VU = V[fs, U]  # (Fs, D, N1)
        if not others or not np.isfinite(VU).any():
            continue
        H = (VU[:, :, None, :] + link_t[None][:, :, others, :]).min(axis=1)  # (Fs, E, N1)
        best = (H[:, :, :, None] + cost[others][None]).min(axis=2)  # (Fs, E, b)
        for j, e in enumerate(others):
            V[fs, U | 1 << e, e] = best[:, j]
    return V


def _best_end(V: np.ndarray, cost: np.ndarray, link: np.ndarray, back: np.ndarray | None,
              required: int) -> Pipeline | None:
    """The best complete state (every part placed, the required devices used) and its
    stages, walked back: at each state the choice of previous device and start that gives
    its value, recomputed with the same sums as the table."""
    n = cost.shape[1] - 1
    total = V[:, :, :, n].copy()  # (F, sets, D)
    if back is not None:
        total += back.T[:, None, :]  # back[last, first]
    sets = np.arange(total.shape[1])
    total[:, (sets & required) != required, :] = np.inf
    flat = int(np.argmin(total))
    value = float(total.flat[flat])
    if not math.isfinite(value):
        return None
    f, U, e = (int(x) for x in np.unravel_index(flat, total.shape))
    b = n
    stages: list[tuple[int, int, int]] = []
    while U != 1 << e:
        prev = U ^ (1 << e)
        cand = (V[f, prev] + link[:, :, e].T) + cost[e, :, b][None, :]  # (previous device, start)
        p, a = (int(x) for x in np.unravel_index(int(np.argmin(cand)), cand.shape))
        stages.append((e, a, b))
        U, e, b = prev, p, a
    stages.append((e, 0, b))
    return Pipeline(value, tuple(reversed(stages)))


def sum_pipeline(d: LlmData, part_ms: np.ndarray, link: np.ndarray, widths: Sequence[int],
                 stop: Stop | None = None, after: Twins = None) -> Pipeline | None:
    """The least sum objective (``part_ms``: prefill or mean decode per part; ``link``:
    the matching link table)."""
    ok = stage_mask(d, widths)
    return cheapest_pipeline(stage_costs(part_ms, widths, ok), link, d.return_ms if d.ring else None,
                             required_mask(d), stop, after)


def throughput_pipeline(d: LlmData, widths: Sequence[int], streams: int,
                        stop: Stop | None = None, after: Twins = None) -> Pipeline | None:
    """The least ``max(busiest stage or link, round trip / streams)`` (module docstring);
    the value is that objective."""
    cost = stage_costs(d.decode_ms, widths, stage_mask(d, widths))
    back, back_busy = (d.return_ms, d.return_busy_ms) if d.ring else (None, None)
    required = required_mask(d)

    def least_round_trip(v: float) -> Pipeline | None:
        held_back = None if back is None or back_busy is None else np.where(back_busy <= v, back, np.inf)
        return cheapest_pipeline(np.where(cost <= v, cost, np.inf), np.where(d.link_busy_ms <= v, d.link_decode_ms,
                                                                            np.inf), held_back, required, stop, after)

    def busiest(p: Pipeline) -> float:
        times = [cost[e, a, b] for e, a, b in p.stages]
        times += [d.link_busy_ms[b, e, f] for (e, _, b), (f, _, _) in zip(p.stages, p.stages[1:])]
        if back_busy is not None and len(p.stages) > 1:
            times.append(back_busy[p.stages[-1][0], p.stages[0][0]])
        return float(max(times))

    free = least_round_trip(math.inf)
    if free is None:
        return None
    floor, top = free.value / streams, busiest(free)
    if top <= floor:  # the round trip alone bounds every plan: this one is optimal
        return Pipeline(floor, free.stages)
    values = [cost[np.isfinite(cost)], d.link_busy_ms[np.isfinite(d.link_busy_ms)]]
    if back_busy is not None:
        values.append(back_busy[np.isfinite(back_busy)])
    candidates = np.unique(np.concatenate(values))
    candidates = candidates[(candidates >= floor) & (candidates <= top)]
    found: dict[int, Pipeline | None] = {}

    def trip(k: int) -> Pipeline | None:
        if k not in found:
            found[k] = least_round_trip(float(candidates[k]))
        return found[k]

    lo, hi = 0, len(candidates) - 1  # the crossing lies in [lo, hi]: it holds at top
    while lo < hi:
        mid = (lo + hi) // 2
        p = trip(mid)
        if p is not None and p.value / streams <= candidates[mid]:
            hi = mid
        else:
            lo = mid + 1
    if stop is not None and stop():
        return None
    options = [(max(busiest(p), p.value / streams), p) for p in (trip(lo), trip(lo - 1) if lo > 0 else None,
                                                                   free) if p is not None]
    value, best = min(options, key=lambda o: o[0])
    return Pipeline(value, best.stages)
