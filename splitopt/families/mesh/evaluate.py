"""The mesh family's evaluator: simulate a plan's semi-active schedule (see
``splitopt.families.mesh.data``), per-device compute and memory, per-link traffic. The
single source of truth for a mesh plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from splitopt.core.metrics import FamilyMetrics
from splitopt.core.schedule import Task
from splitopt.families.mesh.data import MEMORY_RTOL, MeshData, mesh_data
from splitopt.families.mesh.plan import MeshPlan, check_plan
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.tasks import build_tasks, deadlock_error, semi_active_times
from splitopt.core.jsonfile import byte_count


@dataclass(frozen=True)
class DeviceUse:
    """One device's load: compute ms, layer count, memory bytes (weights + largest
    working set, at ``peak_layer``) and its limit."""

    device: str
    layers: int
    compute_ms: float
    weight_bytes: float
    working_bytes: float
    peak_layer: str | None
    memory_limit: float

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.working_bytes


@dataclass(frozen=True)
class LinkUse:
    """One link's traffic: transfers, bytes and busy ms."""

    link: str
    resource: str
    transfers: int
    bytes: float
    transfer_ms: float


@dataclass(frozen=True)
class MeshMetrics(FamilyMetrics):
    """What a mesh plan costs: the makespan (ms) of its schedule, per-device compute and
    memory, per-link transfers, and the schedule itself (``splitopt.core.schedule.Task``)."""

    makespan_ms: float
    devices: tuple[DeviceUse, ...]
    links: tuple[LinkUse, ...]
    schedule: tuple[Task, ...]

    @property
    def objective_ms(self) -> float:
        """What the solvers minimise: the makespan (ms)."""
        return self.makespan_ms

    @property
    def total_ms(self) -> float:
        return self.makespan_ms

    @property
    def compute_ms(self) -> dict[str, float]:
        return {d.device: d.compute_ms for d in self.devices}

    @property
    def memory_bytes(self) -> dict[str, float]:
        return {d.device: d.memory_bytes for d in self.devices}

    @property
    def transfer_ms(self) -> dict[str, float]:
        return {l.link: l.transfer_ms for l in self.links}

    @property
    def transfer_bytes(self) -> dict[str, float]:
        return {l.link: l.bytes for l in self.links}

    def to_dict(self) -> dict:
        return {
            "makespan_ms": self.makespan_ms,
            "total_ms": self.makespan_ms,
            "devices": [
                {"device": d.device, "layers": d.layers, "compute_ms": d.compute_ms, "weight_bytes": d.weight_bytes,
                 "working_bytes": d.working_bytes, "peak_layer": d.peak_layer, "memory_bytes": d.memory_bytes,
                 "memory_limit": d.memory_limit}
                for d in self.devices
            ],
            "links": [
                {"link": l.link, "resource": l.resource, "transfers": l.transfers, "bytes": l.bytes,
                 "transfer_ms": l.transfer_ms}
                for l in self.links
            ],
            "schedule": [t.to_dict() for t in self.schedule],
            **self.verdict(),
        }


def memory_use(data: MeshData, device_map: Mapping[str, str]) -> dict[str, tuple[float, float, str | None]]:
    """Device -> (weight bytes, largest working set bytes, layer of that working set)."""
    weights = dict.fromkeys(data.devices, 0.0)
    peak: dict[str, tuple[float, str | None]] = dict.fromkeys(data.devices, (0.0, None))
    for n in data.layers:
        d = device_map[n]
        weights[d] += data.weight_bytes[n]
        if peak[d][1] is None or data.working_bytes[n] > peak[d][0]:
            peak[d] = (data.working_bytes[n], n)
    return {d: (weights[d], *peak[d]) for d in data.devices}


def memory_violations(data: MeshData, device_map: Mapping[str, str]) -> list[str]:
    out = []
    for d, (w, p, layer) in memory_use(data, device_map).items():
        if w + p > data.limit[d] * (1 + MEMORY_RTOL):
            out.append(
                f"device '{d}' memory {byte_count(w + p)} B (weights {byte_count(w)} + working set "
                f"{byte_count(p)} of '{layer}') "
                f"exceeds its limit {byte_count(data.limit[d])} B"
            )
    return out


def evaluate(inst: MeshInstance, plan: MeshPlan, data: MeshData | None = None) -> MeshMetrics:
    """The independent evaluator: simulate the plan's semi-active schedule (see the
    module docstring); raises InvalidPlan if the plan is malformed or its orders
    deadlock, and lists memory violations in ``violations``."""
    data = data or mesh_data(inst)
    check_plan(inst, plan, data=data)
    tasks = build_tasks(data, plan.device)
    times = semi_active_times(tasks, plan.order)
    if times is None:
        raise deadlock_error(tasks, plan.order, semi_active_times(tasks, plan.order, partial=True))
    schedule = []
    for tid, task in sorted(tasks.items(), key=lambda kv: (times[kv[0]][0], kv[1].key)):
        start, end = times[tid]
        label = task.label if task.kind == "compute" else f"{task.tensor} {task.hop()}"
        schedule.append(Task(task.resource, task.kind, label, start, end))
    makespan = max((e for _, e in times.values()), default=0.0)
    mem = memory_use(data, plan.device)
    devices = []
    for d in data.devices:
        on = [n for n in data.layers if plan.device[n] == d]
        w, p, layer = mem[d]
        devices.append(DeviceUse(d, len(on), sum(data.compute_ms[(n, d)] for n in on), w, p, layer, data.limit[d]))
    links = []
    for pair in data.pairs:
        hops = [t for t in tasks.values() if t.pair == pair]
        links.append(LinkUse(f"{pair[0]}->{pair[1]}", data.resource_of[pair], len(hops),
                             sum(data.sent_bytes[t.tensor] for t in hops), sum(t.duration for t in hops)))
    return MeshMetrics(makespan, tuple(devices), tuple(links), tuple(schedule),
                       violations=tuple(memory_violations(data, plan.device)))
