"""What the separable family declares before any of its data is touched: its settings key,
the JSON Schema of ``settings.separable`` and its plan format. Imports nothing heavy, so
that listing the families (``splitopt solvers``, ``splitopt schema``) loads no numpy."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from splitopt.core.instance import Instance
from splitopt.core.ranges import MAX_MS
from splitopt.core.settings import FamilySettings
from splitopt.families.settings_fields import unused_schema

SETTINGS_KEY = "separable"
PLAN_FORMAT = "splitopt-separable-plan/1"
OPTION_KEYS = ("devices", "alpha", "stem_layers", "head_layers", "head_device", "levels", "dtypes", "mixing",
               "min_intensive_steps", "byte_budget_bytes", "latency_budget_ms", "accuracy", "min_accuracy",
               "ring_accuracy", "reference_policies")
#: bytes per element of each transmission dtype
DTYPE_BYTES = {"float32": 4, "float16": 2}
#: the most devices (G) and sparsity levels (K) an instance may ask for: G! permutations
#: per step grow fast; programs stay small to G = 16
MAX_GROUP_DEVICES = 16
MAX_LEVELS = 101
REQUIREMENT_KEYS = ("mixing", "min_intensive_steps", "max_float16_steps", "min_level", "max_level")

_COUNT = {"type": "integer", "minimum": 0, "maximum": 1_000_000}

def level_percents(min_percent: float, count: int) -> tuple[float, ...]:
    """The ``count`` sparsity levels in % of the channels: ``min_percent + k (100 -
    min_percent) / (count - 1)`` (the paper's Table 4, which divides by ``K - 1`` where its
    Eq. 10 divides by ``K``); one level: 100 %."""
    if count == 1:
        return (100.0,)
    return tuple(min_percent + k * (100.0 - min_percent) / (count - 1) for k in range(count))


def channels_sent(channels: int, percent: float) -> int:
    """N_send (Eq. 10): the first ``floor(channels * percent / 100)`` channels."""
    return int(math.floor(channels * percent / 100.0 + 1e-9))


SETTINGS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": "Problem separable: a separable (grouped) network over G devices and its per-step communication "
                   "policy (formulations/separable_policies.md).",
    "additionalProperties": False,
    "properties": {
        "devices": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                    "maxItems": MAX_GROUP_DEVICES,
                    "description": "The G devices in index order (device 0 first; default: every device of the "
                                   "instance, in file order)."},
        "alpha": {"type": "integer", "minimum": 1, "maximum": 1_000_000,
                  "description": "Staleness factor: one transmission step per alpha blocks (default 1)."},
        "stem_layers": {"type": "integer", "minimum": 0,
                        "description": "Leading layers every device runs whole (default 1)."},
        "head_layers": {"type": "integer", "minimum": 0,
                        "description": "Trailing layers the head device runs on its own features (default 1)."},
        "head_device": {"type": "string", "description": "The device that runs the head (default devices[0])."},
        "levels": {"type": "object", "additionalProperties": False,
                   "properties": {"min_percent": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                                  "count": {"type": "integer", "minimum": 1, "maximum": MAX_LEVELS}},
                   "description": "Sparsification: K levels from min_percent to 100 % of the channels (paper "
                                  "Table 4: min_percent 50, count 9; default: one level, 100 %)."},
        "dtypes": {"type": "array", "items": {"enum": list(DTYPE_BYTES)}, "minItems": 1, "uniqueItems": True,
                   "description": "Transmission dtypes allowed (default [\"float32\"])."},
        "mixing": {"type": "boolean",
                   "description": "Every device's features must reach every other device by the last step."},
        "min_intensive_steps": dict(_COUNT, description="Steps at which every device sends (a derangement): at "
                                                         "least this many."),
        "byte_budget_bytes": {"oneOf": [{"type": "number", "minimum": 0, "maximum": 2.0**62}, {"type": "null"}],
                              "description": "Limit on the bytes sent over all steps (null: none)."},
        "latency_budget_ms": {"oneOf": [{"type": "number", "minimum": 0, "maximum": MAX_MS}, {"type": "null"}],
                              "description": "Limit on the latency (null: none)."},
        "accuracy": {"type": "array", "items": {
            "type": "object", "required": ["accuracy"], "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "accuracy": {"type": "number", "minimum": 0, "maximum": 1},
                           "mixing": {"type": "boolean"}, "min_intensive_steps": _COUNT,
                           "max_float16_steps": _COUNT, "min_level": _COUNT, "max_level": _COUNT}},
            "description": "Measured accuracy records: a policy meeting a record's requirements is credited with "
                           "its accuracy (the best record it meets)."},
        "min_accuracy": {"oneOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}],
                         "description": "The policy must meet a record of at least this accuracy (null: none)."},
        "ring_accuracy": {"oneOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}],
                          "description": "The measured accuracy of the unseparated model (the ring all-reduce plan; "
                                         "null: not measured, so the ring plan meets no min_accuracy)."},
        "reference_policies": {"type": "object", "additionalProperties": {"type": "array"},
                               "description": "Published policies: name -> per step a Table 3 choice id, or "
                                              "[choice id, level], or a step object."},
    },
}


@dataclass(frozen=True)
class SeparableSettings(FamilySettings):
    """``separable``: the options object (``SETTINGS_SCHEMA``: the devices of the group,
    alpha, sparsity levels, dtypes, budgets, accuracy records; parsed and checked by
    ``splitopt.families.separable.data``)."""

    separable: Mapping[str, Any] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {SETTINGS_KEY: SETTINGS_SCHEMA}
    UNUSED: ClassVar[Mapping[str, Any]] = unused_schema(
        "problem 'separable'", "edge", "cloud", "edge_memory_bytes", "error_budget", "bit_widths", "cloud_bits",
        "transmit_bits", "edge_required")
    MAPPING_FIELDS: ClassVar[tuple[str, ...]] = (SETTINGS_KEY,)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Any]) -> "SeparableSettings":
        return cls(separable=dict(raw.get(SETTINGS_KEY, {})))


#: an instance of the separable family, its settings typed (what the family's functions take)
SeparableInstance = Instance[SeparableSettings]
