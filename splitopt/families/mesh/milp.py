"""The mesh family's disjunctive big-M MILP (``formulations/mesh_schedule.md``) as a
``LinearProgram`` for the MILP backends (CBC, HiGHS).

Same structure as the CP-SAT model (``splitopt.families.mesh.structure``): assignment
``x[i,d]``, needs ``w``, crossings ``g`` and ``z``, start times ``S`` (layers) and ``T``
(transfers), order binaries ``o`` per pair of tasks that may share a resource, peak
working set ``P`` per device, makespan ``C``. Times are in units of ``H`` (the start
plan's makespan, or the sum of all durations without one), so every time lies in
[0, 1] and big-M = 2. A solution meets the rows to the solvers' feasibility tolerance
(1e-6 of ``H`` per task), so the program's tolerance is ``(K + 1) * 1e-6 * H`` ms, ``K``
the largest number of tasks a plan can have. The decoded plan is the device per layer
plus the solver's order on every resource; its evaluated makespan may only be below
the program's (a semi-active schedule of the same orders), which is checked. The
solver's bound is lowered by less: the integrality and feasibility tolerances only relax
the program, so they cannot lift its bound above the optimum; only the inexact
optimality of its LP solves can, allowed for as their dual tolerance (1e-7 of ``H``) per
task on one chain (``(K + 1) * 1e-7 * H`` ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from splitopt.core.errors import SolverFailure
from splitopt.core.program import LinearProgram, Program
from splitopt.families.mesh.data import MEMORY_RTOL, MeshData, mesh_data, transfer_id
from splitopt.families.mesh.evaluate import evaluate
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.structure import Structure, identical_device_classes, last_hops, order_from_times, start_horizon

#: the MILP solvers' feasibility tolerance, relative to the horizon
MILP_FEAS_TOL = 1e-6
#: the MILP solvers' dual (optimality) tolerance of their LP solves, relative to the horizon
MILP_DUAL_TOL = 1e-7
#: big-M in units of the horizon (every time lies in [0, 1])
BIG_M = 2.0

Form = dict  # variable index -> coefficient; key None holds a constant


def _time_var(lp: LinearProgram, name: str) -> int:
    """A time variable: in [0, 1] units of the horizon."""
    return lp.var(name, binary=False, lb=0.0, ub=1.0, implied_integer=False)


def _add(target: Form, form: Form, scale: float = 1.0) -> None:
    for k, v in form.items():
        target[k] = target.get(k, 0.0) + scale * v


def build_milp(inst: MeshInstance, start: MeshPlan | None) -> Program:
    """The MILP, its constraints in the formulation's order; ``start`` (a feasible plan or
    None) sets the horizon ``H``."""
    data = mesh_data(inst)
    classes = identical_device_classes(data)
    start, H = start_horizon(inst, data, start, classes)
    lp = LinearProgram()
    if H <= 0:  # the start plan takes no time at all: it is optimal (an empty program says so)
        return Program(kind="linear", model=lp, decode=lambda values: start, stats={"horizon_ms": 0.0})
    v = assignment_variables(data, lp, H)
    need_variables(data, lp, v)
    transfer_variables(data, lp, v)
    data_rows(data, lp, v)
    device_order_rows(data, lp, v)
    resource_order_rows(lp, v)
    memory_rows(data, lp, v)
    symmetry_rows(data, lp, v, classes)
    cmax = makespan(data, lp, v)
    K = v.st.max_tasks
    tol = (K + 1) * MILP_FEAS_TOL * H
    return Program(
        kind="linear", model=lp, decode=lambda values: decode_plan(inst, data, v, cmax, H, tol, values), unit_ms=H,
        tolerance_ms=tol, bound_tolerance_ms=(K + 1) * MILP_DUAL_TOL * H,
        stats={"horizon_ms": H, "order_variables": v.pairs, "variables": len(lp.variables), "rows": len(lp.rows),
               "symmetry_classes": [list(c) for c in classes]},
    )


@dataclass
class MeshVariables:
    """The program's variables (section "Variables") as the steps add them, times in units
    of the horizon ``H``: ``c`` and ``tr`` the durations of layers and transfers, ``E`` each
    layer's end as a form, ``w`` each need as a form (the constant 1 where fixed), ``pairs``
    the order variables ``o`` so far."""

    st: Structure
    c: dict
    tr: dict
    x: dict = field(default_factory=dict)
    S: dict = field(default_factory=dict)
    E: dict = field(default_factory=dict)
    w: dict = field(default_factory=dict)
    g: dict = field(default_factory=dict)
    z: dict = field(default_factory=dict)
    T: dict = field(default_factory=dict)
    pairs: int = 0


def _row(lp: LinearProgram, form: Form, sense: str, rhs: float, name: str) -> None:
    """Add the time row ``form sense rhs``, the form's constant moved to the right."""
    const = form.get(None, 0.0)
    lp.add({k: v for k, v in form.items() if k is not None}, sense, rhs - const, kind="time", name=name)


def assignment_variables(data: MeshData, lp: LinearProgram, H: float) -> MeshVariables:
    """``S_i`` and ``x[i,d]`` with constraints 1 (assignment) and 2 (routes); ``E_i`` as forms."""
    c = {k: val / H for k, val in data.compute_ms.items()}  # durations in units of H
    tr = {k: val / H for k, val in data.transfer_ms.items()}
    v = MeshVariables(Structure(data, max_compute={k: val <= 1 + 1e-12 for k, val in c.items()}), c, tr)
    st, x, S = v.st, v.x, v.S
    for n in data.layers:
        S[n] = _time_var(lp, f"S[{n}]")
        for d in st.allowed[n]:
            x[(n, d)] = lp.var(f"x[{n},{d}]")
        lp.add({x[(n, d)]: 1.0 for d in st.allowed[n]}, "==", 1.0, name=f"assign[{n}]")
    v.E = {n: {S[n]: 1.0, **{x[(n, d)]: c[(n, d)] for d in st.allowed[n] if c[(n, d)]}} for n in data.layers}
    for t, a, n, b in st.forbidden:
        if (t, a) in x and (n, b) in x:
            lp.add({x[(t, a)]: 1.0, x[(n, b)]: 1.0}, "<=", 1.0, name=f"route[{t},{a},{n},{b}]")
    return v



def need_variables(data: MeshData, lp: LinearProgram, v: MeshVariables) -> None:
    """Constraint 3, its lower bounds: ``w >= x[r,b]`` and ``g >= x[t,a] + w[t,b] - 1``
    (enough: an extra transfer can never shorten a schedule)."""
    st, x, w, g = v.st, v.x, v.w, v.g
    for t in data.tensors:
        for b in st.needs[t]:
            if b in st.fixed_need[t]:
                w[(t, b)] = {None: 1.0}
                continue
            var = lp.var(f"w[{t},{b}]", binary=False)
            w[(t, b)] = {var: 1.0}
            for r in data.readers[t]:
                if (r, b) in x:
                    lp.add({var: 1.0, x[(r, b)]: -1.0}, ">=", 0.0, name=f"need[{t},{r},{b}]")
    for t, a, u in st.g:
        g[(t, a, u)] = lp.var(f"g[{t},{a},{u}]", binary=False)
        for b in sorted(data.subtree[a][u], key=data.dev_index.__getitem__):  # a set: rows in device order
            if (t, b) not in w:
                continue
            form = {g[(t, a, u)]: 1.0}
            _add(form, w[(t, b)], -1.0)
            if data.is_raw[t]:
                _row(lp, form, ">=", 0.0, f"cross[{t},{a},{u},{b}]")
            else:
                form[x[(t, a)]] = form.get(x[(t, a)], 0.0) - 1.0
                _row(lp, form, ">=", -1.0, f"cross[{t},{a},{u},{b}]")


def transfer_variables(data: MeshData, lp: LinearProgram, v: MeshVariables) -> None:
    """Constraint 3's ``z >= g`` and the hops ``T[t,e]``: constraint 4's ``T[t,e] >= E_t``
    (a hop leaves after production) and store-and-forward, and constraint 7's horizon (a
    hop longer than ``H``: ``z = 0``)."""
    st, z, T, tr, M = v.st, v.z, v.T, v.tr, BIG_M
    for key in st.z:
        t, pair = key
        z[key] = lp.var(f"z[{t},{pair[0]}->{pair[1]}]", binary=False)
        for k in st.z_of[key]:
            lp.add({z[key]: 1.0, v.g[k]: -1.0}, ">=", 0.0, name=f"link[{t},{k[1]},{k[2]}]")
        if tr[key] > 1 + 1e-12:  # longer than the horizon: no plan within it sends t over this link
            lp.add({z[key]: 1.0}, "<=", 0.0, name=f"too_long[{t},{pair[0]}->{pair[1]}]")
            continue
        T[key] = _time_var(lp, f"T[{t},{pair[0]}->{pair[1]}]")
        if not data.is_raw[t]:
            form = {T[key]: 1.0}
            _add(form, v.E[t], -1.0)
            _row(lp, form, ">=", 0.0, f"after[{t},{pair[0]}->{pair[1]}]")
        # T + tr <= 1 + M (1 - z)
        lp.add({T[key]: 1.0, z[key]: M}, "<=", 1.0 + M - tr[key], kind="time", name=f"horizon[{t},{pair}]")
    for t, a, u in st.g:
        p = data.parent[a][u]
        if p == a:
            continue
        prev = (t, (data.parent[a][p], p))
        if prev in T and (t, (p, u)) in T:  # else z = 0 forces g = 0
            # T[p->u] >= T[prev] + tr[prev] - M (1 - g)
            lp.add({T[(t, (p, u))]: 1.0, T[prev]: -1.0, v.g[(t, a, u)]: -M}, ">=", tr[prev] - M, kind="time",
                   name=f"hop[{t},{a},{u}]")


def data_rows(data: MeshData, lp: LinearProgram, v: MeshVariables) -> None:
    """Constraint 4, the layers: ``S_i >= E_t`` for a layer input t, and a layer on d
    starts after its input arrived over the last hop into d."""
    M = BIG_M
    for n in data.layers:
        for t in data.layer_inputs[n]:
            if not data.is_raw[t]:
                form = {v.S[n]: 1.0}
                _add(form, v.E[t], -1.0)
                _row(lp, form, ">=", 0.0, f"input[{t}->{n}]")
    for n, t, d, a, key in last_hops(data, v.st, v.T):
        # S[n] >= T[key] + tr[key] - M * slack, slack = 1 - x[n,d] (raw) or 2 - x[n,d] - x[t,a]
        form = {v.S[n]: 1.0, v.T[key]: -1.0, v.x[(n, d)]: -M}
        rhs = v.tr[key] - M
        if not data.is_raw[t]:
            form[v.x[(t, a)]] = form.get(v.x[(t, a)], 0.0) - M
            rhs -= M
        lp.add(form, ">=", rhs, kind="time", name=f"arrive[{t}->{n}@{d}]")


def device_order_rows(data: MeshData, lp: LinearProgram, v: MeshVariables) -> None:
    """Constraint 5 on the devices: one compute at a time, an order variable ``o`` per
    pair of layers not ordered by the DAG that may share a device."""
    st, S, x, c, M = v.st, v.S, v.x, v.c, BIG_M
    for j, m in enumerate(data.layers):
        for n in data.layers[j + 1:]:
            if m in data.ancestors[n]:
                continue
            common = [d for d in st.allowed[m] if d in st.allowed[n] and c[(m, d)] > 0 and c[(n, d)] > 0]
            if not common:
                continue
            o = lp.var(f"o[{m},{n}]")
            v.pairs += 1
            for d in common:
                # S[n] >= S[m] + c[m,d] - M (1 - o) - M (2 - x[m,d] - x[n,d])
                lp.add({S[n]: 1.0, S[m]: -1.0, o: -M, x[(m, d)]: -M, x[(n, d)]: -M}, ">=", c[(m, d)] - 3 * M,
                       kind="time", name=f"device[{m}<{n}@{d}]")
                # S[m] >= S[n] + c[n,d] - M o - M (2 - x[m,d] - x[n,d])
                lp.add({S[m]: 1.0, S[n]: -1.0, o: M, x[(m, d)]: -M, x[(n, d)]: -M}, ">=", c[(n, d)] - 2 * M,
                       kind="time", name=f"device[{n}<{m}@{d}]")


def resource_order_rows(lp: LinearProgram, v: MeshVariables) -> None:
    """Constraint 5 on the links and serial buses: one transfer at a time."""
    T, z, tr, M = v.T, v.z, v.tr, BIG_M
    for res, keys in v.st.transfers_on().items():
        keys = [k for k in keys if tr[k] > 0 and k in T]
        for i, k1 in enumerate(keys):
            for k2 in keys[i + 1:]:
                o = lp.var(f"o[{transfer_id(*k1)},{transfer_id(*k2)}]")
                v.pairs += 1
                lp.add({T[k2]: 1.0, T[k1]: -1.0, o: -M, z[k1]: -M, z[k2]: -M}, ">=", tr[k1] - 3 * M, kind="time",
                       name=f"resource[{res}]")
                lp.add({T[k1]: 1.0, T[k2]: -1.0, o: M, z[k1]: -M, z[k2]: -M}, ">=", tr[k2] - 2 * M, kind="time",
                       name=f"resource[{res}]")


def memory_rows(data: MeshData, lp: LinearProgram, v: MeshVariables) -> None:
    """Constraint 6, each row divided by its limit; none where the memory cannot bind."""
    st, x = v.st, v.x
    for d in data.devices:
        if math.isinf(data.limit[d]):
            continue
        on = [n for n in data.layers if d in st.allowed[n]]
        activity = sum(data.weight_bytes[n] for n in on) + max((data.working_bytes[n] for n in on), default=0.0)
        if activity <= data.limit[d]:
            continue
        L = data.limit[d]
        peak = lp.var(f"P[{d}]", binary=False, lb=0.0, ub=max(data.working_bytes[n] for n in on) / L,
                      implied_integer=False)
        for n in on:
            if data.working_bytes[n] > 0:
                lp.add({peak: 1.0, x[(n, d)]: -data.working_bytes[n] / L}, ">=", 0.0, kind="bits",
                       name=f"peak[{n}@{d}]")
        lp.add({**{x[(n, d)]: data.weight_bytes[n] / L for n in on if data.weight_bytes[n]}, peak: 1.0}, "<=",
               1 + MEMORY_RTOL, kind="bits", name=f"memory[{d}]")


def symmetry_rows(data: MeshData, lp: LinearProgram, v: MeshVariables, classes: list[list[str]]) -> None:
    """Constraint 8: interchangeable devices are used in the order of their first layer."""
    x = v.x
    for cls in classes:
        for dk, dn in zip(cls, cls[1:]):
            for j, n in enumerate(data.layers):
                if (n, dn) not in x:
                    continue
                lp.add({x[(n, dn)]: 1.0, **{x[(m, dk)]: -1.0 for m in data.layers[:j] if (m, dk) in x}}, "<=", 0.0,
                       name=f"symmetry[{n},{dk},{dn}]")


def makespan(data: MeshData, lp: LinearProgram, v: MeshVariables) -> int:
    """Constraint 7 and the objective: ``C >= E_i``, ``C >= T[t,e] + tr`` if ``z``; minimise
    ``C``. Returns ``C``."""
    cmax = _time_var(lp, "C")
    for n in data.layers:
        form = {cmax: 1.0}
        _add(form, v.E[n], -1.0)
        _row(lp, form, ">=", 0.0, f"makespan[{n}]")
    for key in v.T:
        lp.add({cmax: 1.0, v.T[key]: -1.0, v.z[key]: -BIG_M}, ">=", v.tr[key] - BIG_M, kind="time",
               name=f"makespan[{key}]")
    lp.add_objective(cmax, 1.0)
    return cmax


def decode_plan(inst: MeshInstance, data: MeshData, v: MeshVariables, cmax: int, H: float, tol: float,
                values) -> MeshPlan:
    """The device per layer and the solver's order on every resource; SolverFailure where
    the plan's schedule is longer than the program's makespan (beyond ``tol`` ms)."""
    st, x, c, tr = v.st, v.x, v.c, v.tr
    device_map = {n: max(st.allowed[n], key=lambda d: (values[x[(n, d)]], -data.dev_index[d])) for n in data.layers}
    starts, ends = {}, {}
    for n in data.layers:
        starts[n] = values[v.S[n]]
        ends[n] = starts[n] + c[(n, device_map[n])]
    for key in v.T:
        tid = transfer_id(*key)
        starts[tid] = values[v.T[key]]
        ends[tid] = starts[tid] + tr[key]
    plan = MeshPlan(device_map, order_from_times(data, device_map, starts, ends))
    makespan_ms = evaluate(inst, plan, data).makespan_ms
    program_ms = values[cmax] * H
    if makespan_ms > program_ms + tol:
        raise SolverFailure(f"mesh MILP: the decoded schedule ({makespan_ms:.9g} ms) is longer than the "
                            f"program's ({program_ms:.9g} ms)")
    return plan
