"""The separable family's data (problem ``separable``; the Separable NN paper, Sec. 3):
a grouped network whose paths are divided among G devices, the devices' speeds, the links
between them, and the knobs of a communication policy (``formulations/separable_policies.md``
states the model and the programs).

The instance's layers, in file order, are ``stem_layers`` stem layers that every device
runs whole (the paper's replicated conv0), then the separable blocks, one layer per
residual block, then ``head_layers`` head layers that the head device runs on its own
features (the paper keeps the first 1/G of the last features for the classifier). A
block's ``output_shape`` is the separable network's whole output ``[C, H, W...]``; each
device holds ``C / G`` of its channels (its own residual stream), so G must divide C.

Instance data (``settings.separable``)::

    {"devices": ["pi0", "pi1", "pi2", "pi3"],    # G devices, device 0 first (default: all)
     "alpha": 2,                                 # one transmission step per alpha blocks
     "stem_layers": 1, "head_layers": 1,         # defaults 1 and 1
     "head_device": "pi0",                       # default devices[0]
     "levels": {"min_percent": 50, "count": 9},  # paper Table 4 (default: 100 % only)
     "dtypes": ["float32", "float16"],           # default ["float32"]
     "mixing": true,                             # every device's features reach every other device
     "min_intensive_steps": 3,                   # steps at which every device sends
     "byte_budget_bytes": 2.0e6, "latency_budget_ms": null,
     "accuracy": [{"name": "all intensive", "accuracy": 0.79, "min_intensive_steps": 9}],
     "min_accuracy": null,
     "reference_policies": {"paper Table 6": [12, 12, 7, 9, 10, 23, 9, 16, 18]}}

Units: ms, bytes, bits/s. Compute: device ``g`` runs its ``1/G`` of a block's paths in
``latency(block, g) / G`` ms (the core latency model: the layer's measured ``latency_ms``
for the device, else its MACs over the device's rate); a stem layer takes ``latency(layer,
g)`` on every device, a head layer ``latency(layer, head)`` on the head device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from splitopt.core.errors import InvalidInstance
from splitopt.core.jsonfile import shown
from splitopt.core.latency import layer_latency_ms
from splitopt.core.ranges import MAX_TOTAL_MS
from splitopt.families.separable.settings import (DTYPE_BYTES, MAX_GROUP_DEVICES, MAX_LEVELS, OPTION_KEYS,
                                                  REQUIREMENT_KEYS, SETTINGS_KEY, SeparableInstance, channels_sent,
                                                  level_percents)


@dataclass(frozen=True)
class AccuracyRecord:
    """A measured accuracy (fraction) credited to every policy that meets the record's
    requirements: full mixing (when ``mixing``), at least ``min_intensive_steps``
    intensive steps, at most ``max_float16_steps`` sending steps in float16, and every
    sending step at a sparsity level in ``[min_level, max_level]`` (None: no
    requirement)."""

    name: str
    accuracy: float
    mixing: bool = False
    min_intensive_steps: int = 0
    max_float16_steps: int | None = None
    min_level: int = 0
    max_level: int | None = None


@dataclass(frozen=True)
class SeparableData:
    """Everything the evaluator, the programs and the methods read (ms, bytes, bits/s).

    ``compute_ms[g, b]``: device ``g``'s share of block ``b``; ``windows[j]``: the blocks
    ``(first, last)`` (both included) of transmission step ``j``; ``channels[b]``: the
    channels of one device's stream after block ``b``, ``spatial[b]`` the elements per
    channel; ``rate[g][h]`` / ``link_ms[g][h]``: the link ``g -> h`` (bits/s, ms per
    transfer), None where there is none."""

    devices: tuple[str, ...]
    head: int
    alpha: int
    stem: tuple[str, ...]
    blocks: tuple[str, ...]
    head_layers: tuple[str, ...]
    stem_ms: np.ndarray
    compute_ms: np.ndarray
    head_ms: float
    single_device_ms: float
    channels: tuple[int, ...]
    spatial: tuple[int, ...]
    windows: tuple[tuple[int, int], ...]
    percents: tuple[float, ...]
    dtypes: tuple[str, ...]
    rate: tuple[tuple[float | None, ...], ...]
    link_ms: tuple[tuple[float, ...], ...]
    mixing: bool
    min_intensive_steps: int
    byte_budget: float | None
    latency_budget: float | None
    records: tuple[AccuracyRecord, ...]
    min_accuracy: float | None
    ring_accuracy: float | None
    reference_policies: Mapping[str, Any]

    @property
    def g(self) -> int:
        """G: the number of devices."""
        return len(self.devices)

    @property
    def steps(self) -> int:
        """J: the number of transmission steps, ``ceil(blocks / alpha)``."""
        return len(self.windows)

    @property
    def levels(self) -> int:
        """K: the number of sparsity levels."""
        return len(self.percents)

    def has_link(self, g: int, h: int) -> bool:
        return self.rate[g][h] is not None

    @property
    def ring_available(self) -> bool:
        """Whether the ring all-reduce plan exists (G > 1 and every ring link ``g -> g+1``)."""
        return self.g > 1 and all(self.has_link(g, (g + 1) % self.g) for g in range(self.g))

    def sent_channels(self, step: int, level: int) -> int:
        """Channels one device sends at ``step`` with sparsity ``level`` (Eq. 10 with the
        levels of Table 4): ``floor(C_dev * percent / 100)``."""
        return channels_sent(self.channels[self.windows[step][0]], self.percents[level])

    def message_bytes(self, step: int, level: int, dtype: str) -> int:
        """Bytes one sending device sends at ``step``: its stream after the step's first
        block, the first ``sent_channels`` channels, in ``dtype``."""
        return self.sent_channels(step, level) * self.spatial[self.windows[step][0]] * DTYPE_BYTES[dtype]

    def transfer_ms(self, g: int, h: int, nbytes: float) -> float:
        """Time (ms) to send ``nbytes`` over the link ``g -> h`` (its latency plus the bytes
        at its rate); zero for nothing."""
        if nbytes <= 0:
            return 0.0
        rate = self.rate[g][h]
        assert rate is not None, (g, h)
        return self.link_ms[g][h] + 1000.0 * nbytes * 8.0 / rate

    def stream_bytes(self, block: int) -> int:
        """One device's stream after ``block`` in float32 (bytes): the feature map the
        unseparated model's ring all-reduce synchronises (``C_dev H W * 4``)."""
        return self.channels[block] * self.spatial[block] * 4

    @property
    def ring_bytes(self) -> float:
        """The 100 % reference: a ring all-reduce of every block's feature map over the G
        devices, ``2 (G-1) / G`` of it sent by each device, ``2 (G-1)`` feature maps per
        block in all (bytes, float32)."""
        return float(sum(2 * (self.g - 1) * self.stream_bytes(b) for b in range(len(self.blocks))))

    def step_compute_ms(self, g: int, step: int) -> tuple[float, float]:
        """Device ``g``'s compute at ``step``: its first block, and the rest of the window (ms)."""
        first, last = self.windows[step]
        return float(self.compute_ms[g, first]), float(self.compute_ms[g, first + 1:last + 1].sum())


def options(inst: SeparableInstance) -> Mapping[str, Any]:
    return inst.settings.separable


def data(inst: SeparableInstance) -> SeparableData:
    """The derived data of ``inst`` (checked), once per instance."""
    return inst.derived(("separable", "data"), lambda: _build(inst))


def _integer(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer() \
            or not low <= value <= high:
        raise InvalidInstance(f"{where}: must be an integer in [{low}, {high}], got {shown(value)}")
    return int(value)


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise InvalidInstance(f"{where}: must be a number in [{low:g}, {high:g}], got {shown(value)}")
    return float(value)


def _records(raw: Any, where: str, levels: int) -> tuple[AccuracyRecord, ...]:
    if not isinstance(raw, list):
        raise InvalidInstance(f"{where}: must be a list of accuracy records, got {shown(raw)}")
    out = []
    for i, rec in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(rec, Mapping) or "accuracy" not in rec:
            raise InvalidInstance(f"{at}: must be an object with 'accuracy', got {shown(rec)}")
        for key in rec:
            if key not in ("name", "accuracy") + REQUIREMENT_KEYS:
                raise InvalidInstance(f"{at}.{key}: unknown field (fields: name, accuracy, "
                                      f"{', '.join(REQUIREMENT_KEYS)})")
        mixing = rec.get("mixing", False)
        if not isinstance(mixing, bool):
            raise InvalidInstance(f"{at}.mixing: must be true or false, got {shown(mixing)}")
        f16 = rec.get("max_float16_steps")
        low = _integer(rec.get("min_level", 0), f"{at}.min_level", 0, levels - 1)
        if rec.get("max_level") is not None and _integer(rec["max_level"], f"{at}.max_level", 0, levels - 1) < low:
            raise InvalidInstance(f"{at}.max_level: {shown(rec['max_level'])} is below min_level {low}: no level "
                                  "meets the record")
        out.append(AccuracyRecord(
            name=str(rec.get("name", f"record {i}")), accuracy=_number(rec["accuracy"], f"{at}.accuracy", 0.0, 1.0),
            mixing=mixing, min_intensive_steps=_integer(rec.get("min_intensive_steps", 0),
                                                        f"{at}.min_intensive_steps", 0, 1_000_000),
            max_float16_steps=None if f16 is None else _integer(f16, f"{at}.max_float16_steps", 0, 1_000_000),
            min_level=_integer(rec.get("min_level", 0), f"{at}.min_level", 0, levels - 1),
            max_level=None if rec.get("max_level") is None else _integer(rec["max_level"], f"{at}.max_level", 0,
                                                                         levels - 1)))
    return tuple(out)


def _build(inst: SeparableInstance) -> SeparableData:
    o = options(inst)
    where = f"instance.settings.{SETTINGS_KEY}"
    if not isinstance(o, Mapping):
        raise InvalidInstance(f"{where}: must be an object, got {shown(o)}")
    for key in o:
        if key not in OPTION_KEYS:
            raise InvalidInstance(f"{where}.{key}: unknown option (options: {', '.join(OPTION_KEYS)})")
    names = o.get("devices", [d.name for d in inst.devices])
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise InvalidInstance(f"{where}.devices: must list device names, got {shown(names)}")
    if len(names) > MAX_GROUP_DEVICES:
        raise InvalidInstance(f"{where}.devices: {len(names)} devices; at most {MAX_GROUP_DEVICES}")
    for n in names:
        if n not in inst.device_by_name:
            raise InvalidInstance(f"{where}.devices: unknown device {shown(n)}")
    if len(set(names)) != len(names):
        raise InvalidInstance(f"{where}.devices: a device is listed twice: {shown(names)}")
    G = len(names)
    head_name = o.get("head_device", names[0])
    if head_name not in names:
        raise InvalidInstance(f"{where}.head_device: {shown(head_name)} is not one of {where}.devices")
    n_layers = len(inst.layers)
    n_stem = _integer(o.get("stem_layers", 1), f"{where}.stem_layers", 0, n_layers)
    n_head = _integer(o.get("head_layers", 1), f"{where}.head_layers", 0, n_layers)
    if n_stem + n_head >= n_layers:
        raise InvalidInstance(f"{where}: stem_layers = {n_stem} and head_layers = {n_head} leave no separable block "
                              f"among the {n_layers} layers")
    layers = inst.layers
    stem, blocks, head = layers[:n_stem], layers[n_stem:n_layers - n_head], layers[n_layers - n_head:]
    channels, spatial = [], []
    for layer in blocks:
        shape = layer.output_shape
        if shape[0] % G:
            raise InvalidInstance(f"instance.graph.layers: block '{layer.name}' has {shape[0]} output channels, "
                                  f"not divisible by G = {G} devices ({where}.devices)")
        channels.append(shape[0] // G)
        spatial.append(int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1)
    B = len(blocks)
    alpha = _integer(o.get("alpha", 1), f"{where}.alpha", 1, 1_000_000)
    windows = tuple((j, min(j + alpha, B) - 1) for j in range(0, B, alpha))
    for first, last in windows:
        if blocks[first].output_shape != blocks[last].output_shape:
            raise InvalidInstance(
                f"{where}.alpha: {alpha}: the step over blocks '{blocks[first].name}' .. '{blocks[last].name}' "
                f"would add a {list(blocks[first].output_shape)} message to a {list(blocks[last].output_shape)} "
                f"stream; every step's blocks must keep one feature shape")
    lv = o.get("levels", {})
    if not isinstance(lv, Mapping) or any(k not in ("min_percent", "count") for k in lv):
        raise InvalidInstance(f"{where}.levels: must be an object with 'min_percent' and 'count', got {shown(lv)}")
    count = _integer(lv.get("count", 1), f"{where}.levels.count", 1, MAX_LEVELS)
    low = 100.0 if count == 1 else lv.get("min_percent", 50.0)
    if isinstance(low, bool) or not isinstance(low, (int, float)) or not 0 < low <= 100:
        raise InvalidInstance(f"{where}.levels.min_percent: must be a number in (0, 100], got {shown(low)}")
    percents = level_percents(float(low), count)
    for first, _ in windows:  # every level sends something: a message of 0 channels is not one
        if channels_sent(channels[first], percents[0]) < 1:
            raise InvalidInstance(
                f"{where}.levels.min_percent: {shown(low)}: the lowest level sends floor({channels[first]} x "
                f"{percents[0]:g} / 100) = 0 of the {channels[first]} channels a device holds after block "
                f"'{blocks[first].name}'; it must be at least {100.0 / channels[first]:g}")
    dtypes = o.get("dtypes", ["float32"])
    if not isinstance(dtypes, list) or not dtypes or any(not isinstance(t, str) or t not in DTYPE_BYTES for t in dtypes) \
            or len(set(dtypes)) != len(dtypes):
        raise InvalidInstance(f"{where}.dtypes: must list distinct dtypes of {', '.join(DTYPE_BYTES)}, "
                              f"got {shown(dtypes)}")
    index = {n: i for i, n in enumerate(names)}
    rate: list[list[float | None]] = [[None] * G for _ in range(G)]
    lat = [[0.0] * G for _ in range(G)]
    for link in inst.links:
        if link.source in index and link.target in index and link.source != link.target:
            if link.bus is not None and inst.bus_by_name[link.bus].mode == "serial":
                raise InvalidInstance(f"instance.links: link {link.source} -> {link.target} is on serial bus "
                                      f"'{link.bus}', which problem 'separable' does not model (use mode 'share')")
            g, h = index[link.source], index[link.target]
            rate[g][h], lat[g][h] = inst.link_rate_bits_per_s(link), float(link.latency_ms)
    devs = [inst.device_by_name[n] for n in names]
    head_dev = inst.device_by_name[head_name]
    stem_ms = np.array([sum(layer_latency_ms(inst, l, d, 32, 32) for l in stem) for d in devs], dtype=float)
    full = np.array([[layer_latency_ms(inst, l, d, 32, 32) for l in blocks] for d in devs], dtype=float)
    compute = full / G
    head_ms = float(sum(layer_latency_ms(inst, l, head_dev, 32, 32) for l in head))
    single = float(stem_ms[0] + full[0].sum() + sum(layer_latency_ms(inst, l, devs[0], 32, 32) for l in head))
    mixing = o.get("mixing", False)
    if not isinstance(mixing, bool):
        raise InvalidInstance(f"{where}.mixing: must be true or false, got {shown(mixing)}")
    budget = o.get("byte_budget_bytes")
    lat_budget = o.get("latency_budget_ms")
    min_acc = o.get("min_accuracy")
    refs = o.get("reference_policies", {})
    if not isinstance(refs, Mapping):
        raise InvalidInstance(f"{where}.reference_policies: must map a name to a list of steps, got {shown(refs)}")
    d = SeparableData(
        devices=tuple(names), head=index[head_name], alpha=alpha, stem=tuple(l.name for l in stem),
        blocks=tuple(l.name for l in blocks), head_layers=tuple(l.name for l in head), stem_ms=stem_ms,
        compute_ms=compute, head_ms=head_ms, single_device_ms=single, channels=tuple(channels),
        spatial=tuple(spatial), windows=windows, percents=percents, dtypes=tuple(dtypes),
        rate=tuple(tuple(r) for r in rate), link_ms=tuple(tuple(r) for r in lat), mixing=mixing,
        min_intensive_steps=_integer(o.get("min_intensive_steps", 0), f"{where}.min_intensive_steps", 0, 1_000_000),
        byte_budget=None if budget is None else _number(budget, f"{where}.byte_budget_bytes", 0.0, 2.0**62),
        latency_budget=None if lat_budget is None else _number(lat_budget, f"{where}.latency_budget_ms", 0.0, 1e8),
        records=_records(o.get("accuracy", []), f"{where}.accuracy", count),
        min_accuracy=None if min_acc is None else _number(min_acc, f"{where}.min_accuracy", 0.0, 1.0),
        ring_accuracy=None if o.get("ring_accuracy") is None else _number(o["ring_accuracy"],
                                                                           f"{where}.ring_accuracy", 0.0, 1.0),
        reference_policies=dict(refs))
    worst = worst_case_ms(d)
    if worst > MAX_TOTAL_MS:
        raise InvalidInstance(f"{where}: the slowest policy (every step's largest message over the slowest link, "
                              f"after the slowest compute) takes {worst:.4g} ms; at most {MAX_TOTAL_MS:g} ms")
    return d


def worst_case_ms(d: SeparableData) -> float:
    """An upper bound (ms) on every policy's latency: the slowest device's stem, then per
    step the slowest device's compute plus, serially, every earlier step's largest
    transfer, then the head (the programs' time horizon)."""
    slowest = max((d.transfer_ms(g, h, d.message_bytes(j, d.levels - 1, "float32")) for j in range(d.steps)
                   for g in range(d.g) for h in range(d.g) if g != h and d.has_link(g, h)), default=0.0)
    return float(d.stem_ms.max() + d.compute_ms.max(axis=0).sum() + d.steps * slowest + d.head_ms)
