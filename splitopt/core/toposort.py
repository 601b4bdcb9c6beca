"""A deterministic topological order: Kahn's algorithm taking the ready node of least key
first (``networkx.lexicographical_topological_sort``'s order). Here rather than in
networkx because importing networkx costs more than a small solve takes
(``benchmarks/results/startup.md``)."""

from __future__ import annotations

import heapq
from typing import Any, Callable, Hashable, Iterable, Mapping, TypeVar

Node = TypeVar("Node", bound=Hashable)


def least_first_order(nodes: Iterable[Node], successors: Mapping[Node, Iterable[Node]],
                      key: Callable[[Node], Any] | None = None) -> list[Node]:
    """The nodes in topological order, the ready node of least ``key`` (else the node
    itself) first. A node listed twice as a successor counts twice. A graph with a cycle
    gives a shorter list (the nodes that no cycle precedes): compare its length."""
    nodes = list(nodes)
    rank = key or (lambda v: v)
    indeg = dict.fromkeys(nodes, 0)
    for v in nodes:
        for w in successors.get(v, ()):
            indeg[w] += 1
    ready = [(rank(v), i, v) for i, v in enumerate(nodes) if indeg[v] == 0]
    heapq.heapify(ready)
    position = {v: i for i, v in enumerate(nodes)}
    order: list[Node] = []
    while ready:
        _, _, v = heapq.heappop(ready)
        order.append(v)
        for w in successors.get(v, ()):
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(ready, (rank(w), position[w], w))
    return order
