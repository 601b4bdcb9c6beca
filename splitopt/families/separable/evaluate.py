"""The one evaluator of separable communication policies (``formulations/separable_policies.md``).

Latency model (ms). Every device has the input at time 0 and runs the stem; then, for
each transmission step ``j`` over blocks ``first_j .. last_j``:

* device ``g`` computes its share of block ``first_j``: at that moment (``snap``) its
  stream is what it sends at step ``j`` (when ``send_to[g] != g``), the first
  ``sent_channels`` channels in the step's dtype;
* the send starts when the stream is ready and the device's previous send has ended
  (one send at a time per device, in step order) and takes the link's latency plus the
  bytes over its rate (links on a ``share`` bus get their share);
* meanwhile ``g`` computes the rest of the window, blocks ``first_j + 1 .. last_j``
  (``alpha - 1`` blocks: with ``alpha = 1`` nothing overlaps the transfer, the paper's
  Fig. 3), and merges the message it receives at step ``j`` (if any) before it starts the
  next step: it is ready at ``max(end of its compute, arrival)``.

The head device runs the head once it is ready after the last step: the latency. A ring
all-reduce plan (the unseparated model's reference) computes every block's share on each
device and then all-reduces the block's feature map around the ring ``0 -> 1 -> ... ->
0``: ``2 (G-1)`` rounds, each sending ``1/G`` of it over every ring link at once.

Objectives: ``latency`` (ms) and ``bytes`` (all steps' messages). Limits: ``mixing``
(every device's features reach every other device, through the chain of steps),
``min_intensive_steps``, ``byte_budget_bytes``, ``latency_budget_ms``, ``min_accuracy``
(the best accuracy record the policy meets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from splitopt.core.metrics import FamilyMetrics
from splitopt.core.schedule import Task
from splitopt.families.separable.data import AccuracyRecord, SeparableData, data
from splitopt.families.separable.plan import SeparablePlan, Step, check_plan
from splitopt.core.jsonfile import byte_count
from splitopt.families.separable.settings import SeparableInstance


@dataclass(frozen=True)
class StepCost:
    """One step: who sends to whom, how much (bytes per sender, in all), and when."""

    index: int
    blocks: tuple[str, str]
    send_to: tuple[int, ...]
    level: int
    percent: float
    dtype: str
    message_bytes: int
    bytes: int
    intensive: bool
    ready_ms: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["send_to"], out["blocks"], out["ready_ms"] = list(self.send_to), list(self.blocks), list(self.ready_ms)
        return out


@dataclass(frozen=True)
class SeparableMetrics(FamilyMetrics):
    """What a policy costs: latency (ms), bytes, the ratio to the ring all-reduce
    reference, and the accuracy proxies the limits read."""

    objective: str
    latency_ms: float
    total_bytes: float
    ring_bytes: float
    single_device_ms: float
    intensive_steps: int
    float16_steps: int
    mixing: bool
    accuracy: float | None
    ring: bool
    steps: tuple[StepCost, ...]
    schedule: tuple[Task, ...]

    @property
    def objective_ms(self) -> float:
        """The objective's value: latency in ms, or bytes for the ``bytes`` objective."""
        return self.total_bytes if self.objective == "bytes" else self.latency_ms

    @property
    def ratio_to_ring(self) -> float:
        """Bytes over the ring all-reduce reference (the paper's 'Comm. costs')."""
        return self.total_bytes / self.ring_bytes if self.ring_bytes > 0 else 0.0

    @property
    def speedup(self) -> float:
        """The unseparated model on device 0 alone over this plan's latency."""
        return self.single_device_ms / self.latency_ms if self.latency_ms > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "objective_value": self.objective_ms, "latency_ms": self.latency_ms,
                "total_bytes": self.total_bytes, "ring_bytes": self.ring_bytes, "ratio_to_ring": self.ratio_to_ring,
                "single_device_ms": self.single_device_ms, "speedup": self.speedup,
                "intensive_steps": self.intensive_steps, "float16_steps": self.float16_steps, "mixing": self.mixing,
                "accuracy": self.accuracy, "ring_allreduce": self.ring, "steps": [s.to_dict() for s in self.steps],
                "schedule": [t.to_dict() for t in self.schedule], **self.verdict()}


def steps_mix(g: int, steps: Sequence[Step]) -> bool:
    """Whether every one of ``g`` devices' features reach every other device by the end:
    after step ``j`` a receiver holds what it held plus what its sender held (the sender's
    stream at the step's first block carries everything merged before)."""
    holds = [{a} for a in range(g)]
    for s in steps:
        new = [set(h) for h in holds]
        for a, b in enumerate(s.send_to):
            if a != b:
                new[b] |= holds[a]
        holds = new
    return all(len(h) == g for h in holds)


def mixes(d: SeparableData, plan: SeparablePlan) -> bool:
    """:func:`steps_mix` of a plan (the ring plan mixes every block)."""
    return plan.ring or steps_mix(d.g, plan.steps)


def step_features(g: int, steps: Sequence[Step]) -> tuple[bool, int, int]:
    """What the accuracy records read of a policy of ``g`` devices: whether it mixes, its
    intensive steps (every device sends) and its sending steps in float16."""
    intensive = sum(1 for s in steps if s.senders == g)
    f16 = sum(1 for s in steps if s.senders and s.dtype == "float16")
    return steps_mix(g, steps), intensive, f16


def credited_accuracy(d: SeparableData, plan: SeparablePlan, mixing: bool, intensive: int, f16: int) -> float | None:
    """The best accuracy record the plan meets (None: none); the ring plan (another
    network: the unseparated model) has ``ring_accuracy``."""
    if plan.ring:
        return d.ring_accuracy
    best = None
    for r in d.records:
        if meets_record(plan.steps, r, mixing, intensive, f16):
            best = r.accuracy if best is None else max(best, r.accuracy)
    return best


def meets_record(steps: Sequence[Step], r: AccuracyRecord, mixing: bool, intensive: int, f16: int) -> bool:
    """Whether a policy's ``steps`` (not the ring plan) with these features
    (:func:`step_features`) meet accuracy record ``r``."""
    top = r.max_level if r.max_level is not None else float("inf")
    levels_ok = all(r.min_level <= s.level <= top for s in steps if s.senders)
    return ((mixing or not r.mixing) and intensive >= r.min_intensive_steps and levels_ok
            and (r.max_float16_steps is None or f16 <= r.max_float16_steps))


def _ring_timeline(d: SeparableData) -> tuple[float, list[Task]]:
    tasks: list[Task] = []
    ready = [float(d.stem_ms[g]) for g in range(d.g)]
    for g in range(d.g):
        tasks.append(Task(d.devices[g], "compute", "stem", 0.0, ready[g]))
    for b, name in enumerate(d.blocks):
        done = [ready[g] + float(d.compute_ms[g, b]) for g in range(d.g)]
        for g in range(d.g):
            tasks.append(Task(d.devices[g], "compute", name, ready[g], done[g]))
        at = max(done)
        if d.g > 1:
            chunk = d.stream_bytes(b) / d.g
            round_ms = max(d.transfer_ms(g, (g + 1) % d.g, chunk) for g in range(d.g))
            for g in range(d.g):
                h = (g + 1) % d.g
                tasks.append(Task(f"{d.devices[g]}->{d.devices[h]}", "transfer", f"all-reduce {name}", at,
                                  at + 2 * (d.g - 1) * round_ms))
            at += 2 * (d.g - 1) * round_ms
        ready = [at] * d.g
    return ready[d.head], tasks


def timeline(d: SeparableData, plan: SeparablePlan) -> tuple[float, list[StepCost], list[Task]]:
    """The latency (ms), the steps' costs and the schedule of a policy (not a ring plan)."""
    ready = [float(d.stem_ms[g]) for g in range(d.g)]
    nic = [0.0] * d.g
    tasks = [Task(d.devices[g], "compute", "stem", 0.0, ready[g]) for g in range(d.g) if ready[g] > 0]
    steps = []
    for j, s in enumerate(plan.steps):
        first, last = d.windows[j]
        size = d.message_bytes(j, s.level, s.dtype)
        arrive: list[float | None] = [None] * d.g
        done = [0.0] * d.g
        for g in range(d.g):
            head_ms, rest_ms = d.step_compute_ms(g, j)
            snap = ready[g] + head_ms
            done[g] = snap + rest_ms
            label = d.blocks[first] if first == last else f"{d.blocks[first]}..{d.blocks[last]}"
            tasks.append(Task(d.devices[g], "compute", label, ready[g], done[g]))
            h = s.send_to[g]
            if h != g:
                start = max(snap, nic[g])
                nic[g] = start + d.transfer_ms(g, h, size)
                arrive[h] = nic[g]
                tasks.append(Task(f"{d.devices[g]}->{d.devices[h]}", "transfer", f"step {j}: {size:,} B", start,
                                  nic[g]))
        ready = [finished if came is None else max(finished, came) for finished, came in zip(done, arrive)]
        steps.append(StepCost(j, (d.blocks[first], d.blocks[last]), s.send_to, s.level, d.percents[s.level], s.dtype,
                              size, size * s.senders, s.intensive, tuple(ready)))
    return ready[d.head], steps, tasks


def evaluate(inst: SeparableInstance, plan: SeparablePlan) -> SeparableMetrics:
    """Evaluate a policy (or the ring reference); InvalidPlan if malformed, the broken
    limits listed."""
    check_plan(inst, plan)
    d = data(inst)
    if plan.ring:
        at, tasks = _ring_timeline(d)
        steps: list[StepCost] = []
        total = d.ring_bytes
        intensive, f16 = d.steps, 0  # every device sends at every step (and block), in float32
    else:
        at, steps, tasks = timeline(d, plan)
        total = float(sum(s.bytes for s in steps))
        _, intensive, f16 = step_features(d.g, plan.steps)
    latency = at + d.head_ms
    if d.head_ms > 0:
        tasks.append(Task(d.devices[d.head], "compute", "head", at, latency))
    mixing = mixes(d, plan)
    accuracy = credited_accuracy(d, plan, mixing, intensive, f16)
    violations = []
    if d.mixing and not mixing:
        violations.append("mixing: some device's features never reach some other device")
    if intensive < d.min_intensive_steps:
        violations.append(f"min_intensive_steps: {intensive} intensive steps, at least {d.min_intensive_steps} "
                          f"required")
    if d.byte_budget is not None and total > d.byte_budget * (1 + 1e-9):
        violations.append(f"byte_budget_bytes: {byte_count(total)} bytes sent, budget {byte_count(d.byte_budget)}")
    if d.latency_budget is not None and latency > d.latency_budget * (1 + 1e-9):
        violations.append(f"latency_budget_ms: {latency:.6g} ms, budget {d.latency_budget:.6g} ms")
    if d.min_accuracy is not None and (accuracy is None or accuracy < d.min_accuracy - 1e-12):
        shown_acc = "no accuracy record met" if accuracy is None else f"accuracy {accuracy:.4f}"
        violations.append(f"min_accuracy: {shown_acc}, at least {d.min_accuracy:.4f} required")
    return SeparableMetrics(
        objective=inst.objective, latency_ms=latency, total_bytes=total, ring_bytes=d.ring_bytes,
        single_device_ms=d.single_device_ms, intensive_steps=intensive, float16_steps=f16, mixing=mixing,
        accuracy=accuracy, ring=plan.ring, steps=tuple(steps), schedule=tuple(tasks), violations=tuple(violations))
