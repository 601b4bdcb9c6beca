"""The base of every problem family's settings object (``Instance.settings``).

An instance's ``settings`` object in JSON holds ``problem``, ``objective`` and the keys of
the problem's family; the core reads the first two (``Instance.problem``,
``Instance.objective``) and hands the rest to the family's settings class, a frozen
dataclass deriving from :class:`FamilySettings` that declares:

* its fields (what the family decides under which limits, in the units its docstring states);
* ``SCHEMA``: the JSON Schema of each key it reads from ``settings`` (composed with the core
  schema and the other families' into the one published document,
  ``splitopt.api.instance_schema``), ``REQUIRED``: the keys that must be present, and
  ``UNUSED``: keys it accepts and does not use (settings that other problems define and that
  instance files of this problem may carry; accepted so that such files load, never
  written back);
* :meth:`FamilySettings.from_json` / :meth:`FamilySettings.to_json`: its JSON form (defaults
  resolved against the devices, e.g. a memory limit of null meaning a device's memory).

The core relies on two properties only, both about precision: :attr:`reference_bits` (the
bits per value of a layer that runs at the reference precision) and :attr:`transmit_bits`
(the bits per value at which a layer's output crosses between devices, None: the bits it
was produced at). Everything else is the family's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, TypeVar

from splitopt.core.built_types import check_mapping, check_sequence, store_as_tuples
from splitopt.core.errors import InvalidInstance

#: the keys of the ``settings`` object the core itself reads
CORE_KEYS = ("problem", "objective")

#: the default reference precision (bits per value) of a family that states none
DEFAULT_REFERENCE_BITS = 16

S = TypeVar("S", bound="FamilySettings")


def _json_value(value: Any) -> Any:
    """A field's value in JSON form: tuples as lists, mappings as dicts (recursively)."""
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class FamilySettings:
    """A problem family's settings: the limits and choices its problems read. Subclasses
    are frozen dataclasses; see the module docstring for what they declare."""

    #: JSON Schema of each ``settings`` key the family reads (``problem`` and ``objective``
    #: are the core's)
    SCHEMA: ClassVar[Mapping[str, Any]] = {}
    #: the keys that must be present in JSON
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    #: JSON Schema of keys accepted and not used by this family (never written back)
    UNUSED: ClassVar[Mapping[str, Any]] = {}
    #: fields stored as tuples (lists given in Python are converted, as the parser does)
    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ()
    #: tuple fields of integers stored sorted (bit-width sets)
    SORTED_FIELDS: ClassVar[tuple[str, ...]] = ()
    #: fields holding a JSON object (a family's nested options), kept as given
    MAPPING_FIELDS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        store_as_tuples(self, *self.TUPLE_FIELDS, sort=self.SORTED_FIELDS)

    # ----- JSON form ---------------------------------------------------------------------
    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The JSON Schema of the whole ``settings`` object of this family's problems (the
        core keys, this family's and the unused ones; no other key)."""
        properties: dict[str, Any] = {key: {} for key in CORE_KEYS}
        properties.update({k: dict(v) for k, v in cls.UNUSED.items()})
        properties.update({k: dict(v) for k, v in cls.SCHEMA.items()})
        return {"type": "object", "required": ["problem", *cls.REQUIRED], "additionalProperties": False,
                "properties": properties}

    @classmethod
    def from_json(cls: type[S], raw: Mapping[str, Any], devices: Mapping[str, Any]) -> S:
        """The settings from the instance's ``settings`` object (already checked against
        :meth:`schema`; it holds ``problem``) and its devices (name -> ``Device``). The default takes each field
        from the key of the same name (absent: the field's default); families whose
        defaults depend on the devices override it."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        """The family's keys of the ``settings`` object (what :meth:`from_json` reads back);
        a nested options object that is empty is left out."""
        return {f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.name in self.MAPPING_FIELDS and not getattr(self, f.name))}

    def replaced(self: S, **changes: Any) -> S:
        """A copy with some fields replaced; InvalidInstance naming an unknown one. The
        values are checked when the instance holding the copy is next prepared."""
        known = [f.name for f in dataclasses.fields(self)]
        for key in changes:
            if key not in known:
                raise InvalidInstance(f"instance.settings.{key}: not a setting of this problem "
                                      f"(settings: {', '.join(['problem', 'objective', *known])})")
        return dataclasses.replace(self, **changes)

    # ----- settings built in Python -------------------------------------------------------
    def check_built_types(self) -> None:
        """InvalidInstance unless the container fields have their declared kinds (settings
        built in Python; scalars are judged by the schema on the JSON form)."""
        for name in self.TUPLE_FIELDS:
            check_sequence(getattr(self, name), f"instance.settings.{name}")
        for name in self.MAPPING_FIELDS:
            check_mapping(getattr(self, name), f"instance.settings.{name}")

    def check_built(self, problem: str, devices: Mapping[str, Any]) -> None:
        """The checks :meth:`from_json` runs against the devices (references to unknown
        devices, ...), on settings built in Python for ``problem``; InvalidInstance names
        the field."""
        type(self).from_json({"problem": problem, **self.to_json()}, devices)

    def describe(self) -> str:
        """A few words on the settings for one-line summaries (e.g. the devices the problem
        starts and ends on); empty by default."""
        return ""

    # ----- what the core reads ---------------------------------------------------------------
    @property
    def reference_bits(self) -> int:
        """Bits per value of a layer run at the reference precision (weights and
        activations; the precision whose quantization error is zero)."""
        return DEFAULT_REFERENCE_BITS

    @property
    def transmit_bits(self) -> int | None:
        """Bits per value at which a layer's output is sent between devices (None: the bits
        it was produced at)."""
        return None

    def bit_widths_named(self) -> tuple[int, ...]:
        """Every bit-width these settings let a value take (for the range checks of
        ``splitopt.core.ranges``)."""
        out = [self.reference_bits]
        if self.transmit_bits is not None:
            out.append(self.transmit_bits)
        return tuple(out)
