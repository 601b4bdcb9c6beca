"""Settings keys that several families read, each with one JSON Schema and one parser.

The families that place a layer graph on devices name some of the same things: the device
where the input arrives (``edge``; a mesh's source, a multi-view reference sensor) and the
one that delivers the result (``cloud``; a mesh's sink, the aggregator), the reference
precision (``cloud_bits``), the precision of sent outputs (``transmit_bits``), a memory
limit on the first device (``edge_memory_bytes``), layers pinned to it (``edge_required``),
the candidate edge bit-widths (``bit_widths``) and the error budget (``error_budget``).
Each family's settings module picks the keys it reads from here (``SCHEMA``), lists those
it accepts without using them (``UNUSED``), and parses them with the functions below, so a
key means the same and reads the same everywhere. Imports nothing heavy.
"""

from __future__ import annotations

from typing import Any, Mapping

from splitopt.core.errors import InvalidInstance

#: the JSON Schema of each shared key (``$ref``s point into the core schema's ``$defs``)
FIELD_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "edge": {"$ref": "#/$defs/identifier",
             "description": "The device where the input arrives: the edge device (split problems), the mesh's source, "
                            "the reference sensor (multiview), the device that runs inference (loading)."},
    "cloud": {"$ref": "#/$defs/identifier",
              "description": "The device that delivers the result: the cloud (split problems), the mesh's sink, the "
                             "aggregator (multiview)."},
    "edge_memory_bytes": {"oneOf": [{"$ref": "#/$defs/memory"}, {"type": "null"}],
                          "description": "Limit on the edge device's weights + peak activation working set (bytes); "
                                         "null: the edge device's memory_bytes."},
    "error_budget": {"oneOf": [{"type": "number", "minimum": 0, "maximum": 1e9}, {"type": "null"}],
                     "description": "Limit on the summed quantization error of the edge layers; null: none."},
    "bit_widths": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"$ref": "#/$defs/bits"},
                   "description": "Candidate edge bit-widths of split_bits (a subset of the edge device's); default: "
                                  "the edge device's."},
    "cloud_bits": {"$ref": "#/$defs/bits",
                   "description": "The reference precision (bits per value) with zero quantization error: cloud "
                                  "layers, and every layer where no bit-width is chosen; default 16."},
    "edge_required": {"type": "array", "uniqueItems": True, "items": {"$ref": "#/$defs/identifier"},
                      "description": "Layers that must run on the edge device (with all their ancestors), e.g. so "
                                     "that the raw input never leaves it."},
    "transmit_bits": {"oneOf": [{"$ref": "#/$defs/bits"}, {"type": "null"}],
                      "description": "Bits per value of every sent layer output; null: the bits it was produced at."},
}


def schema_of(*keys: str, **descriptions: str) -> dict[str, Any]:
    """The JSON Schema of ``keys`` (a family's ``SCHEMA`` or ``UNUSED``); ``descriptions``
    replace a key's description with what it means in the family."""
    out: dict[str, Any] = {}
    for key in keys:
        out[key] = dict(FIELD_SCHEMAS[key])
        if key in descriptions:
            out[key]["description"] = descriptions[key]
    return out


def unused_schema(problem_text: str, *keys: str) -> dict[str, Any]:
    """The JSON Schema of shared keys a family accepts and does not use (instance files of
    its problems may carry them), each described so."""
    return {key: {**FIELD_SCHEMAS[key], "description": f"Not used by {problem_text}; accepted and ignored."}
            for key in keys}


def device_name(raw: Mapping[str, Any], key: str, devices: Mapping[str, Any], problem: str) -> str:
    """The device named by ``settings.<key>``: required, and one of ``devices``
    (InvalidInstance naming the field otherwise)."""
    if key not in raw:
        raise InvalidInstance(f"instance.settings.{key}: required for problem '{problem}'")
    name = raw[key]
    if name not in devices:
        raise InvalidInstance(f"instance.settings.{key}: unknown device '{name}' "
                              f"(devices: {', '.join(sorted(devices))})")
    return name


def memory_limit(raw: Mapping[str, Any], device: Any) -> float:
    """``settings.edge_memory_bytes`` in bytes; absent or null: ``device.memory_bytes``."""
    value = raw.get("edge_memory_bytes")
    return float(device.memory_bytes if value is None else value)


def optional_float(raw: Mapping[str, Any], key: str) -> float | None:
    """A number that may be null (e.g. ``error_budget``), as a float."""
    value = raw.get(key)
    return None if value is None else float(value)
