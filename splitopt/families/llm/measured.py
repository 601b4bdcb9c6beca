"""Times measured on a device (``settings.measured``), and the fits that turn them into
the cost model's numbers (``formulations/llm.md``, "Measured times"). Imports nothing heavy.

``settings.measured[device]`` holds, for the weight bit-width the parts were run at, per
part the prefill time (ms) at each measured prompt length and the time (ms) of one decode
step at each measured context (a KV cache holding ``c - 1`` positions and the new token:
``c`` positions attended), with how, where and when they were measured. Where a part has
measured times on a device at a bit-width they replace the roofline there:

* prefill at the scenario's prompt length ``P``: piecewise linear through the measured
  points (exact at each); outside the measured lengths, the line through the two nearest
  points extended (one point: that time), never below 0;
* decode: one line ``t(c) = alpha + beta c`` fitted by least squares to the measured
  contexts (exact on affine measurements); a step at context ``c`` takes ``max(0, t(c))``
  inside and outside the measured contexts alike, and the tables hold its mean over the
  scenario's decode steps (:func:`splitopt.families.llm.data.mean_decode_ms`).

Beside the wall times a part may carry the CPU time (ms, the process's) of the same runs
(``prefill_cpu_ms``, ``decode_cpu_ms``): not read by the cost model; a run reports them
beside its own CPU times, so that a gap between measured and predicted wall times can be
told apart into more work (CPU times differ) and waiting for a core (they agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

_TOKENS = {"type": "integer", "minimum": 1, "maximum": 2**24}
_TIMES = {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1e9}}

MEASURED_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": "Device -> times measured on it (splitopt profile of a decoder); where a part has them they "
                   "replace the roofline on that device at weight_bits: prefill interpolated in the prompt length, "
                   "decode from a least-squares line in the context (formulations/llm.md, 'Measured times').",
    "additionalProperties": {
        "type": "object",
        "required": ["weight_bits", "prompt_tokens", "contexts", "parts"],
        "additionalProperties": False,
        "properties": {
            "weight_bits": {"$ref": "#/$defs/bits", "description": "The weight bit-width the parts ran at."},
            "prompt_tokens": {"type": "array", "minItems": 1, "items": _TOKENS,
                              "description": "Prompt lengths of the prefill measurements, increasing."},
            "contexts": {"type": "array", "minItems": 2, "items": _TOKENS,
                         "description": "Contexts (positions attended) of the decode measurements, increasing."},
            "parts": {"type": "object",
                      "additionalProperties": {
                          "type": "object", "required": ["prefill_ms", "decode_ms"], "additionalProperties": False,
                          "properties": {"prefill_ms": dict(_TIMES, description="ms per prompt length."),
                                         "decode_ms": dict(_TIMES, description="ms of one step per context."),
                                         "prefill_cpu_ms": dict(_TIMES, description="CPU ms of the same prefills "
                                                                "(not read by the cost model)."),
                                         "decode_cpu_ms": dict(_TIMES, description="CPU ms of the same decode steps "
                                                               "(not read by the cost model).")}},
                      "description": "Layer name -> its measured times."},
            "how": {"type": "string", "description": "How the times were measured (repeats, statistic, threads)."},
            "where": {"type": "string", "description": "The machine (processor, cores)."},
            "when": {"type": "string", "description": "When (ISO 8601)."},
        },
    },
}


@dataclass(frozen=True)
class MeasuredTimes:
    """One device's measured times (module docstring): ``parts`` maps a layer name to
    ``(prefill_ms per prompt length, decode_ms per context)``; ``cpu_parts`` the same for
    the CPU times, where measured."""

    weight_bits: int
    prompt_tokens: tuple[int, ...]
    contexts: tuple[int, ...]
    parts: Mapping[str, tuple[tuple[float, ...], tuple[float, ...]]] = field(default_factory=dict)
    how: str = ""
    where: str = ""
    when: str = ""
    cpu_parts: Mapping[str, tuple[tuple[float, ...], tuple[float, ...]]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "MeasuredTimes":
        return cls(weight_bits=int(raw["weight_bits"]), prompt_tokens=tuple(int(p) for p in raw["prompt_tokens"]),
                   contexts=tuple(int(c) for c in raw["contexts"]),
                   parts={str(name): (tuple(float(t) for t in v["prefill_ms"]), tuple(float(t) for t in v["decode_ms"]))
                          for name, v in raw["parts"].items()},
                   how=str(raw.get("how", "")), where=str(raw.get("where", "")), when=str(raw.get("when", "")),
                   cpu_parts={str(name): (tuple(float(t) for t in v["prefill_cpu_ms"]),
                                          tuple(float(t) for t in v["decode_cpu_ms"]))
                              for name, v in raw["parts"].items() if "prefill_cpu_ms" in v and "decode_cpu_ms" in v})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"weight_bits": self.weight_bits, "prompt_tokens": list(self.prompt_tokens),
                               "contexts": list(self.contexts),
                               "parts": {name: {"prefill_ms": list(pre), "decode_ms": list(dec)}
                                         for name, (pre, dec) in self.parts.items()}}
        for name, (pre, dec) in self.cpu_parts.items():
            out["parts"][name].update(prefill_cpu_ms=list(pre), decode_cpu_ms=list(dec))
        for key in ("how", "where", "when"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    def prefill_ms(self, part: str, prompt_tokens: int) -> float:
        """The part's prefill (ms) at ``prompt_tokens``: :func:`interpolate`."""
        return interpolate(self.prompt_tokens, self.parts[part][0], prompt_tokens)

    def decode_line(self, part: str) -> tuple[float, float]:
        """``(alpha, beta)``: the part's decode step ``alpha + beta c`` (ms), :func:`affine_fit`."""
        return affine_fit(self.contexts, self.parts[part][1])

    def cpu_ms(self, part: str, prompt_tokens: int, context: float) -> tuple[float, float] | None:
        """``(prefill CPU ms at prompt_tokens, decode step CPU ms at context)`` of the
        part, by the rules of the wall times; None where no CPU times were measured."""
        if part not in self.cpu_parts:
            return None
        pre, dec = self.cpu_parts[part]
        alpha, beta = affine_fit(self.contexts, dec)
        return interpolate(self.prompt_tokens, pre, prompt_tokens), max(0.0, alpha + beta * context)


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise linear through ``(xs[i], ys[i])`` (``xs`` increasing) at ``x``; outside
    ``xs`` the nearest segment's line extended (one point: ``ys[0]``); never below 0."""
    if len(xs) == 1:
        return max(0.0, float(ys[0]))
    k = 1
    while k < len(xs) - 1 and x > xs[k]:
        k += 1
    x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
    return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def affine_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """``(alpha, beta)`` minimising ``sum (alpha + beta x_i - y_i)^2`` (at least two
    distinct ``xs``)."""
    n = len(xs)
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    beta = sxy / sxx
    return my - beta * mx, beta
