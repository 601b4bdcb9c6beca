"""The multiview CP-SAT model (``formulations/multiview_bus.md``): one architecture and one
cut point per view, interval variables for the transfers (no overlap on a serial bus)
and the aggregator's per-view tasks, the fusion task after all of them; time in integer
units of ``unit`` ms chosen so that every row's activity stays below 2**30 (or-tools
#5293), with the rounding tolerance ``tol`` stated in the formulation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from splitopt.core.program import Program
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance
from splitopt.families.multiview.tables import Tables, build_tables, decode, no_plan_possible, point_index

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel

#: CP-SAT: every linear row's summed |coefficient| x |variable bound| stays below this
#: (OR-Tools 9.15 presolve overflows past 2**31: or-tools #5293)
CPSAT_ACTIVITY = 2**30
#: CP-SAT: the horizon is resolved into at most this many integer units (finer units
#: made the 12-view MobileNetV2 serial instance find no schedule within 30 s)
CPSAT_HORIZON_UNITS = 2**20


def build_cpsat(inst: MultiviewInstance, start: MultiviewPlan | None) -> Program:
    """CP-SAT: interval variables, no-overlap on the aggregator and (serial) on the bus,
    its constraints in the formulation's order. The hint is the tables' incumbent (the
    best plan with one common cut point), not ``start``."""
    from ortools.sat.python import cp_model

    t = build_tables(inst)
    if no_plan_possible(t):  # a sensor has no allowed cut point: an infeasible model says so
        m = cp_model.CpModel()
        m.add_bool_or([])
        return Program(kind="cpsat", model=m, decode=lambda values: None, stats={"no_cut_point": True})
    unit, tol = time_unit(t)
    d = integer_durations(t, unit)
    m = cp_model.CpModel()
    v = choice_variables(m, t)
    view_tasks(m, t, d, v)
    resource_rows(m, t, v)
    fusion_and_makespan(m, t, d, v)
    symmetry_rows(m, t, v)
    if t.incumbent is not None:
        hint(m, t, v, t.incumbent)
    # presolve on: every row's activity stays below 2**30 (the time unit above), clear of or-tools #5293
    return Program(kind="cpsat", model=m, decode=lambda values: decode_plan(inst, t, v, values), unit_ms=unit,
                   tolerance_ms=tol, presolve=True,
                   stats={"unit_ms": unit, "archs": len(t.archs), "points": len(t.points),
                          "booleans": len(t.archs) + sum(len(r) for r in v.y)})


def time_unit(t: Tables) -> tuple[float, float]:
    """Section "CP-SAT integer time scaling": the unit (ms) that keeps every row's
    activity below 2**30 and the horizon within ``CPSAT_HORIZON_UNITS`` units, and the
    rounding tolerance ``u (1.5 V + 1)`` ms."""
    V = t.V
    row_ms = [sum(abs(c) for c in t.B_terms(v)[0].values()) + sum(abs(c) for c in t.B_terms(v)[1].values())
              for v in range(V)]
    row_ms += [sum(r.values()) for r in t.A] + [sum(r.values()) for r in t.C] + [sum(t.F)]
    unit = max((max(row_ms) + t.horizon) / CPSAT_ACTIVITY, 4 * t.horizon / CPSAT_ACTIVITY,
               t.horizon / CPSAT_HORIZON_UNITS, 1e-12)
    return unit, unit * (1.5 * V + 1.0)


@dataclass
class IntegerDurations:
    """The tables in integer units (``q``: ms to units, rounded): the horizon ``H``, the
    aggregator times ``Ag`` per tensor point and ``P`` per architecture (raised to at least
    ``Ag`` of its compatible points), the fusion times ``F``."""

    q: Callable[[float], int]
    H: int
    Ag: dict[int, int]
    P: list[int]
    F: list[int]


def integer_durations(t: Tables, unit: float) -> IntegerDurations:
    """The tables' durations rounded to whole units."""
    def q(ms: float) -> int:
        return int(round(ms / unit))

    Ag = {p: q(val) for p, val in t.Ag.items()}
    P = [q(val) for val in t.P]
    for p, archs in t.compat.items():  # P[a] >= Ag[p] for compatible points despite rounding
        if p in Ag:
            for a in archs:
                P[a] = max(P[a], Ag[p])
    return IntegerDurations(q, q(t.horizon) + 2 * t.V + 2, Ag, P, [q(val) for val in t.F])


@dataclass
class ViewVariables:
    """The model's variables (section "Variables") as the steps add them: ``x``, ``y``, and
    per view its bus and aggregator tasks (starts ``sb``, ``sa``, ends ``eb``, ``ea``,
    intervals), the sensor, transfer and aggregator durations ``A``, ``C``, ``B`` and its
    point's index ``idx``."""

    x: list
    y: list[dict]
    sb: list = field(default_factory=list)
    eb: list = field(default_factory=list)
    sa: list = field(default_factory=list)
    ea: list = field(default_factory=list)
    bus_iv: list = field(default_factory=list)
    agg_iv: list = field(default_factory=list)
    idx: list = field(default_factory=list)
    a_vars: list = field(default_factory=list)
    b_vars: list = field(default_factory=list)
    c_vars: list = field(default_factory=list)


def choice_variables(m: CpModel, t: Tables) -> ViewVariables:
    """Constraints 1 (one architecture, one point per view) and 2 (compatibility)."""
    x = [m.new_bool_var(f"x[{a}]") for a in range(len(t.archs))]
    m.add_exactly_one(x)
    y = [{p: m.new_bool_var(f"y[{v},{p}]") for p in t.A[v]} for v in range(t.V)]
    for v in range(t.V):
        m.add_exactly_one(y[v].values())
        for p, lit in y[v].items():
            m.add_bool_or([x[a] for a in t.compat[p]]).only_enforce_if(lit)
    return ViewVariables(x, y)


def view_tasks(m: CpModel, t: Tables, d: IntegerDurations, v: ViewVariables) -> None:
    """Constraint 3 per view: the durations ``A_v``, ``C_v``, ``B_v`` tied to the linear
    forms, the bus and aggregator intervals, ``sb_v >= A_v`` and ``sa_v >= eb_v``."""
    x, y, q, P, H = v.x, v.y, d.q, d.P, d.H
    nA = len(t.archs)
    for w in range(t.V):
        A_int = {p: q(t.A[w][p]) for p in y[w]}
        C_int = {p: q(t.C[w][p]) for p in y[w]}
        a_v = m.new_int_var(0, max(A_int.values()), f"A[{w}]")
        c_v = m.new_int_var(0, max(C_int.values()), f"C[{w}]")
        b_v = m.new_int_var(0, max(P), f"B[{w}]")
        m.add(a_v == sum(A_int[p] * y[w][p] for p in y[w]))
        m.add(c_v == sum(C_int[p] * y[w][p] for p in y[w]))
        b_y = {p: -(P[t.points[p][1]] if t.points[p][1] is not None else d.Ag[p]) for p in y[w]}
        m.add(b_v == sum(P[a] * x[a] for a in range(nA)) + sum(b_y[p] * y[w][p] for p in y[w]))
        s1, e1 = m.new_int_var(0, H, f"sb[{w}]"), m.new_int_var(0, H, f"eb[{w}]")
        s2, e2 = m.new_int_var(0, H, f"sa[{w}]"), m.new_int_var(0, H, f"ea[{w}]")
        v.bus_iv.append(m.new_interval_var(s1, c_v, e1, f"bus[{w}]"))
        v.agg_iv.append(m.new_interval_var(s2, b_v, e2, f"agg[{w}]"))
        m.add(s1 >= a_v)
        v.a_vars.append(a_v)
        v.b_vars.append(b_v)
        v.c_vars.append(c_v)
        m.add(s2 >= e1)
        v.sb.append(s1)
        v.eb.append(e1)
        v.sa.append(s2)
        v.ea.append(e2)
        v.idx.append(sum(p * y[w][p] for p in y[w]))


def resource_rows(m: CpModel, t: Tables, v: ViewVariables) -> None:
    """Constraints 4 (share bus: a transfer starts when its sensor is done), 5 (no overlap
    on the aggregator and, serial, on the bus) and 6 (dominance: the aggregator serves views
    in the order their transfers end; one literal per pair orders both resources)."""
    V, sb, eb, sa, ea = t.V, v.sb, v.eb, v.sa, v.ea
    if t.serial:
        m.add_no_overlap(v.bus_iv)
    else:
        for w in range(V):
            m.add(sb[w] == v.a_vars[w])
    m.add_no_overlap(v.agg_iv)
    for a in range(V):
        for b in range(a + 1, V):
            first = m.new_bool_var(f"first[{a},{b}]")
            m.add(eb[a] <= eb[b]).only_enforce_if(first)
            m.add(ea[a] <= sa[b]).only_enforce_if(first)
            m.add(eb[b] <= eb[a]).only_enforce_if(first.negated())
            m.add(ea[b] <= sa[a]).only_enforce_if(first.negated())
            if t.serial:
                m.add(eb[a] <= sb[b]).only_enforce_if(first)
                m.add(eb[b] <= sb[a]).only_enforce_if(first.negated())


def fusion_and_makespan(m: CpModel, t: Tables, d: IntegerDurations, v: ViewVariables) -> None:
    """Constraint 3's fusion and makespan rows, constraint 8 (the redundant bounds for the
    relaxation: the aggregator serves every view after the earliest arrival ``r0``; a
    serial bus carries every transfer after the earliest sensor end ``a0``), and the
    objective (the makespan)."""
    V, q, H = t.V, d.q, d.H
    fs = m.new_int_var(0, H, "fusion_start")
    for w in range(V):
        m.add(fs >= v.ea[w])
    r0 = min(q(t.A[w][p] + t.C[w][p]) for w in range(V) for p in t.A[w])
    a0 = min(q(t.A[w][p]) for w in range(V) for p in t.A[w])
    m.add(fs >= r0 + sum(v.b_vars))
    if t.serial:
        m.add(fs >= a0 + sum(v.c_vars))
    mk = m.new_int_var(0, H + max(d.F), "makespan")
    m.add(mk == fs + sum(d.F[a] * v.x[a] for a in range(len(t.archs))))
    m.minimize(mk)


def symmetry_rows(m: CpModel, t: Tables, v: ViewVariables) -> None:
    """Constraint 7: interchangeable views take non-decreasing points; equal points go in
    index order."""
    idx, sb, sa = v.idx, v.sb, v.sa
    for group in t.groups:
        for a, b in zip(group, group[1:]):
            m.add(idx[a] <= idx[b])
            eq = m.new_bool_var(f"same[{a},{b}]")
            m.add(idx[a] == idx[b]).only_enforce_if(eq)
            m.add(idx[a] < idx[b]).only_enforce_if(eq.negated())
            if t.serial:
                m.add(sb[a] <= sb[b]).only_enforce_if(eq)
            m.add(sa[a] <= sa[b]).only_enforce_if(eq)


def hint(m: CpModel, t: Tables, v: ViewVariables, plan: MultiviewPlan) -> None:
    """``plan``'s architecture and points as the model's hint."""
    arch, pts = point_index(t, plan)
    for a in range(len(t.archs)):
        m.add_hint(v.x[a], int(a == arch))
    for w in range(t.V):
        for p, lit in v.y[w].items():
            m.add_hint(lit, int(p == pts[w]))


def decode_plan(inst: MultiviewInstance, t: Tables, v: ViewVariables, values) -> MultiviewPlan:
    """The chosen architecture, each view's point, the orders by start time."""
    value = values.__getitem__
    arch = next(a for a in range(len(t.archs)) if value(v.x[a].index) > 0.5)
    pts = [next(p for p, lit in v.y[w].items() if value(lit.index) > 0.5) for w in range(t.V)]
    return decode(inst, t, arch, pts, [value(s_.index) for s_ in v.sb], [value(s_.index) for s_ in v.sa])
