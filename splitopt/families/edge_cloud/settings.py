"""The edge/cloud family's settings (problems ``split`` and ``split_bits``): which device is
the edge and which the cloud, the edge's memory limit, the error budget, the candidate
bit-widths and the reference precision. What the family derives from them is in
``data.py``. Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Device, Instance
from splitopt.core.settings import FamilySettings
from splitopt.families.settings_fields import device_name, memory_limit, optional_float, schema_of


@dataclass(frozen=True)
class EdgeCloudSettings(FamilySettings):
    """``edge_memory_bytes`` bounds edge weight bytes plus the peak activation working set
    (bytes); ``error_budget`` bounds the summed quantization error of edge layers (None: no
    bound); ``bit_widths`` are the candidate edge bit-widths of the ``split_bits`` problem;
    ``cloud_bits`` is the reference precision (cloud layers, and every layer in the float
    ``split`` problem); ``transmit_bits`` (None: the producer's activation bit-width) is the
    precision of transmitted layer outputs; ``edge_required`` lists layers that must run on
    the edge (their ancestors follow by closure)."""

    edge: str
    cloud: str
    edge_memory_bytes: float
    error_budget: float | None
    bit_widths: tuple[int, ...]
    cloud_bits: int = 16
    transmit_bits: int | None = None
    edge_required: tuple[str, ...] = ()

    SCHEMA: ClassVar[Mapping[str, Any]] = schema_of(
        "edge", "cloud", "edge_memory_bytes", "error_budget", "bit_widths", "cloud_bits", "transmit_bits",
        "edge_required", edge="The edge device (runs the first part of the network).",
        cloud="The cloud device (runs the rest; must differ from edge).")
    REQUIRED: ClassVar[tuple[str, ...]] = ("edge", "cloud")
    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ("bit_widths", "edge_required")
    SORTED_FIELDS: ClassVar[tuple[str, ...]] = ("bit_widths",)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], devices: Mapping[str, Device]) -> "EdgeCloudSettings":
        problem = raw["problem"]
        edge = device_name(raw, "edge", devices, problem)
        cloud = device_name(raw, "cloud", devices, problem)
        return cls(
            edge=edge,
            cloud=cloud,
            edge_memory_bytes=memory_limit(raw, devices[edge]),
            error_budget=optional_float(raw, "error_budget"),
            bit_widths=tuple(sorted(raw.get("bit_widths", devices[edge].bit_widths))),
            cloud_bits=int(raw.get("cloud_bits", 16)),
            transmit_bits=raw.get("transmit_bits"),
            edge_required=tuple(raw.get("edge_required", ())),
        )

    def check_built(self, problem: str, devices: Mapping[str, Any]) -> None:
        if self.edge_memory_bytes is None:
            raise InvalidInstance("instance.settings.edge_memory_bytes: must be a number of bytes in an instance "
                                  "built in Python (None is resolved to the edge device's memory_bytes only when "
                                  "parsing JSON)")
        super().check_built(problem, devices)

    def describe(self) -> str:
        return f"edge '{self.edge}', cloud '{self.cloud}'"

    @property
    def reference_bits(self) -> int:
        return self.cloud_bits

    def bit_widths_named(self) -> tuple[int, ...]:
        return (*super().bit_widths_named(), *self.bit_widths)


#: an instance of the edge/cloud family, its settings typed (what the family's functions take)
EdgeCloudInstance = Instance[EdgeCloudSettings]
