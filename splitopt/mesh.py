"""The mesh / general-topology family (problem ``mesh``, JMSNAS Eq. 2 generalised).

A layer DAG runs on a directed device graph: raw inputs arrive at the source device
(``settings.edge``), every layer runs on one device, tensors travel over links, and the
final outputs (layers read by no layer) are delivered to the sink (``settings.cloud``)
unless ``settings.mesh.deliver_outputs`` is false. Latency is the makespan of a schedule,
not a sum: branches on different devices run at the same time.

Model (what the evaluator computes and both programs in ``splitopt.mesh_program`` encode;
``formulations/mesh_schedule.md`` states it with symbols):

* compute: layer ``i`` on device ``d`` takes ``layer_latency_ms(inst, i, d, c, c)`` ms,
  ``c = settings.cloud_bits``; one layer at a time per device, no preemption;
* tensors: a raw input is held at its own bits, a layer output at ``c`` bits; on a link it
  is sent at ``settings.transmit_bits`` if set (raw inputs at their own bits);
* routing (``settings.mesh.routing``): ``"shortest"`` (default): a tensor goes from device
  ``a`` to ``b`` along the path of the breadth-first tree rooted at ``a`` (fewest hops;
  ties broken by visiting out-links in the order of their target in ``instance.devices``);
  ``"direct"``: only over a link ``a -> b``. A tensor needed on several devices is sent
  once per link of the union of its routes (a multicast tree, since all routes from ``a``
  come from one tree); a device on the way forwards it and needs no copy in memory;
* transfers: store-and-forward per hop (a hop starts when the whole tensor has arrived at
  the hop's sender), each hop is one transfer of ``link_transfer_ms`` (fixed latency plus
  bytes at the link's rate, see ``Instance.link_rate_bits_per_s``); one transfer at a time
  per link, and per serial bus over all its links (a "share" bus gives each link its own
  fixed share, so its links are separate resources); no preemption;
* a device computes while its links transfer (compute and communication overlap);
* tasks of zero duration occupy no resource (they start when their inputs are ready);
* memory per device ``d`` (bytes): weights of its layers (at ``c`` bits) plus the largest
  working set of one of its layers (its distinct input tensors plus its output, held
  sizes). Limit: ``memory_bytes``; for the source device also ``settings.edge_memory_bytes``
  (which defaults to the source's ``memory_bytes``).

A plan (:class:`MeshPlan`) is the device of every layer plus, optionally, an order of the
tasks per resource. The evaluator builds the semi-active schedule: every task starts at
the latest of the ends of its data predecessors and of the previous task on its resource
in that order. Tasks the order leaves out follow the listed ones in the default order
(by tensor/layer position in the file, then hop number, then link order), which never
deadlocks. Times in ms, sizes in bytes, rates in bits/s, compute in MAC/s.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import networkx as nx

from splitopt.errors import InvalidInstance, InvalidPlan
from splitopt.instance import Instance
from splitopt.latency import layer_latency_ms
from splitopt.plan import plan_layers
from splitopt.schedule import Task

PROBLEMS = ("mesh",)
PLAN_FORMAT = "splitopt-mesh-plan/1"
ROUTINGS = ("shortest", "direct")
#: relative tolerance of the memory check (floating-point noise, not slack)
MEMORY_RTOL = 1e-9


# ----- options and instance data --------------------------------------------------------


@dataclass(frozen=True)
class MeshOptions:
    """``settings.mesh``: ``routing`` ("shortest" or "direct") and ``deliver_outputs``
    (final outputs must reach the sink ``settings.cloud``; default true)."""

    routing: str = "shortest"
    deliver_outputs: bool = True


def mesh_options(inst: Instance) -> MeshOptions:
    """Parse ``settings.mesh``; raises InvalidInstance naming the field."""
    raw = dict(inst.settings.mesh)
    known = ("routing", "deliver_outputs")
    for key in raw:
        if key not in known:
            raise InvalidInstance(f"instance.settings.mesh.{key}: unknown option (known: {', '.join(known)})")
    routing = raw.get("routing", "shortest")
    if routing not in ROUTINGS:
        raise InvalidInstance(f"instance.settings.mesh.routing: must be one of {list(ROUTINGS)}, got {routing!r}")
    deliver = raw.get("deliver_outputs", True)
    if not isinstance(deliver, bool):
        raise InvalidInstance(f"instance.settings.mesh.deliver_outputs: must be true or false, got {deliver!r}")
    return MeshOptions(routing, deliver)


def transfer_id(tensor: str, pair: tuple[str, str]) -> str:
    """Task id of the hop of ``tensor`` over link ``pair``: ``"tensor@u->v"``."""
    return f"{tensor}@{pair[0]}->{pair[1]}"


class MeshData:
    """Everything the evaluator and the programs read, computed once per instance:
    durations (ms), sizes (bytes), resources, and the routing trees."""

    def __init__(self, inst: Instance):
        self.inst = inst
        self.options = mesh_options(inst)
        s = inst.settings
        self.source, self.sink = s.edge, s.cloud
        self.devices: tuple[str, ...] = tuple(d.name for d in inst.devices)
        self.dev_index = {d: k for k, d in enumerate(self.devices)}
        self.layers: tuple[str, ...] = tuple(l.name for l in inst.layers)
        self.position = dict(inst.position)
        bits = s.cloud_bits
        self.tensors: tuple[str, ...] = tuple(t.name for t in inst.inputs) + self.layers
        self.tensor_pos = {t: k for k, t in enumerate(self.tensors)}
        self.is_raw = {t: t in inst.input_by_name for t in self.tensors}
        self.readers: dict[str, tuple[str, ...]] = {t: inst.consumers[t] for t in self.tensors}
        self.layer_inputs = {l.name: tuple(dict.fromkeys(l.inputs)) for l in inst.layers}
        self.final = frozenset(n for n in self.layers if not self.readers[n])
        self.held_bytes = {
            t: inst.tensor_elements(t) * (inst.input_by_name[t].bits if self.is_raw[t] else bits) / 8.0
            for t in self.tensors
        }
        self.sent_bytes = {t: inst.tensor_elements(t) * inst.sent_bits(t, bits) / 8.0 for t in self.tensors}
        self.compute_ms = {
            (l.name, d.name): layer_latency_ms(inst, l, d, bits, bits) for l in inst.layers for d in inst.devices
        }
        self.weight_bytes = {l.name: l.weights * bits / 8.0 for l in inst.layers}
        self.working_bytes = {
            n: sum(self.held_bytes[t] for t in self.layer_inputs[n]) + self.held_bytes[n] for n in self.layers
        }
        self.limit = {d.name: d.memory_bytes for d in inst.devices}
        self.limit[self.source] = min(self.limit[self.source], s.edge_memory_bytes)
        # links and their resources
        serial = {b.name for b in inst.buses if b.mode == "serial"}
        self.pairs: tuple[tuple[str, str], ...] = tuple((l.source, l.target) for l in inst.links)
        self.link_index = {p: k for k, p in enumerate(self.pairs)}
        self.link_by_pair = {(l.source, l.target): l for l in inst.links}
        self.resource_of = {
            (l.source, l.target): (l.bus if l.bus in serial else f"{l.source}->{l.target}") for l in inst.links
        }
        self.resources: tuple[str, ...] = self.devices + tuple(dict.fromkeys(self.resource_of.values()))
        self.transfer_ms = {
            (t, p): inst.link_transfer_ms(self.link_by_pair[p], self.sent_bytes[t]) for t in self.tensors for p in self.pairs
        }
        # routing trees: parent[a][v] is the device before v on the route from a
        out: dict[str, list[str]] = {d: [] for d in self.devices}
        for u, v in sorted(self.pairs, key=lambda p: (self.dev_index[p[0]], self.dev_index[p[1]])):
            out[u].append(v)
        self.out_neighbours = out
        graph = nx.DiGraph()
        graph.add_nodes_from(self.devices)
        graph.add_edges_from(self.pairs)
        self.parent: dict[str, dict[str, str]] = {}
        for a in self.devices:
            if self.options.routing == "direct":
                self.parent[a] = {v: a for v in out[a]}
            else:  # breadth-first: fewest hops, ties to the lower device index
                self.parent[a] = dict(nx.bfs_predecessors(
                    graph, a, sort_neighbors=lambda vs: sorted(vs, key=self.dev_index.__getitem__)))
        # subtree[a][v]: destinations b whose route from a passes v (v included)
        self.subtree: dict[str, dict[str, frozenset[str]]] = {}
        for a in self.devices:
            sub: dict[str, set[str]] = {v: set() for v in self.parent[a]}
            for b in self.parent[a]:
                for u, v in self.route(a, b):
                    sub[v].add(b)
            self.subtree[a] = {v: frozenset(bs) for v, bs in sub.items()}
        # ancestors in the layer DAG (for pruning orders)
        self.ancestors = {n: frozenset(nx.ancestors(inst.graph, n)) for n in self.layers}

    # ----- routes ---------------------------------------------------------------------
    def has_route(self, a: str, b: str) -> bool:
        return a == b or b in self.parent[a]

    def route(self, a: str, b: str) -> list[tuple[str, str]]:
        """Links (pairs) from ``a`` to ``b`` in hop order; [] if a == b; raises KeyError
        if there is no route (check ``has_route`` first)."""
        hops = []
        v = b
        while v != a:
            u = self.parent[a][v]
            hops.append((u, v))
            v = u
        return hops[::-1]

    def producer_device(self, device_map: Mapping[str, str], tensor: str) -> str:
        return self.source if self.is_raw[tensor] else device_map[tensor]

    def destinations(self, device_map: Mapping[str, str], tensor: str) -> list[str]:
        """Devices other than the producer's where ``tensor`` must be available (its
        readers' devices, and the sink for a final output when outputs are delivered),
        in device order."""
        a = self.producer_device(device_map, tensor)
        dests = {device_map[r] for r in self.readers[tensor]}
        if self.options.deliver_outputs and tensor in self.final:
            dests.add(self.sink)
        dests.discard(a)
        return sorted(dests, key=self.dev_index.__getitem__)

    def tree(self, device_map: Mapping[str, str], tensor: str) -> list[tuple[tuple[str, str], int]]:
        """Links ``tensor`` crosses (its multicast tree) with their hop number (1-based),
        in default order (hop number, then link order)."""
        a = self.producer_device(device_map, tensor)
        hops: dict[tuple[str, str], int] = {}
        for b in self.destinations(device_map, tensor):
            for k, pair in enumerate(self.route(a, b), start=1):
                hops[pair] = k
        return sorted(hops.items(), key=lambda item: (item[1], self.link_index[item[0]]))


# ----- plans ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeshPlan:
    """``device[layer]`` for every layer, and ``order[resource]``: task ids in the order
    they use the resource (a device name: layer names; a link ``"u->v"`` or serial bus
    name: transfer ids ``"tensor@u->v"``). Resources or tasks left out follow the default
    order (see the module docstring)."""

    device: Mapping[str, str]
    order: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def key(self) -> tuple:
        """Hashable identity, for comparing plans."""
        return (tuple(sorted(self.device.items())), tuple(sorted((r, tuple(v)) for r, v in self.order.items())))

    def layers_on(self, inst: Instance, device: str) -> list[str]:
        return [l.name for l in inst.layers if self.device[l.name] == device]

    def to_dict(self, inst: Instance) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "instance": inst.name,
            "layers": {l.name: {"device": self.device[l.name]} for l in inst.layers},
            "order": {r: list(ids) for r, ids in self.order.items()},
        }


def single_device_plan(inst: Instance, device: str) -> MeshPlan:
    """Every layer on ``device``, default order."""
    return MeshPlan({l.name: device for l in inst.layers})


def plan_from_dict(inst: Instance, data: Any, where: str = "plan") -> MeshPlan:
    """Parse and check a mesh plan; raises InvalidPlan naming the field."""
    layers = plan_layers(inst, data, where, fmt=PLAN_FORMAT)
    device = {}
    for layer in inst.layers:
        entry = layers.get(layer.name)
        if entry is None:
            raise InvalidPlan(f"{where}.layers: layer '{layer.name}' is missing")
        if isinstance(entry, str):
            entry = {"device": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("device"), str):
            raise InvalidPlan(f"{where}.layers.{layer.name}: must be an object with a 'device' name")
        device[layer.name] = entry["device"]
    order_raw = data.get("order", {})
    if not isinstance(order_raw, dict):
        raise InvalidPlan(f"{where}.order: must be an object mapping resource to a list of task ids")
    order = {}
    for res, ids in order_raw.items():
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            raise InvalidPlan(f"{where}.order.{res}: must be a list of task ids (strings)")
        order[res] = tuple(ids)
    plan = MeshPlan(device, order)
    check_plan(inst, plan, where)
    return plan


@dataclass
class _TaskSpec:
    id: str
    kind: str  # "compute" | "transfer"
    resource: str
    duration: float
    preds: list[str]
    key: tuple
    label: str
    tensor: str = ""
    pair: tuple[str, str] | None = None


def _tasks(data: MeshData, device_map: Mapping[str, str], durations: Mapping | None = None) -> dict[str, _TaskSpec]:
    """The tasks of an assignment with their data predecessors; durations in ms (or in
    the units of ``durations``, a map ``("c", layer, device)`` / ``("t", tensor, pair)``
    -> duration, used by the CP-SAT backend for its integer schedule)."""
    tasks: dict[str, _TaskSpec] = {}
    arrival: dict[tuple[str, str], str | None] = {}  # (tensor, device) -> task that makes it available
    for t in data.tensors:
        a = data.producer_device(device_map, t)
        arrival[(t, a)] = None if data.is_raw[t] else t
        for pair, hop in data.tree(device_map, t):
            u, v = pair
            tid = transfer_id(t, pair)
            pred = arrival[(t, u)]
            dur = data.transfer_ms[(t, pair)] if durations is None else durations[("t", t, pair)]
            tasks[tid] = _TaskSpec(tid, "transfer", data.resource_of[pair], dur, [] if pred is None else [pred],
                                   (data.tensor_pos[t], hop, data.link_index[pair]), t, t, pair)
            arrival[(t, v)] = tid
    for n in data.layers:
        d = device_map[n]
        preds = []
        for t in data.layer_inputs[n]:
            src = arrival[(t, d)]
            if src is not None:
                preds.append(src)
        dur = data.compute_ms[(n, d)] if durations is None else durations[("c", n, d)]
        tasks[n] = _TaskSpec(n, "compute", d, dur, preds, (data.tensor_pos[n], 0, -1), n, n)
    return tasks


def _check_routes(data: MeshData, device_map: Mapping[str, str], where: str) -> None:
    for n in data.layers:
        d = device_map[n]
        for t in data.layer_inputs[n]:
            a = data.producer_device(device_map, t)
            if not data.has_route(a, d):
                what = "raw input" if data.is_raw[t] else "output of layer"
                raise InvalidPlan(
                    f"{where}.layers.{n}.device: '{d}' reads the {what} '{t}' from '{a}', but there is no "
                    f"{'link' if data.options.routing == 'direct' else 'route'} from '{a}' to '{d}'"
                )
        if data.options.deliver_outputs and n in data.final and not data.has_route(d, data.sink):
            raise InvalidPlan(
                f"{where}.layers.{n}.device: final output '{n}' on '{d}' cannot reach sink '{data.sink}' (no route)"
            )


def check_plan(inst: Instance, plan: MeshPlan, where: str = "plan", data: MeshData | None = None) -> None:
    """Raise InvalidPlan unless every layer is on a known device, every tensor can reach
    its readers (and final outputs the sink) over existing links, and the orders name
    known resources and existing tasks, each once. Memory is not checked here: the
    evaluator reports it."""
    data = data or MeshData(inst)
    for n in data.layers:
        if n not in plan.device:
            raise InvalidPlan(f"{where}.layers: layer '{n}' is missing")
        if plan.device[n] not in data.dev_index:
            raise InvalidPlan(
                f"{where}.layers.{n}.device: unknown device '{plan.device[n]}' (devices: {', '.join(data.devices)})"
            )
    extra = [n for n in plan.device if n not in data.position]
    if extra:
        raise InvalidPlan(f"{where}.layers.{extra[0]}: unknown layer")
    _check_routes(data, plan.device, where)
    tasks = _tasks(data, plan.device)
    for res, ids in plan.order.items():
        if res not in data.resources:
            raise InvalidPlan(f"{where}.order.{res}: unknown resource (resources: {', '.join(data.resources)})")
        seen = set()
        for tid in ids:
            if tid in seen:
                raise InvalidPlan(f"{where}.order.{res}: task '{tid}' listed twice")
            seen.add(tid)
            task = tasks.get(tid)
            if task is None:
                raise InvalidPlan(f"{where}.order.{res}: task '{tid}' does not exist in this plan")
            if task.resource != res:
                raise InvalidPlan(f"{where}.order.{res}: task '{tid}' runs on '{task.resource}', not '{res}'")


# ----- the schedule -------------------------------------------------------------------------


def _semi_active(tasks: Mapping[str, _TaskSpec], order: Mapping[str, Sequence[str]]) -> dict[str, tuple[float, float]] | None:
    """Start and end of every task in the semi-active schedule of the per-resource
    orders (listed tasks first, the rest in default order); None if the orders and the
    data dependencies form a cycle. Zero-duration tasks occupy no resource."""
    chains: dict[str, list[str]] = {}
    for res, ids in order.items():
        chains[res] = [tid for tid in ids if tasks[tid].duration > 0]
    rest: dict[str, list[_TaskSpec]] = {}
    for task in tasks.values():
        if task.duration > 0:
            rest.setdefault(task.resource, []).append(task)
    for res, items in rest.items():
        listed = set(chains.get(res, ()))
        chains[res] = chains.get(res, []) + [t.id for t in sorted(items, key=lambda t: t.key) if t.id not in listed]
    prev: dict[str, str] = {}
    for ids in chains.values():
        for a, b in zip(ids, ids[1:]):
            prev[b] = a
    indegree = {tid: len(t.preds) + (1 if tid in prev else 0) for tid, t in tasks.items()}
    succ: dict[str, list[str]] = {tid: [] for tid in tasks}
    for tid, t in tasks.items():
        for p in t.preds:
            succ[p].append(tid)
        if tid in prev:
            succ[prev[tid]].append(tid)
    heap = [(t.key, tid) for tid, t in tasks.items() if indegree[tid] == 0]
    heapq.heapify(heap)
    times: dict[str, tuple[float, float]] = {}
    while heap:
        _, tid = heapq.heappop(heap)
        t = tasks[tid]
        start = 0.0
        for p in t.preds:
            start = max(start, times[p][1])
        if tid in prev:
            start = max(start, times[prev[tid]][1])
        times[tid] = (start, start + t.duration)
        for s in succ[tid]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(heap, (tasks[s].key, s))
    if len(times) < len(tasks):
        return None
    return times


def schedule_makespan(data: MeshData, device_map: Mapping[str, str], order: Mapping[str, Sequence[str]],
                      durations: Mapping | None = None) -> float:
    """Makespan of the semi-active schedule (ms, or the units of ``durations``); raises
    InvalidPlan on a deadlock."""
    times = _semi_active(_tasks(data, device_map, durations), order)
    if times is None:
        raise InvalidPlan("plan.order: the orders contradict the data dependencies (deadlock)")
    return max((e for _, e in times.values()), default=0.0)


# ----- the evaluator ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceUse:
    """One device's load: compute ms, layer count, memory bytes (weights + largest
    working set, at ``peak_layer``) and its limit."""

    device: str
    layers: int
    compute_ms: float
    weight_bytes: float
    working_bytes: float
    peak_layer: str | None
    memory_limit: float

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.working_bytes


@dataclass(frozen=True)
class LinkUse:
    """One link's traffic: transfers, bytes and busy ms."""

    link: str
    resource: str
    transfers: int
    bytes: float
    transfer_ms: float


@dataclass(frozen=True)
class MeshMetrics:
    """What a mesh plan costs: the makespan (ms) of its schedule, per-device compute and
    memory, per-link transfers, and the schedule itself (``splitopt.schedule.Task``)."""

    makespan_ms: float
    devices: tuple[DeviceUse, ...]
    links: tuple[LinkUse, ...]
    schedule: tuple[Task, ...]
    violations: tuple[str, ...] = ()

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def objective_ms(self) -> float:
        """What the solvers minimise: the makespan (ms)."""
        return self.makespan_ms

    @property
    def total_ms(self) -> float:
        return self.makespan_ms

    @property
    def compute_ms(self) -> dict[str, float]:
        return {d.device: d.compute_ms for d in self.devices}

    @property
    def memory_bytes(self) -> dict[str, float]:
        return {d.device: d.memory_bytes for d in self.devices}

    @property
    def transfer_ms(self) -> dict[str, float]:
        return {l.link: l.transfer_ms for l in self.links}

    @property
    def transfer_bytes(self) -> dict[str, float]:
        return {l.link: l.bytes for l in self.links}

    def to_dict(self) -> dict:
        return {
            "makespan_ms": self.makespan_ms,
            "total_ms": self.makespan_ms,
            "devices": [
                {"device": d.device, "layers": d.layers, "compute_ms": d.compute_ms, "weight_bytes": d.weight_bytes,
                 "working_bytes": d.working_bytes, "peak_layer": d.peak_layer, "memory_bytes": d.memory_bytes,
                 "memory_limit": d.memory_limit}
                for d in self.devices
            ],
            "links": [
                {"link": l.link, "resource": l.resource, "transfers": l.transfers, "bytes": l.bytes,
                 "transfer_ms": l.transfer_ms}
                for l in self.links
            ],
            "schedule": [t.to_dict() for t in self.schedule],
            "feasible": self.feasible,
            "violations": list(self.violations),
        }


def memory_use(data: MeshData, device_map: Mapping[str, str]) -> dict[str, tuple[float, float, str | None]]:
    """Device -> (weight bytes, largest working set bytes, layer of that working set)."""
    out = {d: [0.0, 0.0, None] for d in data.devices}
    for n in data.layers:
        entry = out[device_map[n]]
        entry[0] += data.weight_bytes[n]
        if entry[2] is None or data.working_bytes[n] > entry[1]:
            entry[1], entry[2] = data.working_bytes[n], n
    return {d: (w, p, l) for d, (w, p, l) in out.items()}


def memory_violations(data: MeshData, device_map: Mapping[str, str]) -> list[str]:
    out = []
    for d, (w, p, layer) in memory_use(data, device_map).items():
        if w + p > data.limit[d] * (1 + MEMORY_RTOL):
            out.append(
                f"device '{d}' memory {w + p:,.0f} B (weights {w:,.0f} + working set {p:,.0f} of '{layer}') "
                f"exceeds its limit {data.limit[d]:,.0f} B"
            )
    return out


def evaluate(inst: Instance, plan: MeshPlan, data: MeshData | None = None) -> MeshMetrics:
    """The independent evaluator: simulate the plan's semi-active schedule (see the
    module docstring); raises InvalidPlan if the plan is malformed or its orders
    deadlock, and lists memory violations in ``violations``."""
    data = data or MeshData(inst)
    check_plan(inst, plan, data=data)
    tasks = _tasks(data, plan.device)
    times = _semi_active(tasks, plan.order)
    if times is None:
        raise InvalidPlan("plan.order: the orders contradict the data dependencies (deadlock); "
                          "every resource's order must follow the data flow")
    schedule = []
    for tid, task in sorted(tasks.items(), key=lambda kv: (times[kv[0]][0], kv[1].key)):
        start, end = times[tid]
        label = task.label if task.kind == "compute" else f"{task.tensor} {task.pair[0]}->{task.pair[1]}"
        schedule.append(Task(task.resource, task.kind, label, start, end))
    makespan = max((e for _, e in times.values()), default=0.0)
    mem = memory_use(data, plan.device)
    devices = []
    for d in data.devices:
        on = [n for n in data.layers if plan.device[n] == d]
        w, p, layer = mem[d]
        devices.append(DeviceUse(d, len(on), sum(data.compute_ms[(n, d)] for n in on), w, p, layer, data.limit[d]))
    links = []
    for pair in data.pairs:
        hops = [t for t in tasks.values() if t.pair == pair]
        links.append(LinkUse(f"{pair[0]}->{pair[1]}", data.resource_of[pair], len(hops),
                             sum(data.sent_bytes[t.tensor] for t in hops), sum(t.duration for t in hops)))
    return MeshMetrics(makespan, tuple(devices), tuple(links), tuple(schedule), tuple(memory_violations(data, plan.device)))


# ----- instance checks, start plan, diagnosis ---------------------------------------------------


def check_instance(inst: Instance) -> None:
    """Mesh consistency: options, resource names, a connected topology (every device
    reachable from the source and reaching the sink), latencies defined, and every
    layer's weights fitting some device. One-line InvalidInstance naming the element."""
    mesh_options(inst)
    dev_names = {d.name for d in inst.devices}
    for bus in inst.buses:
        if bus.name in dev_names:
            raise InvalidInstance(f"instance.buses: bus '{bus.name}' has the name of a device (resource names must differ)")
    for i, link in enumerate(inst.links):
        if link.bus is None and f"{link.source}->{link.target}" in {b.name for b in inst.buses}:
            raise InvalidInstance(f"instance.links[{i}]: link name '{link.source}->{link.target}' equals a bus name")
    data = MeshData(inst)  # computes every latency: raises on a missing latency entry
    # connectivity is a property of the link graph, whatever the routing rule
    links = nx.DiGraph()
    links.add_nodes_from(data.devices)
    links.add_edges_from(data.pairs)
    reached = nx.descendants(links, data.source) | {data.source}
    for k, d in enumerate(data.devices):
        if d not in reached:
            raise InvalidInstance(
                f"instance.devices[{k}]: device '{d}' cannot be reached from source '{data.source}' over the links "
                "(disconnected topology)"
            )
    reaching = nx.ancestors(links, data.sink) | {data.sink}
    for k, d in enumerate(data.devices):
        if d not in reaching:
            raise InvalidInstance(
                f"instance.devices[{k}]: device '{d}' has no path to sink '{data.sink}' over the links "
                "(disconnected topology)"
            )
    biggest = max(data.devices, key=lambda d: data.limit[d])
    for k, n in enumerate(data.layers):
        if data.weight_bytes[n] > data.limit[biggest] * (1 + MEMORY_RTOL):
            raise InvalidInstance(
                f"instance.graph.layers[{k}]: layer '{n}' has {data.weight_bytes[n]:,.0f} B of weights, more than "
                f"any device's memory (largest: '{biggest}', {data.limit[biggest]:,.0f} B)"
            )


def start_plan(inst: Instance, data: MeshData | None = None) -> MeshPlan | None:
    """The best memory-feasible plan among every single-device plan and the HEFT
    heuristic's plan (None if none is feasible)."""
    from splitopt.baselines.mesh import heft_plan

    data = data or MeshData(inst)
    best, best_ms = None, float("inf")
    candidates = []
    for d in data.devices:
        plan = single_device_plan(inst, d)
        try:
            _check_routes(data, plan.device, "plan")
        except InvalidPlan:
            continue
        candidates.append(plan)
    heft = heft_plan(inst, data)
    if heft is not None:
        candidates.append(heft)
    for plan in candidates:
        m = evaluate(inst, plan, data)
        if m.feasible and m.makespan_ms < best_ms:
            best, best_ms = plan, m.makespan_ms
    return best


def diagnose_infeasibility(inst: Instance) -> str:
    """Name the binding limit of an instance no plan can satisfy (memory is the only
    limit; routes restrict where layers may go)."""
    from splitopt.mesh_program import assignment_feasible

    data = MeshData(inst)
    for n in data.layers:
        need = data.weight_bytes[n] + data.working_bytes[n]
        fits = [d for d in data.devices if need <= data.limit[d] * (1 + MEMORY_RTOL)]
        if not fits:
            biggest = max(data.devices, key=lambda d: data.limit[d])
            return (
                f"infeasible: layer '{n}' needs {need:,.0f} B (weights {data.weight_bytes[n]:,.0f} + working set "
                f"{data.working_bytes[n]:,.0f}), more than any device's memory limit (largest: '{biggest}', "
                f"{data.limit[biggest]:,.0f} B)"
            )
    if assignment_feasible(data):
        return "feasible: a plan meets every memory limit"
    if not assignment_feasible(data, lifted=set(data.devices)):
        return (
            f"infeasible: even without memory limits no placement lets every tensor reach its readers"
            f"{' and the final outputs reach sink ' + repr(data.sink) if data.options.deliver_outputs else ''} "
            f"with routing '{data.options.routing}' (settings.mesh.routing)"
        )
    alone = [d for d in data.devices if assignment_feasible(data, lifted={d})]
    total = sum(data.weight_bytes.values())
    if alone:
        names = ", ".join(f"'{d}' ({data.limit[d]:,.0f} B)" for d in alone)
        return (
            f"infeasible: device memory limits bind; lifting any one of these alone would allow a plan: {names} "
            f"(the model has {total:,.0f} B of weights; routes restrict where layers may go)"
        )
    limits = ", ".join(f"'{d}' {data.limit[d]:,.0f} B" for d in data.devices)
    return (
        f"infeasible: the device memory limits together ({limits}) cannot hold the model's "
        f"{total:,.0f} B of weights plus working sets under the routing constraints; no single limit lifted helps"
    )


# ----- exact backends ------------------------------------------------------------------------------


def solve_exact(backend_name: str, inst: Instance, options):
    """``cpsat``, ``milp-cbc``, ``milp-highs`` on the mesh programs (``splitopt.mesh_program``)."""
    from splitopt import mesh_program

    return mesh_program.solve(backend_name, inst, options)


# ----- report -----------------------------------------------------------------------------------------


def print_metrics(console, inst: Instance, plan: MeshPlan, metrics: MeshMetrics, show_layers: bool = True) -> None:
    """Per-device table, per-link table and (``show_layers``) the schedule."""
    from rich.table import Table

    data = MeshData(inst)
    console.print(
        f"[bold]Makespan[/bold] [bold]{metrics.makespan_ms:.4f} ms[/bold]  (source '{data.source}', sink "
        f"'{data.sink}', routing {data.options.routing}, outputs {'delivered' if data.options.deliver_outputs else 'stay'})"
    )
    table = Table(title="Devices")
    for col in ("device", "layers", "compute ms", "weights MB", "working set MB", "memory MB", "limit MB", "use %"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for d in metrics.devices:
        share = 100.0 * d.memory_bytes / d.memory_limit if d.memory_limit else 0.0
        table.add_row(d.device, str(d.layers), f"{d.compute_ms:.4f}", f"{d.weight_bytes / 1e6:,.3f}",
                      f"{d.working_bytes / 1e6:,.3f}", f"{d.memory_bytes / 1e6:,.3f}", f"{d.memory_limit / 1e6:,.0f}",
                      f"{share:.1f}")
    console.print(table)
    table = Table(title="Links")
    for col in ("link", "resource", "transfers", "bytes", "busy ms"):
        table.add_column(col, justify="left" if col in ("link", "resource") else "right")
    for l in metrics.links:
        table.add_row(l.link, l.resource, str(l.transfers), f"{l.bytes:,.0f}", f"{l.transfer_ms:.4f}")
    console.print(table)
    for v in metrics.violations:
        console.print(f"[red]VIOLATION[/red] {v}")
    if show_layers:
        table = Table(title="Schedule")
        for col in ("start ms", "end ms", "resource", "kind", "what"):
            table.add_column(col, justify="right" if col.endswith("ms") else "left")
        for t in metrics.schedule:
            table.add_row(f"{t.start_ms:.4f}", f"{t.end_ms:.4f}", t.resource, t.kind, t.label)
        console.print(table)


def save_plan(inst: Instance, plan: MeshPlan, path) -> None:
    from pathlib import Path

    Path(path).write_text(json.dumps(plan.to_dict(inst), indent=1) + "\n")


__all__ = ["PROBLEMS", "MeshData", "MeshMetrics", "MeshOptions", "MeshPlan", "check_instance", "check_plan",
           "diagnose_infeasibility", "evaluate", "mesh_options", "plan_from_dict", "print_metrics",
           "schedule_makespan", "single_device_plan", "solve_exact", "start_plan", "transfer_id"]
