"""Methods of the mesh family (problem ``mesh``) besides the generic programs.

* ``best-single-device`` (alias ``mesh-best-single-device``): every layer on one
  device, the device of least makespan that fits;
* ``heft``: HEFT-style list scheduling (Topcuoglu et al. 2002, without insertion):
  layers in decreasing upward rank (mean compute ms over devices plus mean one-hop
  transfer ms along the longest path to an exit), each placed on the device where it
  finishes earliest given the transfers its inputs need (simulated over the routes,
  links busy in the order committed), among devices where its weights and working set
  still fit; final outputs are then delivered to the sink. The plan carries the order
  HEFT committed on every resource, so the evaluator reproduces HEFT's schedule.

Times in ms.
"""

from __future__ import annotations

import time

from splitopt.core.errors import InvalidPlan
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.mesh.data import MEMORY_RTOL, MeshData, mesh_data, transfer_id
from splitopt.families.mesh.evaluate import evaluate
from splitopt.families.mesh.plan import MeshPlan, check_routes, single_device_plan
from splitopt.families.mesh.settings import MeshInstance


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


class HeftState:
    """HEFT's partial schedule: device and resource free times, where each tensor is
    available, the committed orders and memory use per device."""

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
        res_free, avail = dict(self.res_free), dict(self.avail)
        log: list[tuple[str, str]] = []
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


def heft_plan(inst: MeshInstance, data: MeshData | None = None) -> MeshPlan | None:
    """The HEFT plan (device map and committed orders); None if some layer has no
    device its inputs can reach. When no device has memory left for a layer, the
    earliest-finishing device is taken anyway (the plan then breaks a memory limit)."""
    data = data or mesh_data(inst)
    rank = upward_ranks(data)
    state = HeftState(data)
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
            hops: list[tuple[str, str]] = []
            state.bring(n, data.sink, state.res_free, state.avail, hops)
            for r, tid in hops:
                state.order.setdefault(r, []).append(tid)
    return MeshPlan(dict(state.device_map), {r: tuple(ids) for r, ids in state.order.items()})


def heft(inst: MeshInstance, options: SolveOptions) -> BackendOutput:
    """HEFT-style list scheduling: earliest finish time per layer."""
    t0 = time.perf_counter()
    plan = heft_plan(inst)
    extra = {"solve_s": time.perf_counter() - t0}
    if plan is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="heft: no plan (no device reachable for a layer)",
                             extra=extra)
    return BackendOutput(Status.FEASIBLE, plan=plan, extra=extra)


def best_single_device(inst: MeshInstance, options: SolveOptions) -> BackendOutput:
    """All layers on one device, the device of least makespan that fits."""
    t0 = time.perf_counter()
    data = mesh_data(inst)
    best = None  # (infeasible, makespan, device index, plan)
    for k, d in enumerate(data.devices):
        plan = single_device_plan(inst, d)
        try:
            check_routes(data, plan.device, "plan")
        except InvalidPlan:
            continue
        m = evaluate(inst, plan, data)
        cand = (not m.feasible, m.makespan_ms, k, plan)
        if best is None or cand[:3] < best[:3]:
            best = cand
    extra = {"solve_s": time.perf_counter() - t0}
    if best is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="best-single-device: no device can run every layer",
                             extra=extra)
    return BackendOutput(Status.FEASIBLE, plan=best[3], extra=extra)
