"""The mesh family's exact programs (``formulations/mesh_schedule.md``): a CP-SAT model
with optional interval variables (backend ``cpsat``) and a disjunctive big-M MILP
through PuLP (``milp-cbc``, ``milp-highs``). Both encode the model of ``splitopt.mesh``:
assignment ``x[i,d]``, multicast transfers over fixed routes, store-and-forward hops, one
task at a time per device / link / serial bus, memory per device, makespan objective.

Shared structure (``Structure``):

* ``allowed[i]``: devices where layer ``i``'s weights plus working set fit, which the raw
  inputs it reads can reach and (final outputs) from which the sink is reachable;
* ``w[t,b]``: tensor ``t`` is needed on device ``b`` (a reader on ``b``; the sink for a
  final output);
* ``g[t,a,v]``: ``t`` is produced on ``a`` and must cross into ``v``, i.e. some ``b`` in
  the subtree of ``v`` in ``a``'s routing tree needs it; then ``t`` crosses the tree link
  ``(parent_a(v), v)``;
* ``z[t,e]``: ``t`` crosses link ``e`` (the OR of the ``g`` that use ``e``).

Time scaling. CP-SAT works on integer durations ``ceil(ms / unit)`` with
``unit = H / 2**24`` ms (``2**(30 - ceil(log2(D + 2)))`` units for ``D > 62`` devices), where
``H`` is the makespan of the start plan (``splitopt.mesh.start_plan``) or, without one, the
sum of all durations. Every linear constraint then sums to less than ``2**31``, clear of
the presolve overflow of OR-Tools 9.15 (or-tools #5293); memory rows in bits that could
pass ``2**31`` switch presolve off. Rounding up makes every integer schedule a valid
schedule in ms, and a plan's integer makespan exceeds its true one by at most ``K`` units,
``K`` the largest number of tasks a plan can have. So the returned bound is
``bound_int * unit - K * unit`` and ``objective_tolerance_ms = K * unit``.

The MILP works in units of ``H`` (times in [0, 1], big-M = 2); its solutions meet the
constraints to the solvers' feasibility tolerance (1e-6 of ``H`` per task), so
``objective_tolerance_ms = (K + 1) * 1e-6 * H``.

Both decode a plan (device per layer plus the solver's order on every resource) and
report the independent semi-active schedule of that plan (the CP-SAT one on the integer
durations, times ``unit``); it never exceeds the solver's own makespan (checked).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from splitopt.errors import SolverFailure
from splitopt.instance import Instance
from splitopt.mesh import (
    MEMORY_RTOL,
    MeshData,
    MeshPlan,
    _semi_active,
    _tasks,
    evaluate,
    schedule_makespan,
    start_plan,
    transfer_id,
)
from splitopt.result import BackendOutput, Status

#: CP-SAT time units in the horizon (at most; fewer for many devices)
TIME_UNITS = 2**24
#: PuLP solvers' feasibility tolerance, relative to the horizon
MILP_FEAS_TOL = 1e-6


# ----- shared structure ---------------------------------------------------------------------


class Structure:
    """Index sets of both programs (see the module docstring)."""

    def __init__(self, data: MeshData, max_compute: dict | None = None):
        """``max_compute[(i, d)]``: False forbids layer ``i`` on ``d`` (a task longer than
        the horizon: no plan within the horizon can use it). Transfers longer than the
        horizon are forbidden by the programs (``z = 0``)."""
        self.data = data
        inputs_raw = {n: [t for t in data.layer_inputs[n] if data.is_raw[t]] for n in data.layers}
        self.allowed: dict[str, list[str]] = {}
        for n in data.layers:
            ok = []
            for d in data.devices:
                if data.weight_bytes[n] + data.working_bytes[n] > data.limit[d] * (1 + MEMORY_RTOL):
                    continue
                if any(not data.has_route(data.source, d) for _ in inputs_raw[n]):
                    continue
                if n in data.final and data.options.deliver_outputs and not data.has_route(d, data.sink):
                    continue
                if max_compute is not None and not max_compute[(n, d)]:
                    continue
                ok.append(d)
            self.allowed[n] = ok
        # forbidden (producer device, reader device) pairs per data edge between layers
        self.forbidden: list[tuple[str, str, str, str]] = []
        for n in data.layers:
            for t in data.layer_inputs[n]:
                if data.is_raw[t]:
                    continue
                for a in self.allowed[t]:
                    for b in self.allowed[n]:
                        if not data.has_route(a, b):
                            self.forbidden.append((t, a, n, b))
        # sources and possible needs
        self.sources = {t: ([data.source] if data.is_raw[t] else list(self.allowed[t])) for t in data.tensors}
        self.needs: dict[str, list[str]] = {}
        self.fixed_need: dict[str, set[str]] = {}
        for t in data.tensors:
            devs = set()
            for c in data.readers[t]:
                devs.update(self.allowed[c])
            fixed = set()
            if t in data.final and data.options.deliver_outputs:
                fixed.add(data.sink)
            self.needs[t] = sorted(devs | fixed, key=data.dev_index.__getitem__)
            self.fixed_need[t] = fixed
        # g[t, a, v] and the links they use
        self.g: list[tuple[str, str, str]] = []
        self.z_of: dict[tuple[str, tuple[str, str]], list[tuple[str, str, str]]] = {}
        for t in data.tensors:
            need = set(self.needs[t])
            for a in self.sources[t]:
                for v, sub in data.subtree[a].items():
                    if not (sub & need):
                        continue
                    pair = (data.parent[a][v], v)
                    self.g.append((t, a, v))
                    self.z_of.setdefault((t, pair), []).append((t, a, v))
        self.z: list[tuple[str, tuple[str, str]]] = sorted(
            self.z_of, key=lambda k: (data.tensor_pos[k[0]], data.link_index[k[1]]))
        #: the largest number of tasks a plan can have
        self.max_tasks = len(data.layers) + len(self.z)

    def transfers_on(self) -> dict[str, list[tuple[str, tuple[str, str]]]]:
        """Resource -> possible transfers on it."""
        out: dict[str, list] = {}
        for key in self.z:
            out.setdefault(self.data.resource_of[key[1]], []).append(key)
        return out


def identical_device_classes(data: MeshData) -> list[list[str]]:
    """Classes (in device order) of interchangeable devices: neither source nor sink,
    same memory limit and layer latencies, and swapping two of them maps every link to
    a link of the same rate, latency and bus and every route to the swapped route."""
    inst = data.inst
    special = {data.source, data.sink}

    def same(d1: str, d2: str) -> bool:
        if d1 in special or d2 in special or data.limit[d1] != data.limit[d2]:
            return False
        if any(data.compute_ms[(n, d1)] != data.compute_ms[(n, d2)] for n in data.layers):
            return False
        sigma = {d1: d2, d2: d1}

        def s(x: str) -> str:
            return sigma.get(x, x)

        for pair, link in data.link_by_pair.items():
            other = data.link_by_pair.get((s(pair[0]), s(pair[1])))
            if other is None or other.latency_ms != link.latency_ms or other.bus != link.bus:
                return False
            if inst.link_rate_bits_per_s(other) != inst.link_rate_bits_per_s(link):
                return False
        for a in data.devices:
            for b in data.devices:
                if data.has_route(a, b) != data.has_route(s(a), s(b)):
                    return False
                if a != b and data.has_route(a, b):
                    mapped = [(s(u), s(v)) for u, v in data.route(a, b)]
                    if mapped != data.route(s(a), s(b)):
                        return False
        return True

    classes: list[list[str]] = []
    for d in data.devices:
        for cls in classes:
            if same(cls[0], d):
                cls.append(d)
                break
        else:
            classes.append([d])
    return [c for c in classes if len(c) > 1]


def canonical_plan(data: MeshData, plan: MeshPlan, classes: list[list[str]]) -> MeshPlan:
    """Relabel interchangeable devices so that, within each class, devices are used in
    the order of their first layer (the symmetry-breaking rule of both programs); the
    schedule is unchanged (the relabelling is an automorphism of the instance)."""
    mapping = {d: d for d in data.devices}
    for cls in classes:
        first = {d: min((data.position[n] for n in data.layers if plan.device[n] == d), default=math.inf) for d in cls}
        used = sorted(cls, key=lambda d: (first[d], data.dev_index[d]))
        for old, new in zip(used, cls):
            mapping[old] = new

    def link(name: str) -> str:
        u, v = name.split("->")
        return f"{mapping[u]}->{mapping[v]}"

    device = {n: mapping[d] for n, d in plan.device.items()}
    order = {}
    for res, ids in plan.order.items():
        new_res = mapping.get(res, None)
        if new_res is None:
            new_res = link(res) if res in {f"{u}->{v}" for u, v in data.pairs} else res
        new_ids = []
        for tid in ids:
            if "@" in tid and tid not in data.position:
                t, rest = tid.rsplit("@", 1)
                new_ids.append(f"{t}@{link(rest)}")
            else:
                new_ids.append(tid)
        order[new_res] = tuple(new_ids)
    return MeshPlan(device, order)


def _order_from_times(data: MeshData, device_map, starts: dict[str, float], ends: dict[str, float]) -> dict[str, tuple[str, ...]]:
    """Per-resource order of the plan's positive-duration tasks by the solver's times
    (midpoint, then the default key)."""
    tasks = _tasks(data, device_map)
    by_res: dict[str, list] = {}
    for tid, t in tasks.items():
        if t.duration > 0:
            if tid not in starts:
                raise SolverFailure(f"mesh program: task '{tid}' of the decoded plan has no time in the solution")
            by_res.setdefault(t.resource, []).append(((starts[tid] + ends[tid]) / 2.0, t.key, tid))
    return {r: tuple(tid for _, _, tid in sorted(items)) for r, items in by_res.items()}


# ----- assignment feasibility (for the infeasibility diagnosis) --------------------------------


def assignment_feasible(data: MeshData, lifted: set[str] = frozenset(), time_limit_s: float = 20.0) -> bool:
    """Is there an assignment meeting every memory limit (those of ``lifted`` devices
    ignored) and the routes? A CP-SAT feasibility model without the schedule."""
    from ortools.sat.python import cp_model

    if lifted:
        limit = dict(data.limit)
        for d in lifted:
            data.limit[d] = math.inf
        try:
            return assignment_feasible(data, frozenset(), time_limit_s)
        finally:
            data.limit.update(limit)
    st = Structure(data)
    model = cp_model.CpModel()
    x = {}
    for n in data.layers:
        if not st.allowed[n]:
            return False
        for d in st.allowed[n]:
            x[(n, d)] = model.NewBoolVar(f"x[{n},{d}]")
        model.AddExactlyOne(x[(n, d)] for d in st.allowed[n])
    for t, a, n, b in st.forbidden:
        model.AddBoolOr([x[(t, a)].Not(), x[(n, b)].Not()])
    _memory_rows_cpsat(model, data, st, x)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 1
    code = solver.Solve(model)
    return code in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def _last_hops(data: MeshData, st: Structure, transfers):
    """For every layer n, input tensor t, device d allowed for n and source a of t whose
    route to d exists: (n, t, d, a, key), ``key`` the transfer of t over the last hop into
    d when the program has one. Both programs make n start after that hop ends when n
    runs on d and t was produced on a."""
    for n in data.layers:
        for t in data.layer_inputs[n]:
            for d in st.allowed[n]:
                for a in st.sources[t]:
                    if a == d or not data.has_route(a, d):
                        continue
                    key = (t, (data.parent[a][d], d))
                    if key in transfers:
                        yield n, t, d, a, key


def _memory_rows_cpsat(model, data: MeshData, st: Structure, x) -> bool:
    """Memory rows in bits (sizes rounded up, limits down); returns True if a row could
    sum past 2**31 (then presolve must stay off, or-tools #5293)."""
    big = False
    for d in data.devices:
        if math.isinf(data.limit[d]):
            continue
        on = [n for n in data.layers if d in st.allowed[n]]
        wbits = {n: math.ceil(data.weight_bytes[n] * 8 - 1e-9) for n in on}
        sbits = {n: math.ceil(data.working_bytes[n] * 8 - 1e-9) for n in on}
        cap = math.floor(data.limit[d] * 8 * (1 + MEMORY_RTOL) + 1e-9)
        activity = sum(wbits.values()) + max(sbits.values(), default=0)
        if activity <= cap:
            continue
        big = big or activity >= 2**31
        peak = model.NewIntVar(0, max(sbits.values(), default=0), f"peak[{d}]")
        for n in on:
            if sbits[n] > 0:
                model.Add(peak >= sbits[n]).OnlyEnforceIf(x[(n, d)])
        model.Add(sum(wbits[n] * x[(n, d)] for n in on if wbits[n]) + peak <= cap)
    return big


# ----- CP-SAT ---------------------------------------------------------------------------------------


def _scale_units(data: MeshData) -> int:
    n = len(data.devices)
    if n <= 62:
        return TIME_UNITS
    return 2 ** (30 - math.ceil(math.log2(n + 2)))


def _solve_cpsat(inst: Instance, options, data: MeshData, start: MeshPlan | None) -> BackendOutput:
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    classes = identical_device_classes(data)
    if start is not None:
        start = canonical_plan(data, start, classes)
        horizon_ms = evaluate(inst, start, data).makespan_ms
    else:
        horizon_ms = sum(max(data.compute_ms[(n, d)] for d in data.devices) for n in data.layers)
        horizon_ms += sum(data.transfer_ms.values())
    if horizon_ms <= 0:  # the start plan takes no time at all: it is optimal
        return BackendOutput(Status.OPTIMAL, plan=start, objective=0.0, bound=0.0, message="CP-SAT: zero makespan",
                             extra={"build_s": time.perf_counter() - t0, "solve_s": 0.0})
    unit = horizon_ms / _scale_units(data)
    dur = {}
    for (n, d), ms in data.compute_ms.items():
        dur[("c", n, d)] = 0 if ms <= 0 else max(1, math.ceil(ms / unit - 1e-9))
    for (t, pair), ms in data.transfer_ms.items():
        dur[("t", t, pair)] = 0 if ms <= 0 else max(1, math.ceil(ms / unit - 1e-9))
    if start is not None:
        H = int(round(schedule_makespan(data, start.device, start.order, durations=dur)))
    else:
        H = sum(max(dur[("c", n, d)] for d in data.devices) for n in data.layers)
        H += sum(v for k, v in dur.items() if k[0] == "t")
    st = Structure(data, max_compute={(n, d): dur[("c", n, d)] <= H for n in data.layers for d in data.devices})
    K = st.max_tasks
    model = cp_model.CpModel()
    x, S, E, g, z, T = {}, {}, {}, {}, {}, {}
    dev_intervals: dict[str, list] = {d: [] for d in data.devices}
    for n in data.layers:
        S[n] = model.NewIntVar(0, H, f"S[{n}]")
        E[n] = model.NewIntVar(0, H, f"E[{n}]")
        if not st.allowed[n]:
            model.AddBoolOr([])  # no device can hold this layer: infeasible
            continue
        for d in st.allowed[n]:
            x[(n, d)] = model.NewBoolVar(f"x[{n},{d}]")
            c = dur[("c", n, d)]
            if c > 0:
                dev_intervals[d].append(model.NewOptionalFixedSizeIntervalVar(S[n], c, x[(n, d)], f"I[{n},{d}]"))
        model.AddExactlyOne(x[(n, d)] for d in st.allowed[n])
        model.Add(E[n] == S[n] + sum(dur[("c", n, d)] * x[(n, d)] for d in st.allowed[n] if dur[("c", n, d)]))
    for t, a, n, b in st.forbidden:
        if (t, a) in x and (n, b) in x:
            model.AddBoolOr([x[(t, a)].Not(), x[(n, b)].Not()])
    # w[t, b]: t needed on b
    w = {}
    for t in data.tensors:
        for b in st.needs[t]:
            if b in st.fixed_need[t]:
                var = model.NewBoolVar(f"w[{t},{b}]")
                model.Add(var == 1)
                w[(t, b)] = var
                continue
            lits = [x[(c, b)] for c in data.readers[t] if (c, b) in x]
            var = model.NewBoolVar(f"w[{t},{b}]")
            _bool_or(model, var, lits)
            w[(t, b)] = var
    for t, a, v in st.g:
        need = [w[(t, b)] for b in sorted(data.subtree[a][v], key=data.dev_index.__getitem__) if (t, b) in w]
        var = model.NewBoolVar(f"g[{t},{a},{v}]")
        if data.is_raw[t]:
            _bool_or(model, var, need)
        else:
            any_need = model.NewBoolVar(f"n[{t},{a},{v}]")
            _bool_or(model, any_need, need)
            # var == x[t,a] and any_need
            model.AddImplication(var, x[(t, a)])
            model.AddImplication(var, any_need)
            model.AddBoolOr([x[(t, a)].Not(), any_need.Not(), var])
        g[(t, a, v)] = var
    res_intervals: dict[str, list] = {}
    for key in st.z:
        t, pair = key
        var = model.NewBoolVar(f"z[{t},{pair[0]}->{pair[1]}]")
        _bool_or(model, var, [g[k] for k in st.z_of[key]])
        z[key] = var
        T[key] = model.NewIntVar(0, H, f"T[{t},{pair[0]}->{pair[1]}]")
        d_t = dur[("t", t, pair)]
        if d_t > 0:
            res_intervals.setdefault(data.resource_of[pair], []).append(
                model.NewOptionalFixedSizeIntervalVar(T[key], d_t, var, f"J[{t},{pair[0]}->{pair[1]}]"))
            model.Add(T[key] + d_t <= H).OnlyEnforceIf(var)
        if d_t > H:
            model.Add(var == 0)
        if not data.is_raw[t]:
            model.Add(T[key] >= E[t]).OnlyEnforceIf(var)
    # hop chains: a hop into v leaves u after t arrived on u (u not the producer)
    for t, a, v in st.g:
        u = data.parent[a][v]
        if u == a:
            continue
        prev = (t, (data.parent[a][u], u))
        model.Add(T[(t, (u, v))] >= T[prev] + dur[("t", t, prev[1])]).OnlyEnforceIf(g[(t, a, v)])
    # a layer starts after its inputs are on its device
    for n in data.layers:
        for t in data.layer_inputs[n]:
            if not data.is_raw[t]:
                model.Add(S[n] >= E[t])
    for n, t, d, a, key in _last_hops(data, st, T):
        cond = [x[(n, d)]] if data.is_raw[t] else [x[(n, d)], x[(t, a)]]
        model.Add(S[n] >= T[key] + dur[("t", t, key[1])]).OnlyEnforceIf(cond)
    for d, ivs in dev_intervals.items():
        if len(ivs) > 1:
            model.AddNoOverlap(ivs)
    for r, ivs in res_intervals.items():
        if len(ivs) > 1:
            model.AddNoOverlap(ivs)
    big_memory = _memory_rows_cpsat(model, data, st, x)
    _symmetry_cpsat(model, data, st, x, classes)
    cmax = model.NewIntVar(0, H, "makespan")
    for n in data.layers:
        model.Add(cmax >= E[n])
    for key, var in z.items():
        model.Add(cmax >= T[key] + dur[("t", key[0], key[1])]).OnlyEnforceIf(var)
    model.Minimize(cmax)
    if start is not None:  # hint: the start plan's integer schedule
        times = _semi_active(_tasks(data, start.device, dur), start.order)
        for (n, d), var in x.items():
            model.AddHint(var, start.device[n] == d)
        for n in data.layers:
            model.AddHint(S[n], int(times[n][0]))
        for key in st.z:
            tid = transfer_id(*key)
            if tid in times:
                model.AddHint(T[key], int(times[tid][0]))
    build_s = time.perf_counter() - t0
    from splitopt.solvers.cpsat import cpsat_solver, export_model

    if options.export_path is not None:
        export_model(model, options.export_path)

    # presolve off where memory rows are large: or-tools #5293
    solver = cpsat_solver(options.time_limit_s, options.threads, options.seed, options.verbose,
                          presolve=not big_memory)
    t1 = time.perf_counter()
    code = solver.Solve(model)
    solve_s = time.perf_counter() - t1
    extra = {"build_s": build_s, "solve_s": solve_s, "time_unit_ms": unit, "horizon_units": H,
             "max_tasks": K, "presolve": not big_memory, "symmetry_classes": [list(c) for c in classes],
             "objective_tolerance_ms": K * unit}
    name = solver.StatusName(code)
    if code == cp_model.INFEASIBLE:
        return BackendOutput(Status.INFEASIBLE, message="CP-SAT: infeasible", extra=extra)
    if code == cp_model.MODEL_INVALID:
        return BackendOutput(Status.ERROR, message=f"CP-SAT: model invalid: {model.Validate()}", extra=extra)
    bound_ms = solver.BestObjectiveBound() * unit - K * unit
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if start is not None:
            obj = schedule_makespan(data, start.device, start.order, durations=dur) * unit
            return BackendOutput(Status.FEASIBLE, plan=start, objective=obj, bound=bound_ms,
                                 message=f"CP-SAT: {name}; returning the start plan",
                                 objective_tolerance_ms=K * unit, extra=extra)
        return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"CP-SAT: {name}", extra=extra)
    device_map = {n: next(d for d in st.allowed[n] if solver.BooleanValue(x[(n, d)])) for n in data.layers}
    starts, ends = {}, {}
    for n in data.layers:
        starts[n], ends[n] = solver.Value(S[n]), solver.Value(E[n])
    for key, var in z.items():
        if solver.BooleanValue(var):
            tid = transfer_id(*key)
            starts[tid] = solver.Value(T[key])
            ends[tid] = starts[tid] + dur[("t", key[0], key[1])]
    plan = MeshPlan(device_map, _order_from_times(data, device_map, starts, ends))
    rounded = schedule_makespan(data, device_map, plan.order, durations=dur)
    if rounded > solver.Value(cmax) + 1e-9:
        raise SolverFailure(f"cpsat: the decoded schedule ({rounded} units) is longer than CP-SAT's ({solver.Value(cmax)})")
    status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
    return BackendOutput(status, plan=plan, objective=rounded * unit, bound=bound_ms, message=f"CP-SAT: {name}",
                         objective_tolerance_ms=K * unit, extra=extra)


def _bool_or(model, var, lits) -> None:
    """``var == OR(lits)`` (0/1 literals; constants allowed)."""
    if not lits:
        model.Add(var == 0)
        return
    for lit in lits:
        model.AddImplication(lit, var) if not isinstance(lit, int) else model.Add(var >= lit)
    model.AddBoolOr(list(lits)).OnlyEnforceIf(var)


def _symmetry_cpsat(model, data: MeshData, st: Structure, x, classes) -> None:
    """Within a class of interchangeable devices d1 < d2 < ...: a layer may run on
    d(k+1) only if an earlier layer runs on d(k)."""
    for cls in classes:
        for dk, dn in zip(cls, cls[1:]):
            for j, n in enumerate(data.layers):
                if (n, dn) not in x:
                    continue
                before = [x[(m, dk)] for m in data.layers[:j] if (m, dk) in x]
                if not before:
                    model.Add(x[(n, dn)] == 0)
                else:
                    model.AddBoolOr(before).OnlyEnforceIf(x[(n, dn)])


# ----- MILP (PuLP) -----------------------------------------------------------------------------


def _solve_milp(backend_name: str, inst: Instance, options, data: MeshData, start: MeshPlan | None) -> BackendOutput:
    import pulp

    from splitopt.solvers.milp import CbcBackend, HighsBackend, _new_variable, export_pulp

    t0 = time.perf_counter()
    classes = identical_device_classes(data)
    if start is not None:
        start = canonical_plan(data, start, classes)
        H = evaluate(inst, start, data).makespan_ms
    else:
        H = sum(max(data.compute_ms[(n, d)] for d in data.devices) for n in data.layers) + sum(data.transfer_ms.values())
    if H <= 0:
        return BackendOutput(Status.OPTIMAL, plan=start, objective=0.0, bound=0.0, message="zero makespan",
                             extra={"build_s": time.perf_counter() - t0, "solve_s": 0.0})
    c = {k: v / H for k, v in data.compute_ms.items()}  # durations in units of H
    tr = {k: v / H for k, v in data.transfer_ms.items()}
    st = Structure(data, max_compute={k: v <= 1 + 1e-12 for k, v in c.items()})
    M = 2.0
    prob = pulp.LpProblem("mesh", pulp.LpMinimize)
    names = iter(range(10**9))

    def var(prefix: str, lb=0.0, ub=1.0, cat=pulp.LpContinuous):
        return _new_variable(prob, f"{prefix}_{next(names)}", lb, ub, cat)

    x, S, w, g, z, T = {}, {}, {}, {}, {}, {}
    for n in data.layers:
        S[n] = var("S")
        for d in st.allowed[n]:
            x[(n, d)] = var("x", cat=pulp.LpBinary)
        prob += pulp.lpSum(x[(n, d)] for d in st.allowed[n]) == 1
    E = {n: S[n] + pulp.lpSum(c[(n, d)] * x[(n, d)] for d in st.allowed[n]) for n in data.layers}
    for t, a, n, b in st.forbidden:
        if (t, a) in x and (n, b) in x:
            prob += x[(t, a)] + x[(n, b)] <= 1
    for t in data.tensors:
        for b in st.needs[t]:
            if b in st.fixed_need[t]:
                w[(t, b)] = 1
                continue
            w[(t, b)] = var("w")
            for r in data.readers[t]:
                if (r, b) in x:
                    prob += w[(t, b)] >= x[(r, b)]
    for t, a, v in st.g:
        g[(t, a, v)] = var("g")
        for b in data.subtree[a][v]:
            if (t, b) not in w:
                continue
            if data.is_raw[t]:
                prob += g[(t, a, v)] >= w[(t, b)]
            else:
                prob += g[(t, a, v)] >= x[(t, a)] + w[(t, b)] - 1
    for key in st.z:
        t, pair = key
        z[key] = var("z")
        for k in st.z_of[key]:
            prob += z[key] >= g[k]
        if tr[key] > 1 + 1e-12:  # longer than the horizon: no plan within it sends t over this link
            prob += z[key] <= 0
            continue
        T[key] = var("T")
        if not data.is_raw[t]:
            prob += T[key] >= E[t]
        prob += T[key] + tr[key] <= 1 + M * (1 - z[key])
    for t, a, v in st.g:
        u = data.parent[a][v]
        if u == a:
            continue
        prev = (t, (data.parent[a][u], u))
        if prev in T and (t, (u, v)) in T:  # else z = 0 forces g = 0
            prob += T[(t, (u, v))] >= T[prev] + tr[prev] - M * (1 - g[(t, a, v)])
    for n in data.layers:
        for t in data.layer_inputs[n]:
            if not data.is_raw[t]:
                prob += S[n] >= E[t]
    for n, t, d, a, key in _last_hops(data, st, T):
        slack = (1 - x[(n, d)]) if data.is_raw[t] else (2 - x[(n, d)] - x[(t, a)])
        prob += S[n] >= T[key] + tr[key] - M * slack
    # one compute at a time per device: pairs of layers not ordered by the DAG
    pairs = 0
    for j, m in enumerate(data.layers):
        for n in data.layers[j + 1:]:
            if m in data.ancestors[n]:
                continue
            common = [d for d in st.allowed[m] if d in st.allowed[n] and c[(m, d)] > 0 and c[(n, d)] > 0]
            if not common:
                continue
            o = var("o", cat=pulp.LpBinary)
            pairs += 1
            for d in common:
                both = 2 - x[(m, d)] - x[(n, d)]
                prob += S[n] >= S[m] + c[(m, d)] - M * (1 - o) - M * both
                prob += S[m] >= S[n] + c[(n, d)] - M * o - M * both
    # one transfer at a time per link / serial bus
    for res, keys in st.transfers_on().items():
        keys = [k for k in keys if tr[k] > 0 and k in T]
        for i, k1 in enumerate(keys):
            for k2 in keys[i + 1:]:
                o = var("o", cat=pulp.LpBinary)
                pairs += 1
                both = 2 - z[k1] - z[k2]
                prob += T[k2] >= T[k1] + tr[k1] - M * (1 - o) - M * both
                prob += T[k1] >= T[k2] + tr[k2] - M * o - M * both
    # memory, each row divided by its limit
    for d in data.devices:
        if math.isinf(data.limit[d]):
            continue
        on = [n for n in data.layers if d in st.allowed[n]]
        activity = sum(data.weight_bytes[n] for n in on) + max((data.working_bytes[n] for n in on), default=0.0)
        if activity <= data.limit[d]:
            continue
        L = data.limit[d]
        peak = var("P", ub=max(data.working_bytes[n] for n in on) / L)
        for n in on:
            if data.working_bytes[n] > 0:
                prob += peak >= data.working_bytes[n] / L * x[(n, d)]
        prob += pulp.lpSum(data.weight_bytes[n] / L * x[(n, d)] for n in on) + peak <= 1 + MEMORY_RTOL
    for cls in classes:
        for dk, dn in zip(cls, cls[1:]):
            for j, n in enumerate(data.layers):
                if (n, dn) not in x:
                    continue
                prob += x[(n, dn)] <= pulp.lpSum(x[(m, dk)] for m in data.layers[:j] if (m, dk) in x)
    cmax = var("Cmax")
    for n in data.layers:
        prob += cmax >= E[n]
    for key in T:
        prob += cmax >= T[key] + tr[key] - M * (1 - z[key])
    prob += cmax
    build_s = time.perf_counter() - t0
    if options.export_path is not None:
        export_pulp(prob, Path(options.export_path))
    backend = CbcBackend() if backend_name == "milp-cbc" else HighsBackend()
    t1 = time.perf_counter()
    status, bound, message, solver_objective = backend._run(prob, options)
    solve_s = time.perf_counter() - t1
    K = st.max_tasks
    tol = (K + 1) * MILP_FEAS_TOL * H
    extra = {"build_s": build_s, "solve_s": solve_s, "horizon_ms": H, "order_variables": pairs,
             "variables": len(prob.variables()), "rows": prob.numConstraints(), "objective_tolerance_ms": tol,
             "symmetry_classes": [list(c) for c in classes]}
    bound_ms = None if bound is None else bound * H
    if status is Status.NO_SOLUTION_FOUND and start is not None:
        return BackendOutput(Status.FEASIBLE, plan=start, objective=evaluate(inst, start, data).makespan_ms,
                             bound=bound_ms, message=f"{message}; returning the start plan", extra=extra)
    if status in (Status.INFEASIBLE, Status.NO_SOLUTION_FOUND, Status.ERROR):
        return BackendOutput(status, message=message, extra=extra)
    device_map = {}
    for n in data.layers:
        device_map[n] = max(st.allowed[n], key=lambda d: (x[(n, d)].value() or 0.0, -data.dev_index[d]))
    starts, ends = {}, {}
    for n in data.layers:
        starts[n] = S[n].value() or 0.0
        ends[n] = starts[n] + c[(n, device_map[n])]
    for key in T:
        tid = transfer_id(*key)
        starts[tid] = T[key].value() or 0.0
        ends[tid] = starts[tid] + tr[key]
    plan = MeshPlan(device_map, _order_from_times(data, device_map, starts, ends))
    makespan = evaluate(inst, plan, data).makespan_ms
    program_ms = (cmax.value() or 0.0) * H
    if makespan > program_ms + tol:
        raise SolverFailure(f"{backend_name}: the decoded schedule ({makespan:.9g} ms) is longer than the "
                            f"program's ({program_ms:.9g} ms)")
    if status is Status.OPTIMAL:
        bound_ms = program_ms if bound_ms is None else bound_ms
    return BackendOutput(status, plan=plan, objective=makespan, bound=bound_ms, message=message,
                         objective_tolerance_ms=tol, extra=extra)


# ----- entry point -------------------------------------------------------------------------------


def solve(backend_name: str, inst: Instance, options) -> BackendOutput:
    """Run backend ``cpsat``, ``milp-cbc`` or ``milp-highs`` on a mesh instance."""
    data = MeshData(inst)
    start = start_plan(inst, data)
    if backend_name == "cpsat":
        return _solve_cpsat(inst, options, data, start)
    if backend_name in ("milp-cbc", "milp-highs"):
        return _solve_milp(backend_name, inst, options, data, start)
    raise SolverFailure(f"mesh: no exact program for backend '{backend_name}'")
