"""The multiview disjunctive MILP (``formulations/multiview_bus.md``) as a
``LinearProgram`` in ms, for the MILP backends. A solution meets the rows to the solvers'
feasibility tolerance (1e-6), hence the stated tolerance
``MILP_EPS * (2 V H + 2 V + 3)`` ms (``H`` the horizon, ``V`` the views)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from splitopt.core.program import LinearProgram, Program
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance
from splitopt.families.multiview.tables import Tables, build_tables, decode, no_plan_possible

#: MILP: integrality / feasibility tolerance assumed for the objective tolerance
MILP_EPS = 1e-6
#: MILP: the dual (optimality) tolerance of the LP solves, for the bound (the integrality
#: and feasibility tolerances only relax the program, so they cannot lift its bound)
MILP_DUAL_TOL = 1e-7


def build_milp(inst: MultiviewInstance, start: MultiviewPlan | None) -> Program:
    """The MILP program, its constraints in the formulation's order, with its decoder
    (``start`` is not used: CBC and HiGHS get no MIP start)."""
    t = build_tables(inst)
    if no_plan_possible(t):  # a sensor has no allowed cut point: an infeasible program says so
        lp = LinearProgram()
        never = lp.var("no_cut_point", binary=False, lb=0.0, ub=0.0)
        lp.add({never: 1.0}, ">=", 1.0, name="no_cut_point")
        return Program(kind="linear", model=lp, decode=lambda values: None, stats={"no_cut_point": True})
    lp = LinearProgram()
    v = choice_variables(lp, t)
    precedence_rows(lp, t, v)
    resource_rows(lp, t, v)
    symmetry_rows(lp, t, v)
    lp.meta.update(x=v.x, y=v.y, sb=v.sb, sa=v.sa, mk=v.mk)
    V = t.V
    tol = MILP_EPS * (2 * V * t.horizon + 2 * V + 3)
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(inst, t, v, values), tolerance_ms=tol,
                   bound_tolerance_ms=MILP_DUAL_TOL * (2 * V * t.horizon + 2 * V + 3),
                   stats={"variables": len(lp.variables), "rows": len(lp.rows)})


@dataclass
class ViewVariables:
    """The program's variables (section "Variables"), times in ms, and the linear forms of
    each view's sensor, transfer and aggregator durations ``A_v``, ``C_v``, ``B_v`` and its
    point's index; ``order[v, w]`` is ``first[v,w]``."""

    x: list[int]
    y: list[dict[int, int]]
    sb: list[int]
    sa: list[int]
    fs: int
    mk: int
    A: list[dict[int, float]]
    C: list[dict[int, float]]
    B: list[dict[int, float]]
    idx: list[dict[int, float]]
    order: dict[tuple[int, int], int]


def _comb(*parts) -> dict[int, float]:
    """Sum of (coefficient, {index: coefficient}) parts."""
    out: dict[int, float] = {}
    for k, expr in parts:
        for i, c in expr.items():
            out[i] = out.get(i, 0.0) + k * c
    return out


def choice_variables(lp: LinearProgram, t: Tables) -> ViewVariables:
    """Every variable of the program (``first[v,w]`` last) and the one-architecture row of
    constraint 1; the duration forms."""
    V, nA, H = t.V, len(t.archs), t.horizon
    x = [lp.var(f"x[{a}]") for a in range(nA)]
    lp.add({i: 1.0 for i in x}, "==", 1.0, name="one_arch")
    y = [{p: lp.var(f"y[{v},{p}]") for p in t.A[v]} for v in range(V)]
    time_var = partial(lp.var, binary=False, lb=0.0, ub=H, implied_integer=False)
    sb = [time_var(f"sb[{v}]") for v in range(V)]
    sa = [time_var(f"sa[{v}]") for v in range(V)]
    fs = time_var("fusion_start")
    mk = lp.var("makespan", binary=False, lb=0.0, ub=H + max(t.F), implied_integer=False)
    A = [{y[v][p]: t.A[v][p] for p in y[v]} for v in range(V)]
    C = [{y[v][p]: t.C[v][p] for p in y[v]} for v in range(V)]
    B = []
    for v in range(V):
        bx, by = t.B_terms(v)
        expr = {x[a]: c for a, c in bx.items()}
        expr.update({y[v][p]: c for p, c in by.items()})
        B.append(expr)
    return ViewVariables(x, y, sb, sa, fs, mk, A, C, B, idx=[], order={})


def precedence_rows(lp: LinearProgram, t: Tables, v: ViewVariables) -> None:
    """Constraints 1 (one point per view), 2 (compatibility) and 3 (precedence), the
    objective; then the order variables ``first[v,w]``."""
    V, y, sb, sa, fs = t.V, v.y, v.sb, v.sa, v.fs
    for w in range(V):
        lp.add({i: 1.0 for i in y[w].values()}, "==", 1.0, name=f"one_point[{w}]")
        for p, i in y[w].items():
            row = {i: 1.0}
            for a in t.compat[p]:
                row[v.x[a]] = row.get(v.x[a], 0.0) - 1.0
            lp.add(row, "<=", 0.0, name=f"compat[{w},{p}]")
        lp.add(_comb((1, {sb[w]: 1.0}), (-1, v.A[w])), ">=", 0.0, name=f"after_sensor[{w}]")
        lp.add(_comb((1, {sa[w]: 1.0, sb[w]: -1.0}), (-1, v.C[w])), ">=", 0.0, name=f"after_transfer[{w}]")
        lp.add(_comb((1, {fs: 1.0, sa[w]: -1.0}), (-1, v.B[w])), ">=", 0.0, name=f"before_fusion[{w}]")
    lp.add({v.mk: 1.0, fs: -1.0, **{v.x[a]: -t.F[a] for a in range(len(t.archs))}}, ">=", 0.0, name="makespan")
    lp.add_objective(v.mk, 1.0)
    v.idx = [{y[w][p]: float(p) for p in y[w]} for w in range(V)]
    for a in range(V):
        for b in range(a + 1, V):
            v.order[(a, b)] = lp.var(f"first[{a},{b}]")


def _disjunction(lp: LinearProgram, t: Tables, v: ViewVariables, kind: str, s: list[int], dur: list) -> None:
    """Constraint 5 on one resource, with constraint 6's one order variable per pair for
    both resources (the aggregator serves views in bus order (serial) / arrival order
    (share) without loss)."""
    H = t.horizon
    for a in range(t.V):
        for b in range(a + 1, t.V):
            o = v.order[(a, b)]
            # o = 1: a before b;  s_b >= s_a + dur_a - H (1 - o)
            lp.add(_comb((1, {s[b]: 1.0, s[a]: -1.0, o: -H}), (-1, dur[a])), ">=", -H, name=f"{kind}[{a}<{b}]")
            # o = 0: b before a;  s_a >= s_b + dur_b - H o
            lp.add(_comb((1, {s[a]: 1.0, s[b]: -1.0, o: H}), (-1, dur[b])), ">=", 0.0, name=f"{kind}[{b}<{a}]")


def resource_rows(lp: LinearProgram, t: Tables, v: ViewVariables) -> None:
    """Constraints 4 (share bus: transfers start when their sensor is done; ``first[v,w] =
    1``: v arrives no later), 5 and 6 (serial bus and aggregator: :func:`_disjunction`)."""
    V, H, sb, C = t.V, t.horizon, v.sb, v.C
    if t.serial:
        _disjunction(lp, t, v, "bus", sb, C)
    else:
        for w in range(V):
            lp.add(_comb((1, {sb[w]: 1.0}), (-1, v.A[w])), "<=", 0.0, name=f"share_start[{w}]")
        for a in range(V):
            for b in range(a + 1, V):
                o = v.order[(a, b)]
                arr_a, arr_b = _comb((1, {sb[a]: 1.0}), (1, C[a])), _comb((1, {sb[b]: 1.0}), (1, C[b]))
                lp.add(_comb((1, arr_b), (-1, arr_a), (1, {o: -H})), ">=", -H, name=f"arrive[{a}<={b}]")
                lp.add(_comb((1, arr_a), (-1, arr_b), (1, {o: H})), ">=", 0.0, name=f"arrive[{b}<={a}]")
    _disjunction(lp, t, v, "agg", v.sa, v.B)


def symmetry_rows(lp: LinearProgram, t: Tables, v: ViewVariables) -> None:
    """Constraint 7: interchangeable views take non-decreasing points; with equal points
    the lower index goes first (``first[v,w] >= 1 - (idx_w - idx_v)``)."""
    idx = v.idx
    for group in t.groups:
        for a, b in zip(group, group[1:]):
            lp.add(_comb((1, idx[a]), (-1, idx[b])), "<=", 0.0, name=f"sym_point[{a},{b}]")
            lp.add(_comb((1, {v.order[(a, b)]: 1.0}), (1, idx[b]), (-1, idx[a])), ">=", 1.0, name=f"sym_order[{a},{b}]")


def decode_plan(inst: MultiviewInstance, t: Tables, v: ViewVariables, values) -> MultiviewPlan:
    """The chosen architecture, each view's point, the orders by start time."""
    arch = max(range(len(t.archs)), key=lambda a: values[v.x[a]])
    pts = [max(v.y[w], key=lambda p: values[v.y[w][p]]) for w in range(t.V)]
    return decode(inst, t, arch, pts, [values[i] for i in v.sb], [values[i] for i in v.sa])
