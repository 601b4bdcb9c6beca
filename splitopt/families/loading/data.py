"""The loading-balance family's data (problem ``loading``; the RL modularization paper,
Sec. 4.1-4.2.2, Alg. 1-2): a model's blocks in execution order, what each costs to load
from storage and to run, the hardware threads that load child models in parallel, and
the loading model (``formulations/loading_balance.md`` states it and the programs).

Blocks are the instance's layers in the file's order, which is a topological order of
the layer graph: a child model is a contiguous run of that order (on a DAG, a child's
inputs may come from any earlier child; other topological orders are not explored).

Instance data (``settings.loading``; ``settings.edge`` is the device that runs
inference, ``settings.cloud_bits`` is not used)::

    {"threads": 4,                      # T hardware threads that load child models (required)
     "children": {"min": 1, "max": 8},  # bounds on k (default 1 .. min(T, N))
     "trainable_tail": 2,               # m: the last m blocks are trainable and sit in the last child
     "weight_bits": 32,                 # stored bits per weight element (default 32: float32 checkpoints)
     "child_fixed_ms": 1.5,             # per child model: open the file, deserialise, build (default 0)
     "thread_bytes_per_s": 1.2e9,       # one thread's read + deserialise rate (required)
     "storage_bytes_per_s": 2.0e9,      # the storage's shared rate over all threads (null: no cap)
     "block_load_ms": {"conv1": 0.8},   # measured read time of a block on one thread, without F (optional)
     "reference_plans": {"paper Table 2": ["conv1", "layer1.0.conv1", ...]}}  # optional, first block of each child

Loading model (units: ms, bytes, bytes/s): block ``b`` reads ``read_ms[b] =
block_load_ms[b]`` if measured, else ``weights[b] * weight_bits / 8 / thread_bytes_per_s
* 1000``. With ``p = min(T, k)`` threads loading, each reads at
``min(thread_bytes_per_s, storage_bytes_per_s / p)``: the read part of every load is
stretched by ``slowdown(p) = max(1, p * thread_bytes_per_s / storage_bytes_per_s)``. Child
``i`` (blocks ``[s_i, s_{i+1})``) loads in ``load_ms[i] = child_fixed_ms + slowdown(p) *
sum(read_ms[s_i:s_{i+1}])`` and runs inference in ``infer_ms[i] = sum(infer_ms[b])`` on
``settings.edge`` (the core latency model: measured ``latency_ms`` or MACs over the rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from splitopt.core.errors import InvalidInstance
from splitopt.core.jsonfile import shown
from splitopt.core.latency import layer_latency_ms
from splitopt.core.ranges import MAX_MS, MAX_RATE, MAX_TOTAL_MS, MIN_RATE
from splitopt.families.loading.settings import MAX_CHILDREN, MAX_THREADS, OPTION_KEYS, SETTINGS_KEY, LoadingInstance

@dataclass(frozen=True)
class LoadingData:
    """Everything the evaluator, the programs and the methods read (ms, bytes, bytes/s).

    ``read_prefix[i]`` / ``infer_prefix[i]``: the summed single-thread read time and the
    inference time of blocks ``0 .. i-1`` (length N + 1)."""

    blocks: tuple[str, ...]
    device: str
    threads: int
    k_min: int
    k_max: int
    tail: int
    fixed_ms: float
    thread_rate: float
    storage_rate: float | None
    block_bytes: np.ndarray
    read_ms: np.ndarray
    infer_ms: np.ndarray
    read_prefix: np.ndarray
    infer_prefix: np.ndarray
    measured: frozenset[str]
    reference_plans: Mapping[str, tuple[str, ...]]

    @property
    def n(self) -> int:
        """N: the number of blocks."""
        return len(self.blocks)

    @property
    def last_start_max(self) -> int:
        """The latest block the last child may start at (it holds the trainable tail)."""
        return self.n - max(self.tail, 1)

    def slowdown(self, k: int) -> float:
        """How much slower each load reads with ``k`` children (``min(T, k)`` threads
        sharing the storage): ``max(1, p * thread_rate / storage_rate)``."""
        if self.storage_rate is None:
            return 1.0
        p = min(self.threads, k)
        return max(1.0, p * self.thread_rate / self.storage_rate)

    def read_sum(self, start: int, end: int) -> float:
        """Single-thread read time (ms) of blocks ``start .. end-1``."""
        return float(self.read_prefix[end] - self.read_prefix[start])

    def infer_sum(self, start: int, end: int) -> float:
        """Inference time (ms) of blocks ``start .. end-1``."""
        return float(self.infer_prefix[end] - self.infer_prefix[start])

    def load_ms(self, start: int, end: int, k: int) -> float:
        """Load time (ms) of a child of blocks ``start .. end-1`` among ``k`` children."""
        return self.fixed_ms + self.slowdown(k) * self.read_sum(start, end)

    @property
    def total_infer_ms(self) -> float:
        return float(self.infer_prefix[-1])

    def child_counts(self) -> range:
        """The numbers of children a plan may have: ``k_min .. min(k_max, N - m + 1)``."""
        return range(self.k_min, min(self.k_max, self.last_start_max + 1) + 1)


def options(inst: LoadingInstance) -> Mapping[str, Any]:
    return inst.settings.loading


def _number(value: Any, where: str, low: float, high: float, integer: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (not integer or float(value).is_integer())
    if not ok or not (low <= value <= high):
        kind = "an integer" if integer else "a number"
        raise InvalidInstance(f"{where}: must be {kind} in [{low:g}, {high:g}], got {shown(value)}")
    return value


def data(inst: LoadingInstance) -> LoadingData:
    """The derived data of ``inst`` (checked), once per instance."""
    return inst.derived(("loading", "data"), lambda: _build(inst))


def _build(inst: LoadingInstance) -> LoadingData:
    s = inst.settings
    o = options(inst)
    where = f"instance.settings.{SETTINGS_KEY}"
    if not o:
        raise InvalidInstance(f"{where}: required for problem 'loading' (threads, thread_bytes_per_s, ...)")
    for key in o:
        if key not in OPTION_KEYS:
            raise InvalidInstance(f"{where}.{key}: unknown option (options: {', '.join(OPTION_KEYS)})")
    for key in ("threads", "thread_bytes_per_s"):
        if key not in o:
            raise InvalidInstance(f"{where}.{key}: required")
    n = len(inst.layers)
    threads = int(_number(o["threads"], f"{where}.threads", 1, MAX_THREADS, integer=True))
    children = o.get("children", {})
    if not isinstance(children, Mapping):
        raise InvalidInstance(f"{where}.children: must be an object with 'min' and/or 'max', got {shown(children)}")
    for key in children:
        if key not in ("min", "max"):
            raise InvalidInstance(f"{where}.children.{key}: unknown option (options: min, max)")
    k_min = int(_number(children.get("min", 1), f"{where}.children.min", 1, MAX_CHILDREN, integer=True))
    k_max = int(_number(children.get("max", min(threads, n)), f"{where}.children.max", 1, MAX_CHILDREN, integer=True))
    if k_max > n:
        raise InvalidInstance(f"{where}.children.max: {k_max} children of a model with {n} blocks (layers); "
                              f"at most {n}")
    if k_min > k_max:
        raise InvalidInstance(f"{where}.children.min: {k_min} is more than children.max = {k_max}")
    tail = int(_number(o.get("trainable_tail", 0), f"{where}.trainable_tail", 0, n, integer=True))
    bits = int(_number(o.get("weight_bits", 32), f"{where}.weight_bits", 1, 64, integer=True))
    fixed = float(_number(o.get("child_fixed_ms", 0.0), f"{where}.child_fixed_ms", 0.0, MAX_MS))
    thread_rate = float(_number(o["thread_bytes_per_s"], f"{where}.thread_bytes_per_s", MIN_RATE, MAX_RATE))
    storage = o.get("storage_bytes_per_s")
    storage_rate = None if storage is None else float(
        _number(storage, f"{where}.storage_bytes_per_s", MIN_RATE, MAX_RATE))
    measured = o.get("block_load_ms", {})
    if not isinstance(measured, Mapping):
        raise InvalidInstance(f"{where}.block_load_ms: must map block (layer) names to ms, got {shown(measured)}")
    for name, value in measured.items():
        if name not in inst.layer_by_name:
            raise InvalidInstance(f"{where}.block_load_ms.{name}: unknown layer")
        _number(value, f"{where}.block_load_ms.{name}", 0.0, MAX_MS)
    if s.edge not in inst.device_by_name:
        raise InvalidInstance(f"instance.settings.edge: unknown device '{s.edge}'")
    device = inst.device_by_name[s.edge]
    block_bytes = np.array([layer.weights * bits / 8.0 for layer in inst.layers], dtype=float)
    read = np.array([float(measured[layer.name]) if layer.name in measured else 1000.0 * block_bytes[i] / thread_rate
                     for i, layer in enumerate(inst.layers)], dtype=float)
    for i, ms in enumerate(read):
        if ms > MAX_MS:
            raise InvalidInstance(f"instance.graph.layers[{i}]: layer '{inst.layers[i].name}' takes {ms:.4g} ms to "
                                  f"read at {where}.thread_bytes_per_s = {thread_rate:g}; at most {MAX_MS:g} ms")
    infer = np.array([layer_latency_ms(inst, layer, device, bits, bits) for layer in inst.layers], dtype=float)
    worst = fixed * k_max + max(1.0, threads * thread_rate / storage_rate if storage_rate else 1.0) * read.sum() \
        + infer.sum()
    if worst > MAX_TOTAL_MS:
        raise InvalidInstance(f"{where}: loading every block one after another takes {worst:.4g} ms; at most "
                              f"{MAX_TOTAL_MS:g} ms")
    refs = o.get("reference_plans", {})
    if not isinstance(refs, Mapping):
        raise InvalidInstance(f"{where}.reference_plans: must map a name to the first block of each child")
    for name, starts in refs.items():
        if not isinstance(starts, (list, tuple)) or not starts or not all(isinstance(b, str) for b in starts):
            raise InvalidInstance(f"{where}.reference_plans.{name}: must list the first block (layer name) of each "
                                  f"child, got {shown(starts)}")
        for b in starts:
            if b not in inst.layer_by_name:
                raise InvalidInstance(f"{where}.reference_plans.{name}: unknown layer '{b}'")
        at = [inst.position[b] for b in starts]
        if at[0] != 0:
            raise InvalidInstance(f"{where}.reference_plans.{name}: the first child starts at the first block "
                                  f"'{inst.layers[0].name}', got '{starts[0]}'")
        bad = next((j for j in range(1, len(at)) if at[j] <= at[j - 1]), None)
        if bad is not None:
            raise InvalidInstance(f"{where}.reference_plans.{name}[{bad}]: '{starts[bad]}' does not come after "
                                  f"'{starts[bad - 1]}' (the first blocks of the children, in block order)")
    return LoadingData(
        blocks=tuple(layer.name for layer in inst.layers), device=s.edge, threads=threads, k_min=k_min, k_max=k_max,
        tail=tail, fixed_ms=fixed, thread_rate=thread_rate, storage_rate=storage_rate, block_bytes=block_bytes,
        read_ms=read, infer_ms=infer, read_prefix=np.concatenate([[0.0], np.cumsum(read)]),
        infer_prefix=np.concatenate([[0.0], np.cumsum(infer)]), measured=frozenset(measured),
        reference_plans={name: tuple(starts) for name, starts in refs.items()},
    )
