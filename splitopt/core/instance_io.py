"""The instance's JSON form: parse (schema and consistency checks), serialise, save.

``splitopt.loading`` is the entry point that reads files (and the peer formats) and runs
the family's checks; this module knows only the core model (``splitopt.core.instance``).
"""

from __future__ import annotations

import json
import re
import math
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.jsonfile import cut, json_type, shown
from splitopt.core.instance import Bus, Device, InputTensor, Instance, Layer, Link, Settings, checked_elsewhere
from splitopt.core.ranges import check_ranges

FORMAT = "splitopt-instance/1"


def _json_path(path) -> str:
    out = "instance"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


#: the Python types of JSON values (tuples: what a caller may build for an array)
_JSON_TYPES = (dict, list, tuple, str, int, float, bool, type(None))


def _reject_non_json(value: Any, path: str) -> None:
    """InvalidInstance naming the field of the first value that is not a finite JSON
    value: NaN, infinity, or a Python object JSON has no form for (a complex number, a
    set, bytes: reachable through the API, where the schema's number type would take a
    complex number and a later comparison would fail)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInstance(f"{path}: must be a finite number, got {value}")
    if not isinstance(value, _JSON_TYPES):
        raise InvalidInstance(f"{path}: must be a JSON value (number, string, boolean, null, array or object), "
                              f"got a Python {type(value).__name__}")
    if isinstance(value, dict):
        for k, v in value.items():
            _reject_non_json(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _reject_non_json(v, f"{path}[{i}]")


#: the settings the core parses itself (others are families' settings objects)
CORE_SETTINGS = ("problem", "objective", "edge", "cloud", "edge_memory_bytes", "error_budget", "bit_widths", "cloud_bits",
                 "edge_required", "transmit_bits", "chain", "mesh", "multiview")


def core_schema() -> dict[str, Any]:
    """The JSON Schema of the instance format without the families' parts (a fresh copy;
    ``splitopt.loading.instance_schema`` completes it with every registered family's
    problem names and settings)."""
    text = resources.files("splitopt.core").joinpath("schema/instance.schema.json").read_text()
    return json.loads(text)


#: how a bound broken by a number is said
_BOUNDS = {"maximum": "at most", "minimum": "at least", "exclusiveMinimum": "greater than",
           "exclusiveMaximum": "less than"}


def _narrowest(err):
    """For a ``oneOf``/``anyOf`` error, the one alternative whose type matched (e.g. a
    number above its maximum rather than "not null"), else the error itself."""
    while err.validator in ("oneOf", "anyOf") and err.context:
        typed = [e for e in err.context if e.validator != "type"]
        if len(typed) != 1:
            break
        err = typed[0]
    return err


def schema_holds(data: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``data`` meets ``schema`` by ``jsonschema-rs`` (compiled: about 35x faster
    than ``jsonschema`` on a 1,500-layer instance, 0.11 s against 3.9 s); False where it
    finds a violation or cannot tell (data it cannot convert), and :func:`check_schema` then
    asks ``jsonschema``, whose error it reports. Formats are not asserted, as ``jsonschema``
    does not by default. Its regular expressions are stricter than Python's (``$`` does
    not match before a final newline), so it never accepts what ``jsonschema`` rejects;
    ``tests/test_instance_validation.py`` checks that on mutated instances."""
    import jsonschema_rs

    try:
        return bool(jsonschema_rs.validator_for(dict(schema), validate_formats=False).is_valid(data))
    except (ValueError, TypeError, OverflowError, jsonschema_rs.ValidationError):
        return False


def check_schema(data: Any, schema: Mapping[str, Any]) -> None:
    """Raise InvalidInstance naming the first violation of ``schema`` (field and value)."""
    _reject_non_json(data, "instance")
    if schema_holds(data, schema):
        return
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        err = _narrowest(errors[0])
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = sorted(err.schema.get("properties", {}))
            patterns = list(err.schema.get("patternProperties", {}))
            extra = sorted(k for k in err.instance if k not in known and not any(re.search(p, k) for p in patterns))
            if extra:
                allowed = ", ".join(known + [f"keys matching {p}" for p in patterns])
                raise InvalidInstance(f"{_json_path(list(err.absolute_path) + [cut(str(extra[0]))])}: unknown field "
                                      f"(fields: {allowed})")
        if err.validator in _BOUNDS:
            raise InvalidInstance(f"{_json_path(err.absolute_path)}: must be {_BOUNDS[err.validator]} "
                                  f"{err.validator_value:.17g}, got {shown(err.instance)} (README 'Ranges')")
        raise InvalidInstance(f"{_json_path(err.absolute_path)}: {cut(err.message.splitlines()[0], 200)} "
                              f"(got {cut(json.dumps(err.instance, default=lambda v: f'{type(v).__name__}({v!r})'))})")


def parse_instance_data(data: Any, schema: Mapping[str, Any]) -> Instance:
    """Build an Instance from JSON-like data checked against ``schema`` and for the
    consistency every family relies on; raises InvalidInstance on any defect. The
    family's own checks are not run here (``splitopt.loading.parse_instance`` runs both)."""
    check_schema(data, schema)
    g = data["graph"]
    inputs = tuple(InputTensor(t["name"], tuple(t["shape"]), t["bits"]) for t in g["inputs"])
    layers = tuple(_parse_layer(i, raw) for i, raw in enumerate(g["layers"]))
    devices = tuple(
        Device(
            name=d["name"],
            mac_per_s=float(d["mac_per_s"]),
            offchip_bytes_per_s=None if d["offchip_bytes_per_s"] is None else float(d["offchip_bytes_per_s"]),
            onchip_bytes=float(d["onchip_bytes"]),
            memory_bytes=float(d["memory_bytes"]),
            bit_widths=tuple(sorted(d["bit_widths"])),
            description=d.get("description", ""),
        )
        for d in data["devices"]
    )
    buses = tuple(
        Bus(b["name"], float(b["bandwidth_bits_per_s"]), b.get("mode", "serial")) for b in data.get("buses", [])
    )
    bus_names = {b.name for b in buses}
    links = []
    for i, l in enumerate(data["links"]):
        bus = l.get("bus")
        if bus is not None and bus not in bus_names:
            raise InvalidInstance(f"instance.links[{i}].bus: unknown bus '{bus}' (buses: {', '.join(sorted(bus_names)) or 'none'})")
        if bus is None and "bandwidth_bits_per_s" not in l:
            raise InvalidInstance(f"instance.links[{i}]: 'bandwidth_bits_per_s' is required for a link on no bus")
        rate = float(l["bandwidth_bits_per_s"]) if "bandwidth_bits_per_s" in l else float("nan")
        links.append(Link(l["source"], l["target"], rate, float(l.get("latency_ms", 0.0)), bus))
    links = tuple(links)
    s = dict(data["settings"])
    dev_names = {d.name for d in devices}
    chain = tuple(s.get("chain", ()))
    for i, name in enumerate(chain):
        if name not in dev_names:
            raise InvalidInstance(
                f"instance.settings.chain[{i}]: unknown device '{name}' (devices: {', '.join(sorted(dev_names))})"
            )
    if chain:  # a line of devices: the input arrives at the first, the result leaves the last
        s.setdefault("edge", chain[0])
        s.setdefault("cloud", chain[-1])
    for key in ("edge", "cloud"):
        if key not in s:
            raise InvalidInstance(f"instance.settings.{key}: required for problem '{s['problem']}'")
        if s[key] not in dev_names:
            raise InvalidInstance(
                f"instance.settings.{key}: unknown device '{s[key]}' (devices: {', '.join(sorted(dev_names))})"
            )
    edge = next(d for d in devices if d.name == s["edge"])
    memory = s.get("edge_memory_bytes")
    settings = Settings(
        problem=s["problem"],
        edge=s["edge"],
        cloud=s["cloud"],
        edge_memory_bytes=float(edge.memory_bytes if memory is None else memory),
        error_budget=None if s.get("error_budget") is None else float(s["error_budget"]),
        bit_widths=tuple(sorted(s.get("bit_widths", edge.bit_widths))),
        cloud_bits=int(s.get("cloud_bits", 16)),
        transmit_bits=s.get("transmit_bits"),
        objective=s.get("objective", "latency"),
        edge_required=tuple(s.get("edge_required", ())),
        chain=chain,
        mesh=dict(s.get("mesh", {})),
        multiview=dict(s.get("multiview", {})),
        family_settings={key: dict(value) for key, value in s.items()
                         if key not in CORE_SETTINGS and isinstance(value, dict)},
    )
    with checked_elsewhere():  # checked here: the schema above, consistency and ranges below
        inst = Instance(
            name=data["name"],
            inputs=inputs,
            layers=layers,
            devices=devices,
            links=links,
            settings=settings,
            description=data.get("description", ""),
            source=data.get("source", {}),
            buses=buses,
        )
    _check_consistency(inst)
    check_ranges(inst)
    return inst


def check_built(inst: Instance, schema: Mapping[str, Any]) -> None:
    """The checks of :func:`parse_instance_data` on an instance built in Python (not
    parsed from JSON): its fields' types, then its JSON form (:func:`to_dict`) against
    ``schema``, the references to devices and buses, consistency and ranges, in the
    parser's order and with its messages. InvalidInstance (one line naming the field and
    value) on any defect; the family's checks are the caller's
    (``splitopt.api``)."""
    _check_built_types(inst)
    check_schema(to_dict(inst), schema)
    s = inst.settings
    dev_names = {d.name for d in inst.devices}
    bus_names = {b.name for b in inst.buses}
    for i, link in enumerate(inst.links):
        if link.bus is not None and link.bus not in bus_names:
            raise InvalidInstance(f"instance.links[{i}].bus: unknown bus '{link.bus}' "
                                  f"(buses: {', '.join(sorted(bus_names)) or 'none'})")
    for i, name in enumerate(s.chain):
        if name not in dev_names:
            raise InvalidInstance(
                f"instance.settings.chain[{i}]: unknown device '{name}' (devices: {', '.join(sorted(dev_names))})"
            )
    for key in ("edge", "cloud"):
        if getattr(s, key) not in dev_names:
            raise InvalidInstance(f"instance.settings.{key}: unknown device '{getattr(s, key)}' "
                                  f"(devices: {', '.join(sorted(dev_names))})")
    if s.edge_memory_bytes is None:
        raise InvalidInstance("instance.settings.edge_memory_bytes: must be a number of bytes in an instance built in "
                              "Python (None is resolved to the edge device's memory_bytes only when parsing JSON)")
    _check_consistency(inst)
    check_ranges(inst)


def _kind(value: Any) -> str:
    """How a Python value is named in a message: its JSON type, or its class."""
    kind = json_type(value)
    return f"{kind} {shown(value)}" if kind in ("string", "number", "boolean") else type(value).__name__


def _sequence(value: Any, where: str, item: type | None = None) -> None:
    """InvalidInstance unless ``value`` is a tuple or list (of ``item`` instances)."""
    if not isinstance(value, (tuple, list)):
        raise InvalidInstance(f"{where}: must be a tuple or list, got {_kind(value)}")
    if item is not None:
        for i, x in enumerate(value):
            if not isinstance(x, item):
                raise InvalidInstance(f"{where}[{i}]: must be a {item.__name__} (splitopt.core.instance), "
                                      f"got {_kind(x)}")


def _mapping(value: Any, where: str, keys: type = str) -> None:
    """InvalidInstance unless ``value`` is a mapping whose keys are ``keys`` instances."""
    if not isinstance(value, Mapping):
        raise InvalidInstance(f"{where}: must be a mapping (dict), got {_kind(value)}")
    for key in value:
        if not isinstance(key, keys) or isinstance(key, bool):
            what = "bit-widths (int)" if keys is int else "strings"
            raise InvalidInstance(f"{where}: keys must be {what}, got {_kind(key)}")


def _check_built_types(inst: Instance) -> None:
    """The container fields of an instance built in Python have the types the model
    declares (scalars are the schema's to judge, on the JSON form)."""
    if not isinstance(inst.settings, Settings):
        raise InvalidInstance(f"instance.settings: must be a Settings (splitopt.core.instance), got {_kind(inst.settings)}")
    _sequence(inst.inputs, "instance.graph.inputs", InputTensor)
    _sequence(inst.layers, "instance.graph.layers", Layer)
    _sequence(inst.devices, "instance.devices", Device)
    _sequence(inst.links, "instance.links", Link)
    _sequence(inst.buses, "instance.buses", Bus)
    _mapping(inst.source, "instance.source")
    for i, t in enumerate(inst.inputs):
        _sequence(t.shape, f"instance.graph.inputs[{i}].shape")
    for i, layer in enumerate(inst.layers):
        where = f"instance.graph.layers[{i}]"
        for name in ("inputs", "output_shape", "fused"):
            _sequence(getattr(layer, name), f"{where}.{name}")
        for name in ("weight_error", "activation_error"):
            _mapping(getattr(layer, name), f"{where}.{name}", keys=int)
        _mapping(layer.latency_ms, f"{where}.latency_ms")
    for i, d in enumerate(inst.devices):
        _sequence(d.bit_widths, f"instance.devices[{i}].bit_widths")
    s = inst.settings
    for name in ("bit_widths", "edge_required", "chain"):
        _sequence(getattr(s, name), f"instance.settings.{name}")
    for name in ("mesh", "multiview"):
        _mapping(getattr(s, name), f"instance.settings.{name}")
    _mapping(s.family_settings, "instance.settings (family_settings)")
    for key, value in s.family_settings.items():
        _mapping(value, f"instance.settings.{key}")


def _parse_layer(index: int, raw: Mapping[str, Any]) -> Layer:
    def table(key: str) -> dict[int, float]:
        return {int(b): float(v) for b, v in raw.get(key, {}).items()}

    return Layer(
        name=raw["name"],
        op=raw["op"],
        inputs=tuple(raw["inputs"]),
        macs=float(raw["macs"]),
        weights=float(raw["weights"]),
        output_shape=tuple(raw["output_shape"]),
        weight_error=table("weight_error"),
        activation_error=table("activation_error"),
        latency_ms=dict(raw.get("latency_ms", {})),
        fused=tuple(raw.get("fused", ())),
    )


def _check_consistency(inst: Instance) -> None:
    import networkx as nx

    where = "instance.graph"
    names: dict[str, str] = {}
    for i, t in enumerate(inst.inputs):
        if t.name in names:
            raise InvalidInstance(f"{where}.inputs[{i}].name: duplicate name '{t.name}'")
        names[t.name] = "input"
    for i, layer in enumerate(inst.layers):
        if layer.name in names:
            raise InvalidInstance(f"{where}.layers[{i}].name: duplicate name '{layer.name}'")
        names[layer.name] = "layer"
    for i, layer in enumerate(inst.layers):
        if not layer.inputs:
            raise InvalidInstance(f"{where}.layers[{i}].inputs: layer '{layer.name}' has no inputs")
        for src in layer.inputs:
            if src not in names:
                raise InvalidInstance(
                    f"{where}.layers[{i}].inputs: layer '{layer.name}' reads unknown tensor '{src}' (dangling edge)"
                )
    # cycles before order, so that a cycle is reported as such
    g = inst.graph
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        raise InvalidInstance(f"{where}.layers: the layer graph has a cycle: {path}")
    pos = inst.position
    for i, layer in enumerate(inst.layers):
        for src in layer.inputs:
            if src in pos and pos[src] >= i:
                raise InvalidInstance(
                    f"{where}.layers[{i}]: layer '{layer.name}' is listed before its input '{src}'; "
                    "layers must be listed in an execution (topological) order"
                )
    unused = [t.name for t in inst.inputs if not inst.consumers[t.name]]
    if unused:
        raise InvalidInstance(f"{where}.inputs: input '{unused[0]}' is read by no layer")

    seen: set[str] = set()
    for i, d in enumerate(inst.devices):
        if d.name in seen:
            raise InvalidInstance(f"instance.devices[{i}].name: duplicate name '{d.name}'")
        seen.add(d.name)
    for i, link in enumerate(inst.links):
        for end in ("source", "target"):
            if getattr(link, end) not in inst.device_by_name:
                raise InvalidInstance(f"instance.links[{i}].{end}: unknown device '{getattr(link, end)}'")
    for i, link in enumerate(inst.links):
        if link.source == link.target:
            raise InvalidInstance(f"instance.links[{i}]: link from device '{link.source}' to itself")
    seen_pairs: set[tuple[str, str]] = set()
    for i, link in enumerate(inst.links):
        if (link.source, link.target) in seen_pairs:
            raise InvalidInstance(f"instance.links[{i}]: a second link from '{link.source}' to '{link.target}'")
        seen_pairs.add((link.source, link.target))
    seen_buses: set[str] = set()
    for i, bus in enumerate(inst.buses):
        if bus.name in seen_buses:
            raise InvalidInstance(f"instance.buses[{i}].name: duplicate name '{bus.name}'")
        seen_buses.add(bus.name)


def to_dict(inst: Instance) -> dict[str, Any]:
    """The JSON form of an instance (inverse of parse_instance)."""

    def layer_dict(layer: Layer) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": layer.name,
            "op": layer.op,
            "inputs": list(layer.inputs),
            "macs": layer.macs,
            "weights": layer.weights,
            "output_shape": list(layer.output_shape),
        }
        if layer.weight_error:
            out["weight_error"] = {str(b): v for b, v in sorted(layer.weight_error.items())}
        if layer.activation_error:
            out["activation_error"] = {str(b): v for b, v in sorted(layer.activation_error.items())}
        if layer.latency_ms:
            out["latency_ms"] = dict(layer.latency_ms)
        if layer.fused:
            out["fused"] = list(layer.fused)
        return out

    s = inst.settings
    data: dict[str, Any] = {
        "format": FORMAT,
        "name": inst.name,
        "description": inst.description,
        "source": dict(inst.source),
        "graph": {
            "inputs": [{"name": t.name, "shape": list(t.shape), "bits": t.bits} for t in inst.inputs],
            "layers": [layer_dict(layer) for layer in inst.layers],
        },
        "devices": [
            {
                "name": d.name,
                "description": d.description,
                "mac_per_s": d.mac_per_s,
                "offchip_bytes_per_s": d.offchip_bytes_per_s,
                "onchip_bytes": d.onchip_bytes,
                "memory_bytes": d.memory_bytes,
                "bit_widths": list(d.bit_widths),
            }
            for d in inst.devices
        ],
        "links": [
            {"source": l.source, "target": l.target, "bandwidth_bits_per_s": l.bandwidth_bits_per_s, "latency_ms": l.latency_ms}
            for l in inst.links
        ],
        "settings": {
            "problem": s.problem,
            "objective": s.objective,
            "edge": s.edge,
            "cloud": s.cloud,
            "edge_memory_bytes": s.edge_memory_bytes,
            "error_budget": s.error_budget,
            "bit_widths": list(s.bit_widths),
            "cloud_bits": s.cloud_bits,
            "transmit_bits": s.transmit_bits,
            "edge_required": list(s.edge_required),
        },
    }
    if s.chain:
        data["settings"]["chain"] = list(s.chain)
    if s.mesh:
        data["settings"]["mesh"] = dict(s.mesh)
    if s.multiview:
        data["settings"]["multiview"] = dict(s.multiview)
    for key, value in s.family_settings.items():
        data["settings"][key] = dict(value)
    if inst.buses:
        data["buses"] = [{"name": b.name, "bandwidth_bits_per_s": b.bandwidth_bits_per_s, "mode": b.mode} for b in inst.buses]
    for entry, link in zip(data["links"], inst.links):
        if link.bus is not None:
            entry["bus"] = link.bus
            del entry["bandwidth_bits_per_s"]
    return data


def instance_json(inst: Instance) -> str:
    """The JSON text of an instance file."""
    return json.dumps(to_dict(inst), indent=1) + "\n"


def save_instance(inst: Instance, path: str | Path) -> None:
    """Write ``inst`` as JSON to ``path``."""
    Path(path).write_text(instance_json(inst))
