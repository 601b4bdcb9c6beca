"""Checks of a mesh instance: options, resource names, a connected topology, latencies
defined, every layer's weights fitting some device."""

from __future__ import annotations

from splitopt.core.errors import InvalidInstance
from splitopt.families.mesh.data import MEMORY_RTOL, mesh_data, mesh_options
from splitopt.core.jsonfile import byte_count
from splitopt.families.mesh.settings import MeshInstance


def check_mesh(inst: MeshInstance) -> None:
    """Mesh consistency: options, resource names, a connected topology (every device
    reachable from the source and reaching the sink), latencies defined, and every
    layer's weights fitting some device. One-line InvalidInstance naming the element."""
    import networkx as nx

    mesh_options(inst)
    dev_names = {d.name for d in inst.devices}
    for bus in inst.buses:
        if bus.name in dev_names:
            raise InvalidInstance(f"instance.buses: bus '{bus.name}' has the name of a device (resource names must differ)")
    for i, link in enumerate(inst.links):
        if link.bus is None and f"{link.source}->{link.target}" in {b.name for b in inst.buses}:
            raise InvalidInstance(f"instance.links[{i}]: link name '{link.source}->{link.target}' equals a bus name")
    data = mesh_data(inst)  # computes every latency: raises on a missing latency entry
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
                f"instance.graph.layers[{k}]: layer '{n}' has {byte_count(data.weight_bytes[n])} B of weights, "
                "more than "
                f"any device's memory (largest: '{biggest}', {byte_count(data.limit[biggest])} B)"
            )
