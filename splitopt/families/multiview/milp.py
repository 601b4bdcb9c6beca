"""The multiview disjunctive MILP (``formulations/multiview_bus.md``) as a
``LinearProgram`` in ms, for the MILP backends. A solution meets the rows to the solvers'
feasibility tolerance (1e-6), hence the stated tolerance
``MILP_EPS * (2 V H + 2 V + 3)`` ms (``H`` the horizon, ``V`` the views)."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.core.program import LinearProgram, Program
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.tables import Tables, build_tables, decode as decode_plan, no_plan_possible

#: MILP: integrality / feasibility tolerance assumed for the objective tolerance
MILP_EPS = 1e-6
#: MILP: the dual (optimality) tolerance of the LP solves, for the bound (the integrality
#: and feasibility tolerances only relax the program, so they cannot lift its bound)
MILP_DUAL_TOL = 1e-7


def build_linear(inst: Instance, t: Tables) -> LinearProgram:
    """The disjunctive MILP as a ``LinearProgram`` (ms); returns (lp, index maps)."""
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


def build_milp(inst: Instance) -> Program:
    """The MILP program with its decoder."""
    t = build_tables(inst)
    if no_plan_possible(t):  # a sensor has no allowed cut point: an infeasible program says so
        lp = LinearProgram()
        never = lp.var("no_cut_point", binary=False, lb=0.0, ub=0.0)
        lp.add({never: 1.0}, ">=", 1.0, name="no_cut_point")
        return Program(kind="linear", model=lp, decode=lambda values: None, stats={"no_cut_point": True})
    lp = build_linear(inst, t)
    V = t.V
    tol = MILP_EPS * (2 * V * t.horizon + 2 * V + 3)
    meta = lp.meta

    def decode(values) -> MultiviewPlan:
        arch = max(range(len(t.archs)), key=lambda a: values[meta["x"][a]])
        pts = [max(meta["y"][v], key=lambda p: values[meta["y"][v][p]]) for v in range(V)]
        return decode_plan(inst, t, arch, pts, [values[i] for i in meta["sb"]], [values[i] for i in meta["sa"]])

    return Program(kind="linear", model=lp, decode=decode, tolerance_ms=tol,
                   bound_tolerance_ms=MILP_DUAL_TOL * (2 * V * t.horizon + 2 * V + 3),
                   stats={"variables": len(lp.variables), "rows": len(lp.rows)})
