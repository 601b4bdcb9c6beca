"""Profile a block model into a ``loading`` instance, measured on this host (the RL
modularization paper's Alg. 1, lines 2-5: each block's loading and inference time).

Per block (one instance layer, in execution order; ``op`` "block", input = the previous
block): ``macs`` counted by forward hooks (conv: output elements x input channels per
group x kernel area; linear: in x out; batch norms, pools, ReLUs and concatenations are
not counted), ``weights`` = parameter and buffer elements its checkpoint stores,
``output_shape`` without batch, and ``latency_ms.host`` = median wall time of the block's
forward over ``repeats`` runs of the whole model, block by block, batch 1 (after one
warm-up run; torch's intra-op threads as set).

``settings.loading`` (ms, bytes/s), each measured with files written by
:func:`splitopt.torch.loading.children.save_child` and loaded by
:func:`splitopt.torch.loading.children.load_child` (read, deserialise, build on meta,
assign), medians of ``repeats``, the page cache in state ``cache`` before every timed
load (:mod:`splitopt.torch.loading.cache`):

* ``child_fixed_ms``: loading a child file of no blocks (open, zip directory, unpickle
  the spec): the per-file fixed cost;
* ``block_load_ms[b]``: loading a file that holds block ``b`` alone, on one thread, minus
  ``child_fixed_ms`` (the family charges the fixed cost once per child and the block
  times on top; clipped at 0); with ``calibrate`` (default) scaled by one factor so that
  they add up to the monolithic file's measured load minus ``child_fixed_ms``: a block
  loaded alone does not cost what it adds inside a larger file (here the sum of the
  blocks alone was 0.5x to 1.8x the whole file's load, depending on the model and the
  moment); the factor is recorded (``source.measurements.calibration_scale``);
* ``thread_bytes_per_s``: one thread's rate, the blocks' bytes (``weights`` x 4) over the
  sum of ``block_load_ms``;
* ``storage_bytes_per_s`` (``threads`` >= 2; null for one thread): what ``threads``
  threads loading at once get together. The blocks are cut into ``threads`` files of
  about equal bytes, loaded concurrently (threads mode, one file per thread); the
  measured slowdown is ``(wall - child_fixed_ms) / max(share read time)`` and the rate is
  ``threads x thread_bytes_per_s / slowdown``, so that the family's ``slowdown(T)``
  reproduces the measurement. On this host it measures contention for CPU cores and the
  GIL during deserialisation as much as the storage;
* ``threads``, ``children`` (1 .. max(8, the longest reference plan), at most N),
  ``trainable_tail`` (the classifier), ``weight_bits`` 32, ``reference_plans`` (the
  paper's Table 2 on these blocks, :func:`splitopt.torch.loading.models.reference_plans`).

The instance's ``source`` records the model configuration (``block_model``: what
``splitopt run-loading`` rebuilds), the cache state, the repeats and the raw
measurements (monolithic load, the concurrent wall time, the page-cache residency seen
before a timed load).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn

from splitopt.api import FORMAT, parse_instance
from splitopt.torch.loading.cache import prepare_cache, resident_fraction
from splitopt.torch.loading.children import load_child, save_child, state_elements
from splitopt.torch.loading.models import (BlockModelConfig, BlockSequence, build_block_model, reference_plans,
                                           synthetic_input, trainable_tail)
from splitopt.torch.macs import count_macs

#: the fewest children the instances allow at most (the benchmark's k range)
DEFAULT_CHILDREN_MAX = 8
HOST = "host"


@dataclass(frozen=True)
class BlockProfile:
    """One block: MACs, stored elements, output shape (no batch), inference ms."""

    name: str
    macs: int
    weights: int
    output_shape: tuple[int, ...]
    infer_ms: float


def profile_blocks(model: BlockSequence, x: torch.Tensor, repeats: int = 5) -> list[BlockProfile]:
    """MACs, stored elements, output shapes and median inference ms of every block (batch
    1, one warm-up run, then ``repeats`` runs of the model block by block)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    times: list[list[float]] = [[] for _ in model.blocks]
    shapes, macs = [], []
    with torch.no_grad():
        y = x
        for block in model.blocks:
            macs.append(count_macs(block, y))
            y = block(y)
            shapes.append(tuple(y.shape[1:]))
        for run in range(repeats + 1):
            y = x
            for i, block in enumerate(model.blocks):
                t0 = time.perf_counter()
                y = block(y)
                if run:
                    times[i].append(1000 * (time.perf_counter() - t0))
    return [BlockProfile(name, macs[i], state_elements(block), shapes[i], statistics.median(times[i]))
            for i, (name, block) in enumerate(model.named_blocks())]


def timed_load_ms(path: Path, cache: str) -> float:
    """One load of a child file (ms) with the page cache put in state ``cache`` first."""
    prepare_cache([path], cache)
    t0 = time.perf_counter()
    load_child(path)
    return 1000 * (time.perf_counter() - t0)


def concurrent_load_ms(paths: Sequence[Path], cache: str) -> float:
    """Wall time (ms) of loading every file at once, one ``threading.Thread`` each."""
    prepare_cache(paths, cache)
    workers = [threading.Thread(target=load_child, args=(p,)) for p in paths]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return 1000 * (time.perf_counter() - t0)


def equal_byte_starts(sizes: Sequence[float], parts: int) -> list[int]:
    """Start indices of ``parts`` contiguous groups of about equal total size (each
    non-empty; ``parts`` at most ``len(sizes)``)."""
    total = float(sum(sizes))
    starts, acc, j = [0], 0.0, 1
    for i, s in enumerate(sizes):
        if j < parts and i > starts[-1] and acc >= total * j / parts and len(sizes) - i >= parts - j:
            starts.append(i)
            j += 1
        acc += s
    while len(starts) < parts:  # too few large blocks: give the last ones a group each
        starts.append(min(starts[-1] + 1, len(sizes) - (parts - len(starts))))
    return starts


def measure_concurrency(config: BlockModelConfig, named: Sequence[tuple[str, nn.Module]],
                        block_bytes: Sequence[float], block_ms: Sequence[float], fixed_ms: float, threads: int,
                        cache: str, repeats: int, directory: Path,
                        say: Callable[[str], None] = lambda _: None) -> tuple[float | None, dict[str, Any] | None]:
    """``storage_bytes_per_s`` for ``threads`` threads and what was measured (see the
    module docstring): None, None for one thread. ``block_ms``: the blocks' single-thread
    load times (ms, fixed cost excluded); files are written to ``directory``."""
    if threads < 2:
        return None, None
    say(f"{threads} threads loading at once")
    n = len(named)
    read_total = sum(block_ms)
    thread_rate = sum(block_bytes) / (read_total / 1000.0) if read_total > 0 else 1e12
    parts = min(threads, n)
    starts = equal_byte_starts(block_bytes, parts)
    ends = starts[1:] + [n]
    shares = [save_child(directory / f"share{parts}_{j}.pt", config, j, parts, named[a:b], [])
              for j, (a, b) in enumerate(zip(starts, ends))]
    wall = statistics.median(concurrent_load_ms([s.path for s in shares], cache) for _ in range(repeats))
    for s in shares:
        s.path.unlink()
    longest = max(sum(block_ms[a:b]) for a, b in zip(starts, ends))
    slowdown = (wall - fixed_ms) / longest if longest > 0 else 1.0
    rate = min(1e21, parts * thread_rate / max(slowdown, 1e-6))
    return rate, {"threads": parts, "first_blocks": [named[a][0] for a in starts], "wall_ms": wall,
                  "longest_share_read_ms": longest, "slowdown": slowdown}


def instance_for_threads(profile: "LoadingProfile", threads: int, repeats: int = 5,
                         workdir: Path | None = None) -> Any:
    """The profiled instance for another number of loading threads: the block
    measurements reused, the concurrent load (``storage_bytes_per_s``) measured again with
    ``threads`` threads, in the profile's cache state."""
    import copy

    data = copy.deepcopy(profile.data)
    o = data["settings"]["loading"]
    m = data["source"]["measurements"]
    blocks = [layer["name"] for layer in data["graph"]["layers"]]
    block_ms = [o["block_load_ms"][b] for b in blocks]
    block_bytes = [4.0 * layer["weights"] for layer in data["graph"]["layers"]]
    with tempfile.TemporaryDirectory(prefix="splitopt-loading-", dir=workdir) as tmp:
        rate, concurrent = measure_concurrency(profile.config, profile.model.named_blocks(), block_bytes, block_ms,
                                               o["child_fixed_ms"], threads, m["cache"], repeats, Path(tmp))
    o["threads"], o["storage_bytes_per_s"] = threads, rate
    m["concurrent"] = concurrent
    return parse_instance(data)


@dataclass
class LoadingProfile:
    """The instance, the model it was measured on (for writing children), and the raw
    measurements (ms)."""

    instance: Any
    model: BlockSequence
    config: BlockModelConfig
    measurements: dict[str, Any]
    data: dict[str, Any]


def profile_loading(config: BlockModelConfig, threads: int, *, seed: int = 0, cache: str = "warm", repeats: int = 5,
                    children_max: int | None = None, name: str | None = None, objective: str = "latency",
                    workdir: Path | None = None, model: BlockSequence | None = None, calibrate: bool = True,
                    progress: Callable[[str], None] | None = None) -> LoadingProfile:
    """Build (or take ``model``), measure and return the validated loading instance of
    ``config`` for ``threads`` loading threads (see the module docstring). Files go to a
    temporary directory under ``workdir`` (default: the system's), removed afterwards."""
    if threads < 1 or repeats < 1:
        raise ValueError(f"threads and repeats must be >= 1, got {threads}, {repeats}")
    say = progress or (lambda _: None)
    model = model if model is not None else build_block_model(config, seed)
    x = synthetic_input(config)
    say("inference per block")
    blocks = profile_blocks(model, x, repeats)
    named = model.named_blocks()
    n = len(named)
    with tempfile.TemporaryDirectory(prefix="splitopt-loading-", dir=workdir) as tmp:
        tmp_dir = Path(tmp)
        say("load time per block")
        empty = save_child(tmp_dir / "empty.pt", config, 0, 1, [], [])
        files = [save_child(tmp_dir / f"block{i}.pt", config, 0, 1, [named[i]], []) for i in range(n)]
        mono = save_child(tmp_dir / "monolithic.pt", config, 0, 1, named, [])
        load_child(empty.path), load_child(files[0].path)  # first-call costs (imports, caches) out of the timing
        fixed_runs: list[float] = []
        block_runs: list[list[float]] = [[] for _ in range(n)]
        for _ in range(repeats):  # round robin, so that a slow moment of the host spreads over the blocks
            fixed_runs.append(timed_load_ms(empty.path, cache))
            for i, f in enumerate(files):
                block_runs[i].append(timed_load_ms(f.path, cache))
        fixed = statistics.median(fixed_runs)
        raw_block_ms = [statistics.median(r) for r in block_runs]
        alone_ms = [max(0.0, ms - fixed) for ms in raw_block_ms]
        prepare_cache([mono.path], cache)
        residency = resident_fraction(mono.path)
        mono_ms = statistics.median(timed_load_ms(mono.path, cache) for _ in range(repeats))
        # a block loaded alone costs more or less than inside a larger file (per-file costs beyond the empty
        # file's: zip records, allocations, first touch): scale the shares to the whole file's measured load
        scale = (mono_ms - fixed) / sum(alone_ms) if calibrate and sum(alone_ms) > 0 and mono_ms > fixed else 1.0
        block_ms = [ms * scale for ms in alone_ms]
        block_bytes = [4.0 * b.weights for b in blocks]
        read_total = sum(block_ms)
        thread_rate = sum(block_bytes) / (read_total / 1000.0) if read_total > 0 else 1e12
        storage_rate, concurrent = measure_concurrency(config, named, block_bytes, block_ms, fixed, threads, cache,
                                                       repeats, tmp_dir, say)
    layers = []
    for i, b in enumerate(blocks):
        layers.append({"name": b.name, "op": "block", "inputs": ["x" if i == 0 else blocks[i - 1].name],
                       "macs": b.macs, "weights": b.weights, "output_shape": list(b.output_shape),
                       "latency_ms": {HOST: b.infer_ms}})
    total_ms = sum(b.infer_ms for b in blocks)
    total_macs = sum(b.macs for b in blocks)
    refs = reference_plans(config)
    k_cap = max([DEFAULT_CHILDREN_MAX] + [len(v) for v in refs.values()])
    options: dict[str, Any] = {
        "threads": threads,
        "children": {"min": 1, "max": min(n, children_max or k_cap)},
        "trainable_tail": trainable_tail(config),
        "weight_bits": 32,
        "child_fixed_ms": fixed,
        "thread_bytes_per_s": thread_rate,
        "storage_bytes_per_s": storage_rate,
        "block_load_ms": {b.name: ms for b, ms in zip(blocks, block_ms)},
    }
    if refs:
        options["reference_plans"] = refs
    measurements = {
        "cache": cache, "repeats": repeats, "resident_fraction_before_load": residency,
        "empty_child_ms": fixed, "block_file_ms": dict(zip([b.name for b in blocks], raw_block_ms)),
        "monolithic_load_ms": mono_ms, "monolithic_file_bytes": mono.bytes,
        "blocks_alone_ms_plus_fixed": sum(alone_ms) + fixed, "calibration_scale": scale, "inference_ms": total_ms, "concurrent": concurrent,
    }
    data = {
        "format": FORMAT,
        "name": name or f"loading_{config.model}_host",
        "description": f"{config.model} (width {config.width:g}, depth {config.depth:g}, {config.size}x{config.size} "
                       f"input) as {n} blocks, loaded from child checkpoint files on this host, {cache} page cache",
        # the generator's name as the instances written so far record it (the module's name then)
        "source": {"generator": "splitopt.torch.loading_profile", "torch": torch.__version__,
                   "block_model": dict(config.to_dict(), seed=seed), "input_shape": list(x.shape[1:]),
                   "torch_threads": torch.get_num_threads(),
                   "measurements": {k: v for k, v in measurements.items() if k != "block_file_ms"}},
        "graph": {"inputs": [{"name": "x", "shape": list(x.shape[1:]), "bits": 32}], "layers": layers},
        # (the description names the module as the instances written so far do)
        "devices": [{"name": HOST, "description": f"this host, measured by splitopt.torch.loading_profile "
                                                   f"(torch {torch.__version__}, {torch.get_num_threads()} threads)",
                     "mac_per_s": total_macs / (total_ms / 1000.0) if total_ms > 0 and total_macs > 0 else 1e9,
                     "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": 8e9,
                     "bit_widths": [8, 16, 32]}],
        "links": [],
        "settings": {"problem": "loading", "objective": objective, "edge": HOST, "cloud": HOST, "loading": options},
    }
    return LoadingProfile(parse_instance(data), model, config, measurements, data)
