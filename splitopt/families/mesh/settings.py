"""The mesh family's settings (problem ``mesh``): the source and sink devices, the source's
memory limit, the precisions, and the mesh options (routing, output delivery). Imports
nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Instance
from splitopt.core.settings import FamilySettings
from splitopt.families.settings_fields import device_name, memory_limit, schema_of, unused_schema

#: the JSON Schema of ``settings.mesh``
OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "routing": {"enum": ["shortest", "direct"],
                    "description": "shortest: fewest hops over the links (breadth-first tree); direct: one link only."},
        "deliver_outputs": {"type": "boolean", "description": "final outputs must reach settings.cloud (default true)."},
    },
    "description": "Problem mesh: routing and output delivery (formulations/mesh_schedule.md).",
}


@dataclass(frozen=True)
class MeshSettings(FamilySettings):
    """``edge``: the source device (where the input arrives); ``cloud``: the sink (where
    final outputs are delivered); ``edge_memory_bytes``: a memory limit on the source besides
    its ``memory_bytes`` (bytes); ``cloud_bits``: the precision of every layer (bits per
    value); ``transmit_bits``: bits per value of sent outputs (None: ``cloud_bits``);
    ``mesh``: the options object, parsed by ``splitopt.families.mesh.data.mesh_options``."""

    edge: str
    cloud: str
    edge_memory_bytes: float
    cloud_bits: int = 16
    transmit_bits: int | None = None
    mesh: Mapping[str, Any] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        **schema_of("edge", "cloud", "edge_memory_bytes", "cloud_bits", "transmit_bits",
                    edge="The source device, where the input arrives.",
                    cloud="The sink device, where final outputs are delivered (settings.mesh.deliver_outputs).",
                    edge_memory_bytes="A memory limit on the source device besides its memory_bytes (bytes); null: "
                                      "its memory_bytes.",
                    cloud_bits="The precision of every layer (bits per value)."),
        "edge_required": {**schema_of("edge_required")["edge_required"],
                          "description": "Not a setting of problem 'mesh'; accepted only empty."},
        "mesh": OPTIONS_SCHEMA,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("edge", "cloud")
    UNUSED: ClassVar[Mapping[str, Any]] = unused_schema("problem 'mesh'", "error_budget", "bit_widths")
    MAPPING_FIELDS: ClassVar[tuple[str, ...]] = ("mesh",)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Any]) -> "MeshSettings":
        edge = device_name(raw, "edge", devices, "mesh")
        cloud = device_name(raw, "cloud", devices, "mesh")
        if raw.get("edge_required"):
            raise InvalidInstance("instance.settings.edge_required: not a setting of problem 'mesh'")
        return cls(edge=edge, cloud=cloud, edge_memory_bytes=memory_limit(raw, devices[edge]),
                   cloud_bits=int(raw.get("cloud_bits", 16)), transmit_bits=raw.get("transmit_bits"),
                   mesh=dict(raw.get("mesh", {})))

    def describe(self) -> str:
        return f"source '{self.edge}', sink '{self.cloud}'"

    @property
    def reference_bits(self) -> int:
        return self.cloud_bits


#: an instance of the mesh family, its settings typed (what the family's functions take)
MeshInstance = Instance[MeshSettings]
