"""The llm family's evaluator, the single source of truth for a plan (model in
``formulations/llm.md``; the per-part numbers in ``data.py``):

* a stage (device ``d``, parts ``[a, b)``, ``w``-bit weights) takes the sum of its parts'
  prefill times and of their decode step times (each part the larger of its compute and
  its memory traffic: a roofline per part);
* a link between consecutive stages carries ``P`` hidden states in the prefill and one per
  decode step (its fixed latency plus bits at its rate); in a ring the last device sends
  the sampled token back to the first;
* ``ttft_ms`` (time to first token): the prefill through every stage and link; the first
  token is sampled from the prefill's last logits (no decode step), and in a ring it is
  back at the first device, where the prompt arrived;
* ``token_latency_ms``: one stream's time per generated token, the mean over the decode
  steps of the round trip through every stage and link (and back, in a ring);
* ``ms_per_token`` (objective ``throughput``; tokens/s = 1000 / it): a pipeline holding
  ``S`` streams, one token of a stream in flight at a time (the next needs it), is limited
  by its busiest stage, its busiest link (bits at its rate; a fixed latency delays a
  token but does not occupy the link) and ``S`` tokens per round trip:
  ``max(max stage, max link, round trip / S)``, from the mean decode step;
* memory of a device: weights at its bit-width, the KV cache of its blocks at the context
  limit for every stream, and the largest prefill activations of its parts, under
  ``memory_bytes``; a device running both ends of a model with tied embeddings holds the
  matrix once;
* limits: memory, a link between consecutive devices (and from the last to the first in a
  ring), pins, the error budget, the time to first token (``ttft_limit_ms``) and the
  pipeline's tokens/s (``min_tokens_per_s``: at most ``1000 / it`` ms per token); a plan
  that breaks one lists it in ``violations``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from splitopt.core.instance import Instance
from splitopt.core.metrics import FamilyMetrics
from splitopt.core.schedule import Task
from splitopt.families.llm.data import LlmData, data
from splitopt.families.llm.plan import LlmPlan, Stage, check_plan
from splitopt.families.llm.settings import LlmSettings

#: relative tolerance of the memory and error checks
RTOL = 1e-9


def size_text(nbytes: float) -> str:
    """A size for people, in decimal units: ``3.10 GB``, ``512 MB``, ``12 B``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.2f} {unit}"
    return f"{nbytes:,.0f} B"


def over_text(need: float, limit: float) -> tuple[str, str]:
    """``need`` and ``limit`` for a message, exact bytes where the rounded sizes read alike."""
    a, b = size_text(need), size_text(limit)
    return (a, b) if a != b else (f"{need:,.0f} B", f"{limit:,.0f} B")


@dataclass(frozen=True)
class StageLoad:
    """One stage: its device, parts (first and last name, count), weight bits; its
    prefill time and decode step times (ms: the mean over the decode steps, the first and
    the last step); what it sends to the next stage (ms: prefill, one decode step with the
    link's latency, the link's busy time per token; the last stage of a ring: the sampled
    token back to the first); its memory (bytes) and the KV cache tokens that fit its
    memory beside its weights and activations (None: it holds no KV cache)."""

    device: str
    first: str
    last: str
    parts: int
    bits: int
    prefill_ms: float
    decode_ms: float
    decode_first_ms: float
    decode_last_ms: float
    send_prefill_ms: float
    send_decode_ms: float
    send_busy_ms: float
    send_to: str | None
    weight_bytes: float
    kv_bytes: float
    activation_bytes: float
    memory_limit: float
    kv_tokens_fit: int | None

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "first": self.first, "last": self.last, "parts": self.parts,
                "weight_bits": self.bits, "prefill_ms": self.prefill_ms, "decode_ms": self.decode_ms,
                "decode_first_ms": self.decode_first_ms, "decode_last_ms": self.decode_last_ms,
                "send_to": self.send_to, "send_prefill_ms": self.send_prefill_ms,
                "send_decode_ms": self.send_decode_ms, "send_busy_ms": self.send_busy_ms,
                "memory": {"weights_bytes": self.weight_bytes, "kv_cache_bytes": self.kv_bytes,
                           "activations_bytes": self.activation_bytes, "total_bytes": self.memory_bytes,
                           "limit_bytes": self.memory_limit, "kv_tokens_fit": self.kv_tokens_fit}}


@dataclass(frozen=True)
class LlmMetrics(FamilyMetrics):
    """What an llm plan costs (module docstring); ``bottleneck``: what limits the
    pipeline's tokens/s."""

    objective: str
    ttft_ms: float
    token_latency_ms: float
    ms_per_token: float
    bottleneck: str
    streams: int
    error: float
    stages: tuple[StageLoad, ...]
    schedule: tuple[Task, ...]

    @property
    def objective_ms(self) -> float:
        if self.objective == "ttft":
            return self.ttft_ms
        if self.objective == "token_latency":
            return self.token_latency_ms
        return self.ms_per_token

    @property
    def tokens_per_s(self) -> float:
        """The pipeline's tokens/s over all streams."""
        return 1000.0 / self.ms_per_token if self.ms_per_token > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "objective_ms": self.objective_ms, "ttft_ms": self.ttft_ms,
                "token_latency_ms": self.token_latency_ms,
                "stream_tokens_per_s": 1000.0 / self.token_latency_ms if self.token_latency_ms > 0 else None,
                "ms_per_token": self.ms_per_token, "tokens_per_s": self.tokens_per_s if self.ms_per_token > 0
                else None, "streams": self.streams, "bottleneck": self.bottleneck, "error": self.error,
                "stages": [s.to_dict() for s in self.stages], "schedule": [t.to_dict() for t in self.schedule],
                **self.verdict()}


def _finite(value: float) -> float:
    """A time over a link the instance lacks counts 0 (the plan lists the missing link)."""
    return value if math.isfinite(value) else 0.0


def _stage_load(inst: Instance[LlmSettings], d: LlmData, plan: LlmPlan, k: int) -> StageLoad:
    """Stage ``k``'s times, sends and memory."""
    st = plan.stages[k]
    dev, w = d.devices.index(st.device), d.widths.index(st.bits)
    parts = range(st.start, st.end)
    nxt = plan.stages[k + 1].device if k + 1 < len(plan.stages) else None
    if nxt is not None:
        e = d.devices.index(nxt)
        sends = (d.link_prefill_ms[st.end, dev, e], d.link_decode_ms[st.end, dev, e], d.link_busy_ms[st.end, dev, e])
    elif d.ring and len(plan.stages) > 1:
        nxt = plan.stages[0].device
        e = d.devices.index(nxt)
        sends = (d.return_ms[dev, e], d.return_ms[dev, e], d.return_busy_ms[dev, e])
    else:
        sends = (0.0, 0.0, 0.0)
    weight = sum(float(d.weight_bits[i, w]) for i in parts)
    if st.start == 0 and st.end == d.n:
        weight -= float(d.tied_bits[w])
    kv = sum(float(d.kv_bits[i]) for i in parts)
    act = max(float(d.activation_bits[i]) for i in parts)
    limit = float(inst.device_by_name[st.device].memory_bytes)
    per_token = sum(float(d.kv_token_bits[i]) for i in parts)
    fit = None if per_token == 0 else max(0, math.floor((8.0 * limit - weight - act) / per_token))
    return StageLoad(
        device=st.device, first=d.parts[st.start], last=d.parts[st.end - 1], parts=st.end - st.start, bits=st.bits,
        prefill_ms=math.fsum(d.prefill_ms[i, dev, w] for i in parts),
        decode_ms=math.fsum(d.decode_ms[i, dev, w] for i in parts),
        decode_first_ms=math.fsum(d.decode_first_ms[i, dev, w] for i in parts),
        decode_last_ms=math.fsum(d.decode_last_ms[i, dev, w] for i in parts),
        send_prefill_ms=_finite(sends[0]), send_decode_ms=_finite(sends[1]), send_busy_ms=_finite(sends[2]),
        send_to=nxt, weight_bytes=weight / 8.0, kv_bytes=kv / 8.0, activation_bytes=act / 8.0,
        memory_limit=limit, kv_tokens_fit=fit)


def _violations(inst: Instance[LlmSettings], d: LlmData, plan: LlmPlan, loads: tuple[StageLoad, ...],
                error: float, ttft: float, per_token: float) -> list[str]:
    """The limits the plan breaks, one line each."""
    s = inst.settings
    out = []
    for st, load in zip(plan.stages, loads):
        if load.memory_bytes > load.memory_limit * (1 + RTOL):
            need, limit = over_text(load.memory_bytes, load.memory_limit)
            out.append(f"device '{st.device}' memory: weights {size_text(load.weight_bytes)} at {st.bits} bits + "
                       f"KV cache at {s.context_limit:,} tokens x {s.streams} stream{'s' if s.streams > 1 else ''} "
                       f"{size_text(load.kv_bytes)} + activations {size_text(load.activation_bytes)} = {need} over "
                       f"its {limit}")
    for a, b in zip(plan.stages, plan.stages[1:]):
        if (a.device, b.device) not in inst.link_between:
            out.append(f"no link from device '{a.device}' to '{b.device}' (consecutive stages)")
    if d.ring and len(plan.stages) > 1 and (plan.stages[-1].device, plan.stages[0].device) not in inst.link_between:
        out.append(f"no link from device '{plan.stages[-1].device}' back to '{plan.stages[0].device}' (the ring "
                   "returns the sampled token to the first device)")
    where = {st.device: st for st in plan.stages}
    for device, (first, last) in s.pins.items():
        lo, hi = d.parts.index(first), d.parts.index(last)
        held = where.get(device)
        if held is None or not (held.start <= lo and hi < held.end):
            runs = "nothing" if held is None else f"{d.parts[held.start]}..{d.parts[held.end - 1]}"
            out.append(f"device '{device}' is pinned to {first}..{last} (settings.pins) but runs {runs}")
    if s.error_budget is not None and error > s.error_budget * (1 + RTOL) + 1e-12:
        out.append(f"error {error:.6g} exceeds the error budget {s.error_budget:.6g}")
    if s.ttft_limit_ms is not None and ttft > s.ttft_limit_ms * (1 + RTOL) + 1e-12:
        out.append(f"time to first token {ttft:.6g} ms exceeds the limit {s.ttft_limit_ms:.6g} ms "
                   "(settings.ttft_limit_ms)")
    floor_ms = s.ms_per_token_limit
    if floor_ms is not None and per_token > floor_ms * (1 + RTOL) + 1e-12:
        out.append(f"{1000.0 / per_token:.6g} tokens/s ({per_token:.6g} ms per token) is below the least "
                   f"{s.min_tokens_per_s:.6g} tokens/s (settings.min_tokens_per_s)")
    return out


def _schedule(plan: LlmPlan, loads: tuple[StageLoad, ...]) -> tuple[Task, ...]:
    """The prefill pass (to the first token) and then one decode step (its mean time)."""
    tasks, clock = [], 0.0
    for phase, compute, send in (("prefill", "prefill_ms", "send_prefill_ms"), ("decode", "decode_ms",
                                                                                "send_decode_ms")):
        for st, load in zip(plan.stages, loads):
            t = getattr(load, compute)
            if t > 0:
                tasks.append(Task(st.device, "compute", f"{phase} {load.first}..{load.last}", clock, clock + t))
                clock += t
            t = getattr(load, send)
            if t > 0 and load.send_to is not None:
                tasks.append(Task(f"{st.device}->{load.send_to}", "transfer", f"{phase} send", clock, clock + t))
                clock += t
    return tuple(tasks)


def evaluate(inst: Instance[LlmSettings], plan: LlmPlan) -> LlmMetrics:
    """The plan's metrics; InvalidPlan if it is malformed."""
    check_plan(inst, plan)
    d = data(inst)
    loads = tuple(_stage_load(inst, d, plan, k) for k in range(len(plan.stages)))
    error = math.fsum(d.error[i, d.widths.index(st.bits)] for st in plan.stages for i in range(st.start, st.end))
    ttft = math.fsum([x.prefill_ms for x in loads] + [x.send_prefill_ms for x in loads])
    round_trip = math.fsum([x.decode_ms for x in loads] + [x.send_decode_ms for x in loads])
    S = inst.settings.streams
    limits = [(x.decode_ms, f"stage '{x.device}'") for x in loads]
    limits += [(x.send_busy_ms, f"link '{x.device}'->'{x.send_to}'") for x in loads if x.send_to is not None]
    limits.append((round_trip / S, f"{S} stream{'s' if S > 1 else ''} per round trip"))
    per_token, bottleneck = max(limits, key=lambda v: v[0])
    return LlmMetrics(objective=inst.objective, ttft_ms=ttft, token_latency_ms=round_trip, ms_per_token=per_token,
                      bottleneck=bottleneck, streams=S, error=error, stages=loads, schedule=_schedule(plan, loads),
                      violations=tuple(_violations(inst, d, plan, loads, error, ttft, per_token)))


def stage_of(plan: LlmPlan, device: str) -> Stage | None:
    """The stage ``device`` runs in ``plan`` (None: it runs none)."""
    return next((st for st in plan.stages if st.device == device), None)
