"""The peer "dnn-partitioning" benchmark (Tarnawski et al., NeurIPS 2020): read its
instances and expert placements, check placements and evaluate them exactly.

The model and every interpretation choice are written down in
``formulations/dnnp_models.md``; ``tests/test_dnnp.py`` checks them. There is no solver
here yet: a later module builds MILP/CP-SAT programs for these two objectives and meets
this evaluator.

* :func:`load_dnnp` reads one file of ``throughput-inputs/*/`` or ``latency-inputs/*/``
  into a frozen :class:`DnnpInstance` (any defect: one-line ``InvalidInstance``).
* A :class:`DnnpPlacement` maps every node id to a device ``fpga0..fpga{k-1}`` or
  ``cpu0..cpu{l-1}``; :func:`load_expert` reads ``human-experts/*.json`` and, on a training
  graph, derives the backward nodes' devices from the colour classes.
* :func:`check_placement` lists the broken placement rules, one line each.
* :func:`max_load` (throughput, time per sample of the pipeline) and :func:`latency`
  (single sample) are the two objectives.

Units as in the files: times in ms, sizes in bytes.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

import networkx as nx

from splitopt.errors import InvalidInstance, InvalidPlan

__all__ = [
    "DnnpNode",
    "DnnpEdge",
    "DnnpInstance",
    "DnnpPlacement",
    "load_dnnp",
    "parse_dnnp",
    "load_expert",
    "parse_expert",
    "derive_from_colour_classes",
    "check_placement",
    "max_load",
    "latency",
    "data_root",
    "shipped_inputs",
    "expert_rows",
    "expert_table",
]

# two costs of one node's outgoing edges are "the same" within this tolerance
COST_TOL = 1e-9


# ----- the instance ------------------------------------------------------------------
@dataclass(frozen=True)
class DnnpNode:
    """One layer or operator. ``size`` is the memory it takes on an accelerator (bytes);
    ``color_class`` None means it is in a class of its own."""

    id: int
    cpu_ms: float
    fpga_ms: float
    on_fpga_ok: bool
    is_backward: bool
    color_class: int | None
    size_bytes: float
    name: str = ""
    layer_id: int | None = None


@dataclass(frozen=True)
class DnnpEdge:
    """``cost_ms``: time to move the source node's output between an accelerator and CPU
    memory (one value per source node)."""

    source: int
    target: int
    cost_ms: float


@dataclass(frozen=True)
class DnnpInstance:
    nodes: tuple[DnnpNode, ...]
    edges: tuple[DnnpEdge, ...]
    max_fpgas: int
    max_cpus: int
    max_size_per_fpga: float
    name: str = ""
    source: str = ""

    # ----- lookups -------------------------------------------------------------------
    @cached_property
    def node_by_id(self) -> dict[int, DnnpNode]:
        return {n.id: n for n in self.nodes}

    @cached_property
    def successors(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            if e.target not in out[e.source]:
                out[e.source].append(e.target)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def predecessors(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            if e.source not in out[e.target]:
                out[e.target].append(e.source)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def out_cost(self) -> dict[int, float]:
        """Node id -> the cost of its outgoing edges (0.0 for a sink). Checked at load
        time to be one value per node."""
        out = {n.id: 0.0 for n in self.nodes}
        for e in self.edges:
            out[e.source] = e.cost_ms
        return out

    @cached_property
    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(n.id for n in self.nodes)
        g.add_edges_from((e.source, e.target) for e in self.edges)
        return g

    @cached_property
    def topo_order(self) -> tuple[int, ...]:
        return tuple(nx.lexicographical_topological_sort(self.graph))

    @cached_property
    def forward_ids(self) -> frozenset[int]:
        return frozenset(n.id for n in self.nodes if not n.is_backward)

    @property
    def is_training(self) -> bool:
        return len(self.forward_ids) < len(self.nodes)

    @cached_property
    def colour_classes(self) -> dict[int, tuple[int, ...]]:
        """Colour class -> its node ids (nodes without a class are left out)."""
        out: dict[int, list[int]] = {}
        for n in self.nodes:
            if n.color_class is not None:
                out.setdefault(n.color_class, []).append(n.id)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def fpgas(self) -> tuple[str, ...]:
        return tuple(f"fpga{i}" for i in range(self.max_fpgas))

    @property
    def cpus(self) -> tuple[str, ...]:
        return tuple(f"cpu{i}" for i in range(self.max_cpus))


def _where(source: str) -> str:
    return source or "instance"


def _number(value: Any, where: str, *, integer: bool = False) -> float | int:
    """A finite, non-negative number (an int if ``integer``); bools are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInstance(f"{where}: must be a number, got {json.dumps(value)[:40]}")
    if not math.isfinite(value) or value < 0:
        raise InvalidInstance(f"{where}: must be finite and >= 0, got {value}")
    if integer:
        if value != int(value):
            raise InvalidInstance(f"{where}: must be an integer, got {value}")
        return int(value)
    return float(value)


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidInstance(f"{where}: must be 0/1 or a boolean, got {json.dumps(value)[:40]}")


def _ident(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInstance(f"{where}: must be an integer id, got {json.dumps(value)[:40]}")
    return value


def _get(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise InvalidInstance(f"{where}: missing key '{key}'")
    return obj[key]


def parse_dnnp(data: Any, name: str = "", source: str = "") -> DnnpInstance:
    """Build a DnnpInstance from the JSON data of one peer input file; raises a one-line
    InvalidInstance naming the field and value on any defect."""
    w = _where(source)
    if not isinstance(data, dict):
        raise InvalidInstance(f"{w}: top level must be an object, got {type(data).__name__}")
    max_size = _number(_get(data, "maxSizePerFPGA", w), f"{w}.maxSizePerFPGA")
    k = _number(_get(data, "maxFPGAs", w), f"{w}.maxFPGAs", integer=True)
    l = _number(_get(data, "maxCPUs", w), f"{w}.maxCPUs", integer=True)
    raw_nodes = _get(data, "nodes", w)
    raw_edges = _get(data, "edges", w)
    if not isinstance(raw_nodes, list):
        raise InvalidInstance(f"{w}.nodes: must be a list, got {type(raw_nodes).__name__}")
    if not isinstance(raw_edges, list):
        raise InvalidInstance(f"{w}.edges: must be a list, got {type(raw_edges).__name__}")

    nodes: list[DnnpNode] = []
    seen: set[int] = set()
    for i, raw in enumerate(raw_nodes):
        at = f"{w}.nodes[{i}]"
        if not isinstance(raw, dict):
            raise InvalidInstance(f"{at}: must be an object, got {type(raw).__name__}")
        nid = _ident(_get(raw, "id", at), f"{at}.id")
        if nid in seen:
            raise InvalidInstance(f"{at}.id: duplicate node id {nid}")
        seen.add(nid)
        cc = raw.get("colorClass")
        lid = raw.get("layerId")
        node_name = raw.get("name", "")
        nodes.append(
            DnnpNode(
                id=nid,
                cpu_ms=_number(_get(raw, "cpuLatency", at), f"{at}.cpuLatency"),
                fpga_ms=_number(_get(raw, "fpgaLatency", at), f"{at}.fpgaLatency"),
                on_fpga_ok=_flag(_get(raw, "supportedOnFpga", at), f"{at}.supportedOnFpga"),
                is_backward=_flag(_get(raw, "isBackwardNode", at), f"{at}.isBackwardNode"),
                color_class=None if cc is None else _ident(cc, f"{at}.colorClass"),
                size_bytes=_number(_get(raw, "size", at), f"{at}.size"),
                name=node_name if isinstance(node_name, str) else str(node_name),
                layer_id=None if lid is None else _ident(lid, f"{at}.layerId"),
            )
        )

    edges: list[DnnpEdge] = []
    first_cost: dict[int, tuple[float, int]] = {}
    for i, raw in enumerate(raw_edges):
        at = f"{w}.edges[{i}]"
        if not isinstance(raw, dict):
            raise InvalidInstance(f"{at}: must be an object, got {type(raw).__name__}")
        u = _ident(_get(raw, "sourceId", at), f"{at}.sourceId")
        v = _ident(_get(raw, "destId", at), f"{at}.destId")
        for key, x in (("sourceId", u), ("destId", v)):
            if x not in seen:
                raise InvalidInstance(f"{at}.{key}: unknown node id {x} (dangling edge)")
        cost = _number(_get(raw, "cost", at), f"{at}.cost")
        if u in first_cost:
            c0, v0 = first_cost[u]
            if not math.isclose(cost, c0, rel_tol=COST_TOL, abs_tol=COST_TOL):
                raise InvalidInstance(
                    f"{at}.cost: node {u} has two outgoing costs, {c0} (to {v0}) and {cost} "
                    f"(to {v}); the model needs one cost per source node"
                )
        else:
            first_cost[u] = (cost, v)
        edges.append(DnnpEdge(u, v, cost))

    inst = DnnpInstance(
        nodes=tuple(nodes),
        edges=tuple(edges),
        max_fpgas=k,
        max_cpus=l,
        max_size_per_fpga=max_size,
        name=name,
        source=source,
    )
    g = inst.graph
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        path = " -> ".join(str(x) for x in [u for u, _ in cycle] + [cycle[0][0]])
        raise InvalidInstance(f"{w}.edges: the node graph has a cycle: {path}")
    return inst


def _read_json(path: Path, error: type[Exception]) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a byte-order mark
    except OSError as e:
        raise error(f"{path}: cannot read file ({e.strerror})") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from e


def is_dnnp_file(path: str | Path) -> bool:
    """Whether ``path`` holds a peer dnn-partitioning input (top-level ``nodes``,
    ``edges`` and ``maxFPGAs``) rather than a splitopt instance; False if unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"nodes", "edges", "maxFPGAs"} <= set(data) and "format" not in data


def load_dnnp(path: str | Path) -> DnnpInstance:
    """Read one peer input file (``throughput-inputs/*/*.json`` or
    ``latency-inputs/*/*.json``). The name is ``<granularity>/<file stem>``, e.g.
    ``LayerGraphs/bert24_inference``."""
    path = Path(path)
    data = _read_json(path, InvalidInstance)
    return parse_dnnp(data, name=f"{path.parent.name}/{path.stem}", source=str(path))


# ----- placements --------------------------------------------------------------------
_DEVICE = re.compile(r"^(fpga|cpu)(0|[1-9][0-9]*)$")


def _device_kind(device: str) -> tuple[str, int]:
    m = _DEVICE.match(device)
    if not m:
        raise InvalidPlan(f"device '{device}': must be named fpga<i> or cpu<i>")
    return m.group(1), int(m.group(2))


def _device_key(device: str) -> tuple[int, int]:
    kind, i = _device_kind(device)
    return (0 if kind == "fpga" else 1, i)


@dataclass(frozen=True)
class DnnpPlacement:
    """Node id -> device (``fpga<i>`` or ``cpu<i>``)."""

    device: Mapping[int, str]
    source: str = ""

    @classmethod
    def from_groups(
        cls, fpgas: Iterable[Iterable[int]] = (), cpus: Iterable[Iterable[int]] = (), source: str = ""
    ) -> "DnnpPlacement":
        """Group i of ``fpgas`` goes to ``fpga<i>``, group j of ``cpus`` to ``cpu<j>``; a
        node listed twice is an InvalidPlan."""
        device: dict[int, str] = {}
        for kind, groups in (("fpga", fpgas), ("cpu", cpus)):
            for i, group in enumerate(groups):
                for nid in group:
                    if nid in device:
                        raise InvalidPlan(
                            f"{source or 'placement'}: node {nid} is listed twice ({device[nid]} and {kind}{i})"
                        )
                    device[nid] = f"{kind}{i}"
        return cls(device, source)

    @cached_property
    def nodes_on(self) -> dict[str, frozenset[int]]:
        """Device -> its node ids (only devices that hold a node)."""
        out: dict[str, set[int]] = {}
        for nid, dev in self.device.items():
            out.setdefault(dev, set()).add(nid)
        return {d: frozenset(s) for d, s in sorted(out.items(), key=lambda kv: _device_key(kv[0]))}

    def to_expert_json(self) -> dict[str, list[dict[str, list[int]]]]:
        """The expert-file layout, ``{"fpgas": [{"nodes": [...]}, ...], "cpus": [...]}``
        (group i is device i; unused devices below the highest index are empty groups);
        :func:`parse_expert` reads it back."""
        out: dict[str, list[dict[str, list[int]]]] = {"fpgas": [], "cpus": []}
        for dev, ids in self.nodes_on.items():
            kind, i = _device_kind(dev)
            lst = out[kind + "s"]
            while len(lst) <= i:
                lst.append({"nodes": []})
            lst[i] = {"nodes": sorted(ids)}
        return out


def _validate(inst: DnnpInstance, placement: DnnpPlacement) -> None:
    """Structure only: every node placed once, no unknown node, device names well formed.
    Rule violations (memory, colours, ...) are check_placement's business."""
    where = placement.source or "placement"
    unknown = sorted(set(placement.device) - set(inst.node_by_id))
    if unknown:
        raise InvalidPlan(f"{where}: unknown node id {unknown[0]} ({len(unknown)} unknown) for {inst.name}")
    missing = sorted(set(inst.node_by_id) - set(placement.device))
    if missing:
        raise InvalidPlan(
            f"{where}: node {missing[0]} is not placed ({len(missing)} missing, e.g. {missing[:5]}) for {inst.name}"
        )
    for dev in set(placement.device.values()):
        _device_kind(dev)


def derive_from_colour_classes(inst: DnnpInstance, partial: Mapping[int, str], source: str = "") -> DnnpPlacement:
    """Complete a placement that lists only some nodes (e.g. an inference split applied to
    a training graph): an unlisted node goes to the device of the listed nodes of its
    colour class. That device must exist and be unique, else InvalidPlan naming the node.
    This is the rule of the paper's own evaluator (dp.cpp, "augment human expert to
    training with colocations"); on the four layer-granularity training graphs every
    backward node ``<name>grad`` shares its class with exactly one forward node
    ``<name>``, so the derivation is total there."""
    where = source or "placement"
    device = dict(partial)
    for n in inst.nodes:
        if n.id in device:
            continue
        if n.color_class is None:
            raise InvalidPlan(f"{where}: node {n.id} ({n.name}) is not placed and has no colour class to follow")
        devs = {partial[m] for m in inst.colour_classes[n.color_class] if m in partial}
        if not devs:
            raise InvalidPlan(
                f"{where}: node {n.id} ({n.name}) is not placed and no node of its colour class "
                f"{n.color_class} is placed"
            )
        if len(devs) > 1:
            raise InvalidPlan(
                f"{where}: node {n.id} ({n.name}) is not placed and its colour class {n.color_class} "
                f"is on several devices {sorted(devs, key=_device_key)}"
            )
        device[n.id] = devs.pop()
    return DnnpPlacement(device, source)


def parse_expert(inst: DnnpInstance, data: Any, source: str = "") -> DnnpPlacement:
    """Placement from expert-file data ``{"cpus": [{"nodes": [...]}, ...], "fpgas": [...]}``
    (``load`` and ``maxLoad`` are ignored: -1 in the shipped files). Nodes not listed are
    derived from their colour class (:func:`derive_from_colour_classes`); if that fails
    the file is an InvalidPlan. Unknown or repeated ids are InvalidPlan too."""
    where = source or "expert"
    if not isinstance(data, dict):
        raise InvalidPlan(f"{where}: top level must be an object, got {type(data).__name__}")
    groups: dict[str, list[list[int]]] = {}
    for kind in ("fpgas", "cpus"):
        if kind not in data:
            raise InvalidPlan(f"{where}: missing key '{kind}'")
        if not isinstance(data[kind], list):
            raise InvalidPlan(f"{where}.{kind}: must be a list, got {type(data[kind]).__name__}")
        groups[kind] = []
        for i, g in enumerate(data[kind]):
            if not isinstance(g, dict) or not isinstance(g.get("nodes"), list):
                raise InvalidPlan(f"{where}.{kind}[{i}]: must be an object with a 'nodes' list")
            ids = g["nodes"]
            for j, nid in enumerate(ids):
                if isinstance(nid, bool) or not isinstance(nid, int):
                    raise InvalidPlan(f"{where}.{kind}[{i}].nodes[{j}]: must be an integer id, got {nid!r}")
                if nid not in inst.node_by_id:
                    raise InvalidPlan(f"{where}.{kind}[{i}].nodes[{j}]: unknown node id {nid} for {inst.name}")
            groups[kind].append(ids)
    partial = DnnpPlacement.from_groups(groups["fpgas"], groups["cpus"], source=where).device
    return derive_from_colour_classes(inst, partial, where)


def load_expert(inst: DnnpInstance, path: str | Path) -> DnnpPlacement:
    """Read a ``human-experts/*.json`` file for ``inst``. Hand-formatted files (tabs,
    blank lines, a byte-order mark) are read by the json module as they are; a file that
    is not JSON is an InvalidPlan giving line and column."""
    path = Path(path)
    return parse_expert(inst, _read_json(path, InvalidPlan), source=str(path))


# ----- checking ----------------------------------------------------------------------
def _fmt_ids(ids: Iterable[int], limit: int = 6) -> str:
    ids = sorted(ids)
    head = ", ".join(map(str, ids[:limit]))
    return "{" + head + (f", ... ({len(ids)} nodes)" if len(ids) > limit else "") + "}"


def _bfs(adj: Mapping[int, Iterable[int]], starts: Iterable[int], allowed: frozenset[int]) -> dict[int, int | None]:
    """Nodes reachable from ``starts`` through ``allowed`` nodes, with a parent pointer."""
    parent: dict[int, int | None] = {s: None for s in starts}
    queue = deque(parent)
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v in allowed and v not in parent:
                parent[v] = u
                queue.append(v)
    return parent


def _path(parent: Mapping[int, int | None], end: int) -> list[int]:
    out = [end]
    while parent[out[-1]] is not None:
        out.append(parent[out[-1]])  # type: ignore[arg-type]
    return out[::-1]


def convexity_witness(inst: DnnpInstance, ids: frozenset[int], among: frozenset[int] | None = None) -> list[int] | None:
    """None if ``ids`` is convex in the DAG induced on ``among`` (default: all nodes),
    else a path ``a -> ... -> w -> ... -> b`` with a, b in ids and w not. Linear time:
    w is outside ids, reachable from ids and reaching ids."""
    among = frozenset(inst.node_by_id) if among is None else among
    ids = ids & among
    if len(ids) < 2:
        return None
    # leave the set: start from the outside successors of its nodes
    first = {v: u for u in ids for v in inst.successors[u] if v in among and v not in ids}
    outside = among - ids
    down = _bfs(inst.successors, first, outside)
    back = {u: v for v in ids for u in inst.predecessors[v] if u in down}
    if not back:
        return None
    w, b = next(iter(sorted(back.items())))
    path = _path(down, w)
    return [first[path[0]]] + path + [b]


def check_placement(inst: DnnpInstance, placement: DnnpPlacement, contiguous: bool = True) -> list[str]:
    """Broken placement rules, one line each (empty list: the placement is valid).

    Rules (README of the peer data): a node with supportedOnFpga false is on a CPU; a
    colour class is on one device; on each FPGA the sizes sum to at most maxSizePerFPGA;
    at most k FPGAs and l CPUs are used, named fpga0..fpga{k-1}, cpu0..cpu{l-1};
    with ``contiguous``, the forward nodes of each device (CPUs included, as the paper's
    IP does by default) form a convex set of the forward DAG. A placement that does not
    place every node exactly once is an InvalidPlan, not a violation."""
    _validate(inst, placement)
    out: list[str] = []
    dev = placement.device
    for n in inst.nodes:
        if not n.on_fpga_ok and dev[n.id].startswith("fpga"):
            out.append(f"node {n.id} ({n.name}) is on {dev[n.id]} but supportedOnFpga is false")
    for cc, ids in sorted(inst.colour_classes.items()):
        devs: dict[str, list[int]] = {}
        for nid in ids:
            devs.setdefault(dev[nid], []).append(nid)
        if len(devs) > 1:
            parts = "; ".join(f"{d} {_fmt_ids(v)}" for d, v in sorted(devs.items(), key=lambda kv: _device_key(kv[0])))
            out.append(f"colour class {cc} is split across devices: {parts}")
    for d, ids in placement.nodes_on.items():
        kind, _ = _device_kind(d)
        if kind == "fpga":
            size = sum(inst.node_by_id[i].size_bytes for i in ids)
            if size > inst.max_size_per_fpga:
                out.append(
                    f"{d} memory {size:.6g} bytes exceeds maxSizePerFPGA {inst.max_size_per_fpga:.6g} "
                    f"(by {size - inst.max_size_per_fpga:.6g})"
                )
    for kind, limit, key in (("fpga", inst.max_fpgas, "maxFPGAs"), ("cpu", inst.max_cpus, "maxCPUs")):
        used = [d for d in placement.nodes_on if d.startswith(kind)]
        if len(used) > limit:
            out.append(f"{len(used)} {kind.upper()}s used ({', '.join(used)}), more than {key}={limit}")
        else:
            for d in used:
                if _device_kind(d)[1] >= limit:
                    out.append(f"{d} does not exist: {key}={limit} allows {kind}0..{kind}{limit - 1}")
    if contiguous:
        fwd = inst.forward_ids
        for d, ids in placement.nodes_on.items():
            path = convexity_witness(inst, ids, fwd)
            if path is not None:
                via = ", ".join(f"{x} on {dev[x]}" for x in path[1:-1])
                out.append(
                    f"{d} is not contiguous: path {' -> '.join(map(str, path))} leaves its forward nodes "
                    f"and comes back (via {via})"
                )
    return out


# ----- objectives --------------------------------------------------------------------
def _all_devices(inst: DnnpInstance, placement: DnnpPlacement) -> list[str]:
    names = set(inst.fpgas) | set(inst.cpus) | set(placement.nodes_on)
    return sorted(names, key=_device_key)


def fpga_transfers(inst: DnnpInstance, ids: frozenset[int]) -> tuple[float, float]:
    """(incoming, outgoing) communication of an accelerator holding ``ids``: each outside
    node with a successor inside pays its outgoing cost once, each inside node with a
    successor outside pays its outgoing cost once."""
    incoming = {u for v in ids for u in inst.predecessors[v] if u not in ids}
    outgoing = {u for u in ids if any(v not in ids for v in inst.successors[u])}
    return (
        math.fsum(inst.out_cost[u] for u in sorted(incoming)),
        math.fsum(inst.out_cost[u] for u in sorted(outgoing)),
    )


def max_load(inst: DnnpInstance, placement: DnnpPlacement) -> tuple[float, dict[str, float]]:
    """Throughput objective (time per sample of the pipeline, ms) and every device's load.

    FPGA load = sum of its nodes' fpgaLatency + incoming + outgoing transfers
    (:func:`fpga_transfers`); CPU load = sum of its nodes' cpuLatency, no communication.
    Forward and backward nodes both count (the objective is max over devices of forward
    + backward load). Devices fpga0..fpga{k-1} and cpu0..cpu{l-1} are always reported
    (0.0 when empty), plus any other device the placement uses. The rules are not
    checked here: see check_placement."""
    _validate(inst, placement)
    loads: dict[str, float] = {}
    on = placement.nodes_on
    for d in _all_devices(inst, placement):
        ids = on.get(d, frozenset())
        if d.startswith("fpga"):
            cin, cout = fpga_transfers(inst, ids)
            loads[d] = math.fsum([math.fsum(inst.node_by_id[i].fpga_ms for i in sorted(ids)), cin, cout])
        else:
            loads[d] = math.fsum(inst.node_by_id[i].cpu_ms for i in sorted(ids))
    return (max(loads.values(), default=0.0), loads)


def latency(inst: DnnpInstance, placement: DnnpPlacement) -> float:
    """Single-sample latency (ms): when the last node finishes.

    * Each accelerator's node set is one block (one "call"). It starts when every
      outside node with an edge into it has finished, then runs, back to back and not
      overlapped: all its incoming transfers (each outside source node's outgoing cost
      once), all its nodes' fpgaLatency, all its outgoing transfers (each inside node
      with an outside successor, once). Every node of the block finishes at the block's
      end: its outputs are usable only after the whole call, transfers included.
    * A CPU node starts when all its predecessors have finished and takes its
      cpuLatency; CPUs pay no communication; the CPU index and maxCPUs are ignored (as
      many cores as the graph is wide, as in the paper's latency IP and evaluator).
    * An FPGA -> FPGA edge pays the source's cost on both (out to CPU memory, then in).
    * The blocks must be orderable: each accelerator set convex and the graph with each
      accelerator contracted to one node acyclic. Otherwise the latency is undefined
      and this raises InvalidPlan naming the devices (check_placement's contiguity
      rule covers convexity of forward nodes; the mutual-dependency case is only
      caught here).
    The rules (memory, colours, device counts) are not checked: see check_placement."""
    _validate(inst, placement)
    dev = placement.device
    block = {nid: (d if d.startswith("fpga") else f"n{nid}") for nid, d in dev.items()}
    on = placement.nodes_on
    for d, ids in on.items():
        if d.startswith("fpga"):
            path = convexity_witness(inst, ids)
            if path is not None:
                raise InvalidPlan(
                    f"latency: {d} is not convex (path {' -> '.join(map(str, path))} leaves and re-enters it); "
                    "its subgraph cannot run as one call"
                )
    q = nx.DiGraph()
    q.add_nodes_from(set(block.values()))
    q.add_edges_from((block[e.source], block[e.target]) for e in inst.edges if block[e.source] != block[e.target])
    if not nx.is_directed_acyclic_graph(q):
        cyc = nx.find_cycle(q)
        names = [dev[int(b[1:])] + f"(node {b[1:]})" if b.startswith("n") else b for b, _ in cyc]
        raise InvalidPlan(
            f"latency: accelerator subgraphs wait on each other in a cycle: {' -> '.join(names + names[:1])}"
        )
    finish: dict[str, float] = {}
    for b in nx.topological_sort(q):
        ready = max((finish[p] for p in q.predecessors(b)), default=0.0)
        if b.startswith("fpga"):
            ids = on[b]
            cin, cout = fpga_transfers(inst, ids)
            work = math.fsum([cin, math.fsum(inst.node_by_id[i].fpga_ms for i in sorted(ids)), cout])
            finish[b] = ready + work
        else:
            finish[b] = ready + inst.node_by_id[int(b[1:])].cpu_ms
    return max(finish.values(), default=0.0)


# ----- the shipped data --------------------------------------------------------------
def data_root() -> Path:
    """The peer data folder: ``$SPLITOPT_DNNP_DATA``, else ``../shared/peer-instances/
    dnn-partitioning`` beside the repository."""
    env = os.environ.get("SPLITOPT_DNNP_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "peer-instances" / "dnn-partitioning"


def shipped_inputs(root: str | Path | None = None) -> list[Path]:
    root = data_root() if root is None else Path(root)
    return sorted(root.glob("throughput-inputs/*/*.json")) + sorted(root.glob("latency-inputs/*/*.json"))


def expert_rows(root: str | Path | None = None) -> list[dict[str, Any]]:
    """Every expert placement on the graphs it fits, evaluated: one row per (instance,
    model, placement source) with the value in ms and the broken rules.

    Throughput rows use ``throughput-inputs/LayerGraphs``: the inference graph with the
    inference split; the training graph with the split derived from the inference
    split, and also with the training split file where one ships. Latency rows use
    ``latency-inputs/LayerGraphs`` with the inference split (value None when the
    latency is undefined for it)."""
    root = data_root() if root is None else Path(root)
    rows: list[dict[str, Any]] = []
    for f in sorted((root / "human-experts").glob("*_inference_expert.json")):
        model = f.name.removesuffix("_inference_expert.json")
        plans = [("throughput", f"{model}_inference", f, "inference expert")]
        if (root / f"throughput-inputs/LayerGraphs/{model}_training.json").exists():
            plans.append(("throughput", f"{model}_training", f, "derived from inference expert"))
            tr = root / f"human-experts/{model}_training_expert.json"
            if tr.exists():
                plans.append(("throughput", f"{model}_training", tr, "training expert"))
        plans.append(("latency", f"{model}_inference", f, "inference expert"))
        for objective, graph, plan_file, how in plans:
            inst = load_dnnp(root / f"{objective}-inputs/LayerGraphs/{graph}.json")
            placement = load_expert(inst, plan_file)
            violations = check_placement(inst, placement)
            if objective == "throughput":
                value: float | None = max_load(inst, placement)[0]
            else:
                try:
                    value = latency(inst, placement)
                except InvalidPlan as e:
                    value, violations = None, violations + [str(e)]
            rows.append({
                "instance": f"{objective}-inputs/LayerGraphs/{graph}",
                "model": "max-load" if objective == "throughput" else "latency",
                "placement": how,
                "value_ms": value,
                "violations": violations,
            })
    return rows


def expert_table(root: str | Path | None = None) -> str:
    """:func:`expert_rows` as a Markdown table (instance, model, placement, value, rules
    broken)."""
    lines = [
        "| instance | model | placement | value (ms) | rules broken |",
        "|---|---|---|---:|---|",
    ]
    for r in expert_rows(root):
        value = "undefined" if r["value_ms"] is None else f"{r['value_ms']:.4f}"
        broken = "none" if not r["violations"] else f"{len(r['violations'])}: " + " / ".join(r["violations"][:3])
        lines.append(f"| {r['instance']} | {r['model']} | {r['placement']} | {value} | {broken} |")
    return "\n".join(lines)
