"""A per-layer plan: the device of every layer and its weight and activation bit-widths,
the plan type of the families that place layers with bit-widths (``splitopt.families``),
and the reading of the ``layers`` object that every per-layer plan format shares.

JSON form (``splitopt-plan/1``; what ``splitopt solve --json`` prints under ``plan`` and
``splitopt evaluate`` reads)::

    {"format": "splitopt-plan/1", "instance": "resnet50_eyeriss",
     "layers": {"conv1": {"device": "eyeriss", "weight_bits": 8, "activation_bits": 6},
                "fc":    {"device": "tpu"}}}

Each family parses and checks it (which devices and bit-widths are allowed).
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.core.instance import Instance
from splitopt.core.jsonfile import cut, json_type, shown

FORMAT = "splitopt-plan/1"


@dataclass(frozen=True)
class Plan:
    """``device[layer]`` for every layer; ``weight_bits``/``activation_bits`` for every
    layer (layers at the reference precision carry it)."""

    device: Mapping[str, str]
    weight_bits: Mapping[str, int]
    activation_bits: Mapping[str, int]

    def layers_on(self, inst: Instance, device: str) -> list[str]:
        """The layers on ``device``, in execution order."""
        return [l.name for l in inst.layers if self.device[l.name] == device]

    def key(self) -> tuple:
        """Hashable identity, for comparing plans."""
        return tuple(sorted((n, self.device[n], self.weight_bits[n], self.activation_bits[n]) for n in self.device))

    # ----- JSON ------------------------------------------------------------------------
    def to_dict(self, inst: Instance, bits_on: str | None = None) -> dict[str, Any]:
        """The JSON form: every layer's device, and the bit-widths of the layers on device
        ``bits_on`` (where a family's plans choose them; the others run at the reference
        precision, which a reader fills in)."""
        layers: dict[str, Any] = {}
        for layer in inst.layers:
            n = layer.name
            entry: dict[str, Any] = {"device": self.device[n]}
            if self.device[n] == bits_on:
                entry["weight_bits"] = self.weight_bits[n]
                entry["activation_bits"] = self.activation_bits[n]
            layers[n] = entry
        return {"format": FORMAT, "instance": inst.name, "layers": layers}


#: the top-level fields of a per-layer plan document
DOCUMENT_FIELDS = ("format", "instance", "layers")


def check_plan_header(data: Any, instance_name: str, where: str, fmt: str,
                      fields: tuple[str, ...] | None = None) -> None:
    """A plan document must be an object in format ``fmt`` (when it names one) made for
    the instance ``instance_name`` (when it names one), with no top-level field outside
    ``fields`` (when given: a field of another problem's plans is refused rather than
    ignored); raises InvalidPlan naming the field."""
    if not isinstance(data, dict):
        raise InvalidPlan(f"{where}: the top level must be a JSON object (a plan), got {json_type(data)}")
    if data.get("format", fmt) != fmt:
        raise InvalidPlan(f"{where}.format: expected '{fmt}' (the plans of this instance's problem), "
                          f"got {shown(data.get('format'))}")
    named = data.get("instance", instance_name)
    if named != instance_name:
        raise InvalidPlan(f"{where}.instance: the plan is for instance {shown(named)}, not '{instance_name}'")
    if fields is not None:
        for key in data:
            if key not in fields:
                raise InvalidPlan(f"{where}.{cut(key)}: not a field of this problem's plans "
                                  f"(fields: {', '.join(fields)})")
    # informational fields (the evaluator recomputes the objective): typed, not compared
    value = data.get("objective_ms")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value)):
        raise InvalidPlan(f"{where}.objective_ms: must be a finite number or null (informational; the "
                          f"evaluator recomputes it), got {shown(value)}")
    if data.get("note") is not None and not isinstance(data["note"], str):
        raise InvalidPlan(f"{where}.note: must be a string or null, got {shown(data['note'])}")


def plan_layers(inst: Instance, data: Any, where: str = "plan", fmt: str = FORMAT,
                fields: tuple[str, ...] = DOCUMENT_FIELDS) -> dict[str, dict[str, Any]]:
    """The ``layers`` object of a plan in format ``fmt`` (default ``splitopt-plan/1``)
    whose top level has only ``fields``, checked to name only the instance's layers, each
    with an object holding a string ``device`` (a bare device name is accepted for an
    entry); raises InvalidPlan naming the field."""
    check_plan_header(data, inst.name, where, fmt, fields)
    layers = data.get("layers")
    if not isinstance(layers, dict):
        raise InvalidPlan(f"{where}.layers: must be an object mapping layer name to its placement, "
                          f"got {json_type(layers) if 'layers' in data else 'nothing'}")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in layers.items():
        if name not in inst.layer_by_name:
            raise InvalidPlan(f"{where}.layers.{cut(name)}: unknown layer (instance '{inst.name}' has no such layer)")
        if isinstance(entry, str):
            entry = {"device": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("device"), str):
            raise InvalidPlan(f"{where}.layers.{name}: must be an object with a 'device' name (string), "
                              f"got {shown(entry)}")
        out[name] = entry
    for layer in inst.layers:
        if layer.name not in out:
            raise InvalidPlan(f"{where}.layers: layer '{layer.name}' is missing")
    return out


def check_known_layers(inst: Instance, names: Iterable[str], where: str = "plan") -> None:
    """InvalidPlan naming the first of ``names`` (a plan object's layer keys) that is not
    a layer of ``inst``: a plan built for another instance is refused, not evaluated on
    the layers the two share."""
    for name in names:
        if name not in inst.layer_by_name:
            raise InvalidPlan(f"{where}.layers.{cut(str(name))}: unknown layer (instance '{inst.name}' has no "
                              "such layer)")


def check_plan_fields(entry: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """Refuse fields a family's plans do not have (e.g. bit-widths in a mesh plan), so
    that nothing in a plan file is silently ignored."""
    for key in entry:
        if key not in allowed:
            raise InvalidPlan(f"{where}.{cut(key)}: not a field of this problem's plans (fields: {', '.join(allowed)})")
