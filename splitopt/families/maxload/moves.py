"""Baseline ``group-moves``: local search from the ``intervals`` plan, moving one colour
group at a time to another device while every placement rule holds.

A move takes a group off its device onto another one (an accelerator or a core, the
first empty one of each kind standing for all empty ones); it is allowed when the group
may run there (``supportedOnFpga``), the accelerator's memory stays within
``maxSizePerFPGA`` (bytes) and both devices' forward nodes stay convex (bitsets of
``reach``). It is taken when it lowers the max-load (ms), or keeps it and lowers the sum
of squared loads (so that one of several equally loaded bottlenecks can be relieved).
Sweeps over the groups repeat until none improves or the sweep budget is spent. A
device's load is kept exactly as ``evaluate.max_load`` defines it: compute plus, on an
accelerator, each outside node feeding it and each inside node feeding outside once
(per node and device, the number of its successors on that device is kept, so a move
costs O(degree of the group)). The plan is judged by the family's evaluator like every
other.

Unlike the ``intervals`` plan, a device may end up holding several stretches of the
order (e.g. an accelerator holding the graph's head and tail around a core, or one heavy
operator of a parallel branch moved off it): the moves only keep convexity, which is the
rule.

Written here: general local-search libraries (e.g. OR-tools' routing local search) do not
model this load (transfers paid per node and device) or the convexity rule; the moves
need both incrementally to be fast.
"""

from __future__ import annotations

import math
from typing import Callable

from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement
from splitopt.families.maxload.reach import reach_of

#: sweeps over all groups at most (each sweep tries every group on every device)
MAX_SWEEPS = 200
#: a move must lower the max-load or the sum of squares by more than this (relative)
EPS = 1e-9


class LoadState:
    """A placement of the colour groups with every device's load (ms), memory (bytes)
    and convexity bitsets, updated move by move."""

    def __init__(self, inst: MaxloadInstance, gr: Groups, where: list[int]):
        self.inst, self.gr = inst, gr
        self.reach = reach_of(inst, gr)
        self.k, self.l = len(inst.fpgas), len(inst.cpus)
        self.names = list(inst.fpgas) + list(inst.cpus)
        n_dev = self.k + self.l
        self.where = list(where)
        self.node_dev = {v: where[gr.of[v]] for v in inst.node_by_id}
        self.outdeg = {v: len(inst.successors[v]) for v in inst.node_by_id}
        self.cost = inst.out_cost
        # count[v][d]: successors of v on device d
        self.count = {v: [0] * n_dev for v in inst.node_by_id}
        for v, d in self.node_dev.items():
            for u in inst.predecessors[v]:
                self.count[u][d] += 1
        # per group: its nodes' predecessors and how many of their successors it holds
        self.touch: list[dict[int, int]] = []
        for members in gr.members:
            t: dict[int, int] = {v: 0 for v in members}
            for v in members:
                for u in inst.predecessors[v]:
                    t[u] = t.get(u, 0) + 1
            self.touch.append(t)
        self.fpga_ms = [gr.fpga_ms(inst, g) for g in range(len(gr.members))]
        self.cpu_ms = [gr.cpu_ms(inst, g) for g in range(len(gr.members))]
        self.size = [gr.size(inst, g) for g in range(len(gr.members))]
        self.ok = [gr.fpga_ok(inst, g) for g in range(len(gr.members))]
        self.compute = [0.0] * n_dev
        self.mem = [0.0] * n_dev
        self.transfer = [0.0] * n_dev
        self.s = [0] * n_dev
        self.d = [0] * n_dev
        self.a = [0] * n_dev
        self.groups_on: list[set[int]] = [set() for _ in range(n_dev)]
        for g, dev in enumerate(self.where):
            self.groups_on[dev].add(g)
            self.compute[dev] += self.fpga_ms[g] if dev < self.k else self.cpu_ms[g]
            self.mem[dev] += self.size[g]
        for dev in range(n_dev):
            self._masks(dev)
        for v, dev in self.node_dev.items():
            for d in range(self.k):
                self.transfer[d] += self._contrib(v, d, dev, self.count[v][d])

    def _masks(self, dev: int) -> None:
        s = d = a = 0
        r = self.reach
        for g in self.groups_on[dev]:
            s |= r.fwd[g]
            d |= r.gdesc[g]
            a |= r.ganc[g]
        self.s[dev], self.d[dev], self.a[dev] = s, d, a

    def _contrib(self, v: int, d: int, dev_v: int, count: int) -> float:
        """What node ``v`` (on ``dev_v``, with ``count`` successors on accelerator ``d``)
        adds to ``d``'s transfers (ms)."""
        if dev_v == d:
            return self.cost[v] if count < self.outdeg[v] else 0.0
        return self.cost[v] if count > 0 else 0.0

    def load(self, dev: int) -> float:
        return self.compute[dev] + (self.transfer[dev] if dev < self.k else 0.0)

    def allowed(self, g: int, b: int) -> bool:
        """Whether group ``g`` may move to device ``b`` (support, memory, convexity)."""
        a = self.where[g]
        if b < self.k and (not self.ok[g] or self.mem[b] + self.size[g] > self.inst.max_size_per_fpga):
            return False
        r = self.reach
        if not r.convex_masks(self.s[b] | r.fwd[g], self.d[b] | r.gdesc[g], self.a[b] | r.ganc[g]):
            return False
        return r.still_convex_without(self.inst, self.gr, self.s[a], g)

    def loads_after(self, g: int, b: int) -> tuple[float, float]:
        """The loads (ms) of the group's device and of ``b`` once ``g`` moves to ``b``."""
        a = self.where[g]
        ta, tb = self.transfer[a], self.transfer[b]
        for v, inside in self.touch[g].items():
            dv = self.node_dev[v]
            new_dv = b if self.gr.of[v] == g else dv
            ca, cb = self.count[v][a], self.count[v][b]
            if a < self.k:
                ta += self._contrib(v, a, new_dv, ca - inside) - self._contrib(v, a, dv, ca)
            if b < self.k:
                tb += self._contrib(v, b, new_dv, cb + inside) - self._contrib(v, b, dv, cb)
        la = self.compute[a] - (self.fpga_ms[g] if a < self.k else self.cpu_ms[g]) + (ta if a < self.k else 0.0)
        lb = self.compute[b] + (self.fpga_ms[g] if b < self.k else self.cpu_ms[g]) + (tb if b < self.k else 0.0)
        return la, lb

    def move(self, g: int, b: int) -> None:
        """Group ``g`` onto device ``b`` (no check: see :meth:`allowed`)."""
        a = self.where[g]
        if a == b:
            return
        for v in self.touch[g]:
            for d in (a, b):
                if d < self.k:
                    self.transfer[d] -= self._contrib(v, d, self.node_dev[v], self.count[v][d])
        for v in self.gr.members[g]:
            self.node_dev[v] = b
        for v, inside in self.touch[g].items():
            self.count[v][a] -= inside
            self.count[v][b] += inside
        for v in self.touch[g]:
            for d in (a, b):
                if d < self.k:
                    self.transfer[d] += self._contrib(v, d, self.node_dev[v], self.count[v][d])
        self.compute[a] -= self.fpga_ms[g] if a < self.k else self.cpu_ms[g]
        self.compute[b] += self.fpga_ms[g] if b < self.k else self.cpu_ms[g]
        self.mem[a] -= self.size[g]
        self.mem[b] += self.size[g]
        self.groups_on[a].discard(g)
        self.groups_on[b].add(g)
        self.where[g] = b
        self._masks(a)
        self._masks(b)

    def placement(self, source: str = "") -> MaxloadPlacement:
        return MaxloadPlacement({v: self.names[self.where[self.gr.of[v]]] for v in self.inst.node_by_id}, source=source)


def improve(inst: MaxloadInstance, start: MaxloadPlacement, sweeps: int = MAX_SWEEPS,
            out_of_time: Callable[[], bool] | None = None) -> MaxloadPlacement:
    """``start`` (meeting every rule) improved by group moves (module docstring); the
    plan so far once ``out_of_time()`` turns true (checked after each sweep)."""
    gr = groups_of(inst)
    names = list(inst.fpgas) + list(inst.cpus)
    index = {d: i for i, d in enumerate(names)}
    where = [index[start.device[members[0]]] for members in gr.members]
    st = LoadState(inst, gr, where)
    n_dev = len(names)
    loads = [st.load(d) for d in range(n_dev)]
    for _ in range(sweeps):
        improved = False
        for g in range(len(gr.members)):
            a = st.where[g]
            peak = max(loads)
            base = math.fsum(x * x for x in loads)
            best = None
            empty_seen = {True: False, False: False}  # accelerator, core
            for b in range(n_dev):
                if b == a:
                    continue
                if not st.groups_on[b]:
                    kind = b < st.k
                    if empty_seen[kind]:
                        continue
                    empty_seen[kind] = True
                if not st.allowed(g, b):
                    continue
                la, lb = st.loads_after(g, b)
                new = loads[:]
                new[a], new[b] = la, lb
                key = (max(new), math.fsum(x * x for x in new))
                if key[0] < peak * (1 - EPS) or (key[0] <= peak * (1 + EPS) and key[1] < base * (1 - EPS)):
                    if best is None or key < best[0]:
                        best = (key, b)
            if best is not None:
                st.move(g, best[1])
                loads = [st.load(d) for d in range(n_dev)]
                improved = True
        if not improved or (out_of_time is not None and out_of_time()):
            break
    return st.placement(source="group-moves")

