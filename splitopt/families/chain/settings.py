"""The chain family's settings (problem ``chain``): the devices in chain order, the
reference precision every layer runs at and the precision of sent outputs. Imports nothing
heavy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Instance
from splitopt.core.jsonfile import shown
from splitopt.core.settings import FamilySettings
from splitopt.families.settings_fields import schema_of, unused_schema

PROBLEM_TEXT = "problem 'chain'"


@dataclass(frozen=True)
class ChainSettings(FamilySettings):
    """``chain``: device names in chain order (the input arrives at the first, the result
    leaves the last); ``cloud_bits``: the precision of every layer (bits per value);
    ``transmit_bits``: bits per value of sent layer outputs (None: ``cloud_bits``)."""

    chain: tuple[str, ...]
    cloud_bits: int = 16
    transmit_bits: int | None = None

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "chain": {"type": "array", "minItems": 2, "uniqueItems": True, "items": {"$ref": "#/$defs/identifier"},
                  "description": "Device names in chain order, e.g. UE, small cell, macro cell, cloud."},
        **schema_of("cloud_bits", "transmit_bits", cloud_bits="The precision of every layer (bits per value)."),
        **schema_of("edge", "cloud", "edge_memory_bytes", "edge_required",
                    edge="The first chain device, where the input arrives (optional; must be chain[0]).",
                    cloud="The last chain device (optional; must be the last of chain).",
                    edge_memory_bytes="Not a setting of problem 'chain' (each device's memory_bytes limits it); "
                                      "accepted only as null or the first device's memory_bytes.",
                    edge_required="Not a setting of problem 'chain'; accepted only empty."),
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("chain",)
    UNUSED: ClassVar[Mapping[str, Any]] = unused_schema(PROBLEM_TEXT, "error_budget", "bit_widths")
    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ("chain",)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Any]) -> "ChainSettings":
        chain = tuple(raw["chain"])
        for i, name in enumerate(chain):
            if name not in devices:
                raise InvalidInstance(f"instance.settings.chain[{i}]: unknown device '{name}' "
                                      f"(devices: {', '.join(sorted(devices))})")
        _check_named_ends(raw, chain, devices)
        return cls(chain=chain, cloud_bits=int(raw.get("cloud_bits", 16)), transmit_bits=raw.get("transmit_bits"))

    def describe(self) -> str:
        return "chain " + " -> ".join(f"'{d}'" for d in self.chain)

    @property
    def reference_bits(self) -> int:
        return self.cloud_bits

    @property
    def first(self) -> str:
        """The first chain device (where the input arrives)."""
        return self.chain[0]


#: an instance of the chain family, its settings typed (what the family's functions take)
ChainInstance = Instance[ChainSettings]


def _check_named_ends(raw: Mapping[str, Any], chain: tuple[str, ...], devices: Mapping[str, Any]) -> None:
    """Keys other problems define, which a chain instance may carry only as what the chain
    itself says: ``edge`` the first device, ``cloud`` the last, ``edge_memory_bytes`` null or
    the first device's memory, ``edge_required`` empty."""
    edge = raw.get("edge", chain[0])
    if edge != chain[0]:
        raise InvalidInstance(f"instance.settings.edge: {shown(edge)} must be the first chain device '{chain[0]}' "
                              "(where the input arrives)")
    cloud = raw.get("cloud")
    if cloud is not None and cloud != chain[-1]:
        raise InvalidInstance(f"instance.settings.cloud: {shown(cloud)} is not the last chain device '{chain[-1]}'; "
                              "problem 'chain' reads the line from settings.chain (omit cloud or name the last device)")
    memory = raw.get("edge_memory_bytes")
    if memory is not None and float(memory) != devices[chain[0]].memory_bytes:
        raise InvalidInstance(f"instance.settings.edge_memory_bytes: {float(memory):g}: not a setting of problem "
                              "'chain' (each device's memory_bytes limits it)")
    if raw.get("edge_required"):
        raise InvalidInstance("instance.settings.edge_required: not defined for problem 'chain'")
