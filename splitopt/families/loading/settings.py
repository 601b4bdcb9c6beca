"""What the loading family declares before any of its data is touched: its settings (the
inference device and ``settings.loading``, with its JSON Schema) and its plan format. Imports nothing heavy, so that
listing the families (``splitopt solvers``, ``splitopt schema``) loads no numpy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from splitopt.core.instance import Instance
from splitopt.core.ranges import MAX_MS, MAX_RATE, MIN_RATE
from splitopt.core.settings import FamilySettings
from splitopt.families.settings_fields import device_name, schema_of, unused_schema

SETTINGS_KEY = "loading"
PLAN_FORMAT = "splitopt-loading-plan/1"
OPTION_KEYS = ("threads", "children", "trainable_tail", "weight_bits", "child_fixed_ms", "thread_bytes_per_s",
               "storage_bytes_per_s", "block_load_ms", "reference_plans")
#: the most threads and children an instance may ask for (a schedule of 1024 loads)
MAX_THREADS = 1024
MAX_CHILDREN = 1024

_TIME = {"type": "number", "minimum": 0, "maximum": MAX_MS}
_RATE = {"type": "number", "minimum": MIN_RATE, "maximum": MAX_RATE}

SETTINGS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": "Problem loading: threads, bounds on the number of child models, the trainable tail and the "
                   "loading model (formulations/loading_balance.md).",
    "required": ["threads", "thread_bytes_per_s"],
    "additionalProperties": False,
    "properties": {
        "threads": {"type": "integer", "minimum": 1, "maximum": MAX_THREADS,
                    "description": "T: hardware threads loading child models in parallel."},
        "children": {"type": "object", "additionalProperties": False,
                     "properties": {"min": {"type": "integer", "minimum": 1, "maximum": MAX_CHILDREN},
                                    "max": {"type": "integer", "minimum": 1, "maximum": MAX_CHILDREN}},
                     "description": "Bounds on k, the number of child models (default 1 .. min(threads, blocks))."},
        "trainable_tail": {"type": "integer", "minimum": 0,
                           "description": "m: the last m blocks are trainable and must sit in the last child."},
        "weight_bits": {"type": "integer", "minimum": 1, "maximum": 64,
                        "description": "Stored bits per weight element (default 32)."},
        "child_fixed_ms": dict(_TIME, description="Fixed cost of loading one child model (ms): open, "
                                                  "deserialise, build."),
        "thread_bytes_per_s": dict(_RATE, description="One thread's read and deserialise rate (bytes/s)."),
        "storage_bytes_per_s": {"oneOf": [_RATE, {"type": "null"}],
                                "description": "Rate the storage gives all threads together (bytes/s; null: no cap)."},
        "block_load_ms": {"type": "object", "additionalProperties": _TIME,
                          "description": "Measured read time of a block (layer) on one thread alone, without the "
                                         "per-child fixed cost (ms)."},
        "reference_plans": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"},
                                                                       "minItems": 1},
                            "description": "Published cut positions: name -> the first block of each child."},
    },
}


@dataclass(frozen=True)
class LoadingSettings(FamilySettings):
    """``edge``: the device that loads the child models and runs inference; ``loading``: the
    options object (``SETTINGS_SCHEMA``; parsed and checked by
    ``splitopt.families.loading.data``)."""

    edge: str
    loading: Mapping[str, Any] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        **schema_of("edge", edge="The device that loads the child models and runs inference."),
        SETTINGS_KEY: SETTINGS_SCHEMA,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("edge",)
    UNUSED: ClassVar[Mapping[str, Any]] = unused_schema(
        "problem 'loading'", "cloud", "edge_memory_bytes", "error_budget", "bit_widths", "cloud_bits",
        "transmit_bits", "edge_required")
    MAPPING_FIELDS: ClassVar[tuple[str, ...]] = (SETTINGS_KEY,)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Any]) -> "LoadingSettings":
        return cls(edge=device_name(raw, "edge", devices, "loading"), loading=dict(raw.get(SETTINGS_KEY, {})))


#: an instance of the loading family, its settings typed (what the family's functions take)
LoadingInstance = Instance[LoadingSettings]
