"""The mesh family's CP-SAT model (``formulations/mesh_schedule.md``): assignment
``x[i,d]``, multicast transfers over fixed routes, store-and-forward hops, optional
interval variables with one task at a time per device / link / serial bus, memory per
device, makespan objective.

Time scaling. CP-SAT works on integer durations ``ceil(ms / unit)`` with
``unit = H / 2**24`` ms (``2**(30 - ceil(log2(D + 2)))`` units for ``D > 62`` devices), where
``H`` is the makespan of the start plan or, without one, the sum of all durations. Every
linear constraint then sums to less than ``2**31``, clear of the presolve overflow of
OR-Tools 9.15 (or-tools #5293); memory rows in bits that could pass ``2**31`` switch
presolve off. Rounding up makes every integer schedule a valid schedule in ms, and a
plan's integer makespan exceeds its true one by at most ``K`` units, ``K`` the largest
number of tasks a plan can have: the program's tolerance is ``K * unit`` (the reported
bound is ``bound_int * unit - K * unit``). The decoded plan is the device per layer plus
the solver's order on every resource; its semi-active schedule on the integer durations
never exceeds CP-SAT's makespan (checked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from splitopt.core.errors import SolverFailure
from splitopt.core.program import Program
from splitopt.families.mesh.data import MeshData, mesh_data, transfer_id
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.structure import (Structure, bool_or, identical_device_classes, last_hops,
                                              memory_rows_cpsat, order_from_times, start_horizon)
from splitopt.families.mesh.tasks import build_tasks, schedule_makespan, semi_active_times

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel

#: CP-SAT time units in the horizon (at most; fewer for many devices)
TIME_UNITS = 2**24


def scale_units(data: MeshData) -> int:
    n = len(data.devices)
    if n <= 62:
        return TIME_UNITS
    return 2 ** (30 - math.ceil(math.log2(n + 2)))


def build_cpsat(inst: MeshInstance, start: MeshPlan | None) -> Program:
    """The CP-SAT model of the mesh schedule (optional intervals per device and per link
    or serial bus, store-and-forward hops, memory, makespan), time in integer units, its
    constraints in the formulation's order; ``start`` (a feasible plan or None) sets the
    horizon and is the hint."""
    from ortools.sat.python import cp_model

    data = mesh_data(inst)
    classes = identical_device_classes(data)
    start, horizon_ms = start_horizon(inst, data, start, classes)
    if horizon_ms <= 0:  # the start plan takes no time at all: it is optimal (an empty model says so)
        return Program(kind="cpsat", model=cp_model.CpModel(), decode=lambda values: start,
                       stats={"horizon_ms": 0.0})
    unit = horizon_ms / scale_units(data)
    v = integer_durations(data, start, unit)
    model = cp_model.CpModel()
    assignment_variables(data, model, v)
    need_variables(data, model, v)
    transfer_variables(data, model, v)
    data_rows(data, model, v)
    for ivs in [*v.device_intervals.values(), *v.resource_intervals.values()]:  # constraint 5
        if len(ivs) > 1:
            model.add_no_overlap(ivs)
    big_memory = memory_rows_cpsat(model, data, v.st, v.x)
    symmetry_cpsat(model, data, v.st, v.x, classes)
    cmax = makespan(data, model, v)
    if start is not None:
        hint(data, model, v, start)
    K = v.st.max_tasks
    return Program(
        kind="cpsat", model=model, decode=lambda values: decode_plan(data, v, cmax, values), unit_ms=unit,
        tolerance_ms=K * unit, presolve=not big_memory,
        stats={"time_unit_ms": unit, "horizon_units": v.H, "max_tasks": K, "presolve": not big_memory,
               "symmetry_classes": [list(c) for c in classes]},
    )


@dataclass
class CpSatVariables:
    """The model's variables (section "Variables") as the steps add them, with the integer
    durations ``dur`` (``("c", layer, device)`` and ``("t", tensor, link)``) and the
    horizon ``H`` in units; the optional intervals per device and per resource (link or
    serial bus) for constraint 5."""

    dur: dict
    H: int
    st: Structure
    x: dict = field(default_factory=dict)
    S: dict = field(default_factory=dict)
    E: dict = field(default_factory=dict)
    w: dict = field(default_factory=dict)
    g: dict = field(default_factory=dict)
    z: dict = field(default_factory=dict)
    T: dict = field(default_factory=dict)
    device_intervals: dict[str, list] = field(default_factory=dict)
    resource_intervals: dict[str, list] = field(default_factory=dict)


def integer_durations(data: MeshData, start: MeshPlan | None, unit: float) -> CpSatVariables:
    """Section "Scaling": every duration rounded up to whole units, and the horizon in
    units (the start plan's makespan on them, or the sum of the slowest)."""
    dur: dict[tuple[str, str, str | tuple[str, str]], int] = {}
    for (n, d), ms in data.compute_ms.items():
        dur[("c", n, d)] = 0 if ms <= 0 else max(1, math.ceil(ms / unit - 1e-9))
    for (t, pair), ms in data.transfer_ms.items():
        dur[("t", t, pair)] = 0 if ms <= 0 else max(1, math.ceil(ms / unit - 1e-9))
    if start is not None:
        H = int(round(schedule_makespan(data, start.device, start.order, durations=dur)))
    else:
        H = sum(max(dur[("c", n, d)] for d in data.devices) for n in data.layers)
        H += sum(val for k, val in dur.items() if k[0] == "t")
    st = Structure(data, max_compute={(n, d): dur[("c", n, d)] <= H for n in data.layers for d in data.devices})
    return CpSatVariables(dur, H, st, device_intervals={d: [] for d in data.devices})


def assignment_variables(data: MeshData, model: CpModel, v: CpSatVariables) -> None:
    """``S_i``, ``E_i``, ``x[i,d]`` with each layer's optional interval per device, and
    constraints 1 (assignment) and 2 (routes)."""
    st, x, S, E, dur, H = v.st, v.x, v.S, v.E, v.dur, v.H
    for n in data.layers:
        S[n] = model.new_int_var(0, H, f"S[{n}]")
        E[n] = model.new_int_var(0, H, f"E[{n}]")
        if not st.allowed[n]:
            model.add_bool_or([])  # no device can hold this layer: infeasible
            continue
        for d in st.allowed[n]:
            x[(n, d)] = model.new_bool_var(f"x[{n},{d}]")
            c = dur[("c", n, d)]
            if c > 0:
                v.device_intervals[d].append(model.new_optional_fixed_size_interval_var(S[n], c, x[(n, d)], f"I[{n},{d}]"))
        model.add_exactly_one(x[(n, d)] for d in st.allowed[n])
        model.add(E[n] == S[n] + sum(dur[("c", n, d)] * x[(n, d)] for d in st.allowed[n] if dur[("c", n, d)]))
    for t, a, n, b in st.forbidden:
        if (t, a) in x and (n, b) in x:
            model.add_bool_or([x[(t, a)].negated(), x[(n, b)].negated()])


def need_variables(data: MeshData, model: CpModel, v: CpSatVariables) -> None:
    """Constraint 3 as exact Boolean equivalences: ``w[t,b]`` (t needed on b) and
    ``g[t,a,v]`` (t made on a must cross into v)."""
    st, x, w, g = v.st, v.x, v.w, v.g
    for t in data.tensors:
        for b in st.needs[t]:
            if b in st.fixed_need[t]:
                var = model.new_bool_var(f"w[{t},{b}]")
                model.add(var == 1)
                w[(t, b)] = var
                continue
            lits = [x[(c, b)] for c in data.readers[t] if (c, b) in x]
            var = model.new_bool_var(f"w[{t},{b}]")
            bool_or(model, var, lits)
            w[(t, b)] = var
    for t, a, u in st.g:
        need = [w[(t, b)] for b in sorted(data.subtree[a][u], key=data.dev_index.__getitem__) if (t, b) in w]
        var = model.new_bool_var(f"g[{t},{a},{u}]")
        if data.is_raw[t]:
            bool_or(model, var, need)
        else:
            any_need = model.new_bool_var(f"n[{t},{a},{u}]")
            bool_or(model, any_need, need)
            # var == x[t,a] and any_need
            model.add_implication(var, x[(t, a)])
            model.add_implication(var, any_need)
            model.add_bool_or([x[(t, a)].negated(), any_need.negated(), var])
        g[(t, a, u)] = var


def transfer_variables(data: MeshData, model: CpModel, v: CpSatVariables) -> None:
    """Constraint 3's ``z`` (the OR of its ``g``) and the hops ``T[t,e]`` with their optional
    intervals per resource: constraint 4's ``T[t,e] >= E_t`` if ``z`` and store-and-forward,
    constraint 7's horizon."""
    st, z, T, dur, H = v.st, v.z, v.T, v.dur, v.H
    for key in st.z:
        t, pair = key
        var = model.new_bool_var(f"z[{t},{pair[0]}->{pair[1]}]")
        bool_or(model, var, [v.g[k] for k in st.z_of[key]])
        z[key] = var
        T[key] = model.new_int_var(0, H, f"T[{t},{pair[0]}->{pair[1]}]")
        d_t = dur[("t", t, pair)]
        if d_t > 0:
            v.resource_intervals.setdefault(data.resource_of[pair], []).append(
                model.new_optional_fixed_size_interval_var(T[key], d_t, var, f"J[{t},{pair[0]}->{pair[1]}]"))
            model.add(T[key] + d_t <= H).only_enforce_if(var)
        if d_t > H:
            model.add(var == 0)
        if not data.is_raw[t]:
            model.add(T[key] >= v.E[t]).only_enforce_if(var)
    # hop chains: a hop into u leaves its parent p after t arrived on p (p not the producer)
    for t, a, u in st.g:
        p = data.parent[a][u]
        if p == a:
            continue
        prev = (t, (data.parent[a][p], p))
        model.add(T[(t, (p, u))] >= T[prev] + dur[("t", t, prev[1])]).only_enforce_if(v.g[(t, a, u)])


def data_rows(data: MeshData, model: CpModel, v: CpSatVariables) -> None:
    """Constraint 4, the layers: a layer starts after its inputs are on its device."""
    for n in data.layers:
        for t in data.layer_inputs[n]:
            if not data.is_raw[t]:
                model.add(v.S[n] >= v.E[t])
    for n, t, d, a, key in last_hops(data, v.st, v.T):
        cond = [v.x[(n, d)]] if data.is_raw[t] else [v.x[(n, d)], v.x[(t, a)]]
        model.add(v.S[n] >= v.T[key] + v.dur[("t", t, key[1])]).only_enforce_if(cond)


def makespan(data: MeshData, model: CpModel, v: CpSatVariables) -> Any:
    """Constraint 7 and the objective: the makespan after every layer and every hop sent;
    minimise it. Returns it."""
    cmax = model.new_int_var(0, v.H, "makespan")
    for n in data.layers:
        model.add(cmax >= v.E[n])
    for key, var in v.z.items():
        model.add(cmax >= v.T[key] + v.dur[("t", key[0], key[1])]).only_enforce_if(var)
    model.minimize(cmax)
    return cmax


def hint(data: MeshData, model: CpModel, v: CpSatVariables, start: MeshPlan) -> None:
    """The start plan's integer schedule as the model's hint."""
    times = semi_active_times(build_tasks(data, start.device, v.dur), start.order)
    assert times is not None  # integer_durations scheduled these orders (a deadlock raised there)
    for (n, d), var in v.x.items():
        model.add_hint(var, start.device[n] == d)
    for n in data.layers:
        model.add_hint(v.S[n], int(times[n][0]))
    for key in v.st.z:
        tid = transfer_id(*key)
        if tid in times:
            model.add_hint(v.T[key], int(times[tid][0]))


def decode_plan(data: MeshData, v: CpSatVariables, cmax: Any, values) -> MeshPlan:
    """The device per layer and the solver's order on every resource; SolverFailure where
    the plan's schedule on the integer durations is longer than CP-SAT's makespan."""
    value = values.__getitem__

    def is_true(var) -> bool:
        return value(var.index) > 0.5

    device_map = {n: next(d for d in v.st.allowed[n] if is_true(v.x[(n, d)])) for n in data.layers}
    starts, ends = {}, {}
    for n in data.layers:
        starts[n], ends[n] = value(v.S[n].index), value(v.E[n].index)
    for key, var in v.z.items():
        if is_true(var):
            tid = transfer_id(*key)
            starts[tid] = value(v.T[key].index)
            ends[tid] = starts[tid] + v.dur[("t", key[0], key[1])]
    plan = MeshPlan(device_map, order_from_times(data, device_map, starts, ends))
    rounded = schedule_makespan(data, device_map, plan.order, durations=v.dur)
    if rounded > value(cmax.index) + 1e-9:
        raise SolverFailure(f"cpsat: the decoded schedule ({rounded} units) is longer than CP-SAT's "
                            f"({value(cmax.index)})")
    return plan


def symmetry_cpsat(model: CpModel, data: MeshData, st: Structure, x, classes) -> None:
    """Within a class of interchangeable devices d1 < d2 < ...: a layer may run on
    d(k+1) only if an earlier layer runs on d(k)."""
    for cls in classes:
        for dk, dn in zip(cls, cls[1:]):
            for j, n in enumerate(data.layers):
                if (n, dn) not in x:
                    continue
                before = [x[(m, dk)] for m in data.layers[:j] if (m, dk) in x]
                if not before:
                    model.add(x[(n, dn)] == 0)
                else:
                    model.add_bool_or(before).only_enforce_if(x[(n, dn)])
