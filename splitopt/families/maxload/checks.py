"""The maxload family's check: what an instance must satisfy beyond each field's type
and range (which the importer, ``instance.parse_peer_instance``, checks as it reads a
peer file): node ids unique, every edge between known nodes, one outgoing cost per node,
the sizes within what the memory rows represent exactly, and an acyclic graph. The
importer ends with it; ``MaxloadFamily.check`` runs it on any instance, one built in
Python included. One-line InvalidInstance naming the field and value."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from splitopt.core.errors import InvalidInstance

if TYPE_CHECKING:
    from splitopt.families.maxload.instance import MaxloadInstance

#: two costs of one node's outgoing edges are "the same" within this tolerance
COST_TOL = 1e-9
#: the largest size (bytes) of a node, and of all nodes together: integers up to 2**53 are
#: exact in a double, so every memory row is
MAX_BYTES = float(2**53)


def check_maxload(inst: MaxloadInstance) -> None:
    """Raise InvalidInstance (one line naming the field and value; the fields as the peer
    file names them, under ``inst.source``) unless ``inst`` is consistent."""
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
