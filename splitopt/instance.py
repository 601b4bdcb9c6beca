"""Problem data: the layer graph, the devices and links, and the problem settings.

An :class:`Instance` is read from JSON (``load_instance``), checked against the shipped
JSON Schema and then for consistency (unique names, no dangling edges, no cycles, known
devices, supported bit-widths, finite sizes). Everything downstream (evaluator,
formulations, baselines) reads this immutable model and never the raw JSON.

Units: latency in ms, sizes in bytes, bit-widths in bits, compute in MAC/s, off-chip
bandwidth in bytes/s, link bandwidth in bits/s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import networkx as nx

from splitopt.errors import InvalidInstance

FORMAT = "splitopt-instance/1"
#: problem name -> family; every family's plans, metrics and programs live in the module
#: that ``splitopt.families`` names for it
PROBLEMS = ("split", "split_bits", "chain", "mesh", "multiview")
TWO_TIER = ("split", "split_bits")
OBJECTIVES = ("latency", "throughput")


@dataclass(frozen=True)
class InputTensor:
    """A raw graph input captured on the edge (an image, a sensor frame)."""

    name: str
    shape: tuple[int, ...]
    bits: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Layer:
    """One fused layer; it produces one output tensor named like the layer."""

    name: str
    op: str
    inputs: tuple[str, ...]
    macs: float
    weights: float
    output_shape: tuple[int, ...]
    weight_error: Mapping[int, float] = field(default_factory=dict)
    activation_error: Mapping[int, float] = field(default_factory=dict)
    latency_ms: Mapping[str, Any] = field(default_factory=dict)
    fused: tuple[str, ...] = ()

    @property
    def output_elements(self) -> int:
        return math.prod(self.output_shape)


@dataclass(frozen=True)
class Device:
    """A processor with its compute rate (MAC/s), off-chip bandwidth (bytes/s), on-chip
    buffer (bytes), memory for the model (bytes) and supported bit-widths."""

    name: str
    mac_per_s: float
    offchip_bytes_per_s: float | None
    onchip_bytes: float
    memory_bytes: float
    bit_widths: tuple[int, ...]
    description: str = ""


@dataclass(frozen=True)
class Link:
    """A directed link: bandwidth in bits/s plus a fixed latency in ms per transfer. A
    link on a shared ``bus`` takes its bandwidth from the bus (see :class:`Bus`)."""

    source: str
    target: str
    bandwidth_bits_per_s: float
    latency_ms: float = 0.0
    bus: str | None = None


@dataclass(frozen=True)
class Bus:
    """A medium shared by several links (e.g. the sensors' bus of a head-mounted device).

    ``mode`` says how the links share it: ``"serial"``: one transfer at a time, each at
    the full ``bandwidth_bits_per_s``; ``"share"``: every link on the bus owns a fixed
    equal share, ``bandwidth_bits_per_s / links``, at all times (time-division), so
    transfers on different links overlap and never wait for each other."""

    name: str
    bandwidth_bits_per_s: float
    mode: str = "serial"


@dataclass(frozen=True)
class Settings:
    """What to optimise and under which limits.

    ``edge_memory_bytes`` bounds edge weight bytes plus the peak activation working set;
    ``error_budget`` bounds the summed quantization error of edge layers (None: no
    bound); ``bit_widths`` are the candidate edge bit-widths of the ``split_bits``
    problem; ``cloud_bits`` is the reference precision (cloud layers, and every layer in
    the float ``split`` problem); ``transmit_bits`` (None: the producer's activation
    bit-width) is the precision of transmitted layer outputs; ``edge_required`` lists
    layers that must run on the edge (their ancestors follow by closure)."""

    problem: str
    edge: str
    cloud: str
    edge_memory_bytes: float
    error_budget: float | None
    bit_widths: tuple[int, ...]
    cloud_bits: int = 16
    transmit_bits: int | None = None
    objective: str = "latency"
    edge_required: tuple[str, ...] = ()
    #: problem "chain": device names in chain order (input arrives at the first)
    chain: tuple[str, ...] = ()
    #: problem "mesh" / "multiview": that family's options, checked by its module
    mesh: Mapping[str, Any] = field(default_factory=dict)
    multiview: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Instance:
    name: str
    inputs: tuple[InputTensor, ...]
    layers: tuple[Layer, ...]
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    settings: Settings
    description: str = ""
    source: Mapping[str, Any] = field(default_factory=dict)
    buses: tuple[Bus, ...] = ()

    # ----- lookups -------------------------------------------------------------------
    @cached_property
    def layer_by_name(self) -> dict[str, Layer]:
        return {layer.name: layer for layer in self.layers}

    @cached_property
    def input_by_name(self) -> dict[str, InputTensor]:
        return {t.name: t for t in self.inputs}

    @cached_property
    def device_by_name(self) -> dict[str, Device]:
        return {d.name: d for d in self.devices}

    @cached_property
    def position(self) -> dict[str, int]:
        """Index of each layer in the execution order (the file's order)."""
        return {layer.name: i for i, layer in enumerate(self.layers)}

    @cached_property
    def consumers(self) -> dict[str, tuple[str, ...]]:
        """Tensor name (graph input or layer) -> layers that read it, in execution order,
        each once even if it reads the tensor twice."""
        out: dict[str, list[str]] = {t.name: [] for t in self.inputs}
        out.update({layer.name: [] for layer in self.layers})
        for layer in self.layers:
            for src in dict.fromkeys(layer.inputs):
                out[src].append(layer.name)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def graph(self) -> nx.DiGraph:
        """Layer DAG (graph inputs excluded); node attribute ``layer`` holds the Layer."""
        g = nx.DiGraph()
        for layer in self.layers:
            g.add_node(layer.name, layer=layer)
        for layer in self.layers:
            for src in layer.inputs:
                if src in self.layer_by_name:
                    g.add_edge(src, layer.name)
        return g

    @cached_property
    def bus_by_name(self) -> dict[str, Bus]:
        return {b.name: b for b in self.buses}

    @cached_property
    def link_between(self) -> dict[tuple[str, str], Link]:
        """(source device, target device) -> the link."""
        return {(l.source, l.target): l for l in self.links}

    def link_rate_bits_per_s(self, link: Link) -> float:
        """Bandwidth (bits/s) a transfer on ``link`` gets: the link's own, or on a bus the
        full bus rate (serial) or the link's equal share of it (share)."""
        if link.bus is None:
            return link.bandwidth_bits_per_s
        bus = self.bus_by_name[link.bus]
        if bus.mode == "share":
            return bus.bandwidth_bits_per_s / sum(1 for l in self.links if l.bus == bus.name)
        return bus.bandwidth_bits_per_s

    def link_transfer_ms(self, link: Link, nbytes: float) -> float:
        """Time (ms) to send ``nbytes`` in one transfer over ``link``; zero for nothing."""
        if nbytes <= 0:
            return 0.0
        return link.latency_ms + 1000.0 * nbytes * 8.0 / self.link_rate_bits_per_s(link)

    @property
    def is_two_tier(self) -> bool:
        return self.settings.problem in TWO_TIER

    @property
    def edge_device(self) -> Device:
        return self.device_by_name[self.settings.edge]

    @property
    def cloud_device(self) -> Device:
        return self.device_by_name[self.settings.cloud]

    @cached_property
    def uplink(self) -> Link:
        """The link from the edge device to the cloud device."""
        for link in self.links:
            if link.source == self.settings.edge and link.target == self.settings.cloud:
                return link
        raise InvalidInstance(
            f"links: no link from edge device '{self.settings.edge}' to cloud device "
            f"'{self.settings.cloud}'"
        )

    @cached_property
    def required_on_edge(self) -> frozenset[str]:
        """``settings.edge_required`` with all their ancestors."""
        out: set[str] = set()
        for name in self.settings.edge_required:
            out.add(name)
            out.update(nx.ancestors(self.graph, name))
        return frozenset(out)

    def candidate_bits(self) -> tuple[int, ...]:
        """Edge bit-widths a plan may use: the candidate set for ``split_bits``, the
        reference precision alone for ``split``."""
        if self.settings.problem == "split":
            return (self.settings.cloud_bits,)
        return self.settings.bit_widths

    def sent_bits(self, tensor: str, activation_bits: int) -> int:
        """Bits per element at which ``tensor`` crosses the cut: a raw input at its own
        bits, a layer output at ``settings.transmit_bits`` if set, else at the bits it was
        produced at (``activation_bits``)."""
        if tensor in self.input_by_name:
            return self.input_by_name[tensor].bits
        if self.settings.transmit_bits is not None:
            return self.settings.transmit_bits
        return activation_bits

    def tensor_elements(self, tensor: str) -> int:
        if tensor in self.input_by_name:
            return self.input_by_name[tensor].elements
        return self.layer_by_name[tensor].output_elements

    def with_settings(self, **changes: Any) -> "Instance":
        """A copy with some settings replaced (e.g. ``problem="split"``), re-validated."""
        data = to_dict(self)
        data["settings"].update(changes)
        return parse_instance(data)


# ----- reading and checking ---------------------------------------------------------

_SCHEMA_CACHE: dict[str, Any] = {}


def instance_schema() -> dict[str, Any]:
    """The published JSON Schema of the instance format."""
    if "instance" not in _SCHEMA_CACHE:
        text = resources.files("splitopt").joinpath("schema/instance.schema.json").read_text()
        _SCHEMA_CACHE["instance"] = json.loads(text)
    return _SCHEMA_CACHE["instance"]


def _json_path(path) -> str:
    out = "instance"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _reject_non_finite(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInstance(f"{path}: must be a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            _reject_non_finite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _reject_non_finite(v, f"{path}[{i}]")


def check_schema(data: Any) -> None:
    """Raise InvalidInstance naming the first schema violation (field and value)."""
    import jsonschema

    _reject_non_finite(data, "instance")
    validator = jsonschema.Draft202012Validator(instance_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        err = errors[0]
        value = json.dumps(err.instance)
        if len(value) > 60:
            value = value[:57] + "..."
        raise InvalidInstance(f"{_json_path(err.path)}: {err.message.splitlines()[0][:200]} (got {value})")


def load_instance(path: str | Path) -> Instance:
    """Read, schema-check and consistency-check an instance file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InvalidInstance(f"{path}: cannot read file ({e.strerror})") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInstance(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    return parse_instance(data)


def parse_instance(data: Any) -> Instance:
    """Build an Instance from JSON-like data; raises InvalidInstance on any defect."""
    check_schema(data)
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
    if s["problem"] == "chain":
        if len(chain) < 2:
            raise InvalidInstance("instance.settings.chain: problem 'chain' needs at least two devices in chain order")
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
    )
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
    from splitopt.families import family

    family(inst.settings.problem).check_instance(inst)
    return inst


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
    if inst.settings.objective == "throughput" and inst.settings.problem != "chain":
        raise InvalidInstance(
            f"instance.settings.objective: 'throughput' is defined for problem 'chain' only, not '{inst.settings.problem}'"
        )


def check_two_tier(inst: Instance) -> None:
    """Consistency of an edge/cloud instance: bit-widths, uplink, error and latency tables."""
    where = "instance.graph"
    s = inst.settings
    if s.edge == s.cloud:
        raise InvalidInstance(f"instance.settings.cloud: must differ from settings.edge, both are '{s.edge}'")
    edge, cloud = inst.edge_device, inst.cloud_device
    bad = [b for b in s.bit_widths if b not in edge.bit_widths]
    if bad:
        raise InvalidInstance(
            f"instance.settings.bit_widths: {bad[0]} bits is not supported by edge device "
            f"'{edge.name}' (supports {list(edge.bit_widths)})"
        )
    if s.cloud_bits not in cloud.bit_widths:
        raise InvalidInstance(
            f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by cloud device "
            f"'{cloud.name}' (supports {list(cloud.bit_widths)})"
        )
    if s.problem == "split" and s.cloud_bits not in edge.bit_widths:
        raise InvalidInstance(
            f"instance.settings.problem: 'split' runs edge layers at cloud_bits={s.cloud_bits}, "
            f"which edge device '{edge.name}' does not support (supports {list(edge.bit_widths)})"
        )
    for name in s.edge_required:
        if name not in inst.layer_by_name:
            raise InvalidInstance(f"instance.settings.edge_required: unknown layer '{name}'")
    inst.uplink  # raises if missing
    # error tables must cover every quantized candidate bit-width
    for i, layer in enumerate(inst.layers):
        for b in inst.candidate_bits():
            if b >= s.cloud_bits:
                continue
            if layer.weights > 0 and b not in layer.weight_error:
                raise InvalidInstance(
                    f"{where}.layers[{i}].weight_error: layer '{layer.name}' has no entry for candidate bit-width {b}"
                )
            if b not in layer.activation_error:
                raise InvalidInstance(
                    f"{where}.layers[{i}].activation_error: layer '{layer.name}' has no entry for candidate bit-width {b}"
                )
        tb = s.transmit_bits
        if tb is not None and tb < s.cloud_bits and inst.consumers[layer.name] and tb not in layer.activation_error:
            raise InvalidInstance(
                f"{where}.layers[{i}].activation_error: layer '{layer.name}' has no entry for "
                f"settings.transmit_bits={tb} (its output reaches the cloud at that width when sent)"
            )
        for dev, entry in layer.latency_ms.items():
            if dev not in inst.device_by_name:
                raise InvalidInstance(f"{where}.layers[{i}].latency_ms: unknown device '{dev}'")
            if isinstance(entry, dict):
                if dev == s.edge:
                    needed = [f"w{w}a{a}" for w in inst.candidate_bits() for a in inst.candidate_bits()]
                elif dev == s.cloud:
                    needed = [f"w{s.cloud_bits}a{s.cloud_bits}"]
                else:
                    needed = []
                missing = [k for k in needed if k not in entry]
                if missing:
                    raise InvalidInstance(
                        f"{where}.layers[{i}].latency_ms.{dev}: layer '{layer.name}' has no entry '{missing[0]}' "
                        f"for a bit-width pair the problem may choose"
                    )


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
    if inst.buses:
        data["buses"] = [{"name": b.name, "bandwidth_bits_per_s": b.bandwidth_bits_per_s, "mode": b.mode} for b in inst.buses]
    for entry, link in zip(data["links"], inst.links):
        if link.bus is not None:
            entry["bus"] = link.bus
            del entry["bandwidth_bits_per_s"]
    return data


def save_instance(inst: Instance, path: str | Path) -> None:
    Path(path).write_text(json.dumps(to_dict(inst), indent=1) + "\n")
