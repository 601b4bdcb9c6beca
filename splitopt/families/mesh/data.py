"""The mesh family's data (problem ``mesh``, JMSNAS Eq. 2 generalised): options, durations,
sizes, resources and routing trees, computed once per instance.

The model (shared by the evaluator and both programs):

A layer DAG runs on a directed device graph: raw inputs arrive at the source device
(``settings.edge``), every layer runs on one device, tensors travel over links, and the
final outputs (layers read by no layer) are delivered to the sink (``settings.cloud``)
unless ``settings.mesh.deliver_outputs`` is false. Latency is the makespan of a schedule,
not a sum: branches on different devices run at the same time.

Model (what the evaluator computes and both programs, ``cpsat.py`` and ``milp.py``, encode;
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

from dataclasses import dataclass
from typing import Mapping

from splitopt.core.errors import InvalidInstance
from splitopt.core.latency import layer_latency_ms
from splitopt.families.mesh.settings import MeshInstance

ROUTINGS = ("shortest", "direct")
#: relative tolerance of the memory check (floating-point noise, not slack)
MEMORY_RTOL = 1e-9


@dataclass(frozen=True)
class MeshOptions:
    """``settings.mesh``: ``routing`` ("shortest" or "direct") and ``deliver_outputs``
    (final outputs must reach the sink ``settings.cloud``; default true)."""

    routing: str = "shortest"
    deliver_outputs: bool = True


def mesh_options(inst: MeshInstance) -> MeshOptions:
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

    def __init__(self, inst: MeshInstance):
        import networkx as nx

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
                for _, v in self.route(a, b):
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


def mesh_data(inst: MeshInstance) -> MeshData:
    """The instance's MeshData, built once and kept with the instance."""
    return inst.derived(("mesh", "data"), lambda: MeshData(inst))
