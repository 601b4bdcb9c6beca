"""The chain family's evaluator (problem ``chain``, JMSNAS Eq. 1 on a DAG), the single
source of truth for a chain plan (model in
``formulations/chain_split.md``):

* compute: layer l on device m costs ``layer_latency_ms`` at the reference precision
  ``cloud_bits`` (weights and activations);
* transfer: link m (chain[m] -> chain[m+1]) carries every tensor whose producer runs on
  a device <= m and whose farthest consumer runs on a device > m, each once (a raw input
  is produced on the first device); its time is the link's fixed latency (once, if
  anything is sent) plus bytes * 8 / bandwidth;
* stage time of device m = its compute + its outgoing link's transfer (Eq. 1's term);
  latency (objective "latency") = sum of stage times, the devices working one after
  the other on one sample; bottleneck (objective "throughput") = the largest stage time,
  the rate-limiting stage of a pipelined stream of samples;
* memory of device m = weight bytes of its layers + its peak activation bytes, the peak
  over the execution steps k (file order) of the tensors live at step k (produced at or
  before k, last read at or after k) that occupy device m: a tensor occupies every device
  from its producer's to its farthest consumer's (it is received, used or forwarded
  there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from splitopt.core.metrics import FamilyMetrics
from splitopt.core.plan import Plan
from splitopt.core.schedule import Task
from splitopt.families.chain.data import chain_links, chain_tensors, compute_table
from splitopt.families.chain.plan import check_plan
from splitopt.core.jsonfile import byte_count
from splitopt.families.chain.settings import ChainInstance

#: relative tolerance of the memory check (memory rows are exact integers in bits)
MEMORY_RTOL = 1e-9


@dataclass(frozen=True)
class DeviceLoad:
    """One chain device: its layers' compute (ms), its outgoing link's transfer (ms,
    bytes, tensors), and its memory (bytes)."""

    device: str
    layers: int
    compute_ms: float
    send_ms: float
    sent_bytes: float
    sent_tensors: tuple[str, ...]
    weight_bytes: float
    peak_activation_bytes: float
    peak_step: str | None
    memory_limit: float

    @property
    def stage_ms(self) -> float:
        return self.compute_ms + self.send_ms

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.peak_activation_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "layers": self.layers, "compute_ms": self.compute_ms, "send_ms": self.send_ms,
                "stage_ms": self.stage_ms, "sent_bytes": self.sent_bytes, "sent_tensors": list(self.sent_tensors),
                "weight_bytes": self.weight_bytes, "peak_activation_bytes": self.peak_activation_bytes,
                "peak_step": self.peak_step, "memory_bytes": self.memory_bytes, "memory_limit": self.memory_limit}


@dataclass(frozen=True)
class ChainMetrics(FamilyMetrics):
    """What a chain plan costs. ``latency_ms``: Eq. 1, the sum of stage times;
    ``bottleneck_ms``: the largest stage time (throughput = 1000 / bottleneck samples/s)."""

    objective: str
    latency_ms: float
    bottleneck_ms: float
    bottleneck_device: str
    devices: tuple[DeviceLoad, ...]
    schedule: tuple[Task, ...]

    @property
    def objective_ms(self) -> float:
        return self.bottleneck_ms if self.objective == "throughput" else self.latency_ms

    @property
    def total_ms(self) -> float:
        return self.latency_ms

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "objective_ms": self.objective_ms, "latency_ms": self.latency_ms,
                "bottleneck_ms": self.bottleneck_ms, "bottleneck_device": self.bottleneck_device,
                "throughput_per_s": 1000.0 / self.bottleneck_ms if self.bottleneck_ms > 0 else None,
                "devices": [d.to_dict() for d in self.devices],
                "schedule": [t.to_dict() for t in self.schedule],
                **self.verdict()}


def activation_profile(inst: ChainInstance, src: dict[str, int], far: dict[str, int]):
    """(devices, steps) array: the activation bytes each device holds at each execution
    step, given each tensor's producer (``src``) and farthest reader (``far``) positions.
    A tensor adds its bytes to the devices ``src..far`` over its live steps
    ``first..last``."""
    import numpy as np

    names = chain_tensors(inst).names
    return activation_profile_arrays(inst, np.array([src[t] for t in names], dtype=np.int64),
                                     np.array([far[t] for t in names], dtype=np.int64))


def activation_profile_arrays(inst: ChainInstance, src, far):
    """:func:`activation_profile` with the positions as arrays in ``chain_tensors(inst).names``
    order: one two-dimensional difference array (devices x steps) summed along both axes,
    O(tensors + steps x devices), exact (bytes are multiples of 1/8 far below 2^50)."""
    import numpy as np

    tensors = chain_tensors(inst)
    M, N = len(inst.settings.chain), len(inst.layers)
    arrays = inst.derived(("chain", "tensor_arrays"), lambda: (
        np.array([tensors.held_bytes[t] for t in tensors.names], dtype=float),
        np.array([tensors.first_step[t] for t in tensors.names], dtype=np.int64),
        np.array([tensors.last_step[t] for t in tensors.names], dtype=np.int64)))
    held, first, last = arrays
    src, far = np.asarray(src, dtype=np.int64), np.asarray(far, dtype=np.int64)
    diff = np.zeros((M + 1, N + 1))
    np.add.at(diff, (src, first), held)
    np.add.at(diff, (far + 1, first), -held)
    np.add.at(diff, (src, last + 1), -held)
    np.add.at(diff, (far + 1, last + 1), held)
    return np.cumsum(np.cumsum(diff, axis=0), axis=1)[:M, :N]


def _peak_activations(inst: ChainInstance, src: dict[str, int], far: dict[str, int]):
    """Per device: its peak activation bytes over the steps and the layer at the first
    step reaching it (None where nothing is ever held)."""
    M = len(inst.settings.chain)
    if not inst.layers:
        return [0.0] * M, [None] * M
    held = activation_profile(inst, src, far)
    steps = held.argmax(axis=1)
    peak = [float(held[m, k]) if held[m, k] > 0 else 0.0 for m, k in enumerate(steps)]
    return peak, [inst.layers[k].name if held[m, k] > 0 else None for m, k in enumerate(steps)]


def evaluate(inst: ChainInstance, plan: Plan) -> ChainMetrics:
    """Evaluate a chain plan; raises InvalidPlan if malformed, lists memory violations."""
    check_plan(inst, plan)
    s = inst.settings
    chain = s.chain
    M = len(chain)
    index = {name: i for i, name in enumerate(chain)}
    dev_of = {n: index[plan.device[n]] for n in plan.device}
    tensors = chain_tensors(inst)
    table = compute_table(inst)

    src = {t: 0 if tensors.producer[t] is None else dev_of[t] for t in tensors.names}
    far = {t: max([dev_of[c] for c in tensors.consumers[t]], default=src[t]) for t in tensors.names}

    compute = [0.0] * M
    count = [0] * M
    for layer in inst.layers:
        m = dev_of[layer.name]
        compute[m] += table[layer.name][m]
        count[m] += 1

    links = chain_links(inst)
    sent: list[list[str]] = [[] for _ in range(M)]
    for t in tensors.names:
        for m in range(src[t], far[t]):
            sent[m].append(t)
    send_bytes = [sum(tensors.sent_bytes[t] for t in sent[m]) for m in range(M)]
    send_ms = [inst.link_transfer_ms(links[m], send_bytes[m]) if m < M - 1 else 0.0 for m in range(M)]

    weight = [0.0] * M
    for layer in inst.layers:
        weight[dev_of[layer.name]] += layer.weights * s.cloud_bits / 8.0
    peak, peak_step = _peak_activations(inst, src, far)

    loads = tuple(
        DeviceLoad(chain[m], count[m], compute[m], send_ms[m], send_bytes[m], tuple(sent[m]), weight[m], peak[m],
                   peak_step[m], inst.device_by_name[chain[m]].memory_bytes)
        for m in range(M)
    )
    schedule, clock = [], 0.0
    for m, d in enumerate(loads):
        if d.compute_ms > 0:
            schedule.append(Task(d.device, "compute", f"{d.layers} layers", clock, clock + d.compute_ms))
            clock += d.compute_ms
        if d.send_ms > 0:
            label = ", ".join(d.sent_tensors[:3]) + (" ..." if len(d.sent_tensors) > 3 else "")
            schedule.append(Task(f"{chain[m]}->{chain[m + 1]}", "transfer", label, clock, clock + d.send_ms))
            clock += d.send_ms

    violations = []
    for d in loads:
        if d.memory_bytes > d.memory_limit * (1 + MEMORY_RTOL):
            violations.append(
                f"device '{d.device}' memory {byte_count(d.memory_bytes)} B (weights {byte_count(d.weight_bytes)} "
                f"+ activations {byte_count(d.peak_activation_bytes)} at step '{d.peak_step}') exceeds its limit "
                f"{byte_count(d.memory_limit)} B"
            )
    bottleneck = max(loads, key=lambda d: d.stage_ms)
    return ChainMetrics(
        objective=inst.objective,
        latency_ms=sum(d.stage_ms for d in loads),
        bottleneck_ms=bottleneck.stage_ms,
        bottleneck_device=bottleneck.device,
        devices=loads,
        schedule=tuple(schedule),
        violations=tuple(violations),
    )
