"""Colour groups: the nodes that must share a device (one group per colour class, one per
node without a class), numbered by the topological position of their first node."""

from __future__ import annotations

import math
from dataclasses import dataclass

from splitopt.families.maxload.instance import MaxloadInstance


@dataclass(frozen=True)
class Groups:
    """The nodes that must share a device: one group per colour class, one per node
    without a class. ``members[g]`` are node ids; groups are numbered by the topological
    position of their first node (the order the "first" symmetry breaking uses)."""

    members: tuple[tuple[int, ...], ...]
    of: dict[int, int]  # node id -> group

    def fpga_ok(self, inst: MaxloadInstance, g: int) -> bool:
        return all(inst.node_by_id[v].on_fpga_ok for v in self.members[g])

    def size(self, inst: MaxloadInstance, g: int) -> float:
        return math.fsum(inst.node_by_id[v].size_bytes for v in self.members[g])

    def fpga_ms(self, inst: MaxloadInstance, g: int) -> float:
        return math.fsum(inst.node_by_id[v].fpga_ms for v in self.members[g])

    def cpu_ms(self, inst: MaxloadInstance, g: int) -> float:
        return math.fsum(inst.node_by_id[v].cpu_ms for v in self.members[g])


def groups_of(inst: MaxloadInstance) -> Groups:
    position = {v: i for i, v in enumerate(inst.topo_order)}
    key: dict[int, tuple[str, int]] = {}
    for n in inst.nodes:
        key[n.id] = ("c", n.color_class) if n.color_class is not None else ("n", n.id)
    buckets: dict[tuple[str, int], list[int]] = {}
    for v in inst.topo_order:
        buckets.setdefault(key[v], []).append(v)
    ordered = sorted(buckets.values(), key=lambda ids: position[ids[0]])
    members = tuple(tuple(ids) for ids in ordered)
    return Groups(members, {v: g for g, ids in enumerate(members) for v in ids})
