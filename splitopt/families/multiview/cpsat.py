"""The multiview CP-SAT model (``formulations/multiview_bus.md``): one architecture and one
cut point per view, interval variables for the transfers (no overlap on a serial bus)
and the aggregator's per-view tasks, the fusion task after all of them; time in integer
units of ``unit`` ms chosen so that every row's activity stays below 2**30 (or-tools
#5293), with the rounding tolerance ``tol`` stated in the formulation."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.core.program import Program
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.tables import build_tables, decode as decode_plan, no_plan_possible, point_index

#: CP-SAT: every linear row's summed |coefficient| x |variable bound| stays below this
#: (OR-Tools 9.15 presolve overflows past 2**31: or-tools #5293)
CPSAT_ACTIVITY = 2**30
#: CP-SAT: the horizon is resolved into at most this many integer units (finer units
#: made the 12-view MobileNetV2 serial instance find no schedule within 30 s)
CPSAT_HORIZON_UNITS = 2**20




def build_cpsat(inst: Instance) -> Program:
    """CP-SAT: interval variables, no-overlap on the aggregator and (serial) on the bus."""
    from ortools.sat.python import cp_model

    t = build_tables(inst)
    if no_plan_possible(t):  # a sensor has no allowed cut point: an infeasible model says so
        m = cp_model.CpModel()
        m.AddBoolOr([])
        return Program(kind="cpsat", model=m, decode=lambda values: None, stats={"no_cut_point": True})
    V, nA = t.V, len(t.archs)
    # integer unit: every row's activity below 2**30 (see module constants)
    row_ms = [sum(abs(c) for c in t.B_terms(v)[0].values()) + sum(abs(c) for c in t.B_terms(v)[1].values())
              for v in range(V)]
    row_ms += [sum(r.values()) for r in t.A] + [sum(r.values()) for r in t.C] + [sum(t.F)]
    unit = max((max(row_ms) + t.horizon) / CPSAT_ACTIVITY, 4 * t.horizon / CPSAT_ACTIVITY,
               t.horizon / CPSAT_HORIZON_UNITS, 1e-12)
    tol = unit * (1.5 * V + 1.0)

    def q(ms: float) -> int:
        return int(round(ms / unit))

    H = q(t.horizon) + 2 * V + 2
    Ag = {p: q(v) for p, v in t.Ag.items()}
    P = [q(v) for v in t.P]
    for p, archs in t.compat.items():  # P[a] >= Ag[p] for compatible points despite rounding
        if p in Ag:
            for a in archs:
                P[a] = max(P[a], Ag[p])
    F = [q(v) for v in t.F]
    m = cp_model.CpModel()
    x = [m.NewBoolVar(f"x[{a}]") for a in range(nA)]
    m.AddExactlyOne(x)
    y = [{p: m.NewBoolVar(f"y[{v},{p}]") for p in t.A[v]} for v in range(V)]
    for v in range(V):
        m.AddExactlyOne(y[v].values())
        for p, lit in y[v].items():
            m.AddBoolOr([x[a] for a in t.compat[p]]).OnlyEnforceIf(lit)
    sb, eb, sa, ea, bus_iv, agg_iv, idx = [], [], [], [], [], [], []
    a_vars, b_vars, c_vars = [], [], []
    for v in range(V):
        A_int = {p: q(t.A[v][p]) for p in y[v]}
        C_int = {p: q(t.C[v][p]) for p in y[v]}
        a_v = m.NewIntVar(0, max(A_int.values()), f"A[{v}]")
        c_v = m.NewIntVar(0, max(C_int.values()), f"C[{v}]")
        b_v = m.NewIntVar(0, max(P), f"B[{v}]")
        m.Add(a_v == sum(A_int[p] * y[v][p] for p in y[v]))
        m.Add(c_v == sum(C_int[p] * y[v][p] for p in y[v]))
        b_y = {p: -(P[t.points[p][1]] if t.points[p][1] is not None else Ag[p]) for p in y[v]}
        m.Add(b_v == sum(P[a] * x[a] for a in range(nA)) + sum(b_y[p] * y[v][p] for p in y[v]))
        s1, e1 = m.NewIntVar(0, H, f"sb[{v}]"), m.NewIntVar(0, H, f"eb[{v}]")
        s2, e2 = m.NewIntVar(0, H, f"sa[{v}]"), m.NewIntVar(0, H, f"ea[{v}]")
        bus_iv.append(m.NewIntervalVar(s1, c_v, e1, f"bus[{v}]"))
        agg_iv.append(m.NewIntervalVar(s2, b_v, e2, f"agg[{v}]"))
        m.Add(s1 >= a_v)
        a_vars.append(a_v), b_vars.append(b_v), c_vars.append(c_v)
        m.Add(s2 >= e1)
        sb.append(s1), eb.append(e1), sa.append(s2), ea.append(e2)
        idx.append(sum(p * y[v][p] for p in y[v]))
    if t.serial:
        m.AddNoOverlap(bus_iv)
    else:
        for v in range(V):  # share bus: no contention, a transfer starts when its sensor is done
            m.Add(sb[v] == a_vars[v])
    m.AddNoOverlap(agg_iv)
    # dominance (formulation doc, "permutation schedules"): the aggregator serves views in
    # the order their transfers end; one literal per pair orders both resources
    for v in range(V):
        for w in range(v + 1, V):
            first = m.NewBoolVar(f"first[{v},{w}]")
            m.Add(eb[v] <= eb[w]).OnlyEnforceIf(first)
            m.Add(ea[v] <= sa[w]).OnlyEnforceIf(first)
            m.Add(eb[w] <= eb[v]).OnlyEnforceIf(first.Not())
            m.Add(ea[w] <= sa[v]).OnlyEnforceIf(first.Not())
            if t.serial:
                m.Add(eb[v] <= sb[w]).OnlyEnforceIf(first)
                m.Add(eb[w] <= sb[v]).OnlyEnforceIf(first.Not())
    fs = m.NewIntVar(0, H, "fusion_start")
    for v in range(V):
        m.Add(fs >= ea[v])
    # redundant bounds for the relaxation (constants r0, a0: the earliest any view can
    # arrive / any sensor can be done): the aggregator serves every view after r0; a serial
    # bus carries every transfer after a0
    r0 = min(q(t.A[v][p] + t.C[v][p]) for v in range(V) for p in t.A[v])
    a0 = min(q(t.A[v][p]) for v in range(V) for p in t.A[v])
    m.Add(fs >= r0 + sum(b_vars))
    if t.serial:
        m.Add(fs >= a0 + sum(c_vars))
    mk = m.NewIntVar(0, H + max(F), "makespan")
    m.Add(mk == fs + sum(F[a] * x[a] for a in range(nA)))
    m.Minimize(mk)
    # symmetry: interchangeable views take non-decreasing points; equal points go in index order
    for group in t.groups:
        for v, w in zip(group, group[1:]):
            m.Add(idx[v] <= idx[w])
            eq = m.NewBoolVar(f"same[{v},{w}]")
            m.Add(idx[v] == idx[w]).OnlyEnforceIf(eq)
            m.Add(idx[v] < idx[w]).OnlyEnforceIf(eq.Not())
            if t.serial:
                m.Add(sb[v] <= sb[w]).OnlyEnforceIf(eq)
            m.Add(sa[v] <= sa[w]).OnlyEnforceIf(eq)
    start = t.incumbent
    if start is not None:
        arch, pts = point_index(t, start)
        for a in range(nA):
            m.AddHint(x[a], int(a == arch))
        for v in range(V):
            for p, lit in y[v].items():
                m.AddHint(lit, int(p == pts[v]))

    def decode(values) -> MultiviewPlan:
        value = values.__getitem__
        arch = next(a for a in range(nA) if value(x[a].Index()) > 0.5)
        pts = [next(p for p, lit in y[v].items() if value(lit.Index()) > 0.5) for v in range(V)]
        return decode_plan(inst, t, arch, pts, [value(s_.Index()) for s_ in sb], [value(s_.Index()) for s_ in sa])

    # presolve on: every row's activity stays below 2**30 (the time unit above), clear of or-tools #5293
    return Program(kind="cpsat", model=m, decode=decode, unit_ms=unit, tolerance_ms=tol, presolve=True,
                              stats={"unit_ms": unit, "archs": nA, "points": len(t.points),
                          "booleans": nA + sum(len(r) for r in y)})
