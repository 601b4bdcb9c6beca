"""Reachability in the forward DAG as bitsets, for fast convexity tests of unions of
colour groups (the contiguity rule of ``check_placement``: each device's forward nodes
convex in the forward DAG ``G[F]``; under contiguity "authors" the graph and the nodes
are those of ``contiguity.ContiguityGraph``, artificial forward nodes and edges included,
and a node on a cycle counts among its own descendants and ancestors).

A set ``S`` of forward nodes is convex iff no node outside ``S`` is both reachable from
``S`` and reaching ``S``: ``desc(S) & anc(S) & ~S == 0``, where ``desc(S)`` (``anc(S)``)
is the union of the strict descendants (ancestors) of its nodes in ``G[F]``. Sets are
Python ints (bit ``i``: the ``i``-th forward node in topological order), so a test costs
a few word operations per 64 forward nodes. ``convexity_witness`` in ``evaluate`` stays
the judge; this is the search's fast test of the same rule (tests/test_maxload_search.py
compares them).

Written here rather than taken from networkx: networkx answers reachability one query at a
time (``descendants``) and has no convexity test of a node set, while the searches ask
thousands of "is this union of groups convex" questions per second.
"""

from __future__ import annotations

from dataclasses import dataclass

from splitopt.families.maxload.contiguity import contiguity_graph
from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance


@dataclass(frozen=True)
class Reach:
    """Per forward (contiguity) node ``v``: ``bit[v]``, ``desc[v]`` and ``anc[v]``
    (strict, in G[F] or the contiguity graph); per colour group ``g``: ``fwd[g]`` (the bits
    of its forward nodes), ``gdesc[g]``, ``ganc[g]`` (unions over them); ``gnodes[g]``: its
    forward (contiguity) nodes."""

    bit: dict[int, int]
    desc: dict[int, int]
    anc: dict[int, int]
    fwd: tuple[int, ...]
    gdesc: tuple[int, ...]
    ganc: tuple[int, ...]
    gnodes: tuple[tuple[int, ...], ...] = ()

    def convex(self, groups) -> bool:
        """Whether the forward nodes of the union of ``groups`` are convex in G[F]."""
        s = d = a = 0
        for g in groups:
            s |= self.fwd[g]
            d |= self.gdesc[g]
            a |= self.ganc[g]
        return not (d & a & ~s)

    @staticmethod
    def convex_masks(s: int, d: int, a: int) -> bool:
        """Whether a set with forward bits ``s``, descendants ``d`` and ancestors ``a`` is
        convex."""
        return not (d & a & ~s)

    def still_convex_without(self, inst: MaxloadInstance, gr: Groups, s: int, g: int) -> bool:
        """For a convex set with forward bits ``s`` holding group ``g``: whether it stays
        convex once ``g`` leaves. Only a node of ``g`` can then lie between two of the
        remaining nodes (any other outside node already did before), so it is enough that
        none of them has both an ancestor and a descendant left in the set."""
        rest = s & ~self.fwd[g]
        if not rest:
            return True
        for v in (self.gnodes[g] if self.gnodes else gr.members[g]):
            b = self.bit.get(v)
            if b is not None and self.desc[v] & rest and self.anc[v] & rest:
                return False
        return True


def reach_of(inst: MaxloadInstance, gr: Groups | None = None) -> Reach:
    """The bitsets of :class:`Reach` (kept with the instance)."""
    def build() -> Reach:
        groups = gr if gr is not None else groups_of(inst)
        cg = contiguity_graph(inst)
        bit, desc, anc = cg.reach_masks()
        gnodes = cg.group_nodes(groups)
        fwd, gdesc, ganc = [], [], []
        for nodes in gnodes:
            s = d = a = 0
            for v in nodes:
                s |= bit[v]
                d |= desc[v]
                a |= anc[v]
            fwd.append(s)
            gdesc.append(d)
            ganc.append(a)
        return Reach(bit, desc, anc, tuple(fwd), tuple(gdesc), tuple(ganc), gnodes)

    return inst.derived(("maxload", "reach"), build)
