"""Type checks of objects built in Python rather than parsed from JSON (an ``Instance(...)``
and its settings): containers of the declared kinds, named in one line. Scalars are left to
the JSON Schema, which judges the object's JSON form.
"""

from __future__ import annotations

from typing import Any, Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.jsonfile import json_type, shown


def kind_of(value: Any) -> str:
    """How a Python value is named in a message: its JSON type, or its class."""
    kind = json_type(value)
    return f"{kind} {shown(value)}" if kind in ("string", "number", "boolean") else type(value).__name__


def check_sequence(value: Any, where: str, item: type | None = None) -> None:
    """InvalidInstance unless ``value`` is a tuple or list (of ``item`` instances)."""
    if not isinstance(value, (tuple, list)):
        raise InvalidInstance(f"{where}: must be a tuple or list, got {kind_of(value)}")
    if item is not None:
        for i, x in enumerate(value):
            if not isinstance(x, item):
                raise InvalidInstance(f"{where}[{i}]: must be a {item.__name__} (splitopt.core.instance), "
                                      f"got {kind_of(x)}")


def check_mapping(value: Any, where: str, keys: type = str) -> None:
    """InvalidInstance unless ``value`` is a mapping whose keys are ``keys`` instances."""
    if not isinstance(value, Mapping):
        raise InvalidInstance(f"{where}: must be a mapping (dict), got {kind_of(value)}")
    for key in value:
        if not isinstance(key, keys) or isinstance(key, bool):
            what = "bit-widths (int)" if keys is int else "strings"
            raise InvalidInstance(f"{where}: keys must be {what}, got {kind_of(key)}")


def store_as_tuples(obj: Any, *names: str, sort: tuple[str, ...] = ()) -> None:
    """Store list fields ``names`` of a frozen dataclass as tuples (as the parser does),
    sorted for ``sort`` when they hold integers only; other values are left for the
    build check to report."""
    for name in names:
        value = getattr(obj, name)
        if name in sort and isinstance(value, (list, tuple)) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            value = tuple(sorted(value))
        elif isinstance(value, list):
            value = tuple(value)
        else:
            continue
        object.__setattr__(obj, name, value)
