"""The parameter tables both multiview programs are built from
(``formulations/multiview_bus.md``): cut points, per-view sensor and transfer times,
aggregator times per architecture, an incumbent with one common point, symmetry groups
and the horizon. Units: ms. The evaluator does not use these tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from splitopt.families.multiview.architecture import layer_ms
from splitopt.families.multiview.data import REDUCE, data
from splitopt.families.multiview.evaluate import evaluate
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance
from splitopt.families.multiview.start import allowed_cut


@dataclass
class Tables:
    """Parameters of the programs (ms, bytes).

    ``points[p] = (cut name, arch index or None)``: a tensor cut point (arch None), the
    ``mv.reduce`` point of arch ``a``, or (one view only) a graph output ``t`` tied to arch
    ``(t, None)``, where nothing is sent; the list order is the symmetry-breaking index.
    ``A[v][p]``/``C[v][p]``: view ``v``'s sensor compute and transfer time at point ``p``
    (only allowed points: memory fits, required layers on the sensor); ``Ag[p]``:
    aggregator time of the backbone up to tensor point ``p``; ``P[a]``: aggregator time of
    arch ``a``'s whole pre-fusion pipeline; ``F[a]``: fusion + post-fusion time;
    ``compat[p]``: archs under which point ``p`` is a cut point; ``groups``: lists of
    interchangeable views (same allowed points and durations), in sensor order."""

    sensors: tuple[str, ...]
    serial: bool
    archs: list[tuple[str, int | None]]
    points: list[tuple[str, int | None]]
    A: list[dict[int, float]]
    C: list[dict[int, float]]
    Ag: dict[int, float]
    P: list[float]
    F: list[float]
    compat: dict[int, list[int]]
    groups: list[list[int]] = field(default_factory=list)
    horizon: float = 0.0
    #: the best common-point plan and its makespan (ms): the hint and an upper bound
    incumbent: MultiviewPlan | None = None
    upper: float | None = None

    @property
    def V(self) -> int:
        return len(self.sensors)

    def B_terms(self, v: int) -> tuple[dict[int, float], dict[int, float]]:
        """View ``v``'s aggregator time as (coefficients on x[a], coefficients on y[v,p]):
        ``B_v = sum_a P[a] x[a] - sum_{tensor p} Ag[p] y[v,p] - sum_{reduce p} P[a(p)] y[v,p]``."""
        xs = {a: self.P[a] for a in range(len(self.archs))}
        ys = {}
        for p in self.A[v]:
            name, a = self.points[p]
            ys[p] = -(self.P[a] if a is not None else self.Ag[p])
        return xs, ys


def build_tables(inst: MultiviewInstance) -> Tables:
    """The parameter tables, computed from the instance (layer latencies from
    ``splitopt.families.multiview.architecture.layer_ms``, transfer times from ``Instance.link_transfer_ms``,
    memory feasibility from the evaluator's App. G walk via ``allowed_cut``)."""
    d = data(inst)
    bits_out = inst.settings.transmit_bits if inst.settings.transmit_bits is not None else d.bits
    archs = list(d.allowed_archs)  # those meeting min_accuracy
    any_fusion = d.fusions[0]
    agg = d.aggregator

    def sum_ms(names, device):
        return sum(layer_ms(inst, any_fusion, None, n, device) for n in names)

    points: list[tuple[str, int | None]] = []
    compat: dict[int, list[int]] = {}
    for t in d.cuts:
        ok = [a for a, (f, w) in enumerate(archs) if t in d.points(f, w)]
        if d.views == 1 and t != d.input and not inst.consumers[t] and (t, None) in archs:
            # one view fused at a graph output without compression: no fusion layer reads
            # the output, so nothing is sent (Table 4 "All-on-sen."); a point of its own
            tied = archs.index((t, None))
            ok.remove(tied)
            compat[len(points)] = [tied]
            points.append((t, tied))
        if ok:
            compat[len(points)] = ok
            points.append((t, None))
    for arch, (_, w) in enumerate(archs):
        if w is not None:
            compat[len(points)] = [arch]
            points.append((REDUCE, arch))
    Ag = {p: sum_ms(d.prefix[t], agg) for p, (t, a) in enumerate(points) if a is None}
    P, F = [], []
    for f, w in archs:
        pre = sum_ms(d.prefix[f], agg)
        P.append(pre + (layer_ms(inst, f, w, REDUCE, agg) if w is not None else 0.0))
        post = [l.name for l in inst.layers if l.name not in set(d.prefix[f])]
        F.append((layer_ms(inst, f, w, "mv.fuse", agg) if d.has_fuse(w) else 0.0) + sum_ms(post, agg))
    A, C = [], []
    for s in d.sensors:
        link = d.links[s]
        a_row, c_row = {}, {}
        for p, (t, a) in enumerate(points):
            fusion, width = archs[a] if a is not None else archs[compat[p][0]]
            if not allowed_cut(inst, fusion, width, s, t):
                continue
            if a is None:
                a_row[p] = sum_ms(d.prefix[t], s)
                nbytes = inst.tensor_elements(t) * inst.sent_bits(t, d.bits) / 8.0
            elif t != REDUCE:  # the tied output point above: nothing sent
                a_row[p] = sum_ms(d.prefix[t], s)
                nbytes = 0.0
            else:
                assert width is not None  # a mv.reduce point belongs to an arch with a width (above)
                a_row[p] = sum_ms(d.prefix[fusion], s) + layer_ms(inst, fusion, width, REDUCE, s)
                nbytes = width * d.spatial[fusion] * bits_out / 8.0
            c_row[p] = inst.link_transfer_ms(link, nbytes)
        A.append(a_row)
        C.append(c_row)
    tables = Tables(sensors=d.sensors, serial=d.serial, archs=archs, points=points, A=A, C=C, Ag=Ag, P=P, F=F,
                    compat=compat)
    # an upper bound: the best plan with one common point (evaluated by the evaluator);
    # a point whose sensor + transfer time alone passes it is never in a better plan
    tables.incumbent = best_uniform_plan(inst, tables)
    if tables.incumbent is not None:
        tables.upper = evaluate(inst, tables.incumbent).makespan_ms
        cap = tables.upper * (1 + 1e-9) + 1e-9
        for v in range(tables.V):
            for p in [p for p in A[v] if A[v][p] + C[v][p] > cap]:
                del A[v][p], C[v][p]
    sig: dict[tuple, list[int]] = {}
    for v in range(tables.V):
        key = tuple(sorted((p, A[v][p], C[v][p]) for p in A[v]))
        sig.setdefault(key, []).append(v)
    tables.groups = [g for g in sig.values() if len(g) > 1]
    max_a = max((max(r.values()) for r in A if r), default=0.0)
    tables.horizon = (max_a + sum(max(r.values(), default=0.0) for r in C) + tables.V * max(P, default=0.0)
                      + max(F, default=0.0))
    if tables.upper is not None:
        tables.horizon = min(tables.horizon, tables.upper * (1 + 1e-9) + 1e-9)
    return tables


def best_uniform_plan(inst: MultiviewInstance, t: Tables) -> MultiviewPlan | None:
    """The best plan in which every view uses the same point, by the tables' recursion
    (the evaluator's schedule with orders by sensor index); None if no point is allowed
    on every sensor."""
    best, best_ms = None, float("inf")
    for p, archs in t.compat.items():
        if any(p not in t.A[v] for v in range(t.V)):
            continue
        for a in archs:
            if t.points[p][1] is not None and t.points[p][1] != a:
                continue
            b = t.P[a] - (t.Ag[p] if t.points[p][1] is None else t.P[a])
            bus = agg = 0.0
            for v in range(t.V):
                arrive = (max(bus, t.A[v][p]) if t.serial else t.A[v][p]) + t.C[v][p]
                bus = arrive
                agg = max(agg, arrive) + b
            ms = agg + t.F[a]
            if ms < best_ms:
                best_ms, best = ms, (a, p)
    if best is None:
        return None
    a, p = best
    f, w = t.archs[a]
    cuts = {s: t.points[p][0] for s in t.sensors}
    return MultiviewPlan(f, w, cuts, t.sensors if t.serial else None, t.sensors)


def no_plan_possible(t: Tables) -> bool:
    return any(not row for row in t.A)


def decode(inst: MultiviewInstance, t: Tables, arch: int, point_of: list[int], bus_start: Sequence[float],
           agg_start: Sequence[float]) -> MultiviewPlan:
    """Plan from the chosen arch, each view's point and the tasks' start times (orders:
    by start time, ties by sensor index)."""
    f, w = t.archs[arch]
    cuts = {t.sensors[v]: t.points[point_of[v]][0] for v in range(t.V)}
    idx = range(t.V)
    bus = tuple(t.sensors[v] for v in sorted(idx, key=lambda v: (bus_start[v], v))) if t.serial else None
    agg = tuple(t.sensors[v] for v in sorted(idx, key=lambda v: (agg_start[v], v)))
    return MultiviewPlan(f, w, cuts, bus, agg)


def point_index(t: Tables, plan: MultiviewPlan) -> tuple[int, list[int]]:
    arch = t.archs.index((plan.fusion, plan.width))
    out = []
    for s in t.sensors:
        cut = plan.cuts[s]
        tied = [p for p, (name, a) in enumerate(t.points) if name == cut and a == arch]
        out.append(tied[0] if tied else next(p for p, (name, a) in enumerate(t.points) if name == cut and a is None))
    return arch, out
