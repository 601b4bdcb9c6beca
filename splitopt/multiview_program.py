"""The multiview programs: one CP-SAT model with interval variables and one disjunctive
MILP (PuLP: CBC, HiGHS), both built from the same parameter tables. The formulation,
with its schedule semantics and the CP-SAT integer scaling, is
``formulations/multiview_bus.md``; the evaluator (``splitopt.multiview.evaluate``) does not
use these tables.

Units: ms (the MILP works in ms; CP-SAT in integer units of ``unit`` ms).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from splitopt.errors import NotApplicable
from splitopt.instance import Instance
from splitopt.multiview import REDUCE, MultiviewPlan, allowed_cut, data, layer_ms
from splitopt.result import BackendOutput, Status

#: CP-SAT: every linear row's summed |coefficient| x |variable bound| stays below this
#: (OR-Tools 9.15 presolve overflows past 2**31: or-tools #5293)
CPSAT_ACTIVITY = 2**30
#: CP-SAT: the horizon is resolved into at most this many integer units (finer units
#: made the 12-view MobileNetV2 serial instance find no schedule within 30 s)
CPSAT_HORIZON_UNITS = 2**20
#: MILP: integrality / feasibility tolerance assumed for the objective tolerance
MILP_EPS = 1e-6


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


def build_tables(inst: Instance) -> Tables:
    """The parameter tables, computed from the instance (layer latencies from
    ``splitopt.multiview.layer_ms``, transfer times from ``Instance.link_transfer_ms``,
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
    for a, (f, w) in enumerate(archs):
        if w is not None:
            compat[len(points)] = [a]
            points.append((REDUCE, a))
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
            f, w = archs[a] if a is not None else archs[compat[p][0]]
            if not allowed_cut(inst, f, w, s, t):
                continue
            if a is None:
                a_row[p] = sum_ms(d.prefix[t], s)
                nbytes = inst.tensor_elements(t) * inst.sent_bits(t, d.bits) / 8.0
            elif t != REDUCE:  # the tied output point above: nothing sent
                a_row[p] = sum_ms(d.prefix[t], s)
                nbytes = 0.0
            else:
                a_row[p] = sum_ms(d.prefix[f], s) + layer_ms(inst, f, w, REDUCE, s)
                nbytes = w * d.spatial[f] * bits_out / 8.0
            c_row[p] = inst.link_transfer_ms(link, nbytes)
        A.append(a_row)
        C.append(c_row)
    tables = Tables(sensors=d.sensors, serial=d.serial, archs=archs, points=points, A=A, C=C, Ag=Ag, P=P, F=F,
                    compat=compat)
    # an upper bound: the best plan with one common point (evaluated by the evaluator);
    # a point whose sensor + transfer time alone passes it is never in a better plan
    tables.incumbent = best_uniform_plan(inst, tables)
    if tables.incumbent is not None:
        from splitopt.multiview import evaluate

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


def best_uniform_plan(inst: Instance, t: Tables) -> MultiviewPlan | None:
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


def _better(inst: Instance, t: Tables, plan: MultiviewPlan) -> MultiviewPlan:
    """Of a time-limited incumbent and the common-point plan ``t.incumbent``, the one with
    the shorter makespan by the evaluator (CBC and HiGHS get no MIP start)."""
    from splitopt.multiview import evaluate

    if t.incumbent is None or evaluate(inst, plan).makespan_ms <= t.upper:
        return plan
    return t.incumbent


def _no_plan_possible(t: Tables) -> bool:
    return any(not row for row in t.A)


def decode(inst: Instance, t: Tables, arch: int, point_of: list[int], bus_start: list[float] | None,
           agg_start: list[float]) -> MultiviewPlan:
    """Plan from the chosen arch, each view's point and the tasks' start times (orders:
    by start time, ties by sensor index)."""
    f, w = t.archs[arch]
    cuts = {t.sensors[v]: t.points[point_of[v]][0] for v in range(t.V)}
    idx = range(t.V)
    bus = tuple(t.sensors[v] for v in sorted(idx, key=lambda v: (bus_start[v], v))) if t.serial else None
    agg = tuple(t.sensors[v] for v in sorted(idx, key=lambda v: (agg_start[v], v)))
    return MultiviewPlan(f, w, cuts, bus, agg)


def _point_index(t: Tables, plan: MultiviewPlan) -> tuple[int, list[int]]:
    arch = t.archs.index((plan.fusion, plan.width))
    out = []
    for s in t.sensors:
        cut = plan.cuts[s]
        tied = [p for p, (name, a) in enumerate(t.points) if name == cut and a == arch]
        out.append(tied[0] if tied else next(p for p, (name, a) in enumerate(t.points) if name == cut and a is None))
    return arch, out


# ----- CP-SAT -------------------------------------------------------------------------------------

def solve_cpsat(inst: Instance, options) -> BackendOutput:
    """CP-SAT: interval variables, no-overlap on the aggregator and (serial) on the bus."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    t = build_tables(inst)
    if _no_plan_possible(t):
        return BackendOutput(Status.INFEASIBLE, message="CP-SAT: a sensor has no allowed cut point (model not built)",
                             extra={"build_s": time.perf_counter() - t0, "solve_s": 0.0})
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
        arch, pts = _point_index(t, start)
        for a in range(nA):
            m.AddHint(x[a], int(a == arch))
        for v in range(V):
            for p, lit in y[v].items():
                m.AddHint(lit, int(p == pts[v]))
    build_s = time.perf_counter() - t0
    from splitopt.solvers.cpsat import cpsat_solver, export_model

    if options.export_path is not None:
        export_model(m, options.export_path)

    # presolve on: every row's activity stays below 2**30 (the time unit above), clear of or-tools #5293
    solver = cpsat_solver(options.time_limit_s, options.threads, options.seed, options.verbose, presolve=True)
    t1 = time.perf_counter()
    code = solver.Solve(m)
    solve_s = time.perf_counter() - t1
    extra = {"build_s": build_s, "solve_s": solve_s, "unit_ms": unit, "objective_tolerance_ms": tol,
             "archs": nA, "points": len(t.points), "booleans": nA + sum(len(r) for r in y)}
    name = solver.StatusName(code)
    if code == cp_model.INFEASIBLE:
        return BackendOutput(Status.INFEASIBLE, message="CP-SAT: infeasible", extra=extra)
    if code == cp_model.MODEL_INVALID:
        return BackendOutput(Status.ERROR, message=f"CP-SAT: model invalid: {m.Validate()}", extra=extra)
    bound = solver.BestObjectiveBound() * unit - tol
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if start is not None:
            return BackendOutput(Status.FEASIBLE, plan=start, bound=bound,
                                 message=f"CP-SAT: {name}; returning the start plan", extra=extra)
        return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"CP-SAT: {name}", extra=extra)
    arch = next(a for a in range(nA) if solver.Value(x[a]))
    pts = [next(p for p, lit in y[v].items() if solver.Value(lit)) for v in range(V)]
    plan = decode(inst, t, arch, pts, [solver.Value(s) for s in sb], [solver.Value(s) for s in sa])
    value = solver.ObjectiveValue() * unit
    extra["solver_objective_ms"] = value
    if code == cp_model.OPTIMAL:
        return BackendOutput(Status.OPTIMAL, plan=plan, objective=value, bound=bound, message="CP-SAT: OPTIMAL",
                             objective_tolerance_ms=tol, extra=extra)
    # a time-limited incumbent need not be left-justified: the evaluator's semi-active
    # schedule of its orders is at most its makespan, so no objective is claimed
    return BackendOutput(Status.FEASIBLE, plan=_better(inst, t, plan), bound=bound, message=f"CP-SAT: {name}",
                         extra=extra)


# ----- MILP ------------------------------------------------------------------------------------------

def build_milp(inst: Instance, t: Tables):
    """The disjunctive MILP as a ``LinearProgram`` (ms); returns (lp, index maps)."""
    from splitopt.solvers.linear import LinearProgram

    lp = LinearProgram()
    V, nA = t.V, len(t.archs)
    H = t.horizon
    x = [lp.var(f"x[{a}]") for a in range(nA)]
    lp.add({i: 1.0 for i in x}, "==", 1.0, name="one_arch")
    y = [{p: lp.var(f"y[{v},{p}]") for p in t.A[v]} for v in range(V)]
    cont = dict(binary=False, lb=0.0, ub=H, implied_integer=False)
    sb = [lp.var(f"sb[{v}]", **cont) for v in range(V)]
    sa = [lp.var(f"sa[{v}]", **cont) for v in range(V)]
    fs = lp.var("fusion_start", **cont)
    mk = lp.var("makespan", binary=False, lb=0.0, ub=H + max(t.F), implied_integer=False)
    A = [{y[v][p]: t.A[v][p] for p in y[v]} for v in range(V)]
    C = [{y[v][p]: t.C[v][p] for p in y[v]} for v in range(V)]
    B = []
    for v in range(V):
        bx, by = t.B_terms(v)
        expr = {x[a]: c for a, c in bx.items()}
        expr.update({y[v][p]: c for p, c in by.items()})
        B.append(expr)

    def comb(*parts):
        """Sum of (coefficient, {index: coefficient}) parts."""
        out: dict[int, float] = {}
        for k, expr in parts:
            for i, c in expr.items():
                out[i] = out.get(i, 0.0) + k * c
        return out

    for v in range(V):
        lp.add({i: 1.0 for i in y[v].values()}, "==", 1.0, name=f"one_point[{v}]")
        for p, i in y[v].items():
            row = {i: 1.0}
            for a in t.compat[p]:
                row[x[a]] = row.get(x[a], 0.0) - 1.0
            lp.add(row, "<=", 0.0, name=f"compat[{v},{p}]")
        lp.add(comb((1, {sb[v]: 1.0}), (-1, A[v])), ">=", 0.0, name=f"after_sensor[{v}]")
        lp.add(comb((1, {sa[v]: 1.0, sb[v]: -1.0}), (-1, C[v])), ">=", 0.0, name=f"after_transfer[{v}]")
        lp.add(comb((1, {fs: 1.0, sa[v]: -1.0}), (-1, B[v])), ">=", 0.0, name=f"before_fusion[{v}]")
    lp.add({mk: 1.0, fs: -1.0, **{x[a]: -t.F[a] for a in range(nA)}}, ">=", 0.0, name="makespan")
    lp.add_objective(mk, 1.0)
    idx = [{y[v][p]: float(p) for p in y[v]} for v in range(V)]
    order = {}

    for v in range(V):
        for w in range(v + 1, V):
            order[(v, w)] = lp.var(f"first[{v},{w}]")

    def disjunction(kind, s, dur):
        # one order variable per pair for both resources: the aggregator serves views in
        # bus order (serial) / arrival order (share) without loss (formulation doc)
        for v in range(V):
            for w in range(v + 1, V):
                o = order[(v, w)]
                # o = 1: v before w;  s_w >= s_v + dur_v - H (1 - o)
                lp.add(comb((1, {s[w]: 1.0, s[v]: -1.0, o: -H}), (-1, dur[v])), ">=", -H, name=f"{kind}[{v}<{w}]")
                # o = 0: w before v;  s_v >= s_w + dur_w - H o
                lp.add(comb((1, {s[v]: 1.0, s[w]: -1.0, o: H}), (-1, dur[w])), ">=", 0.0, name=f"{kind}[{w}<{v}]")

    if t.serial:
        disjunction("bus", sb, C)
    else:
        # share bus: transfers start when their sensor is done; first[v,w] = 1 -> v arrives no later
        for v in range(V):
            lp.add(comb((1, {sb[v]: 1.0}), (-1, A[v])), "<=", 0.0, name=f"share_start[{v}]")
        for v in range(V):
            for w in range(v + 1, V):
                o = order[(v, w)]
                arr_v, arr_w = comb((1, {sb[v]: 1.0}), (1, C[v])), comb((1, {sb[w]: 1.0}), (1, C[w]))
                lp.add(comb((1, arr_w), (-1, arr_v), (1, {o: -H})), ">=", -H, name=f"arrive[{v}<={w}]")
                lp.add(comb((1, arr_v), (-1, arr_w), (1, {o: H})), ">=", 0.0, name=f"arrive[{w}<={v}]")
    disjunction("agg", sa, B)
    for group in t.groups:
        for v, w in zip(group, group[1:]):
            lp.add(comb((1, idx[v]), (-1, idx[w])), "<=", 0.0, name=f"sym_point[{v},{w}]")
            # equal points -> v first: o >= 1 - (idx_w - idx_v)
            lp.add(comb((1, {order[(v, w)]: 1.0}), (1, idx[w]), (-1, idx[v])), ">=", 1.0, name=f"sym_order[{v},{w}]")
    lp.meta.update(x=x, y=y, sb=sb, sa=sa, mk=mk)
    return lp


def solve_milp(backend_name: str, inst: Instance, options) -> BackendOutput:
    """The disjunctive MILP on CBC or HiGHS through PuLP (``splitopt.solvers.milp``)."""
    from splitopt.solvers.milp import CbcBackend, HighsBackend, export_pulp, to_pulp

    t0 = time.perf_counter()
    t = build_tables(inst)
    if _no_plan_possible(t):
        return BackendOutput(Status.INFEASIBLE, message=f"{backend_name}: a sensor has no allowed cut point "
                             "(model not built)", extra={"build_s": time.perf_counter() - t0, "solve_s": 0.0})
    lp = build_milp(inst, t)
    prob, xs = to_pulp(lp, name=f"multiview_{inst.name}".replace(" ", "_"))
    build_s = time.perf_counter() - t0
    if options.export_path is not None:
        export_pulp(prob, options.export_path)
    runner = CbcBackend() if backend_name == "milp-cbc" else HighsBackend()
    t1 = time.perf_counter()
    status, bound, message, solver_objective = runner._run(prob, options)
    solve_s = time.perf_counter() - t1
    V = t.V
    tol = MILP_EPS * (2 * V * t.horizon + 2 * V + 3)
    extra = {"build_s": build_s, "solve_s": solve_s, "variables": len(lp.variables), "rows": len(lp.rows),
             "objective_tolerance_ms": tol}
    if status in (Status.INFEASIBLE, Status.ERROR):
        return BackendOutput(status, message=message, extra=extra)
    if status is Status.NO_SOLUTION_FOUND:
        start = t.incumbent
        if start is not None:
            return BackendOutput(Status.FEASIBLE, plan=start, bound=bound,
                                 message=f"{message}; returning the start plan", extra=extra)
        return BackendOutput(status, message=message, bound=bound, extra=extra)
    values = [v.value() if v.value() is not None else 0.0 for v in xs]
    meta = lp.meta
    arch = max(range(len(t.archs)), key=lambda a: values[meta["x"][a]])
    pts = [max(meta["y"][v], key=lambda p: values[meta["y"][v][p]]) for v in range(V)]
    plan = decode(inst, t, arch, pts, [values[i] for i in meta["sb"]], [values[i] for i in meta["sa"]])
    value = values[meta["mk"]]
    extra["solver_objective_ms"] = value
    if status is Status.OPTIMAL:
        return BackendOutput(Status.OPTIMAL, plan=plan, objective=value, bound=value, message=message,
                             objective_tolerance_ms=tol, extra=extra)
    return BackendOutput(Status.FEASIBLE, plan=_better(inst, t, plan), bound=bound, message=message, extra=extra)


def solve_program(backend_name: str, inst: Instance, options) -> BackendOutput:
    """Dispatch for ``splitopt.multiview.solve_exact``."""
    if backend_name == "cpsat":
        return solve_cpsat(inst, options)
    if backend_name in ("milp-cbc", "milp-highs"):
        return solve_milp(backend_name, inst, options)
    raise NotApplicable(f"problem 'multiview' has no program for backend '{backend_name}'")
