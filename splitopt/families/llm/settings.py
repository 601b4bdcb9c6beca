"""The llm family's settings (problem ``llm``): the decoder's shape (``model``), the
scenario (prompt, generated tokens, context limit, concurrent streams), the precisions
(weight bit-widths to choose from, KV cache and activation bits), the topology (a chain
or a ring), the user's limits (devices not to use, layer ranges pinned to a device, an
error budget over the weight bit-widths) and the times measured on a device, where a
profile measured them (``measured``: :mod:`splitopt.families.llm.measured`). Imports
nothing heavy.

Layers of an llm instance are the model's parts in execution order, each reading the one
before it; three ops have a meaning here (``formulations/llm.md``): ``embedding`` (reads
one row of its table per token), ``block`` (a decoder block: attention over the context
and a KV cache) and ``head`` (the output head: during prefill only the last position's
logits are computed). Any other op is a plain per-token layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.jsonfile import shown
from splitopt.core.ranges import MAX_TOTAL_MS
from splitopt.core.settings import FamilySettings
from splitopt.families.llm.measured import MEASURED_SCHEMA, MeasuredTimes
from splitopt.families.settings_fields import optional_float, schema_of, unused_schema

PROBLEM = "llm"
PROBLEM_TEXT = "problem 'llm'"
PLAN_FORMAT = "splitopt-llm-plan/1"
#: the topologies: a chain (the sampled token's way back to the first device is not a
#: link of the instance) or a ring (the last device sends it back over a link each step)
TOPOLOGIES = ("chain", "ring")
#: bits per element of the KV cache the model takes
KV_BITS = (4, 8, 16, 32)
#: the precision whose quantization error is zero (bf16/fp16 checkpoints)
REFERENCE_BITS = 16
#: the largest context, prompt and generation (tokens) and streams an instance may ask for:
#: sizes and times stay within the ranges the programs represent exactly
MAX_TOKENS = 2**24
MAX_STREAMS = 2**16
#: the largest tokens/s floor an instance may ask for (a time per token of 1 ns)
MAX_TOKENS_PER_S = 1e9

_TOKENS = {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS}
_COUNT = {"type": "integer", "minimum": 1, "maximum": 2**20}

MODEL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": "The decoder's shape, from its config.json: attention heads, KV heads, head dimension, the "
                   "longest context it was trained for, whether the head shares the embedding's matrix, and the "
                   "weights a mixture-of-experts block reads per token.",
    "required": ["attention_heads", "kv_heads", "head_dim"],
    "additionalProperties": False,
    "properties": {
        "attention_heads": dict(_COUNT, description="Query heads per block (num_attention_heads)."),
        "kv_heads": dict(_COUNT, description="Key/value heads per block (num_key_value_heads); each block caches "
                                             "2 x kv_heads x head_dim elements per token."),
        "head_dim": dict(_COUNT, description="Elements per head (hidden_size / num_attention_heads unless the "
                                             "config says otherwise)."),
        "max_context": {"oneOf": [_TOKENS, {"type": "null"}],
                        "description": "The longest context the model takes (max_position_embeddings); null: no "
                                       "limit."},
        "tied_embeddings": {"type": "boolean",
                            "description": "The head's matrix is the embedding's (tie_word_embeddings): a device "
                                           "that runs both holds it once."},
        "active_weights": {"type": "object",
                           "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 2**44},
                           "description": "Layer name -> weights it reads per generated token where that is not "
                                          "all of them (a mixture-of-experts block: its active experts); default: "
                                          "all (one row for an embedding)."},
    },
}


@dataclass(frozen=True)
class DecoderShape:
    """The decoder's shape: ``attention_heads`` and ``kv_heads`` per block, ``head_dim``
    (elements per head), ``max_context`` (tokens; None: no limit), ``tied_embeddings``
    (the head reads the embedding's matrix), ``active_weights`` (layer -> weights read per
    generated token, where not all of them)."""

    attention_heads: int
    kv_heads: int
    head_dim: int
    max_context: int | None = None
    tied_embeddings: bool = False
    active_weights: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "DecoderShape":
        return cls(attention_heads=int(raw["attention_heads"]), kv_heads=int(raw["kv_heads"]),
                   head_dim=int(raw["head_dim"]), max_context=raw.get("max_context"),
                   tied_embeddings=bool(raw.get("tied_embeddings", False)),
                   active_weights={str(k): int(v) for k, v in raw.get("active_weights", {}).items()})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attention_heads": self.attention_heads, "kv_heads": self.kv_heads,
                               "head_dim": self.head_dim, "max_context": self.max_context,
                               "tied_embeddings": self.tied_embeddings}
        if self.active_weights:
            out["active_weights"] = dict(self.active_weights)
        return out

    @property
    def kv_elements_per_token(self) -> int:
        """Elements one block caches per token: keys and values, ``2 x kv_heads x head_dim``."""
        return 2 * self.kv_heads * self.head_dim

    @property
    def attention_macs_per_position(self) -> int:
        """MACs one block's attention spends per token per context position: scores
        (``q . k``) and the weighted sum of values, ``2 x attention_heads x head_dim``."""
        return 2 * self.attention_heads * self.head_dim


#: the limits on time an instance may set (settings fields)
TIME_LIMITS = ("ttft_limit_ms", "min_tokens_per_s")
#: the limit on the measure each objective minimises
OWN_LIMIT = {"ttft": "ttft_limit_ms", "throughput": "min_tokens_per_s"}


@dataclass(frozen=True)
class LlmSettings(FamilySettings):
    """See the module docstring and ``SCHEMA``. Tokens are counts; ``error_budget`` bounds
    the summed ``weight_error`` of every layer at its device's bit-width (None: none);
    ``ttft_limit_ms`` bounds the time to first token (ms) and ``min_tokens_per_s`` the
    pipeline's tokens/s over all streams from below (None: no limit), whatever the
    objective."""

    model: DecoderShape
    prompt_tokens: int = 512
    generated_tokens: int = 128
    context_limit: int = 640
    streams: int = 1
    topology: str = "chain"
    bit_widths: tuple[int, ...] = (REFERENCE_BITS,)
    kv_bits: int = 16
    activation_bits: int = 16
    error_budget: float | None = None
    ttft_limit_ms: float | None = None
    min_tokens_per_s: float | None = None
    exclude: tuple[str, ...] = ()
    pins: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    measured: Mapping[str, MeasuredTimes] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "model": MODEL_SCHEMA,
        "prompt_tokens": dict(_TOKENS, description="P: tokens of the prompt, prefilled at once (one stream)."),
        "generated_tokens": dict(_TOKENS, description="G: tokens generated per stream (the first comes from the "
                                                      "prefill, the other G - 1 from decode steps)."),
        "context_limit": {"oneOf": [_TOKENS, {"type": "null"}],
                          "description": "C: tokens of context each stream's KV cache holds (at least P + G; "
                                         "null: P + G)."},
        "streams": {"type": "integer", "minimum": 1, "maximum": MAX_STREAMS,
                    "description": "S: concurrent streams (sequences) the pipeline holds; each has its KV cache."},
        "topology": {"enum": list(TOPOLOGIES),
                     "description": "chain: stages in a line; ring: the last device also sends the sampled token "
                                    "back to the first over a link, every step."},
        **schema_of("bit_widths", "error_budget",
                    bit_widths="Weight bit-widths a device may run its layers at (one per device, among those it "
                               "supports); default [16].",
                    error_budget="Limit on the summed weight_error of every layer at its device's bit-width; "
                                 "null: none."),
        "kv_bits": {"enum": list(KV_BITS), "description": "Bits per element of the KV cache (default 16)."},
        "activation_bits": {"$ref": "#/$defs/bits",
                            "description": "Bits per element of the hidden states held and sent (default 16)."},
        "ttft_limit_ms": {"oneOf": [{"type": "number", "minimum": 0, "maximum": MAX_TOTAL_MS}, {"type": "null"}],
                          "description": "Limit on the time to first token (ms), whatever the objective; null: none."},
        "min_tokens_per_s": {"oneOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TOKENS_PER_S},
                                       {"type": "null"}],
                             "description": "Least tokens/s of the pipeline over all streams (objective throughput's "
                                            "measure: at most 1000 / it ms per token), whatever the objective; null: "
                                            "none."},
        "exclude": {"type": "array", "uniqueItems": True, "items": {"$ref": "#/$defs/identifier"},
                    "description": "Devices not to use."},
        "pins": {"type": "object",
                 "additionalProperties": {"type": "array", "minItems": 2, "maxItems": 2,
                                          "items": {"$ref": "#/$defs/identifier"}},
                 "description": "Device -> [first layer, last layer]: layers the device must run (its range "
                                "holds them)."},
        "measured": MEASURED_SCHEMA,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("model",)
    UNUSED: ClassVar[Mapping[str, Any]] = unused_schema(PROBLEM_TEXT, "edge", "cloud", "edge_memory_bytes",
                                                        "cloud_bits", "transmit_bits", "edge_required")
    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ("bit_widths", "exclude")
    SORTED_FIELDS: ClassVar[tuple[str, ...]] = ("bit_widths",)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Any]) -> "LlmSettings":
        prompt, generated = int(raw.get("prompt_tokens", 512)), int(raw.get("generated_tokens", 128))
        context = raw.get("context_limit")
        settings = cls(
            model=DecoderShape.from_json(raw["model"]),
            prompt_tokens=prompt,
            generated_tokens=generated,
            context_limit=prompt + generated if context is None else int(context),
            streams=int(raw.get("streams", 1)),
            topology=str(raw.get("topology", "chain")),
            bit_widths=tuple(sorted(int(b) for b in raw.get("bit_widths", (REFERENCE_BITS,)))),
            kv_bits=int(raw.get("kv_bits", 16)),
            activation_bits=int(raw.get("activation_bits", 16)),
            error_budget=optional_float(raw, "error_budget"),
            ttft_limit_ms=optional_float(raw, "ttft_limit_ms"),
            min_tokens_per_s=optional_float(raw, "min_tokens_per_s"),
            exclude=tuple(raw.get("exclude", ())),
            pins={str(d): (str(r[0]), str(r[1])) for d, r in raw.get("pins", {}).items()},
            measured={str(d): MeasuredTimes.from_json(m) for d, m in raw.get("measured", {}).items()},
        )
        settings.check_devices(devices)
        return settings

    def check_devices(self, devices: Mapping[str, Any]) -> None:
        """The devices the settings name exist (InvalidInstance naming the field)."""
        for i, name in enumerate(self.exclude):
            if name not in devices:
                raise InvalidInstance(f"instance.settings.exclude[{i}]: unknown device {shown(name)} "
                                      f"(devices: {', '.join(sorted(devices))})")
        for name in self.pins:
            if name not in devices:
                raise InvalidInstance(f"instance.settings.pins.{name}: unknown device (devices: "
                                      f"{', '.join(sorted(devices))})")
        for name in self.measured:
            if name not in devices:
                raise InvalidInstance(f"instance.settings.measured.{name}: unknown device (devices: "
                                      f"{', '.join(sorted(devices))})")

    def to_json(self) -> dict[str, Any]:
        out = {"model": self.model.to_json(), "prompt_tokens": self.prompt_tokens,
               "generated_tokens": self.generated_tokens, "context_limit": self.context_limit,
               "streams": self.streams, "topology": self.topology, "bit_widths": list(self.bit_widths),
               "kv_bits": self.kv_bits, "activation_bits": self.activation_bits, "error_budget": self.error_budget,
               "exclude": list(self.exclude), "pins": {d: list(r) for d, r in self.pins.items()}}
        if self.measured:
            out["measured"] = {d: m.to_json() for d, m in self.measured.items()}
        # the limits on time where set (an instance without them reads and writes as before)
        for key in ("ttft_limit_ms", "min_tokens_per_s"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def describe(self) -> str:
        limits = "".join(f", {text}" for text in self.limit_texts())
        return (f"{self.topology}, prompt {self.prompt_tokens} + {self.generated_tokens} tokens, context "
                f"{self.context_limit}, {self.streams} stream{'s' if self.streams != 1 else ''}{limits}")

    @property
    def ms_per_token_limit(self) -> float | None:
        """The most ms per token of the pipeline ``min_tokens_per_s`` allows (None: no limit)."""
        return None if self.min_tokens_per_s is None else 1000.0 / self.min_tokens_per_s

    @property
    def has_time_limits(self) -> bool:
        """Whether a limit on the time to first token or on the tokens/s is set."""
        return self.ttft_limit_ms is not None or self.min_tokens_per_s is not None

    def limit_texts(self) -> list[str]:
        """The time limits that are set, in words."""
        out = []
        if self.ttft_limit_ms is not None:
            out.append(f"time to first token at most {self.ttft_limit_ms:g} ms")
        if self.min_tokens_per_s is not None:
            out.append(f"at least {self.min_tokens_per_s:g} tokens/s")
        return out

    @property
    def reference_bits(self) -> int:
        return REFERENCE_BITS

    @property
    def transmit_bits(self) -> int | None:
        return self.activation_bits

    def bit_widths_named(self) -> tuple[int, ...]:
        return (*super().bit_widths_named(), *self.bit_widths, self.kv_bits)
