"""Structure shared by the mesh programs (``formulations/mesh_schedule.md``): where each
layer may run, which tensors may cross which links, interchangeable devices, and the
assignment-only feasibility model the infeasibility diagnosis uses.

* ``allowed[i]``: devices where layer ``i``'s weights plus working set fit, which the raw
  inputs it reads can reach and (final outputs) from which the sink is reachable;
* ``w[t,b]``: tensor ``t`` is needed on device ``b`` (a reader on ``b``; the sink for a
  final output);
* ``g[t,a,v]``: ``t`` is produced on ``a`` and must cross into ``v``, i.e. some ``b`` in
  the subtree of ``v`` in ``a``'s routing tree needs it; then ``t`` crosses the tree link
  ``(parent_a(v), v)``;
* ``z[t,e]``: ``t`` crosses link ``e`` (the OR of the ``g`` that use ``e``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from splitopt.core.errors import SolverFailure
from splitopt.core.interrupts import solve_cpsat
from splitopt.families.mesh.data import MEMORY_RTOL, MeshData
from splitopt.families.mesh.evaluate import evaluate
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.tasks import build_tasks

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel


class Structure:
    """Index sets of both programs (see the module docstring)."""

    def __init__(self, data: MeshData, max_compute: dict | None = None, lifted: frozenset = frozenset()):
        """``max_compute[(i, d)]``: False forbids layer ``i`` on ``d`` (a task longer than
        the horizon: no plan within the horizon can use it). Transfers longer than the
        horizon are forbidden by the programs (``z = 0``). ``lifted``: devices whose
        memory limit is ignored (the infeasibility diagnosis)."""
        self.data = data
        inputs_raw = {n: [t for t in data.layer_inputs[n] if data.is_raw[t]] for n in data.layers}
        self.allowed: dict[str, list[str]] = {}
        for n in data.layers:
            ok = []
            for d in data.devices:
                if d not in lifted and data.weight_bytes[n] + data.working_bytes[n] > data.limit[d] * (1 + MEMORY_RTOL):
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
        #: the largest number of tasks a plan can have: one per layer, and per tensor at
        #: most one per link of its multicast tree (a tree over D devices has at most D - 1
        #: links), and never more than the possible transfers
        tree_links = min(len(data.devices) - 1, len(data.pairs))
        self.max_tasks = len(data.layers) + min(len(self.z), len(data.tensors) * tree_links)

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


def start_horizon(inst: Any, data: MeshData, start: MeshPlan | None,
                  classes: list[list[str]]) -> tuple[MeshPlan | None, float]:
    """Both programs' horizon ``H`` (ms): the makespan of ``start`` relabelled to the
    symmetry rule (:func:`canonical_plan`; returned with it), or, without one, the sum of
    every layer's slowest duration and every transfer's."""
    if start is not None:
        start = canonical_plan(data, start, classes)
        return start, evaluate(inst, start, data).makespan_ms
    horizon = sum(max(data.compute_ms[(n, d)] for d in data.devices) for n in data.layers)
    horizon += sum(data.transfer_ms.values())
    return start, horizon


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


def order_from_times(data: MeshData, device_map, starts: dict[str, float], ends: dict[str, float]) -> dict[str, tuple[str, ...]]:
    """Per-resource order of the plan's positive-duration tasks by the solver's times
    (midpoint, then the default key), taken along a topological order of the data
    dependencies: the next task is the one of least (midpoint, key) whose predecessors
    all came before. Where the times respect the dependencies this is the order of the
    times; where they do not (a task shorter than the solver's feasibility tolerance,
    1e-6 ms against a horizon of seconds, may appear to start before its input is
    ready), it is still an order that runs, never one that deadlocks."""
    import heapq

    tasks = build_tasks(data, device_map)
    for tid, t in tasks.items():
        if t.duration > 0 and tid not in starts:
            raise SolverFailure(f"mesh program: task '{tid}' of the decoded plan has no time in the solution")
    rank = {tid: ((starts[tid] + ends[tid]) / 2.0 if tid in starts else float("-inf"), t.key, tid)
            for tid, t in tasks.items()}
    waiting = {tid: len(set(t.preds)) for tid, t in tasks.items()}
    after: dict[str, list[str]] = {}
    for tid, t in tasks.items():
        for p in set(t.preds):
            after.setdefault(p, []).append(tid)
    ready = [rank[tid] for tid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    by_res: dict[str, list[str]] = {}
    while ready:
        _, _, tid = heapq.heappop(ready)
        if tasks[tid].duration > 0:
            by_res.setdefault(tasks[tid].resource, []).append(tid)
        for nxt in after.get(tid, ()):
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, rank[nxt])
    return {r: tuple(ids) for r, ids in by_res.items()}


# ----- assignment feasibility (for the infeasibility diagnosis) --------------------------------


def assignment_feasible(data: MeshData, lifted: frozenset = frozenset(), time_limit_s: float = 20.0) -> bool:
    """Is there an assignment meeting every memory limit (those of ``lifted`` devices
    ignored) and the routes? A CP-SAT feasibility model without the schedule."""
    from ortools.sat.python import cp_model

    st = Structure(data, lifted=lifted)
    model = cp_model.CpModel()
    x = {}
    for n in data.layers:
        if not st.allowed[n]:
            return False
        for d in st.allowed[n]:
            x[(n, d)] = model.new_bool_var(f"x[{n},{d}]")
        model.add_exactly_one(x[(n, d)] for d in st.allowed[n])
    for t, a, n, b in st.forbidden:
        model.add_bool_or([x[(t, a)].negated(), x[(n, b)].negated()])
    memory_rows_cpsat(model, data, st, x, lifted=lifted)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False  # or-tools #5293: memory rows in bits can pass 2**31
    code, stopped = solve_cpsat(solver, model)
    if stopped:  # the user's Ctrl-C: no verdict, let the caller's handling take it
        raise KeyboardInterrupt
    return code in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def last_hops(data: MeshData, st: Structure, transfers):
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


def memory_rows_cpsat(model: CpModel, data: MeshData, st: Structure, x, lifted: frozenset = frozenset()) -> bool:
    """Memory rows in bits (sizes rounded up, limits down), none for ``lifted`` devices;
    returns True if a row could sum past 2**31 (then presolve must stay off, or-tools
    #5293)."""
    big = False
    for d in data.devices:
        if d in lifted or math.isinf(data.limit[d]):
            continue
        on = [n for n in data.layers if d in st.allowed[n]]
        wbits = {n: math.ceil(data.weight_bytes[n] * 8 - 1e-9) for n in on}
        sbits = {n: math.ceil(data.working_bytes[n] * 8 - 1e-9) for n in on}
        cap = math.floor(data.limit[d] * 8 * (1 + MEMORY_RTOL) + 1e-9)
        activity = sum(wbits.values()) + max(sbits.values(), default=0)
        if activity <= cap:
            continue
        big = big or activity >= 2**31
        peak = model.new_int_var(0, max(sbits.values(), default=0), f"peak[{d}]")
        for n in on:
            if sbits[n] > 0:
                model.add(peak >= sbits[n]).only_enforce_if(x[(n, d)])
        model.add(sum(wbits[n] * x[(n, d)] for n in on if wbits[n]) + peak <= cap)
    return big


def bool_or(model: CpModel, var, lits) -> None:
    """``var == OR(lits)`` (0/1 literals; constants allowed)."""
    if not lits:
        model.add(var == 0)
        return
    for lit in lits:
        model.add_implication(lit, var) if not isinstance(lit, int) else model.add(var >= lit)
    model.add_bool_or(list(lits)).only_enforce_if(var)
