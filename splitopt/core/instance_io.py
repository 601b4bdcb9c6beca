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
from typing import Any, Callable, Mapping, Union

from splitopt.core.errors import InvalidInstance
from splitopt.core.built_types import kind_of, check_mapping, check_sequence
from splitopt.core.jsonfile import cut, shown
from splitopt.core.instance import Bus, Device, InputTensor, Instance, Layer, Link, checked_elsewhere
from splitopt.core.ranges import check_ranges
from splitopt.core.settings import FamilySettings

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


#: a JSON Schema, or a function that builds one (called only where it is needed)
SchemaOrBuilder = Union[Mapping[str, Any], Callable[[], Mapping[str, Any]]]


def check_schema(data: Any, schema: SchemaOrBuilder, narrower: Mapping[str, Any] | None = None) -> None:
    """Raise InvalidInstance naming the first violation of ``schema`` (field and value).
    ``narrower``: a schema that only data meeting ``schema`` meets (one family's part of the
    instance schema, which needs that family alone), checked first: where ``data`` meets it,
    ``schema`` (given as a function) is not even built; where not, ``schema`` decides and
    words the violation, as without ``narrower``."""
    _reject_non_json(data, "instance")
    if narrower is not None and schema_holds(data, narrower):
        return
    if callable(schema):
        schema = schema()
    if schema_holds(data, schema):
        return
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        err = _narrowest(errors[0])
        settings = list(err.absolute_path) == ["settings"] and isinstance(err.instance, dict) and \
            isinstance(err.instance.get("problem"), str)  # the settings object: its keys are the family's
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = sorted(err.schema.get("properties", {}))
            patterns = list(err.schema.get("patternProperties", {}))
            extra = sorted(k for k in err.instance if k not in known and not any(re.search(p, k) for p in patterns))
            if extra:
                allowed = ", ".join(known + [f"keys matching {p}" for p in patterns])
                where = _json_path(list(err.absolute_path) + [cut(str(extra[0]))])
                if settings:
                    raise InvalidInstance(f"{where}: not a setting of problem {shown(err.instance['problem'])} "
                                          f"(settings: {allowed})")
                raise InvalidInstance(f"{where}: unknown field (fields: {allowed})")
        if err.validator == "required" and settings:
            missing = [k for k in err.validator_value if k not in err.instance]
            if missing:  # a key the problem's family requires in the settings object
                raise InvalidInstance(f"{_json_path(list(err.absolute_path) + [missing[0]])}: required for problem "
                                      f"{shown(err.instance['problem'])}")
        if err.validator in _BOUNDS:
            raise InvalidInstance(f"{_json_path(err.absolute_path)}: must be {_BOUNDS[err.validator]} "
                                  f"{err.validator_value:.17g}, got {shown(err.instance)} (docs/guide/instances.md, 'Ranges')")
        raise InvalidInstance(f"{_json_path(err.absolute_path)}: {cut(err.message.splitlines()[0], 200)} "
                              f"(got {cut(json.dumps(err.instance, default=lambda v: f'{type(v).__name__}({v!r})'))})")


#: problem name -> the settings class of its family (``Family.settings_class``)
SettingsClassOf = Callable[[str], "type[FamilySettings]"]


def parse_instance_data(data: Any, schema: SchemaOrBuilder, settings_class: SettingsClassOf,
                        narrower: Mapping[str, Any] | None = None) -> Instance:
    """Build an Instance from JSON-like data checked against ``schema`` (``narrower`` first:
    :func:`check_schema`) and for the consistency every family relies on, its ``settings``
    read by the settings class of the problem's family (``settings_class(problem)``); raises
    InvalidInstance on any defect. The family's own checks are not run here
    (``splitopt.api.parse_instance`` runs both)."""
    check_schema(data, schema, narrower)
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
    parsed_links = []
    for i, l in enumerate(data["links"]):
        bus = l.get("bus")
        if bus is not None and bus not in bus_names:
            raise InvalidInstance(f"instance.links[{i}].bus: unknown bus '{bus}' (buses: {', '.join(sorted(bus_names)) or 'none'})")
        if bus is None and "bandwidth_bits_per_s" not in l:
            raise InvalidInstance(f"instance.links[{i}]: 'bandwidth_bits_per_s' is required for a link on no bus")
        rate = float(l["bandwidth_bits_per_s"]) if "bandwidth_bits_per_s" in l else float("nan")
        parsed_links.append(Link(l["source"], l["target"], rate, float(l.get("latency_ms", 0.0)), bus))
    links = tuple(parsed_links)
    raw = data["settings"]
    settings = settings_class(raw["problem"]).from_json(raw, {d.name: d for d in devices})
    with checked_elsewhere():  # checked here: the schema above, consistency and ranges below
        inst = Instance(
            name=data["name"],
            inputs=inputs,
            layers=layers,
            devices=devices,
            links=links,
            problem=raw["problem"],
            settings=settings,
            objective=raw.get("objective", "latency"),
            description=data.get("description", ""),
            source=data.get("source", {}),
            buses=buses,
        )
    _check_consistency(inst)
    check_ranges(inst)
    return inst


def check_built(inst: Instance, schema: SchemaOrBuilder, settings_class: SettingsClassOf,
                narrower: Mapping[str, Any] | None = None) -> None:
    """The checks of :func:`parse_instance_data` on an instance built in Python (not
    parsed from JSON): its fields' types, then its JSON form (:func:`to_dict`) against
    ``schema`` (``narrower`` first), the references to devices and buses, consistency and ranges, in the
    parser's order and with its messages. InvalidInstance (one line naming the field and
    value) on any defect; ``settings_class(problem)``: the settings class of the problem's
    family; the family's checks are the caller's (``splitopt.api``)."""
    _check_built_types(inst)
    if not isinstance(inst.problem, str):
        raise InvalidInstance(f"instance.problem: must be a problem name (string), got {kind_of(inst.problem)}")
    expected = settings_class(inst.problem)
    if not isinstance(inst.settings, expected):
        raise InvalidInstance(f"instance.settings: must be a {expected.__name__} (the settings of problem "
                              f"{shown(inst.problem)}), got {type(inst.settings).__name__}")
    check_schema(to_dict(inst), schema, narrower)
    bus_names = {b.name for b in inst.buses}
    for i, link in enumerate(inst.links):
        if link.bus is not None and link.bus not in bus_names:
            raise InvalidInstance(f"instance.links[{i}].bus: unknown bus '{link.bus}' "
                                  f"(buses: {', '.join(sorted(bus_names)) or 'none'})")
    inst.settings.check_built(inst.problem, {d.name: d for d in inst.devices})
    _check_consistency(inst)
    check_ranges(inst)


def _check_built_types(inst: Instance) -> None:
    """The container fields of an instance built in Python have the types the model
    declares (scalars are the schema's to judge, on the JSON form)."""
    if not isinstance(inst.settings, FamilySettings):
        raise InvalidInstance(f"instance.settings: must be a family's settings object (a FamilySettings, "
                              f"splitopt.core.settings), got {kind_of(inst.settings)}")
    check_sequence(inst.inputs, "instance.graph.inputs", InputTensor)
    check_sequence(inst.layers, "instance.graph.layers", Layer)
    check_sequence(inst.devices, "instance.devices", Device)
    check_sequence(inst.links, "instance.links", Link)
    check_sequence(inst.buses, "instance.buses", Bus)
    check_mapping(inst.source, "instance.source")
    for i, t in enumerate(inst.inputs):
        check_sequence(t.shape, f"instance.graph.inputs[{i}].shape")
    for i, layer in enumerate(inst.layers):
        where = f"instance.graph.layers[{i}]"
        for name in ("inputs", "output_shape", "fused"):
            check_sequence(getattr(layer, name), f"{where}.{name}")
        for name in ("weight_error", "activation_error"):
            check_mapping(getattr(layer, name), f"{where}.{name}", keys=int)
        check_mapping(layer.latency_ms, f"{where}.latency_ms")
    for i, d in enumerate(inst.devices):
        check_sequence(d.bit_widths, f"instance.devices[{i}].bit_widths")
    inst.settings.check_built_types()


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
    # layers in an execution order (every input listed before its reader) form no cycle; where
    # the order is broken, a cycle is looked for first, so that a cycle is reported as such
    pos = inst.position
    misordered = next(((i, layer, src) for i, layer in enumerate(inst.layers) for src in layer.inputs
                       if src in pos and pos[src] >= i), None)
    if misordered is not None:
        import networkx as nx  # here, on the error's path: importing it costs more than a small solve

        g = inst.graph
        if not nx.is_directed_acyclic_graph(g):
            cycle = nx.find_cycle(g)
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            raise InvalidInstance(f"{where}.layers: the layer graph has a cycle: {path}")
        i, layer, src = misordered
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
        "settings": {"problem": inst.problem, "objective": inst.objective, **inst.settings.to_json()},
    }
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
