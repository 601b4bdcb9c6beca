"""The multi-view family's settings (problem ``multiview``): the reference sensor and the
aggregator, the sensors' memory limit, the precisions, the layers pinned to the sensors and
the multi-view options (sensors, fusion and cut candidates, Conv-Reduce widths, measured
accuracies). Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from splitopt.core.instance import Instance
from splitopt.core.settings import FamilySettings
from splitopt.families.settings_fields import (device_name, memory_limit, optional_float, schema_of,
                                               unused_schema)

#: the JSON Schema of ``settings.multiview`` (its fields are checked by the family's data module)
OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": "Problem multiview: sensors, fusion and cut candidates, Conv-Reduce widths, measured "
                   "accuracies, min_accuracy (checked by splitopt.families.multiview; formulations/multiview_bus.md).",
}


@dataclass(frozen=True)
class MultiviewSettings(FamilySettings):
    """``edge``: the reference sensor (one of the sensors; used in reports); ``cloud``: the
    aggregator; ``edge_memory_bytes``: the sensors' memory limit (bytes; each sensor's is the
    smaller of it and its own ``memory_bytes``); ``error_budget``: must be None (every layer
    runs at ``cloud_bits``); ``cloud_bits``: the precision of every layer; ``transmit_bits``:
    bits per value of sent outputs (None: ``cloud_bits``); ``edge_required``: layers every
    sensor must run; ``multiview``: the options object, parsed by
    ``splitopt.families.multiview.data``."""

    edge: str
    cloud: str
    edge_memory_bytes: float
    error_budget: float | None = None
    cloud_bits: int = 16
    transmit_bits: int | None = None
    edge_required: tuple[str, ...] = ()
    multiview: Mapping[str, Any] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        **schema_of("edge", "cloud", "edge_memory_bytes", "error_budget", "cloud_bits", "transmit_bits",
                    "edge_required",
                    edge="The reference sensor (one of settings.multiview.sensors).",
                    cloud="The aggregator, which fuses the views and runs the rest.",
                    edge_memory_bytes="The sensors' memory limit (bytes; each sensor's is the smaller of it and its "
                                      "memory_bytes); null: the reference sensor's memory_bytes.",
                    error_budget="Not used by problem 'multiview' (every layer runs at cloud_bits): null.",
                    cloud_bits="The precision of every layer (bits per value).",
                    edge_required="Layers every sensor must run (with their ancestors)."),
        "multiview": OPTIONS_SCHEMA,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("edge", "cloud")
    UNUSED: ClassVar[Mapping[str, Any]] = unused_schema("problem 'multiview'", "bit_widths")
    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ("edge_required",)
    MAPPING_FIELDS: ClassVar[tuple[str, ...]] = ("multiview",)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Any]) -> "MultiviewSettings":
        edge = device_name(raw, "edge", devices, "multiview")
        cloud = device_name(raw, "cloud", devices, "multiview")
        return cls(edge=edge, cloud=cloud, edge_memory_bytes=memory_limit(raw, devices[edge]),
                   error_budget=optional_float(raw, "error_budget"), cloud_bits=int(raw.get("cloud_bits", 16)),
                   transmit_bits=raw.get("transmit_bits"), edge_required=tuple(raw.get("edge_required", ())),
                   multiview=dict(raw.get("multiview", {})))

    def describe(self) -> str:
        return f"reference sensor '{self.edge}', aggregator '{self.cloud}'"

    @property
    def reference_bits(self) -> int:
        return self.cloud_bits


#: an instance of the multiview family, its settings typed (what the family's functions take)
MultiviewInstance = Instance[MultiviewSettings]
