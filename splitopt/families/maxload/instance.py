"""The peer benchmark's data model (Tarnawski et al., NeurIPS 2020, "device placement of
DNN graph operators"; ``../shared/peer-instances/dnn-partitioning``) and its importer.

A file of ``throughput-inputs/*/`` or ``latency-inputs/*/`` is read into a frozen
:class:`MaxloadInstance` (any defect: one-line ``InvalidInstance`` naming the field and
value). The model and every interpretation choice are in ``formulations/maxload_models.md``.

Ranges (checked at load, so that every program represents the data exactly): times in
[0, 1e9] ms, sizes in [0, 2**53] bytes with their sum over all nodes at most 2**53 too
(integers up to 2**53 are exact in a double, so every memory row is), device counts in
[0, 2**31 - 1]; a placement never uses more devices than there are nodes, so a huge count
costs nothing.
Units as in the files: times in ms, sizes in bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping

from splitopt.core.errors import InvalidInstance, InvalidOption
from splitopt.core.jsonfile import byte_count, read_json
from splitopt.core.toposort import least_first_order

PROBLEM = "maxload"
#: "throughput": the max-load (time per sample of the pipeline); "latency": one sample
OBJECTIVES = ("throughput", "latency")
#: the contiguity rule (rule 5, ``contiguity.py``): "splitopt" (each device's forward nodes
#: convex in the forward DAG; colour groups without a forward node free) or "authors" (the
#: peer ``dp.cpp``'s: such groups get artificial forward nodes, joined like a mirror image
#: of their backward edges, and are held to contiguity too)
CONTIGUITY = ("splitopt", "authors")
#: two costs of one node's outgoing edges are "the same" within this tolerance
COST_TOL = 1e-9
#: largest time (ms) and device count a file may give
MAX_MS = 1e9
#: the largest size (bytes) of a node, and of all nodes together: integers up to 2**53 are
#: exact in a double, so every memory row is
MAX_BYTES = float(2**53)
MAX_COUNT = 2**31 - 1
#: the keys that identify a peer file
PEER_KEYS = {"nodes", "edges", "maxFPGAs"}


@dataclass(frozen=True)
class MaxloadNode:
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
class MaxloadEdge:
    """``cost_ms``: time to move the source node's output between an accelerator and CPU
    memory (one value per source node)."""

    source: int
    target: int
    cost_ms: float


@dataclass(frozen=True)
class MaxloadInstance:
    """A peer dnn-partitioning graph with its devices: ``max_fpgas`` identical
    accelerators of ``max_size_per_fpga`` bytes and ``max_cpus`` CPU cores (the counts as
    the file gives them; :attr:`fpgas` and :attr:`cpus` name the devices a placement can
    use, never more than there are nodes). ``objective``: "throughput" (the max-load,
    time per sample of the pipeline) or "latency" (single sample). ``contiguity``: the
    contiguity rule, one of :data:`CONTIGUITY` (``contiguity.py``)."""

    nodes: tuple[MaxloadNode, ...]
    edges: tuple[MaxloadEdge, ...]
    max_fpgas: int
    max_cpus: int
    max_size_per_fpga: float
    name: str = ""
    source: str = ""
    objective: str = "throughput"
    contiguity: str = "splitopt"

    @property
    def problem(self) -> str:
        return PROBLEM

    def derived(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()`` computed once per instance and kept with it."""
        cache = self.__dict__.setdefault("_derived_cache", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]

    def with_objective(self, objective: str) -> "MaxloadInstance":
        """The same graph and devices with another objective ("throughput" or "latency")."""
        if objective not in OBJECTIVES:
            raise InvalidInstance(f"objective: must be one of {', '.join(OBJECTIVES)} for problem 'maxload', "
                                  f"got {objective!r}")
        return replace(self, objective=objective)

    def with_contiguity(self, contiguity: str) -> "MaxloadInstance":
        """The same graph, devices and objective with another contiguity rule ("splitopt"
        or "authors"); InvalidOption naming the value otherwise."""
        return replace(self, contiguity=check_contiguity(contiguity, "contiguity"))

    def summary(self) -> str:
        kind = "training" if self.is_training else "inference"
        rule = "" if self.contiguity == "splitopt" else f", contiguity {self.contiguity}"
        return (f"{self.name}: {len(self.nodes)} nodes, {len(self.edges)} edges ({kind}), problem maxload "
                f"({self.objective}{rule}), {self.max_fpgas} accelerators of {byte_count(self.max_size_per_fpga)} B, "
                f"{self.max_cpus} CPU cores")

    # ----- lookups -------------------------------------------------------------------
    @cached_property
    def node_by_id(self) -> dict[int, MaxloadNode]:
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
    def graph(self):
        """The node DAG (a ``networkx.DiGraph`` of node ids)."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(n.id for n in self.nodes)
        g.add_edges_from((e.source, e.target) for e in self.edges)
        return g

    @cached_property
    def topo_order(self) -> tuple[int, ...]:
        """The node ids in the lexicographic topological order (the smallest ready id
        first, as ``networkx.lexicographical_topological_sort``; ``core.toposort``). A cyclic
        graph gives a shorter tuple (the nodes before the cycle); the importer rejects it."""
        succ: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            succ[e.source].append(e.target)
        return tuple(least_first_order(succ, succ))

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

    @cached_property
    def fpgas(self) -> tuple[str, ...]:
        """The accelerators a placement can use: ``fpga0 ..``, at most one per node (more
        could never all hold a node)."""
        return tuple(f"fpga{i}" for i in range(min(self.max_fpgas, len(self.nodes))))

    @cached_property
    def cpus(self) -> tuple[str, ...]:
        """The CPU cores a placement can use: ``cpu0 ..``, at most one per node."""
        return tuple(f"cpu{i}" for i in range(min(self.max_cpus, len(self.nodes))))


def check_contiguity(value: Any, where: str) -> str:
    """``value`` if it is one of :data:`CONTIGUITY`, else InvalidOption (one line)."""
    if not isinstance(value, str) or value not in CONTIGUITY:
        raise InvalidOption(f"{where}: must be one of {', '.join(CONTIGUITY)}, got {json.dumps(value)[:40]}")
    return value


def _where(source: str) -> str:
    return source or "instance"


def _number(value: Any, where: str, high: float, *, integer: bool = False) -> float | int:
    """A number in [0, high] (an int if ``integer``); bools, NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInstance(f"{where}: must be a number, got {json.dumps(value)[:40]}")
    if not math.isfinite(value) or value < 0 or value > high:
        raise InvalidInstance(f"{where}: must be a finite number in [0, {high:.17g}], got {value!r}"[:200])
    if integer:
        if value != int(value):
            raise InvalidInstance(f"{where}: must be an integer, got {value}")
        return int(value)
    return float(value)


def _count(value: Any, where: str, high: float) -> int:
    """A whole number in [0, high] (see :func:`_number`)."""
    return int(_number(value, where, high, integer=True))


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


def parse_peer_instance(data: Any, name: str = "", source: str = "", objective: str = "throughput",
                        contiguity: str = "splitopt") -> MaxloadInstance:
    """Build a MaxloadInstance from the JSON data of one peer input file; raises a one-line
    InvalidInstance naming the field and value on any defect (InvalidOption for a
    ``contiguity`` not in :data:`CONTIGUITY`): every field's type and range here, then the
    instance's consistency (:func:`check_consistency`)."""
    check_contiguity(contiguity, "contiguity")
    w = _where(source)
    if not isinstance(data, dict):
        raise InvalidInstance(f"{w}: top level must be an object, got {type(data).__name__}")
    if objective not in OBJECTIVES:
        raise InvalidInstance(f"{w}: objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    max_size = _number(_get(data, "maxSizePerFPGA", w), f"{w}.maxSizePerFPGA", MAX_BYTES)
    k = _count(_get(data, "maxFPGAs", w), f"{w}.maxFPGAs", MAX_COUNT)
    l = _count(_get(data, "maxCPUs", w), f"{w}.maxCPUs", MAX_COUNT)
    raw_nodes = _get(data, "nodes", w)
    raw_edges = _get(data, "edges", w)
    if not isinstance(raw_nodes, list):
        raise InvalidInstance(f"{w}.nodes: must be a list, got {type(raw_nodes).__name__}")
    if not isinstance(raw_edges, list):
        raise InvalidInstance(f"{w}.edges: must be a list, got {type(raw_edges).__name__}")
    inst = MaxloadInstance(
        nodes=tuple(_node(raw, f"{w}.nodes[{i}]") for i, raw in enumerate(raw_nodes)),
        edges=tuple(_edge(raw, f"{w}.edges[{i}]") for i, raw in enumerate(raw_edges)),
        max_fpgas=k,
        max_cpus=l,
        max_size_per_fpga=max_size,
        name=name,
        source=source,
        objective=objective,
        contiguity=contiguity,
    )
    check_consistency(inst)
    return inst


def check_consistency(inst: MaxloadInstance) -> None:
    """What an instance must satisfy beyond each field's type and range: node ids unique,
    every edge between known nodes, one outgoing cost per node, the sizes within what
    the memory rows represent exactly (:data:`MAX_BYTES` in all), an acyclic graph.
    InvalidInstance (one line naming the field and value; the fields as the peer file
    names them, under ``inst.source``) otherwise."""
    w = inst.source or "instance"
    seen: set[int] = set()
    for i, node in enumerate(inst.nodes):
        if node.id in seen:
            raise InvalidInstance(f"{w}.nodes[{i}].id: duplicate node id {node.id}")
        seen.add(node.id)
    first_cost: dict[int, tuple[float, int]] = {}
    for i, edge in enumerate(inst.edges):
        at = f"{w}.edges[{i}]"
        u, v, cost = edge.source, edge.target, edge.cost_ms
        for key, x in (("sourceId", u), ("destId", v)):
            if x not in seen:
                raise InvalidInstance(f"{at}.{key}: unknown node id {x} (dangling edge)")
        if u in first_cost:
            c0, v0 = first_cost[u]
            if not math.isclose(cost, c0, rel_tol=COST_TOL, abs_tol=COST_TOL):
                raise InvalidInstance(
                    f"{at}.cost: node {u} has two outgoing costs, {c0} (to {v0}) and {cost} "
                    f"(to {v}); the model needs one cost per source node"
                )
        else:
            first_cost[u] = (cost, v)
    if math.fsum(n.size_bytes for n in inst.nodes) > MAX_BYTES:
        i, big = max(enumerate(inst.nodes), key=lambda item: item[1].size_bytes)
        raise InvalidInstance(f"{w}.nodes[{i}].size: {big.size_bytes:.3g} bytes; the sizes of all nodes total more "
                              f"than 2**53 = {MAX_BYTES:.17g} bytes, beyond what the memory rows represent exactly")
    if len(inst.topo_order) < len(inst.nodes):
        import networkx as nx

        cycle = nx.find_cycle(inst.graph)
        path = " -> ".join(str(x) for x in [u for u, _ in cycle] + [cycle[0][0]])
        raise InvalidInstance(f"{w}.edges: the node graph has a cycle: {path}")


def _node(raw: Any, at: str) -> MaxloadNode:
    """One node of the file (``at``: where it is)."""
    if not isinstance(raw, dict):
        raise InvalidInstance(f"{at}: must be an object, got {type(raw).__name__}")
    nid = _ident(_get(raw, "id", at), f"{at}.id")
    cc = raw.get("colorClass")
    lid = raw.get("layerId")
    node_name = raw.get("name", "")
    return MaxloadNode(
        id=nid,
        cpu_ms=_number(_get(raw, "cpuLatency", at), f"{at}.cpuLatency", MAX_MS),
        fpga_ms=_number(_get(raw, "fpgaLatency", at), f"{at}.fpgaLatency", MAX_MS),
        on_fpga_ok=_flag(_get(raw, "supportedOnFpga", at), f"{at}.supportedOnFpga"),
        is_backward=_flag(_get(raw, "isBackwardNode", at), f"{at}.isBackwardNode"),
        color_class=None if cc is None else _ident(cc, f"{at}.colorClass"),
        size_bytes=_number(_get(raw, "size", at), f"{at}.size", MAX_BYTES),
        name=node_name if isinstance(node_name, str) else str(node_name),
        layer_id=None if lid is None else _ident(lid, f"{at}.layerId"),
    )


def _edge(raw: Any, at: str) -> MaxloadEdge:
    """One edge of the file (``at``: where it is)."""
    if not isinstance(raw, dict):
        raise InvalidInstance(f"{at}: must be an object, got {type(raw).__name__}")
    u = _ident(_get(raw, "sourceId", at), f"{at}.sourceId")
    v = _ident(_get(raw, "destId", at), f"{at}.destId")
    return MaxloadEdge(u, v, _number(_get(raw, "cost", at), f"{at}.cost", MAX_MS))


def is_peer_data(data: Any) -> bool:
    """Whether parsed JSON is a peer dnn-partitioning input (top-level ``nodes``,
    ``edges`` and ``maxFPGAs``, no splitopt ``format``)."""
    return isinstance(data, dict) and PEER_KEYS <= set(data) and "format" not in data


def objective_of_path(path: str | Path) -> str:
    """The objective a peer file asks for: "latency" under a ``latency-inputs`` folder,
    "throughput" otherwise (the peer repository's layout); the folders of the absolute
    path, so that a file named from inside the folder reads the same."""
    return "latency" if "latency-inputs" in Path(path).absolute().parts else "throughput"


def peer_name(path: str | Path) -> str:
    """A peer file's instance name, ``<granularity>/<file stem>`` (e.g.
    ``LayerGraphs/bert24_inference``), from the absolute path: the same however the path is
    spelled (a file named from its own folder had read ``/bert24_inference``, and its plans
    were refused when it was named otherwise)."""
    path = Path(path).absolute()
    return f"{path.parent.name}/{path.stem}"


def read_peer_instance(path: str | Path, objective: str | None = None, contiguity: str = "splitopt") -> MaxloadInstance:
    """Read one peer input file. The name is ``<granularity>/<file stem>``, e.g.
    ``LayerGraphs/bert24_inference``; the objective is what the file's folder asks for
    unless ``objective`` is given; ``contiguity``: the contiguity rule (:data:`CONTIGUITY`)."""
    check_contiguity(contiguity, "contiguity")
    path = Path(path)
    data = read_json(path, InvalidInstance)
    return parse_peer_instance(data, name=peer_name(path), source=str(path),
                               objective=objective or objective_of_path(path), contiguity=contiguity)
