"""The llm family's derived data: per part (layer), usable device and weight bit-width its
prefill time and mean decode time, per part its memory (weights at each bit-width, KV
cache, activations), per stage boundary and pair of devices the link times, and the
pins; each number computed once per instance by the functions here, which state the cost
model of ``formulations/llm.md`` (units: ms, bits, bytes/s, MAC/s). The evaluator, the
dynamic program, the program and the baselines all read these tables.

Per part ``l`` on device ``d`` at weight bit-width ``w`` (``P`` prompt tokens, decode
contexts ``c = P+1 .. P+G-1``):

* prefill (one stream's prompt at once)::

      macs   = pos_l * macs_l + attn_l * P (P + 1) / 2      # pos_l = 1 for the head, else P
      bytes  = min(weights_l, pos_l * read_l) * w / 8 + kv_l * P * kv_bits / 8
      ms     = 1000 * max(macs / mac_per_s, bytes / offchip_bytes_per_s)

* one decode step at context ``c`` (one token of one stream)::

      ms(c)  = 1000 * max((macs_l + attn_l * c) / mac_per_s,
                          (read_l * w / 8 + kv_l * c * kv_bits / 8) / offchip_bytes_per_s)

  and the table holds its mean over the generation's decode steps (exact, in closed form:
  the mean of the larger of two affine functions over integers);

* memory (bits): weights ``weights_l * w``; KV cache ``kv_l * C * S * kv_bits``;
  activations ``(P * in_l * in_bits + pos_l * out_l * activation_bits)`` (the part's input
  and output during prefill; a device holds the largest of its parts').

``macs_l``: the layer's ``macs`` (per token); ``read_l``: weights read per generated token
(all, one row for an embedding, ``model.active_weights`` where given); ``kv_l = 2 x
kv_heads x head_dim`` and ``attn_l = 2 x attention_heads x head_dim`` for a block, 0
otherwise. Where ``settings.measured[d]`` holds a part's times at bit-width ``w``
(:mod:`splitopt.families.llm.measured`), they replace the roofline of that part on ``d``
at ``w``: prefill interpolated at ``P``, decode steps from the line fitted to the measured
contexts (``max(0, alpha + beta c)``, the same mean over the decode steps). A link from ``d`` to ``e`` at the boundary before part ``b`` carries ``P *
out_{b-1}`` activations in the prefill and ``out_{b-1}`` per decode step; in a ring the last
device sends the sampled token (the graph input's size) back to the first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from splitopt.core.instance import Device, Instance, Link
from splitopt.families.llm.settings import LlmSettings

#: the ops with a meaning of their own (formulations/llm.md, "Parts")
EMBEDDING, BLOCK, HEAD = "embedding", "block", "head"


@dataclass(frozen=True)
class LlmData:
    """The tables (module docstring). ``devices``: the usable devices (instance order:
    not excluded, running some candidate bit-width), ``D`` of them; ``widths``: every
    candidate bit-width, ``W`` of them; ``runs[d, w]``: device ``d`` runs width ``w``.
    Arrays over parts ``(n, ...)``, devices ``d``, widths ``w``, stage boundaries ``b = 0..n``
    (boundary ``b`` lies before part ``b``); ``inf`` where a choice does not exist."""

    parts: tuple[str, ...]
    ops: tuple[str, ...]
    devices: tuple[str, ...]
    widths: tuple[int, ...]
    runs: np.ndarray            # (D, W) bool
    prefill_ms: np.ndarray      # (n, D, W)
    decode_ms: np.ndarray       # (n, D, W) mean over the decode steps
    decode_first_ms: np.ndarray  # (n, D, W) at the first decode step's context
    decode_last_ms: np.ndarray   # (n, D, W) at the last decode step's context
    weight_bits: np.ndarray     # (n, W) int
    kv_bits: np.ndarray         # (n,) int: KV cache at the context limit, every stream
    kv_token_bits: np.ndarray   # (n,) int: KV cache per token of context (one stream)
    activation_bits: np.ndarray  # (n,) int
    error: np.ndarray           # (n, W)
    memory_bits: np.ndarray     # (D,)
    link_prefill_ms: np.ndarray  # (n + 1, D, D)
    link_decode_ms: np.ndarray   # (n + 1, D, D) latency + one hidden state
    link_busy_ms: np.ndarray     # (n + 1, D, D) one hidden state at the link's rate (no latency)
    return_ms: np.ndarray        # (D, D) ring: the sampled token from the last device to the first
    return_busy_ms: np.ndarray   # (D, D)
    tied_bits: np.ndarray        # (W,) the head's copy of a tied embedding, saved on a device running both
    pins: dict[int, tuple[int, int]]  # device index -> (first, last) part, inclusive
    ring: bool
    decode_contexts: tuple[int, int]  # the first and last decode step's context (tokens)

    @property
    def n(self) -> int:
        return len(self.parts)

    @property
    def D(self) -> int:
        return len(self.devices)

    def bits_of(self, d: int) -> list[int]:
        """The indices (into ``widths``) of the bit-widths device ``d`` runs."""
        return [w for w in range(len(self.widths)) if self.runs[d, w]]

    def lowest(self, d: int) -> int:
        """The index of the lowest bit-width device ``d`` runs."""
        return self.bits_of(d)[0]


def data(inst: Instance[LlmSettings]) -> LlmData:
    """The instance's tables, built once."""
    return inst.derived(("llm", "data"), lambda: build_data(inst))


# ----- the per-part cost model ------------------------------------------------------------------

def read_weights(inst: Instance[LlmSettings], i: int) -> float:
    """Weights part ``i`` reads per generated token: ``model.active_weights`` where given,
    one row (its output elements) for an embedding, else all of them."""
    layer = inst.layers[i]
    given = inst.settings.model.active_weights.get(layer.name)
    if given is not None:
        return float(given)
    if layer.op == EMBEDDING:
        return float(min(layer.weights, layer.output_elements))
    return float(layer.weights)


def kv_elements(inst: Instance[LlmSettings], i: int) -> int:
    """KV cache elements part ``i`` holds per token of context (one stream)."""
    return inst.settings.model.kv_elements_per_token if inst.layers[i].op == BLOCK else 0


def attention_macs(inst: Instance[LlmSettings], i: int) -> int:
    """MACs of part ``i``'s attention per token per context position."""
    return inst.settings.model.attention_macs_per_position if inst.layers[i].op == BLOCK else 0


def prefill_positions(inst: Instance[LlmSettings], i: int) -> int:
    """Positions part ``i`` computes in the prefill: the head only the last one's logits."""
    return 1 if inst.layers[i].op == HEAD else inst.settings.prompt_tokens


def decode_contexts(s: LlmSettings) -> tuple[int, int]:
    """The contexts (tokens attended) of the first and last decode step: ``P + 1`` and
    ``P + G - 1`` (the step that makes token ``j + 1`` feeds token ``j`` over ``P + j``
    positions); one step at ``P + 1`` when ``G = 1`` (the next token's)."""
    first = s.prompt_tokens + 1
    return first, max(first, s.prompt_tokens + s.generated_tokens - 1)


def prefill_ms(inst: Instance[LlmSettings], i: int, device: Device, bits: int) -> float:
    """Prefill time (ms) of part ``i`` on ``device`` at ``bits``-bit weights."""
    s, layer = inst.settings, inst.layers[i]
    P, pos = s.prompt_tokens, prefill_positions(inst, i)
    macs = pos * layer.macs + attention_macs(inst, i) * P * (P + 1) / 2.0
    weight_bytes = min(float(layer.weights), pos * read_weights(inst, i)) * bits / 8.0
    kv_bytes = kv_elements(inst, i) * P * s.kv_bits / 8.0
    return 1000.0 * max(macs / device.mac_per_s, (weight_bytes + kv_bytes) / _bandwidth(device))


def decode_lines(inst: Instance[LlmSettings], i: int, device: Device, bits: int) -> tuple[float, float, float, float]:
    """One decode step of part ``i`` as two affine functions of the context ``c`` (ms):
    compute ``a1 + b1 c`` and memory ``a2 + b2 c``; the step takes their maximum."""
    s, layer = inst.settings, inst.layers[i]
    rate, bw = device.mac_per_s, _bandwidth(device)
    a1, b1 = 1000.0 * layer.macs / rate, 1000.0 * attention_macs(inst, i) / rate
    a2 = 1000.0 * read_weights(inst, i) * bits / 8.0 / bw
    b2 = 1000.0 * kv_elements(inst, i) * s.kv_bits / 8.0 / bw
    return a1, b1, a2, b2


def decode_step_ms(lines: tuple[float, float, float, float], c: int) -> float:
    """One decode step (ms) at context ``c``."""
    a1, b1, a2, b2 = lines
    return max(a1 + b1 * c, a2 + b2 * c)


def mean_decode_ms(lines: tuple[float, float, float, float], first: int, last: int) -> float:
    """The mean of ``max(a1 + b1 c, a2 + b2 c)`` over the integers ``c = first .. last``,
    in closed form: the memory line's mean plus the mean of the compute line's excess
    over it, which is positive on one side of their crossing."""
    a1, b1, a2, b2 = lines
    count = last - first + 1
    alpha, beta = a1 - a2, b1 - b2  # excess(c) = alpha + beta c

    def line_sum(a: float, b: float, lo: int, hi: int) -> float:
        return 0.0 if hi < lo else (hi - lo + 1) * (a + b * (lo + hi) / 2.0)

    if beta == 0.0:
        lo, hi = (first, last) if alpha > 0 else (last + 1, last)
    else:
        cross = -alpha / beta
        if beta > 0:  # positive above the crossing
            lo, hi = max(first, math.floor(cross) + 1), last
        else:
            lo, hi = first, min(last, math.ceil(cross) - 1)
    excess = line_sum(alpha, beta, lo, hi)
    return (line_sum(a2, b2, first, last) + max(excess, 0.0)) / count


def activation_bits(inst: Instance[LlmSettings], i: int) -> int:
    """Bits of part ``i``'s input and output during the prefill (one stream)."""
    s = inst.settings
    if i == 0:
        source = sum(t.elements * t.bits for t in inst.inputs)
    else:
        source = inst.layers[i - 1].output_elements * s.activation_bits
    return s.prompt_tokens * source + prefill_positions(inst, i) * inst.layers[i].output_elements * s.activation_bits


def token_bits(inst: Instance) -> int:
    """Bits of the sampled token a ring sends back (the graph input's size)."""
    return sum(t.elements * t.bits for t in inst.inputs)


def _bandwidth(device: Device) -> float:
    """The device's memory bandwidth (bytes/s); the checks require one."""
    assert device.offchip_bytes_per_s is not None, device.name
    return device.offchip_bytes_per_s


def link_ms(inst: Instance, link: Link | None, bits: float, latency: bool = True) -> float:
    """Time (ms) to send ``bits`` over ``link`` (inf without a link): its fixed latency
    (where ``latency``) plus the bits at its rate."""
    if link is None:
        return math.inf
    return (link.latency_ms if latency else 0.0) + 1000.0 * bits / inst.link_rate_bits_per_s(link)


# ----- the tables --------------------------------------------------------------------------------

def usable_devices(inst: Instance[LlmSettings]) -> list[Device]:
    """The devices a plan may use: not excluded, running some candidate bit-width."""
    s = inst.settings
    return [d for d in inst.devices if d.name not in s.exclude and set(d.bit_widths) & set(s.bit_widths)]


def build_data(inst: Instance[LlmSettings]) -> LlmData:
    s = inst.settings
    devices = usable_devices(inst)
    widths = tuple(s.bit_widths)
    D, W = len(devices), len(widths)
    runs = np.array([[w in dev.bit_widths for w in widths] for dev in devices], dtype=bool).reshape(D, W)
    tables = _part_tables(inst, devices, widths, runs)
    links = _link_tables(inst, devices)
    index = {dev.name: k for k, dev in enumerate(devices)}
    position = {layer.name: i for i, layer in enumerate(inst.layers)}
    pins = {index[d]: (position[a], position[b]) for d, (a, b) in s.pins.items() if d in index}
    tied = np.zeros(W)
    if s.model.tied_embeddings:
        shared = min(inst.layers[0].weights, inst.layers[-1].weights)  # the matrix both read
        tied = np.array([shared * w for w in widths], dtype=float)
    return LlmData(
        parts=tuple(layer.name for layer in inst.layers), ops=tuple(layer.op for layer in inst.layers),
        devices=tuple(dev.name for dev in devices), widths=widths, runs=runs, **tables, **links,
        memory_bits=np.array([8.0 * dev.memory_bytes for dev in devices]), tied_bits=tied, pins=pins,
        ring=s.topology == "ring", decode_contexts=decode_contexts(s))


def _part_tables(inst: Instance[LlmSettings], devices: list[Device], widths: tuple[int, ...],
                 runs: np.ndarray) -> dict[str, Any]:
    """The per-part tables: times per (part, device, width), memory and error per part."""
    s = inst.settings
    n, D, W = len(inst.layers), len(devices), len(widths)
    first, last = decode_contexts(s)
    shape = (n, D, W)
    pre, dec, dec_first, dec_last = (np.full(shape, math.inf) for _ in range(4))
    for i in range(n):
        name = inst.layers[i].name
        for d, dev in enumerate(devices):
            measured = s.measured.get(dev.name)
            for w, bits in enumerate(widths):
                if not runs[d, w]:
                    continue
                if measured is not None and measured.weight_bits == bits and name in measured.parts:
                    pre[i, d, w] = measured.prefill_ms(name, s.prompt_tokens)
                    alpha, beta = measured.decode_line(name)
                    lines = (0.0, 0.0, alpha, beta)  # max(0, alpha + beta c)
                else:
                    pre[i, d, w] = prefill_ms(inst, i, dev, bits)
                    lines = decode_lines(inst, i, dev, bits)
                dec[i, d, w] = mean_decode_ms(lines, first, last)
                dec_first[i, d, w] = decode_step_ms(lines, first)
                dec_last[i, d, w] = decode_step_ms(lines, last)
    kv_token = np.array([kv_elements(inst, i) * s.kv_bits for i in range(n)], dtype=np.int64)
    error = np.zeros((n, W))
    if s.error_budget is not None:
        for i, layer in enumerate(inst.layers):
            for w, bits in enumerate(widths):
                error[i, w] = layer.weight_error.get(bits, 0.0) if layer.weights else 0.0
    return dict(
        prefill_ms=pre, decode_ms=dec, decode_first_ms=dec_first, decode_last_ms=dec_last,
        weight_bits=np.array([[int(layer.weights) * w for w in widths] for layer in inst.layers],
                             dtype=np.int64).reshape(n, W),
        kv_bits=kv_token * s.context_limit * s.streams, kv_token_bits=kv_token,
        activation_bits=np.array([activation_bits(inst, i) for i in range(n)], dtype=np.int64), error=error)


def _link_tables(inst: Instance[LlmSettings], devices: list[Device]) -> dict[str, np.ndarray]:
    """The link tables: per boundary and pair of devices the prefill, decode and busy
    times; per pair the ring's return of the sampled token."""
    s = inst.settings
    n, D = len(inst.layers), len(devices)
    prefill, decode, busy = (np.full((n + 1, D, D), math.inf) for _ in range(3))
    back, back_busy = np.full((D, D), math.inf), np.full((D, D), math.inf)
    token = token_bits(inst)
    for a, src in enumerate(devices):
        for b, dst in enumerate(devices):
            if a == b:
                back[a, b] = back_busy[a, b] = 0.0  # one device: the token stays where it is
                continue
            link = inst.link_between.get((src.name, dst.name))
            if link is None:
                continue
            back[a, b], back_busy[a, b] = link_ms(inst, link, token), link_ms(inst, link, token, latency=False)
            for k in range(1, n):
                hidden = inst.layers[k - 1].output_elements * s.activation_bits
                prefill[k, a, b] = link_ms(inst, link, s.prompt_tokens * hidden)
                decode[k, a, b] = link_ms(inst, link, hidden)
                busy[k, a, b] = link_ms(inst, link, hidden, latency=False)
    return dict(link_prefill_ms=prefill, link_decode_ms=decode, link_busy_ms=busy, return_ms=back,
                return_busy_ms=back_busy)


def identical_pairs(inst: Instance[LlmSettings], d: LlmData) -> list[tuple[int, int]]:
    """Pairs of usable devices (in instance order, each with the next one like it) that no
    plan can tell apart: equal specifications and link tables, neither pinned."""
    def same(a: int, b: int) -> bool:
        da, db = inst.device_by_name[d.devices[a]], inst.device_by_name[d.devices[b]]
        if (da.mac_per_s, da.offchip_bytes_per_s, da.memory_bytes, da.bit_widths) != \
                (db.mac_per_s, db.offchip_bytes_per_s, db.memory_bytes, db.bit_widths) or a in d.pins or b in d.pins:
            return False
        others = [c for c in range(d.D) if c not in (a, b)]
        for t in (d.link_prefill_ms, d.link_decode_ms, d.link_busy_ms, d.return_ms[None], d.return_busy_ms[None]):
            if not (np.array_equal(t[:, a, others], t[:, b, others]) and np.array_equal(t[:, others, a], t[:, others, b])
                    and np.array_equal(t[:, a, b], t[:, b, a])):
                return False
        return True

    pairs = []
    for a in range(d.D):
        b = next((b for b in range(a + 1, d.D) if same(a, b)), None)
        if b is not None:
            pairs.append((a, b))
    return pairs


def twins(inst: Instance[LlmSettings], d: LlmData, widths: Sequence[int] | None = None) -> dict[int, int]:
    """``{e': e}`` for each pair of :func:`identical_pairs` (``e`` the earlier): the dynamic
    program builds only plans where ``e'`` joins after ``e`` (``dp.pipeline_table``);
    where ``widths`` (per device) are given, only pairs that run the same width."""
    return {b: a for a, b in identical_pairs(inst, d) if widths is None or widths[a] == widths[b]}
