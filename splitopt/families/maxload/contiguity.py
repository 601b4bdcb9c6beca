"""The contiguity rule of the maxload family (rule 5 of ``formulations/maxload_models.md``):
which node sets must be convex, in which graph. One place, so that the evaluator, the
programs, the exact DP and the searches read the same rule.

The instance's ``contiguity`` (``MaxloadInstance.contiguity``) selects one of
:data:`~splitopt.families.maxload.instance.CONTIGUITY`:

* ``"splitopt"`` (default): every device's forward nodes are convex in the forward DAG
  ``G[F]``; backward nodes are not constrained, so a colour group with no forward node (a
  backward-only colour class, a backward node without a class) goes anywhere.
* ``"authors"``: the peer DP's rule (``code/throughput-dp/dp.cpp``,
  ``InputInstance::createArtificialForwardNodes``, called from ``main`` unless
  ``IGNORE_ORPHANED_BACKWARD_NODES``). Every colour group with no forward node ("orphaned
  backward" in dp.cpp; a backward node without a class is a class of its own there too)
  gets one artificial forward node on its group's device (no time, no size, no
  transfers), and for every backward edge ``u -> v`` between two different groups of
  which at least one is such a group, an artificial edge from the forward nodes of
  ``v``'s group to those of ``u``'s group (the mirror image of the backward edge; a
  group's forward nodes are its artificial node where it has one; dp.cpp has one node per
  contracted class, so here every forward node of the one group is joined to every
  forward node of the other). Then every device's forward nodes, artificial ones
  included, are convex in that extended graph. The artificial edges may close cycles
  (dp.cpp then fuses the strongly connected components into one class): convexity keeps
  a cycle on one device, since a path around it would leave the device and come back.

:class:`ContiguityGraph` is that graph (the forward DAG for ``"splitopt"``); its node ids
are the forward node ids and, for the artificial nodes, fresh integers above every node
id, each with its ``host``: a node of its group, whose device it takes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Mapping

from splitopt.core.errors import NotApplicable
from splitopt.core.toposort import least_first_order
from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance


@dataclass(frozen=True)
class ContiguityGraph:
    """The graph in which every device's contiguity nodes must be convex.

    ``nodes``: the contiguity nodes, the forward nodes in the instance's topological order
    then the artificial ones; ``succ`` / ``pred``: their edges (forward edges, plus the
    artificial ones); ``host[v]``: the node whose device ``v`` takes (``v`` itself for a
    forward node); ``artificial``: the artificial node ids (empty for ``"splitopt"``)."""

    rule: str
    nodes: tuple[int, ...]
    succ: Mapping[int, tuple[int, ...]]
    pred: Mapping[int, tuple[int, ...]]
    host: Mapping[int, int]
    artificial: frozenset[int]

    @property
    def binds(self) -> bool:
        """Whether the rule differs from ``"splitopt"`` on this instance (some artificial
        node exists)."""
        return bool(self.artificial)

    def on(self, ids: Iterable[int]) -> frozenset[int]:
        """The contiguity nodes of a device holding the node ids ``ids``."""
        ids = frozenset(ids)
        return frozenset(v for v in self.nodes if self.host[v] in ids)

    def label(self, v: int) -> str:
        """``v`` as messages print it: an artificial node as ``fwd[h]`` (``h`` its host)."""
        return f"fwd[{self.host[v]}]" if v in self.artificial else str(v)

    def witness(self, ids: Iterable[int]) -> list[int] | None:
        """None if the contiguity nodes of a device holding ``ids`` are convex, else a path
        ``a -> w -> ... -> b`` of contiguity nodes with a, b on the device and w not (a
        path that leaves and comes back; around a cycle ``a`` may equal ``b``). Linear
        time: a breadth-first search from the outside successors through outside nodes."""
        inside = self.on(ids)
        if not inside:
            return None
        first = {w: u for u in sorted(inside) for w in self.succ[u] if w not in inside}
        parent: dict[int, int | None] = {w: None for w in first}
        queue = deque(parent)
        while queue:
            u = queue.popleft()
            for w in self.succ[u]:
                if w not in inside and w not in parent:
                    parent[w] = u
                    queue.append(w)
        back = sorted((u, b) for u in parent for b in self.succ[u] if b in inside)
        if not back:
            return None
        w, b = back[0]
        path = [w]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])  # type: ignore[arg-type]
        path.reverse()
        return [first[path[0]]] + path + [b]

    def group_nodes(self, gr: Groups) -> tuple[tuple[int, ...], ...]:
        """Per colour group: its contiguity nodes."""
        out: list[list[int]] = [[] for _ in gr.members]
        for v in self.nodes:
            out[gr.of[self.host[v]]].append(v)
        return tuple(tuple(x) for x in out)

    def reach_masks(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        """(bit, desc, anc) as Python ints over ``nodes`` (bit ``i``: ``nodes[i]``):
        ``desc[v]`` / ``anc[v]`` the nodes reachable from / reaching ``v`` by a path of at
        least one edge (so ``v`` itself where it lies on a cycle). A set ``S`` is convex
        iff ``desc(S) & anc(S) & ~S == 0``; cycles are handled through their strongly
        connected components."""
        index = {v: i for i, v in enumerate(self.nodes)}
        n = len(self.nodes)
        comp = strong_components(n, [[index[w] for w in self.succ[v]] for v in self.nodes])
        n_comp = max(comp, default=-1) + 1
        cbits = [0] * n_comp
        cyclic = [False] * n_comp
        csucc: list[set[int]] = [set() for _ in range(n_comp)]
        for i, v in enumerate(self.nodes):
            cbits[comp[i]] |= 1 << i
            for w in self.succ[v]:
                j = index[w]
                if comp[j] == comp[i]:
                    cyclic[comp[i]] = True
                else:
                    csucc[comp[i]].add(comp[j])
        order = least_first_order(range(n_comp), {c: sorted(s) for c, s in enumerate(csucc)})
        cdesc = [0] * n_comp
        for c in reversed(order):
            m = cbits[c] if cyclic[c] else 0
            for d in csucc[c]:
                m |= cbits[d] | cdesc[d]
            cdesc[c] = m
        canc = [0] * n_comp
        for c in order:
            if cyclic[c]:
                canc[c] |= cbits[c]
            for d in csucc[c]:
                canc[d] |= cbits[c] | canc[c]
        bit = {v: 1 << i for i, v in enumerate(self.nodes)}
        desc = {v: cdesc[comp[i]] for i, v in enumerate(self.nodes)}
        anc = {v: canc[comp[i]] for i, v in enumerate(self.nodes)}
        return bit, desc, anc


def strong_components(n: int, succ: list[list[int]] | list[set[int]]) -> list[int]:
    """Component index of each vertex ``0..n-1`` of a directed graph (Kosaraju,
    iterative; here so that a small solve does not import networkx)."""
    order: list[int] = []
    seen = [False] * n
    for s in range(n):
        if seen[s]:
            continue
        seen[s] = True
        stack = [(s, iter(succ[s]))]
        while stack:
            v, it = stack[-1]
            for w in it:
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, iter(succ[w])))
                    break
            else:
                stack.pop()
                order.append(v)
    pred: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        for w in succ[v]:
            pred[w].append(v)
    comp = [-1] * n
    count = 0
    for s in reversed(order):
        if comp[s] >= 0:
            continue
        comp[s] = count
        todo = [s]
        while todo:
            v = todo.pop()
            for w in pred[v]:
                if comp[w] < 0:
                    comp[w] = count
                    todo.append(w)
        count += 1
    return comp


def contiguity_graph(inst: MaxloadInstance) -> ContiguityGraph:
    """The :class:`ContiguityGraph` of ``inst``'s rule (kept with the instance)."""
    def build() -> ContiguityGraph:
        fwd = inst.forward_ids
        nodes = [v for v in inst.topo_order if v in fwd]
        succ: dict[int, list[int]] = {v: [w for w in inst.successors[v] if w in fwd] for v in nodes}
        host = {v: v for v in nodes}
        artificial: set[int] = set()
        if inst.contiguity == "authors":
            gr = groups_of(inst)
            group_fwd: list[list[int]] = [[v for v in m if v in fwd] for m in gr.members]
            fresh = max((n.id for n in inst.nodes), default=-1) + 1
            for g, members in enumerate(gr.members):
                if not group_fwd[g]:
                    a = fresh
                    fresh += 1
                    nodes.append(a)
                    succ[a] = []
                    host[a] = members[0]
                    artificial.add(a)
                    group_fwd[g] = [a]
            orphan = {gr.of[host[a]] for a in artificial}
            for e in inst.edges:  # dp.cpp: "tie the new artificial nodes with edges like a mirror image"
                gu, gv = gr.of[e.source], gr.of[e.target]
                if gu == gv or e.source in fwd or e.target in fwd or not ({gu, gv} & orphan):
                    continue
                for x in group_fwd[gv]:
                    for y in group_fwd[gu]:
                        if y not in succ[x]:
                            succ[x].append(y)
        pred: dict[int, list[int]] = {v: [] for v in nodes}
        for v in nodes:
            for w in succ[v]:
                pred[w].append(v)
        return ContiguityGraph(inst.contiguity, tuple(nodes), {v: tuple(s) for v, s in succ.items()},
                               {v: tuple(p) for v, p in pred.items()}, host, frozenset(artificial))

    return inst.derived(("maxload", "contiguity"), build)


def splitopt_rule_only(inst: MaxloadInstance, who: str) -> None:
    """NotApplicable where ``who`` implements only the ``"splitopt"`` contiguity rule and
    the instance's rule differs from it (contiguity "authors" with a colour group that
    has no forward node)."""
    cg = contiguity_graph(inst)
    if cg.binds:
        raise NotApplicable(
            f"{who}: contiguity 'authors' (artificial forward nodes for {len(cg.artificial)} colour group(s) "
            f"without a forward node, e.g. node {cg.host[min(cg.artificial)]}) is implemented for the throughput "
            "objective only; use contiguity 'splitopt'")
