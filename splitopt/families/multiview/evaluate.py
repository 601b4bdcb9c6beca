"""The multiview family's evaluator: per-view costs (sensor compute, the sent tensor, the
aggregator's per-view work, sensor memory) and the semi-active schedule of the plan's
orders. The single source of truth for a multiview plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from splitopt.core.memory import edge_set_use
from splitopt.core.metrics import FamilyMetrics
from splitopt.core.schedule import Task
from splitopt.families.multiview.architecture import arch_layers, layer_ms, edge_cloud_view
from splitopt.families.multiview.data import MEMORY_RTOL, data, derived
from splitopt.families.multiview.plan import MultiviewPlan, check_plan
from splitopt.core.jsonfile import byte_count
from splitopt.families.multiview.settings import MultiviewInstance


@dataclass(frozen=True)
class ViewCosts:
    """One view's costs: sensor compute (ms), what it sends (bytes) and how long the
    transfer occupies its channel (ms), the aggregator's per-view work (ms), and the
    sensor memory of the App. G walk (bytes)."""

    sensor: str
    cut: str
    sensor_layers: tuple[str, ...]
    sensor_ms: float
    sent: tuple[tuple[str, float], ...]
    sent_bytes: float
    transfer_ms: float
    aggregator_ms: float
    weight_bytes: float
    activation_bytes: float
    memory_bytes: float
    memory_limit: float
    peak_layer: str | None
    missing_required: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"sensor": self.sensor, "cut": self.cut, "sensor_layers": len(self.sensor_layers),
                "sensor_ms": self.sensor_ms, "sent": [{"tensor": t, "bytes": b} for t, b in self.sent],
                "sent_bytes": self.sent_bytes, "transfer_ms": self.transfer_ms, "aggregator_ms": self.aggregator_ms,
                "sensor_weight_bytes": self.weight_bytes, "sensor_activation_bytes": self.activation_bytes,
                "sensor_memory_bytes": self.memory_bytes, "sensor_memory_limit": self.memory_limit,
                "peak_layer": self.peak_layer}


def view_costs(inst: MultiviewInstance, fusion: str, width: int | None, sensor: str, cut: str) -> ViewCosts:
    """Costs of one view (cached): compute as sums of ``layer_ms``; memory and the sent
    tensor from the live-range sweep (``splitopt.core.memory``) on the view's network."""
    def build():
        d = data(inst)
        on_sensor = d.sensor_layers(fusion, width, cut)
        pipeline = d.pipeline(fusion, width)

        def walk():  # the memory walk and the sent tensor do not depend on the sensor device
            view = edge_cloud_view(inst, fusion, width, d.sensors[0])
            bits = {l.name: d.bits for l in view.layers}
            return edge_set_use(view, frozenset(on_sensor), bits, bits)

        m = derived(inst, ("walk", fusion, width, cut), walk)
        sensor_ms = sum(layer_ms(inst, fusion, width, n, sensor) for n in on_sensor)
        agg_ms = sum(layer_ms(inst, fusion, width, n, d.aggregator) for n in pipeline if n not in on_sensor)
        sent = tuple(m.sent)
        nbytes = sum(b for _, b in sent)
        return ViewCosts(
            sensor=sensor, cut=cut, sensor_layers=on_sensor, sensor_ms=sensor_ms, sent=sent, sent_bytes=nbytes,
            transfer_ms=inst.link_transfer_ms(d.links[sensor], nbytes), aggregator_ms=agg_ms,
            weight_bytes=m.weight_bytes, activation_bytes=m.peak_activation_bytes,
            memory_bytes=m.memory_bytes, memory_limit=d.limits[sensor], peak_layer=m.peak_layer,
            missing_required=tuple(l.name for l in inst.layers if l.name in d.required and l.name not in on_sensor),
        )

    return derived(inst, ("costs", fusion, width, sensor, cut), build)


def fusion_ms(inst: MultiviewInstance, fusion: str, width: int | None) -> float:
    """Aggregator time (ms) of the fusion layer plus every post-fusion layer (run once)."""
    d = data(inst)
    pre = set(d.pipeline(fusion, width))
    names = [l.name for l in arch_layers(inst, fusion, width) if l.name not in pre]
    return sum(layer_ms(inst, fusion, width, n, d.aggregator) for n in names)


@dataclass(frozen=True)
class MultiviewMetrics(FamilyMetrics):
    """What a multiview plan costs. ``makespan_ms`` is the end of the last aggregator task
    of the semi-active schedule; ``schedule`` lists every task of positive duration."""

    makespan_ms: float
    views: tuple[ViewCosts, ...]
    fusion_ms: float
    aggregator_compute_ms: float
    bus_busy_ms: float
    schedule: tuple[Task, ...]
    device_compute_ms: Mapping[str, float]
    accuracy: float | None = None

    @property
    def objective_ms(self) -> float:
        """What the solvers minimise: the makespan (ms)."""
        return self.makespan_ms

    def to_dict(self) -> dict:
        return {"makespan_ms": self.makespan_ms, "fusion_ms": self.fusion_ms,
                "aggregator_compute_ms": self.aggregator_compute_ms, "bus_busy_ms": self.bus_busy_ms,
                "device_compute_ms": dict(self.device_compute_ms),
                "views": [v.to_dict() for v in self.views],
                "schedule": [t.to_dict() for t in self.schedule], "accuracy": self.accuracy,
                **self.verdict()}


def simulate(inst: MultiviewInstance, costs: Sequence[ViewCosts], final_ms: float, bus_order: Sequence[str] | None,
             aggregator_order: Sequence[str]) -> tuple[float, list[Task]]:
    """The semi-active schedule: every task starts as soon as its predecessor in its view
    has ended and its resource is free, resources serving tasks in the plan's orders.

    Sensor compute starts at 0; a transfer starts after its sensor's compute
    (store-and-forward) and, on a serial bus, after the previous transfer in
    ``bus_order`` (on a share bus each link is its own channel); the view's aggregator
    task starts after its transfer has ended and the previous aggregator task in
    ``aggregator_order``; the fusion task (fusion + post-fusion layers) after every
    transfer and every aggregator task. No preemption. Returns (makespan ms, tasks)."""
    d = data(inst)
    by = {c.sensor: c for c in costs}
    tasks: list[Task] = []
    arrive: dict[str, float] = {}
    for c in costs:
        if c.sensor_ms > 0:
            tasks.append(Task(c.sensor, "compute", f"view {c.sensor}: up to {c.cut}", 0.0, c.sensor_ms))
    if d.serial:
        assert bus_order is not None  # a plan of a serial bus orders its transfers (check_plan, by evaluate)
        free = 0.0
        for s in bus_order:
            c = by[s]
            start = max(free, c.sensor_ms)
            end = start + c.transfer_ms
            if c.transfer_ms > 0:
                tasks.append(Task(d.bus.name, "transfer", f"{s}: {c.sent[0][0] if c.sent else ''}", start, end))
                free = end
            arrive[s] = end
    else:
        for s in d.sensors:
            c = by[s]
            end = c.sensor_ms + c.transfer_ms
            if c.transfer_ms > 0:
                tasks.append(Task(f"{s}->{d.aggregator}", "transfer", f"{s}: {c.sent[0][0] if c.sent else ''}",
                                  c.sensor_ms, end))
            arrive[s] = end
    free = 0.0
    ready = []
    for s in aggregator_order:
        c = by[s]
        if c.aggregator_ms > 0:
            start = max(free, arrive[s])
            free = start + c.aggregator_ms
            tasks.append(Task(d.aggregator, "compute", f"view {s}: after {c.cut}", start, free))
            ready.append(free)
        else:
            ready.append(arrive[s])
    start = max(ready + [free])
    end = start + final_ms
    if final_ms > 0:
        tasks.append(Task(d.aggregator, "compute", "fusion + post-fusion", start, end))
    return end, tasks


def evaluate(inst: MultiviewInstance, plan: MultiviewPlan) -> MultiviewMetrics:
    """Evaluate a multiview plan; raises InvalidPlan if malformed, lists broken limits
    (sensor memory, required sensor layers, ``min_accuracy``) in ``violations``;
    ``accuracy`` is the measured accuracy of the plan's (fusion, width), if recorded."""
    check_plan(inst, plan)
    d = data(inst)
    costs = [view_costs(inst, plan.fusion, plan.width, s, plan.cuts[s]) for s in d.sensors]
    final = fusion_ms(inst, plan.fusion, plan.width)
    makespan, tasks = simulate(inst, costs, final, plan.bus_order, plan.aggregator_order)
    violations = []
    accuracy_problem = d.accuracy_problem(plan.fusion, plan.width)
    if accuracy_problem:
        violations.append(accuracy_problem)
    for c in costs:
        if c.memory_bytes > c.memory_limit * (1 + MEMORY_RTOL):
            violations.append(f"sensor '{c.sensor}' memory {byte_count(c.memory_bytes)} B (weights "
                              f"{byte_count(c.weight_bytes)} + activations {byte_count(c.activation_bytes)}) exceeds "
                              f"limit {byte_count(c.memory_limit)} B")
        if c.missing_required:
            violations.append(f"sensor '{c.sensor}' does not run required layer '{c.missing_required[0]}' "
                              "(settings.edge_required)")
    compute = {c.sensor: c.sensor_ms for c in costs}
    agg = sum(c.aggregator_ms for c in costs) + final
    compute[d.aggregator] = agg
    return MultiviewMetrics(makespan_ms=makespan, views=tuple(costs), fusion_ms=final, aggregator_compute_ms=agg,
                            bus_busy_ms=sum(c.transfer_ms for c in costs), schedule=tuple(tasks),
                            device_compute_ms=compute, violations=tuple(violations),
                            accuracy=d.accuracy.get((plan.fusion, plan.width)))
