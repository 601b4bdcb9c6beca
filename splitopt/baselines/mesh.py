"""Baselines and a heuristic for the mesh family (problem ``mesh``).

* ``mesh-brute-force``: the reference optimum on tiny instances. Enumerates every
  assignment of layers to devices (that the routes allow) and, for each, every order of
  the tasks on every resource (orders that put a task before one of its own data
  ancestors on the same resource are skipped: they deadlock), and evaluates each
  semi-active schedule with the family's evaluator simulation. An assignment whose
  critical path (the schedule with resources ignored, a valid lower bound) is not
  below the best makespan found is skipped. Every optimal schedule is semi-active for
  some orders, so this is exact. Above ``max_schedules`` schedules it raises
  NotApplicable;
* ``mesh-best-single-device``: every layer on one device (the best such device);
* ``heft``: HEFT-style list scheduling (Topcuoglu et al. 2002, without insertion):
  layers in decreasing upward rank (mean compute ms over devices plus mean one-hop
  transfer ms along the longest path to an exit), each placed on the device where it
  finishes earliest given the transfers its inputs need (simulated over the routes,
  links busy in the order committed), among devices where its weights and working set
  still fit; final outputs are then delivered to the sink. The plan carries the order
  HEFT committed on every resource, so the evaluator reproduces HEFT's schedule.

Every backend's plan is re-evaluated by ``splitopt.mesh.evaluate``. Times in ms.
"""

from __future__ import annotations

import itertools
import math
import time

from splitopt.errors import InvalidPlan, NotApplicable
from splitopt.instance import Instance
from splitopt.mesh import (
    MEMORY_RTOL,
    MeshData,
    MeshPlan,
    _check_routes,
    _semi_active,
    _tasks,
    evaluate,
    memory_violations,
    single_device_plan,
    transfer_id,
)
from splitopt.result import BackendOutput, Status
from splitopt.solvers.base import Backend, SolveOptions

#: default limit on the number of schedules brute force simulates
MAX_SCHEDULES = 200_000


# ----- HEFT -------------------------------------------------------------------------------


def upward_ranks(data: MeshData) -> dict[str, float]:
    """HEFT's upward rank (ms): mean compute over devices plus, along the longest path
    to an exit layer, mean one-hop transfer times of the tensors passed on."""
    n_dev = len(data.devices)
    pairs = data.pairs

    def mean_tr(t: str) -> float:
        return sum(data.transfer_ms[(t, p)] for p in pairs) / len(pairs) if pairs else 0.0

    rank: dict[str, float] = {}
    for n in reversed(data.layers):
        mean_c = sum(data.compute_ms[(n, d)] for d in data.devices) / n_dev
        tail = max((mean_tr(n) + rank[c] for c in data.readers[n]), default=0.0)
        if n in data.final and data.options.deliver_outputs:
            tail = max(tail, mean_tr(n))
        rank[n] = mean_c + tail
    return rank


class _HeftState:
    def __init__(self, data: MeshData):
        self.data = data
        self.dev_free = {d: 0.0 for d in data.devices}
        self.res_free: dict[str, float] = {r: 0.0 for r in data.resources}
        self.avail: dict[tuple[str, str], float] = {(t, data.source): 0.0 for t in data.tensors if data.is_raw[t]}
        self.order: dict[str, list[str]] = {}
        self.device_map: dict[str, str] = {}
        self.weights = {d: 0.0 for d in data.devices}
        self.peak = {d: 0.0 for d in data.devices}

    def location(self, t: str) -> str:
        return self.data.source if self.data.is_raw[t] else self.device_map[t]

    def bring(self, t: str, d: str, res_free: dict, avail: dict, log: list) -> float:
        """Send ``t`` to ``d`` along its route (hops already done are reused); returns
        its arrival time; records the hops in ``avail``, ``res_free`` and ``log``."""
        data = self.data
        a = self.location(t)
        for pair in data.route(a, d):
            u, v = pair
            if (t, v) in avail:
                continue
            r = data.resource_of[pair]
            dur = data.transfer_ms[(t, pair)]
            start = avail[(t, u)] if dur <= 0 else max(avail[(t, u)], res_free[r])
            avail[(t, v)] = start + dur
            if dur > 0:
                res_free[r] = start + dur
                log.append((r, transfer_id(t, pair)))
        return avail[(t, d)]

    def try_place(self, n: str, d: str):
        data = self.data
        res_free, avail, log = dict(self.res_free), dict(self.avail), []
        ready = 0.0
        for t in data.layer_inputs[n]:
            ready = max(ready, self.bring(t, d, res_free, avail, log))
        dur = data.compute_ms[(n, d)]
        start = ready if dur <= 0 else max(ready, self.dev_free[d])
        return start + dur, res_free, avail, log

    def fits(self, n: str, d: str) -> bool:
        data = self.data
        need = self.weights[d] + data.weight_bytes[n] + max(self.peak[d], data.working_bytes[n])
        return need <= data.limit[d] * (1 + MEMORY_RTOL)

    def commit(self, n: str, d: str, finish: float, res_free, avail, log) -> None:
        data = self.data
        self.res_free, self.avail = res_free, avail
        for r, tid in log:
            self.order.setdefault(r, []).append(tid)
        if data.compute_ms[(n, d)] > 0:
            self.dev_free[d] = finish
            self.order.setdefault(d, []).append(n)
        self.avail[(n, d)] = finish
        self.device_map[n] = d
        self.weights[d] += data.weight_bytes[n]
        self.peak[d] = max(self.peak[d], data.working_bytes[n])


def heft_plan(inst: Instance, data: MeshData | None = None) -> MeshPlan | None:
    """The HEFT plan (device map and committed orders); None if some layer has no
    device its inputs can reach. When no device has memory left for a layer, the
    earliest-finishing device is taken anyway (the plan then breaks a memory limit)."""
    data = data or MeshData(inst)
    rank = upward_ranks(data)
    state = _HeftState(data)
    for n in sorted(data.layers, key=lambda n: (-rank[n], data.position[n])):
        options = []
        for d in data.devices:
            if not all(data.has_route(state.location(t), d) for t in data.layer_inputs[n]):
                continue
            if n in data.final and data.options.deliver_outputs and not data.has_route(d, data.sink):
                continue
            finish, res_free, avail, log = state.try_place(n, d)
            options.append((not state.fits(n, d), finish, data.dev_index[d], d, res_free, avail, log))
        if not options:
            return None
        _, finish, _, d, res_free, avail, log = min(options, key=lambda o: o[:3])
        state.commit(n, d, finish, res_free, avail, log)
    if data.options.deliver_outputs:
        for n in sorted(data.final, key=data.position.__getitem__):
            log: list = []
            state.bring(n, data.sink, state.res_free, state.avail, log)
            for r, tid in log:
                state.order.setdefault(r, []).append(tid)
    return MeshPlan(dict(state.device_map), {r: tuple(ids) for r, ids in state.order.items()})


def _baseline_output(inst: Instance, plan: MeshPlan | None, name: str, extra: dict) -> BackendOutput:
    if plan is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"{name}: no plan (no device reachable for a layer)",
                             extra=extra)
    m = evaluate(inst, plan)
    if not m.feasible:
        return BackendOutput(Status.NO_SOLUTION_FOUND, plan=plan, objective=m.makespan_ms,
                             message=f"{name}: its plan breaks a limit: {m.violations[0]}", extra=extra)
    return BackendOutput(Status.FEASIBLE, plan=plan, objective=m.makespan_ms, extra=extra)


class HeftBackend(Backend):
    name = "heft"
    kind = "heuristic"
    problems = ("mesh",)
    description = "HEFT-style list scheduling: earliest finish time per layer (mesh)"

    def solve(self, inst: Instance, options: SolveOptions | None = None) -> BackendOutput:
        t0 = time.perf_counter()
        plan = heft_plan(inst)
        return _baseline_output(inst, plan, self.name, {"solve_s": time.perf_counter() - t0})


# ----- best single device ---------------------------------------------------------------


class BestSingleDeviceBackend(Backend):
    """All layers on one device (registry name ``mesh-best-single-device``: the chain
    family owns ``best-single-device``)."""

    name = "mesh-best-single-device"
    kind = "baseline"
    problems = ("mesh",)
    description = "all layers on one device, the device of least makespan that fits (mesh)"

    def solve(self, inst: Instance, options: SolveOptions | None = None) -> BackendOutput:
        t0 = time.perf_counter()
        data = MeshData(inst)
        best = None  # (infeasible, makespan, device index, plan)
        for k, d in enumerate(data.devices):
            plan = single_device_plan(inst, d)
            try:
                _check_routes(data, plan.device, "plan")
            except InvalidPlan:
                continue
            m = evaluate(inst, plan, data)
            cand = (not m.feasible, m.makespan_ms, k, plan)
            if best is None or cand[:3] < best[:3]:
                best = cand
        return _baseline_output(inst, None if best is None else best[3], self.name,
                                {"solve_s": time.perf_counter() - t0})


# ----- brute force ------------------------------------------------------------------------


def _assignments(data: MeshData):
    """Every route-valid assignment (device per layer, layers in file order)."""
    for combo in itertools.product(data.devices, repeat=len(data.layers)):
        device_map = dict(zip(data.layers, combo))
        try:
            _check_routes(data, device_map, "plan")
        except InvalidPlan:
            continue
        yield device_map


def _resource_orders(tasks) -> list[list[tuple[str, ...]]]:
    """Per resource with two or more positive-duration tasks: every order of them that
    keeps each task after its own data ancestors on that resource."""
    ancestors: dict[str, set[str]] = {}

    def anc(tid: str) -> set[str]:
        if tid not in ancestors:
            out: set[str] = set()
            for p in tasks[tid].preds:
                out.add(p)
                out |= anc(p)
            ancestors[tid] = out
        return ancestors[tid]

    by_res: dict[str, list[str]] = {}
    for tid, t in tasks.items():
        if t.duration > 0:
            by_res.setdefault(t.resource, []).append(tid)
    choices = []
    for res, ids in sorted(by_res.items()):
        if len(ids) < 2:
            continue
        perms = []
        for perm in itertools.permutations(sorted(ids)):
            pos = {tid: k for k, tid in enumerate(perm)}
            if all(pos[a] < pos[b] for b in perm for a in anc(b) if a in pos):
                perms.append((res, perm))
        choices.append(perms)
    return choices


def _critical_path(tasks) -> float:
    """Makespan with resources ignored (ms): a lower bound on every schedule of the tasks."""
    end: dict[str, float] = {}

    def finish(tid: str) -> float:
        if tid not in end:
            t = tasks[tid]
            end[tid] = max((finish(p) for p in t.preds), default=0.0) + t.duration
        return end[tid]

    return max((finish(tid) for tid in tasks), default=0.0)


def count_schedules(data: MeshData, stop_above: int | None = None) -> int:
    total = 0
    for device_map in _assignments(data):
        n = 1
        for perms in _resource_orders(_tasks(data, device_map)):
            n *= len(perms)
        total += n
        if stop_above is not None and total > stop_above:
            break
    return total


class MeshBruteForceBackend(Backend):
    """Enumerate every assignment and every per-resource order (see the module docstring)."""

    name = "mesh-brute-force"
    kind = "exact"
    problems = ("mesh",)
    description = "enumerate every assignment and per-resource task order (tiny mesh instances)"

    def __init__(self, max_schedules: int = MAX_SCHEDULES, max_layers: int = 8):
        self.max_schedules = max_schedules
        self.max_layers = max_layers

    def solve(self, inst: Instance, options: SolveOptions | None = None) -> BackendOutput:
        data = MeshData(inst)
        if len(data.devices) ** len(data.layers) > 50 * self.max_schedules or len(data.layers) > self.max_layers:
            raise NotApplicable(
                f"mesh-brute-force: instance '{inst.name}' is too big ({len(data.layers)} layers, "
                f"{len(data.devices)} devices); use cpsat or raise the limits"
            )
        count = count_schedules(data, stop_above=self.max_schedules)
        if count > self.max_schedules:
            raise NotApplicable(
                f"mesh-brute-force: instance '{inst.name}' has more than {self.max_schedules:,} schedules; "
                "use cpsat or raise max_schedules"
            )
        t0 = time.perf_counter()
        best_ms, best_plan, simulated = math.inf, None, 0
        for device_map in _assignments(data):
            if memory_violations(data, device_map):
                continue
            tasks = _tasks(data, device_map)
            if _critical_path(tasks) >= best_ms:
                continue
            for combo in itertools.product(*_resource_orders(tasks)):
                order = dict(combo)
                times = _semi_active(tasks, order)
                simulated += 1
                if times is None:
                    continue
                makespan = max((e for _, e in times.values()), default=0.0)
                if makespan < best_ms:
                    best_ms, best_plan = makespan, MeshPlan(dict(device_map), order)
        extra = {"schedules_simulated": simulated, "solve_s": time.perf_counter() - t0}
        if best_plan is None:
            return BackendOutput(Status.INFEASIBLE, message="mesh-brute-force: no assignment meets the memory limits",
                                 extra=extra)
        return BackendOutput(Status.OPTIMAL, plan=best_plan, objective=best_ms, bound=best_ms, extra=extra)
