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

from splitopt.core.errors import SolverFailure
from splitopt.core.instance import Instance
from splitopt.core.program import LinearProgram, Program
from splitopt.families.mesh.data import MEMORY_RTOL, MeshData, transfer_id
from splitopt.families.mesh.evaluate import evaluate
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.structure import (Structure, canonical_plan, identical_device_classes, last_hops,
                                              order_from_times)

#: the MILP solvers' feasibility tolerance, relative to the horizon
MILP_FEAS_TOL = 1e-6
#: the MILP solvers' dual (optimality) tolerance of their LP solves, relative to the horizon
MILP_DUAL_TOL = 1e-7
#: big-M in units of the horizon (every time lies in [0, 1])
BIG_M = 2.0

Form = dict  # variable index -> coefficient; key None holds a constant


def _add(target: Form, form: Form, scale: float = 1.0) -> None:
    for k, v in form.items():
        target[k] = target.get(k, 0.0) + scale * v


def build_milp(inst: Instance, data: MeshData, start: MeshPlan | None) -> Program:
    """The MILP; ``start`` (a feasible plan or None) sets the horizon ``H``."""
    classes = identical_device_classes(data)
    if start is not None:
        start = canonical_plan(data, start, classes)
        H = evaluate(inst, start, data).makespan_ms
    else:
        H = sum(max(data.compute_ms[(n, d)] for d in data.devices) for n in data.layers) + sum(data.transfer_ms.values())
    lp = LinearProgram()
    if H <= 0:  # the start plan takes no time at all: it is optimal (an empty program says so)
        return Program(kind="linear", model=lp, decode=lambda values: start, stats={"horizon_ms": 0.0})
    c = {k: v / H for k, v in data.compute_ms.items()}  # durations in units of H
    tr = {k: v / H for k, v in data.transfer_ms.items()}
    st = Structure(data, max_compute={k: v <= 1 + 1e-12 for k, v in c.items()})
    M = BIG_M
    cont = dict(binary=False, lb=0.0, ub=1.0, implied_integer=False)

    def row(form: Form, sense: str, rhs: float, name: str) -> None:
        const = form.get(None, 0.0)
        lp.add({k: v for k, v in form.items() if k is not None}, sense, rhs - const, kind="time", name=name)

    x, S, w, g, z, T = {}, {}, {}, {}, {}, {}
    for n in data.layers:
        S[n] = lp.var(f"S[{n}]", **cont)
        for d in st.allowed[n]:
            x[(n, d)] = lp.var(f"x[{n},{d}]")
        lp.add({x[(n, d)]: 1.0 for d in st.allowed[n]}, "==", 1.0, name=f"assign[{n}]")
    E = {n: {S[n]: 1.0, **{x[(n, d)]: c[(n, d)] for d in st.allowed[n] if c[(n, d)]}} for n in data.layers}
    for t, a, n, b in st.forbidden:
        if (t, a) in x and (n, b) in x:
            lp.add({x[(t, a)]: 1.0, x[(n, b)]: 1.0}, "<=", 1.0, name=f"route[{t},{a},{n},{b}]")
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
    for t, a, v in st.g:
        g[(t, a, v)] = lp.var(f"g[{t},{a},{v}]", binary=False)
        for b in sorted(data.subtree[a][v], key=data.dev_index.__getitem__):  # a set: rows in device order
            if (t, b) not in w:
                continue
            form = {g[(t, a, v)]: 1.0}
            _add(form, w[(t, b)], -1.0)
            if data.is_raw[t]:
                row(form, ">=", 0.0, f"cross[{t},{a},{v},{b}]")
            else:
                form[x[(t, a)]] = form.get(x[(t, a)], 0.0) - 1.0
                row(form, ">=", -1.0, f"cross[{t},{a},{v},{b}]")
    for key in st.z:
        t, pair = key
        z[key] = lp.var(f"z[{t},{pair[0]}->{pair[1]}]", binary=False)
        for k in st.z_of[key]:
            lp.add({z[key]: 1.0, g[k]: -1.0}, ">=", 0.0, name=f"link[{t},{k[1]},{k[2]}]")
        if tr[key] > 1 + 1e-12:  # longer than the horizon: no plan within it sends t over this link
            lp.add({z[key]: 1.0}, "<=", 0.0, name=f"too_long[{t},{pair[0]}->{pair[1]}]")
            continue
        T[key] = lp.var(f"T[{t},{pair[0]}->{pair[1]}]", **cont)
        if not data.is_raw[t]:
            form = {T[key]: 1.0}
            _add(form, E[t], -1.0)
            row(form, ">=", 0.0, f"after[{t},{pair[0]}->{pair[1]}]")
        # T + tr <= 1 + M (1 - z)
        lp.add({T[key]: 1.0, z[key]: M}, "<=", 1.0 + M - tr[key], kind="time", name=f"horizon[{t},{pair}]")
    for t, a, v in st.g:
        u = data.parent[a][v]
        if u == a:
            continue
        prev = (t, (data.parent[a][u], u))
        if prev in T and (t, (u, v)) in T:  # else z = 0 forces g = 0
            # T[u->v] >= T[prev] + tr[prev] - M (1 - g)
            lp.add({T[(t, (u, v))]: 1.0, T[prev]: -1.0, g[(t, a, v)]: -M}, ">=", tr[prev] - M, kind="time",
                   name=f"hop[{t},{a},{v}]")
    for n in data.layers:
        for t in data.layer_inputs[n]:
            if not data.is_raw[t]:
                form = {S[n]: 1.0}
                _add(form, E[t], -1.0)
                row(form, ">=", 0.0, f"input[{t}->{n}]")
    for n, t, d, a, key in last_hops(data, st, T):
        # S[n] >= T[key] + tr[key] - M * slack, slack = 1 - x[n,d] (raw) or 2 - x[n,d] - x[t,a]
        form = {S[n]: 1.0, T[key]: -1.0, x[(n, d)]: -M}
        rhs = tr[key] - M
        if not data.is_raw[t]:
            form[x[(t, a)]] = form.get(x[(t, a)], 0.0) - M
            rhs -= M
        lp.add(form, ">=", rhs, kind="time", name=f"arrive[{t}->{n}@{d}]")
    # one compute at a time per device: pairs of layers not ordered by the DAG
    pairs = 0
    for j, m in enumerate(data.layers):
        for n in data.layers[j + 1:]:
            if m in data.ancestors[n]:
                continue
            common = [d for d in st.allowed[m] if d in st.allowed[n] and c[(m, d)] > 0 and c[(n, d)] > 0]
            if not common:
                continue
            o = lp.var(f"o[{m},{n}]")
            pairs += 1
            for d in common:
                # S[n] >= S[m] + c[m,d] - M (1 - o) - M (2 - x[m,d] - x[n,d])
                lp.add({S[n]: 1.0, S[m]: -1.0, o: -M, x[(m, d)]: -M, x[(n, d)]: -M}, ">=", c[(m, d)] - 3 * M,
                       kind="time", name=f"device[{m}<{n}@{d}]")
                # S[m] >= S[n] + c[n,d] - M o - M (2 - x[m,d] - x[n,d])
                lp.add({S[m]: 1.0, S[n]: -1.0, o: M, x[(m, d)]: -M, x[(n, d)]: -M}, ">=", c[(n, d)] - 2 * M,
                       kind="time", name=f"device[{n}<{m}@{d}]")
    # one transfer at a time per link / serial bus
    for res, keys in st.transfers_on().items():
        keys = [k for k in keys if tr[k] > 0 and k in T]
        for i, k1 in enumerate(keys):
            for k2 in keys[i + 1:]:
                o = lp.var(f"o[{transfer_id(*k1)},{transfer_id(*k2)}]")
                pairs += 1
                lp.add({T[k2]: 1.0, T[k1]: -1.0, o: -M, z[k1]: -M, z[k2]: -M}, ">=", tr[k1] - 3 * M, kind="time",
                       name=f"resource[{res}]")
                lp.add({T[k1]: 1.0, T[k2]: -1.0, o: M, z[k1]: -M, z[k2]: -M}, ">=", tr[k2] - 2 * M, kind="time",
                       name=f"resource[{res}]")
    # memory, each row divided by its limit
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
    for cls in classes:
        for dk, dn in zip(cls, cls[1:]):
            for j, n in enumerate(data.layers):
                if (n, dn) not in x:
                    continue
                lp.add({x[(n, dn)]: 1.0, **{x[(m, dk)]: -1.0 for m in data.layers[:j] if (m, dk) in x}}, "<=", 0.0,
                       name=f"symmetry[{n},{dk},{dn}]")
    cmax = lp.var("C", **cont)
    for n in data.layers:
        form = {cmax: 1.0}
        _add(form, E[n], -1.0)
        row(form, ">=", 0.0, f"makespan[{n}]")
    for key in T:
        lp.add({cmax: 1.0, T[key]: -1.0, z[key]: -M}, ">=", tr[key] - M, kind="time", name=f"makespan[{key}]")
    lp.add_objective(cmax, 1.0)
    K = st.max_tasks
    tol = (K + 1) * MILP_FEAS_TOL * H

    def decode(values) -> MeshPlan:
        device_map = {n: max(st.allowed[n], key=lambda d: (values[x[(n, d)]], -data.dev_index[d]))
                      for n in data.layers}
        starts, ends = {}, {}
        for n in data.layers:
            starts[n] = values[S[n]]
            ends[n] = starts[n] + c[(n, device_map[n])]
        for key in T:
            tid = transfer_id(*key)
            starts[tid] = values[T[key]]
            ends[tid] = starts[tid] + tr[key]
        plan = MeshPlan(device_map, order_from_times(data, device_map, starts, ends))
        makespan = evaluate(inst, plan, data).makespan_ms
        program_ms = values[cmax] * H
        if makespan > program_ms + tol:
            raise SolverFailure(f"mesh MILP: the decoded schedule ({makespan:.9g} ms) is longer than the "
                                f"program's ({program_ms:.9g} ms)")
        return plan

    return Program(
        kind="linear", model=lp, decode=decode, unit_ms=H, tolerance_ms=tol,
        bound_tolerance_ms=(K + 1) * MILP_DUAL_TOL * H,
        stats={"horizon_ms": H, "order_variables": pairs, "variables": len(lp.variables), "rows": len(lp.rows),
               "symmetry_classes": [list(c) for c in classes]},
    )
