"""The chain family (problem ``chain``, JMSNAS Eq. 1 on a DAG): devices 1..M in a line
(UE -> small cell -> macro cell -> cloud, ``settings.chain``), each layer on one device,
the device index never decreasing along a DAG edge.

The evaluator here is the single source of truth for a chain plan (model in
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

import weakref
from dataclasses import dataclass, field
from typing import Any

from splitopt.errors import InvalidInstance, InvalidPlan
from splitopt.instance import Instance
from splitopt.latency import layer_latency_ms
from splitopt.plan import Plan, plan_layers
from splitopt.schedule import Task

PROBLEMS = ("chain",)

#: relative tolerance of the memory check (memory rows are exact integers in bits)
MEMORY_RTOL = 1e-9


# ----- instance -------------------------------------------------------------------------

def chain_links(inst: Instance):
    """The links chain[m] -> chain[m+1], m = 0..M-2."""
    chain = inst.settings.chain
    return [inst.link_between[(a, b)] for a, b in zip(chain, chain[1:])]


def check_instance(inst: Instance) -> None:
    """A declared chain needs a link between consecutive devices, no link back (a cycle),
    the reference precision on every chain device, and every layer must fit somewhere."""
    s = inst.settings
    chain = s.chain
    index = {name: i for i, name in enumerate(chain)}
    for a, b in zip(chain, chain[1:]):
        if (a, b) not in inst.link_between:
            raise InvalidInstance(
                f"instance.links: no link from '{a}' to '{b}', consecutive devices of settings.chain"
            )
    for i, link in enumerate(inst.links):
        if link.source in index and link.target in index and index[link.target] < index[link.source]:
            raise InvalidInstance(
                f"instance.links[{i}]: link '{link.source}' -> '{link.target}' runs against settings.chain "
                "and closes a cycle in the device graph; a chain is a line"
            )
    if s.edge != chain[0]:
        raise InvalidInstance(f"instance.settings.edge: '{s.edge}' must be the first chain device '{chain[0]}' (where the input arrives)")
    for name in chain:
        dev = inst.device_by_name[name]
        if s.cloud_bits not in dev.bit_widths:
            raise InvalidInstance(
                f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by chain device '{name}' "
                f"(supports {list(dev.bit_widths)})"
            )
    if s.edge_required:
        raise InvalidInstance("instance.settings.edge_required: not defined for problem 'chain'")
    for i, layer in enumerate(inst.layers):
        need = (layer.weights + layer.output_elements) * s.cloud_bits / 8.0
        if all(need > inst.device_by_name[m].memory_bytes * (1 + MEMORY_RTOL) for m in chain):
            raise InvalidInstance(
                f"instance.graph.layers[{i}]: layer '{layer.name}' fits on no chain device: its weights and "
                f"output need {need:,.0f} B, the largest device memory is "
                f"{max(inst.device_by_name[m].memory_bytes for m in chain):,.0f} B"
            )


# ----- the tensors of a chain -------------------------------------------------------------

@dataclass(frozen=True)
class ChainTensors:
    """Per tensor (graph inputs and layer outputs): producer (None for a raw input), the
    execution step range it is live over, and its sizes. Shared by the evaluator, the
    program and the baselines so that all read the same data."""

    names: tuple[str, ...]
    producer: dict[str, str | None]
    consumers: dict[str, tuple[str, ...]]
    first_step: dict[str, int]
    last_step: dict[str, int]
    held_bytes: dict[str, float]
    sent_bytes: dict[str, float]
    live: tuple[tuple[str, ...], ...]


#: per-instance caches of the tables below (an instance is immutable)
_CACHE: dict[int, tuple[Any, dict[str, Any]]] = {}


def _cached(inst: Instance, key: str, build):
    """``build(inst)`` computed once per instance object."""
    entry = _CACHE.get(id(inst))
    if entry is None or entry[0]() is not inst:
        if len(_CACHE) > 64:
            _CACHE.clear()
        entry = (weakref.ref(inst), {})
        _CACHE[id(inst)] = entry
    if key not in entry[1]:
        entry[1][key] = build(inst)
    return entry[1][key]


def chain_tensors(inst: Instance) -> ChainTensors:
    return _cached(inst, "tensors", _chain_tensors)


def _chain_tensors(inst: Instance) -> ChainTensors:
    bits = inst.settings.cloud_bits
    names, producer, first, last, held, sent = [], {}, {}, {}, {}, {}
    for t in inst.inputs:
        names.append(t.name)
        producer[t.name] = None
        first[t.name] = 0
        held[t.name] = t.elements * t.bits / 8.0
    for layer in inst.layers:
        names.append(layer.name)
        producer[layer.name] = layer.name
        first[layer.name] = inst.position[layer.name]
        held[layer.name] = layer.output_elements * bits / 8.0
    for name in names:
        readers = inst.consumers[name]
        last[name] = max([inst.position[r] for r in readers], default=first[name])
        sent[name] = inst.tensor_elements(name) * inst.sent_bits(name, bits) / 8.0
    live: list[list[str]] = [[] for _ in inst.layers]
    for name in names:
        for k in range(first[name], last[name] + 1):
            live[k].append(name)
    return ChainTensors(tuple(names), producer, dict(inst.consumers), first, last, held, sent,
                        tuple(tuple(v) for v in live))


def compute_table(inst: Instance) -> dict[str, list[float]]:
    """Layer -> latency (ms) on each chain device, at the reference precision."""
    return _cached(inst, "compute", _compute_table)


def _compute_table(inst: Instance) -> dict[str, list[float]]:
    b = inst.settings.cloud_bits
    devices = [inst.device_by_name[m] for m in inst.settings.chain]
    return {layer.name: [layer_latency_ms(inst, layer, d, b, b) for d in devices] for layer in inst.layers}


# ----- plans ------------------------------------------------------------------------------

def plan_on_devices(inst: Instance, device_of: dict[str, str]) -> Plan:
    """A chain plan from ``layer -> device`` (every layer at the reference precision)."""
    b = inst.settings.cloud_bits
    return Plan(dict(device_of), {n: b for n in device_of}, {n: b for n in device_of})


def plan_from_indices(inst: Instance, index: dict[str, int]) -> Plan:
    """A chain plan from ``layer -> chain position`` (0-based)."""
    chain = inst.settings.chain
    return plan_on_devices(inst, {n: chain[m] for n, m in index.items()})


def check_plan(inst: Instance, plan: Plan, where: str = "plan") -> None:
    """Raise InvalidPlan unless every layer runs on a chain device at the reference
    precision and no DAG edge goes back along the chain."""
    s = inst.settings
    index = {name: i for i, name in enumerate(s.chain)}
    for layer in inst.layers:
        n = layer.name
        if n not in plan.device:
            raise InvalidPlan(f"{where}.layers: layer '{n}' is missing")
        dev = plan.device[n]
        if dev not in index:
            raise InvalidPlan(f"{where}.layers.{n}.device: '{dev}' is not a device of settings.chain {list(s.chain)}")
        for key, bits in (("weight_bits", plan.weight_bits), ("activation_bits", plan.activation_bits)):
            if bits.get(n) != s.cloud_bits:
                raise InvalidPlan(
                    f"{where}.layers.{n}.{key}: {bits.get(n)} bits, but problem 'chain' runs every layer at "
                    f"cloud_bits={s.cloud_bits}"
                )
    for layer in inst.layers:
        for src in layer.inputs:
            if src in plan.device and index[plan.device[src]] > index[plan.device[layer.name]]:
                raise InvalidPlan(
                    f"{where}.layers.{layer.name}: runs on '{plan.device[layer.name]}' but its input '{src}' runs on "
                    f"'{plan.device[src]}', later in the chain (data only flows forward along the chain)"
                )


def plan_from_dict(inst: Instance, data: Any, where: str = "plan") -> Plan:
    """Parse a chain plan (``{"layers": {name: {"device": d}}}``; bit-widths optional and
    equal to ``cloud_bits`` if given)."""
    layers = plan_layers(inst, data, where)
    b = inst.settings.cloud_bits
    device, wb, ab = {}, {}, {}
    for layer in inst.layers:
        n = layer.name
        entry = layers.get(n)
        if not isinstance(entry, dict) or "device" not in entry:
            raise InvalidPlan(f"{where}.layers.{n}: missing, or not an object with a 'device'")
        device[n] = entry["device"]
        wb[n] = entry.get("weight_bits", b)
        ab[n] = entry.get("activation_bits", b)
    plan = Plan(device, wb, ab)
    check_plan(inst, plan, where)
    return plan


def start_plan(inst: Instance) -> Plan:
    """A plan for time-limited solves to fall back on and CP-SAT to start from: the best
    single-device plan that meets the memory limits (the last device is JMSNAS's cloud
    computing baseline); failing that, layers packed backwards from the last device,
    each device filled while its memory allows; failing that (no plan found), all on the
    last device."""
    chain, N = inst.settings.chain, len(inst.layers)
    singles = [plan_from_indices(inst, {l.name: m for l in inst.layers}) for m in range(len(chain))]
    scored = [(evaluate(inst, p), p) for p in singles]
    feasible = [(m.objective_ms, i) for i, (m, _) in enumerate(scored) if m.feasible]
    if feasible:
        return scored[min(feasible)[1]][1]
    names = [l.name for l in inst.layers]
    index: dict[str, int] = {}
    end = N
    for m in range(len(chain) - 1, 0, -1):
        def fits(i: int) -> bool:  # positions [i, end) on m fit its memory (monotone in i)
            trial = dict(index, **{n: m - 1 for n in names[:i]}, **{n: m for n in names[i:end]})
            d = evaluate(inst, plan_from_indices(inst, trial)).devices[m]
            return d.memory_bytes <= d.memory_limit
        low, high = 0, end  # the smallest i that fits lies in [low, high]
        while low < high:
            mid = (low + high) // 2
            if fits(mid):
                high = mid
            else:
                low = mid + 1
        index.update({n: m for n in names[low:end]})
        end = low
    index.update({n: 0 for n in names[:end]})
    packed = plan_from_indices(inst, index)
    return packed if evaluate(inst, packed).feasible else singles[-1]


# ----- the evaluator ------------------------------------------------------------------------

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
class ChainMetrics:
    """What a chain plan costs. ``latency_ms``: Eq. 1, the sum of stage times;
    ``bottleneck_ms``: the largest stage time (throughput = 1000 / bottleneck samples/s)."""

    objective: str
    latency_ms: float
    bottleneck_ms: float
    bottleneck_device: str
    devices: tuple[DeviceLoad, ...]
    schedule: tuple[Task, ...]
    violations: tuple[str, ...] = field(default=())

    @property
    def feasible(self) -> bool:
        return not self.violations

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
                "feasible": self.feasible, "violations": list(self.violations)}


def evaluate(inst: Instance, plan: Plan) -> ChainMetrics:
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
    peak = [0.0] * M
    peak_step: list[str | None] = [None] * M
    for k, live in enumerate(tensors.live):
        held = [0.0] * M
        for t in live:
            for m in range(src[t], far[t] + 1):
                held[m] += tensors.held_bytes[t]
        for m in range(M):
            if held[m] > peak[m]:
                peak[m], peak_step[m] = held[m], inst.layers[k].name

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
                f"device '{d.device}' memory {d.memory_bytes:,.0f} B (weights {d.weight_bytes:,.0f} + activations "
                f"{d.peak_activation_bytes:,.0f} at step '{d.peak_step}') exceeds its limit {d.memory_limit:,.0f} B"
            )
    bottleneck = max(loads, key=lambda d: d.stage_ms)
    return ChainMetrics(
        objective=s.objective,
        latency_ms=sum(d.stage_ms for d in loads),
        bottleneck_ms=bottleneck.stage_ms,
        bottleneck_device=bottleneck.device,
        devices=loads,
        schedule=tuple(schedule),
        violations=tuple(violations),
    )


def diagnose_infeasibility(inst: Instance) -> str:
    """Name the memory limit that no chain plan can meet."""
    tensors = chain_tensors(inst)
    first = inst.settings.chain[0]
    raw = max((tensors.held_bytes[t.name] for t in inst.inputs), default=0.0)
    limit = inst.device_by_name[first].memory_bytes
    if raw > limit:
        return (f"infeasible: the raw input ({raw:,.0f} B) does not fit the memory of the first chain device "
                f"'{first}' ({limit:,.0f} B), where it arrives")
    return ("infeasible: no placement meets every device memory limit "
            f"({', '.join(f'{m} {inst.device_by_name[m].memory_bytes:,.0f} B' for m in inst.settings.chain)})")


# ----- the program (built in solvers/chain_program.py) ---------------------------------------

def build_program(inst: Instance):
    from splitopt.solvers.chain_program import build_chain_program

    return build_chain_program(inst)


def encode_plan(inst: Instance, lp, plan: Plan) -> list[float]:
    from splitopt.solvers.chain_program import encode_chain_plan

    return encode_chain_plan(inst, lp, plan)


def decode_plan(inst: Instance, lp, values: list[float]) -> Plan:
    from splitopt.solvers.chain_program import decode_chain_plan

    return decode_chain_plan(inst, lp, values)


# ----- report -------------------------------------------------------------------------------

def print_metrics(console, inst: Instance, plan: Plan, m: ChainMetrics, show_layers: bool = True) -> None:
    from rich.table import Table

    table = Table(title=f"Chain {' -> '.join(inst.settings.chain)}")
    for col in ("device", "layers", "compute ms", "send ms", "stage ms", "sent B", "memory MB", "limit MB"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for d in m.devices:
        table.add_row(d.device, str(d.layers), f"{d.compute_ms:.3f}", f"{d.send_ms:.3f}", f"{d.stage_ms:.3f}",
                      f"{d.sent_bytes:,.0f}", f"{d.memory_bytes / 1e6:,.3f}", f"{d.memory_limit / 1e6:,.0f}")
    console.print(table)
    console.print(f"[bold]Latency[/bold]  {m.latency_ms:.3f} ms (sum of stages, Eq. 1)   "
                  f"[bold]Bottleneck[/bold] {m.bottleneck_ms:.3f} ms on '{m.bottleneck_device}' "
                  f"({1000.0 / m.bottleneck_ms if m.bottleneck_ms > 0 else float('inf'):.2f} samples/s pipelined)")
    console.print("[bold]Schedule[/bold] " + "; ".join(
        f"{t.resource} {t.start_ms:.3f}-{t.end_ms:.3f} ms" for t in m.schedule))
    if show_layers:
        runs: list[tuple[str, list[str]]] = []
        for layer in inst.layers:
            dev = plan.device[layer.name]
            if runs and runs[-1][0] == dev:
                runs[-1][1].append(layer.name)
            else:
                runs.append((dev, [layer.name]))
        console.print("[bold]Layers[/bold]   " + " | ".join(
            f"{dev}: {names[0]}" + (f" .. {names[-1]} ({len(names)})" if len(names) > 1 else "") for dev, names in runs))
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {v}")
