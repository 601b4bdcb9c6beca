"""Why an llm instance has no plan: the limit it breaks, in one line.

``proven_infeasible`` names what the data alone proves (every backend then answers
INFEASIBLE at once): a pinned range that does not fit its device, a part that fits no
device, the whole model and its KV cache beyond every usable device's memory together, an
error budget below the least error any bit-widths give. ``diagnose`` (after a solver found
no plan) says whether the error budget, the limits on the time to first token and the
tokens/s or the pins are to blame, by solving without them, else names the memory and
links.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from splitopt.core.instance import Instance
from splitopt.families.llm.data import LlmData, data
from splitopt.families.llm.evaluate import RTOL, over_text, size_text
from splitopt.families.llm.settings import LlmSettings

Inst = Instance[LlmSettings]


def _need_bits(d: LlmData, e: int, start: int, end: int) -> tuple[float, float, float]:
    """Device ``e`` running parts ``[start, end)`` at its lowest width: (weights, KV cache,
    activations) in bits."""
    w = d.lowest(e)
    weights = float(d.weight_bits[start:end, w].sum())
    if start == 0 and end == d.n:
        weights -= float(d.tied_bits[w])  # one device holds a tied matrix once
    return weights, float(d.kv_bits[start:end].sum()), float(d.activation_bits[start:end].max())


def _kv_words(inst: Inst) -> str:
    s = inst.settings
    return f"{s.context_limit:,} tokens x {s.streams} stream{'s' if s.streams > 1 else ''}"


def pinned_overflow(inst: Inst) -> str | None:
    """A pinned range too large for its device even at the device's lowest width."""
    d = data(inst)
    for e, (p, q) in d.pins.items():
        weights, kv, act = _need_bits(d, e, p, q + 1)
        if weights + kv + act > d.memory_bits[e] * (1 + RTOL):
            need, limit = over_text((weights + kv + act) / 8.0, d.memory_bits[e] / 8.0)
            return (f"infeasible: device '{d.devices[e]}' is pinned to {d.parts[p]}..{d.parts[q]}: weights "
                    f"{size_text(weights / 8.0)} at {d.widths[d.lowest(e)]} bits + KV cache at {_kv_words(inst)} "
                    f"{size_text(kv / 8.0)} + activations {size_text(act / 8.0)} = {need} over its memory {limit}")
    return None


def homeless_part(inst: Inst) -> str | None:
    """A part that fits no usable device alone (at each device's lowest width)."""
    d = data(inst)
    for i in range(d.n):
        needs = [sum(_need_bits(d, e, i, i + 1)) for e in range(d.D)]
        if all(need > d.memory_bits[e] * (1 + RTOL) for e, need in enumerate(needs)):
            e = max(range(d.D), key=lambda k: d.memory_bits[k])
            weights, kv, act = _need_bits(d, e, i, i + 1)
            need, limit = over_text(needs[e] / 8.0, d.memory_bits[e] / 8.0)
            return (f"infeasible: part '{d.parts[i]}' fits no device: weights {size_text(weights / 8.0)} + KV cache "
                    f"at {_kv_words(inst)} {size_text(kv / 8.0)} + activations {size_text(act / 8.0)} = {need} "
                    f"over the largest memory, device '{d.devices[e]}''s {limit}")
    return None


def total_overflow(inst: Inst) -> str | None:
    """The weights (each part at the lowest width any device runs it) and the KV cache
    beyond every usable device's memory together."""
    d = data(inst)
    weights = sum(min(float(d.weight_bits[i, d.lowest(e)]) for e in range(d.D)) for i in range(d.n))
    weights -= max(float(d.tied_bits[d.lowest(e)]) for e in range(d.D))  # at most one copy saved
    kv = float(d.kv_bits.sum())
    memory = float(d.memory_bits.sum())
    if weights + kv > memory * (1 + RTOL):
        need, limit = over_text((weights + kv) / 8.0, memory / 8.0)
        return (f"infeasible: weights {size_text(weights / 8.0)} at the lowest bit-widths + KV cache at "
                f"{_kv_words(inst)} {size_text(kv / 8.0)} = {need} over the memory of all {d.D} usable devices "
                f"together, {limit}")
    return None


def budget_below_least_error(inst: Inst) -> str | None:
    """An error budget below the least summed error any bit-widths give."""
    s, d = inst.settings, data(inst)
    if s.error_budget is None:
        return None
    least = math.fsum(min(d.error[i, w] for e in range(d.D) for w in d.bits_of(e)) for i in range(d.n))
    if least > s.error_budget * (1 + RTOL) + 1e-12:
        return (f"infeasible: the error budget {s.error_budget:.6g} is below the least error any bit-widths give, "
                f"{least:.6g}")
    return None


def proven_infeasible(inst: Inst) -> str | None:
    for check in (pinned_overflow, homeless_part, total_overflow, budget_below_least_error):
        reason = check(inst)
        if reason is not None:
            return reason
    return None


def diagnose(inst: Inst, resolve: Callable[[Any], bool]) -> str:
    """One line naming the limit no plan meets (the solver found none)."""
    s = inst.settings
    reason = proven_infeasible(inst)
    if reason is not None:
        return reason
    if s.error_budget is not None and resolve(inst.with_settings(error_budget=None)):
        return f"infeasible: every plan that fits the memory, links and pins breaks the error budget {s.error_budget:.6g}"
    if s.has_time_limits and resolve(inst.with_settings(ttft_limit_ms=None, min_tokens_per_s=None)):
        return (f"infeasible: every plan that fits the memory, links, pins and error budget breaks the time limits: "
                f"{' and '.join(s.limit_texts())}")
    if s.pins and resolve(inst.with_settings(pins={})):
        return "infeasible: the pins (settings.pins) leave no plan that fits the devices' memory and links"
    d = data(inst)
    devices = ", ".join(f"{name} {size_text(d.memory_bits[e] / 8.0)}" for e, name in enumerate(d.devices))
    return (f"infeasible: no choice of devices, order and ranges holds the weights and the KV cache at "
            f"{_kv_words(inst)} in the devices' memory with a link between consecutive devices ({devices})")
