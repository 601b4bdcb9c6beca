"""Reachability in the forward DAG as bitsets, for fast convexity tests of unions of
colour groups (the contiguity rule of ``check_placement``: each device's forward nodes
convex in the forward DAG ``G[F]``).

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

from splitopt.families.maxload.groups import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance


@dataclass(frozen=True)
class Reach:
    """Per forward node ``v``: ``bit[v]``, ``desc[v]`` and ``anc[v]`` (strict, in G[F]);
    per colour group ``g``: ``fwd[g]`` (the bits of its forward nodes), ``gdesc[g]``,
    ``ganc[g]`` (unions over them)."""

    bit: dict[int, int]
    desc: dict[int, int]
    anc: dict[int, int]
    fwd: tuple[int, ...]
    gdesc: tuple[int, ...]
    ganc: tuple[int, ...]

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
        for v in gr.members[g]:
            b = self.bit.get(v)
            if b is not None and self.desc[v] & rest and self.anc[v] & rest:
                return False
        return True


def reach_of(inst: MaxloadInstance, gr: Groups | None = None) -> Reach:
    """The bitsets of :class:`Reach` (kept with the instance)."""
    def build() -> Reach:
        groups = gr if gr is not None else groups_of(inst)
        fwd_ids = inst.forward_ids
        order = [v for v in inst.topo_order if v in fwd_ids]
        bit = {v: 1 << i for i, v in enumerate(order)}
        desc: dict[int, int] = {}
        for v in reversed(order):
            m = 0
            for w in inst.successors[v]:
                if w in bit:
                    m |= bit[w] | desc[w]
            desc[v] = m
        anc: dict[int, int] = {}
        for v in order:
            m = 0
            for u in inst.predecessors[v]:
                if u in bit:
                    m |= bit[u] | anc[u]
            anc[v] = m
        fwd, gdesc, ganc = [], [], []
        for members in groups.members:
            s = d = a = 0
            for v in members:
                if v in bit:
                    s |= bit[v]
                    d |= desc[v]
                    a |= anc[v]
            fwd.append(s)
            gdesc.append(d)
            ganc.append(a)
        return Reach(bit, desc, anc, tuple(fwd), tuple(gdesc), tuple(ganc))

    return inst.derived(("maxload", "reach"), build)
