"""Load child models as a plan says and run inference as soon as each is ready (the RL
modularization paper's Alg. 2, both cases), measuring every step on this host.

One run: at time 0 every plan thread starts loading its children one after another (in
the plan's order); the calling thread runs inference of child ``i`` on the output of
child ``i-1`` as soon as child ``i`` is loaded and child ``i-1``'s inference is done. The
first response is the time from the start of loading to the last child's output (ms).
With ``k <= T`` (Case 1) every child has its own thread; with ``k > T`` (Case 2) the
inference of loaded children overlaps the loading of the rest.

Two ways to load (``mode``):

* ``threads``: each plan thread is a ``threading.Thread`` that loads a child with
  :func:`splitopt.torch.loading.children.load_child` (read, deserialise, build on meta,
  assign) in this process. ``torch.load`` runs much of its work in Python (the
  restricted unpickler) holding the GIL, and building the modules is Python too, so
  loading threads partly interleave rather than overlap, with each other and with the
  inferring thread (``benchmarks/results/loading_torch.md`` has the measured slowdowns).
* ``processes``: a :class:`ProcessLoaderPool` of ``T`` worker processes, started (and
  warmed: torch imported; :func:`splitopt.torch.loading.run.run_loading` also runs the plan
  once untimed) before the clock starts. Worker ``t`` loads
  its children in order with ``torch.load(weights_only=True)``, copies each child's
  tensors into one shared-memory buffer and sends it back (``torch.multiprocessing``
  passes the buffer's file descriptor, the bytes are not copied again); the calling
  process's receiver thread builds the child on the meta device over views of that
  buffer. Each worker has its own GIL; the price is one extra memory copy per child and
  the pool's start-up (reported, not in the first response: an app keeps its loader
  processes warm).

Times come from ``time.perf_counter`` (``CLOCK_MONOTONIC`` on Linux, the same clock in
every process).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from splitopt.torch.loading.children import ChildModel, build_child, load_child, read_child

#: shared-memory buffers align each tensor to this many bytes
_ALIGN = 64


@dataclass(frozen=True)
class ChildTiming:
    """One child's measured schedule (ms from the start of loading)."""

    index: int
    thread: int
    load_start_ms: float
    load_end_ms: float
    infer_start_ms: float
    infer_end_ms: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LoadingRun:
    """One measured run: the first response (ms), the per-child schedule, the output, and
    the children (for fine-tuning)."""

    mode: str
    first_response_ms: float
    children: list[ChildTiming]
    output: torch.Tensor
    models: list[ChildModel] = field(repr=False, default_factory=list)

    @property
    def loads_done_ms(self) -> float:
        return max(c.load_end_ms for c in self.children)


def check_threads(threads: Sequence[Sequence[int]], k: int) -> None:
    """ValueError unless ``threads`` loads every child ``0 .. k-1`` exactly once."""
    seen = sorted(i for t in threads for i in t)
    if seen != list(range(k)):
        raise ValueError(f"threads {[list(t) for t in threads]} must load every child 0..{k - 1} exactly once")


def _infer_in_order(k: int, ready: list[threading.Event], models: list, failures: list, x: torch.Tensor,
                    t0: float) -> tuple[torch.Tensor, list[tuple[float, float]]]:
    spans = []
    with torch.no_grad():
        for i in range(k):
            ready[i].wait()
            if failures:
                raise failures[0]
            start = time.perf_counter()
            x = models[i](x)
            spans.append((1000 * (start - t0), 1000 * (time.perf_counter() - t0)))
    return x, spans


def run_with_threads(paths: Sequence[Path], threads: Sequence[Sequence[int]], x: torch.Tensor) -> LoadingRun:
    """Load ``paths`` (child files in execution order) on one ``threading.Thread`` per
    entry of ``threads`` (the child indices it loads, in order) and run inference on
    ``x`` as children become ready (see the module docstring)."""
    k = len(paths)
    check_threads(threads, k)
    ready = [threading.Event() for _ in range(k)]
    models: list[ChildModel | None] = [None] * k
    loads: list[tuple[int, float, float]] = [(0, 0.0, 0.0)] * k
    failures: list[BaseException] = []

    def loader(t: int, order: Sequence[int]) -> None:
        for i in order:
            start = time.perf_counter()
            try:
                models[i] = load_child(paths[i])
            except BaseException as e:  # noqa: BLE001 - handed to the inferring thread
                failures.append(e)
                for event in ready:
                    event.set()
                return
            loads[i] = (t, 1000 * (start - t0), 1000 * (time.perf_counter() - t0))
            ready[i].set()

    t0 = time.perf_counter()
    workers = [threading.Thread(target=loader, args=(t, list(order)), daemon=True)
               for t, order in enumerate(threads)]
    for w in workers:
        w.start()
    try:
        out, spans = _infer_in_order(k, ready, models, failures, x, t0)
        response = 1000 * (time.perf_counter() - t0)
    finally:
        for w in workers:
            w.join()
    timings = [ChildTiming(i, loads[i][0], loads[i][1], loads[i][2], spans[i][0], spans[i][1]) for i in range(k)]
    return LoadingRun("threads", response, timings, out, [m for m in models if m is not None])


# ----- processes -------------------------------------------------------------------------

def _pack_state(state: dict[str, dict[str, torch.Tensor]]) -> tuple[torch.Tensor, list[tuple]]:
    """Every tensor of a child copied into one shared-memory byte buffer, and the layout
    ``(block, key, dtype name, shape, offset)`` to view them again."""
    layout, offset = [], 0
    for block, tensors in state.items():
        for key, t in tensors.items():
            layout.append((block, key, str(t.dtype).removeprefix("torch."), tuple(t.shape), offset))
            offset += -(-t.numel() * t.element_size() // _ALIGN) * _ALIGN
    buffer = torch.empty(max(offset, 1), dtype=torch.uint8).share_memory_()
    for (_, _, _, _, at), t in zip(layout, (t for ts in state.values() for t in ts.values())):
        n = t.numel() * t.element_size()
        if n:
            buffer[at:at + n].copy_(t.contiguous().view(-1).view(torch.uint8))
    return buffer, layout


def _unpack_state(blocks: Sequence[str], buffer: torch.Tensor, layout: list[tuple]) -> dict[str, dict[str, torch.Tensor]]:
    """Each block's state dict as views of ``buffer`` (no copy); blocks with no tensors
    get an empty one."""
    state: dict[str, dict[str, torch.Tensor]] = {b: {} for b in blocks}
    for block, key, dtype_name, shape, at in layout:
        dtype = getattr(torch, dtype_name)
        n = int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()
        state.setdefault(block, {})[key] = buffer[at:at + n].view(dtype).view(shape)
    return state


def _worker_main(tasks, results) -> None:
    """A loader process: for each task ``(run, [(child, path), ...])`` load the children in
    order and send each back as it is loaded; None stops."""
    torch.set_num_threads(1)
    while True:
        task = tasks.get()
        if task is None:
            return
        run, order = task
        if not order:  # a ping: this worker is up (torch imported)
            results.put((run, -1, None, None, None, 0.0, 0.0, None))
        for i, path in order:
            start = time.perf_counter()
            try:
                raw = read_child(Path(path))
                buffer, layout = _pack_state(raw.pop("state"))
                results.put((run, i, raw, buffer, layout, start, time.perf_counter(), None))
            except Exception as e:  # noqa: BLE001 - reported to the caller
                results.put((run, i, None, None, None, start, time.perf_counter(), f"{type(e).__name__}: {e}"))
            del raw


class ProcessLoaderPool:
    """``workers`` loader processes (``torch.multiprocessing``, spawn), started on
    construction: each has answered once torch is imported, and has loaded ``warm_file``
    once if given (``start_s``: seconds that took); use as a context manager or call
    :meth:`close`."""

    def __init__(self, workers: int, warm_file: Path | None = None):
        import torch.multiprocessing as tmp

        t0 = time.perf_counter()
        ctx = tmp.get_context("spawn")
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(workers)]
        self.processes = [ctx.Process(target=_worker_main, args=(q, self.results), daemon=True) for q in self.tasks]
        for p in self.processes:
            p.start()
        self._run = 0
        for q in self.tasks:  # every worker answers once it has imported torch
            self._run += 1
            q.put((self._run, []))
            self._receive(self._run, 1)
        if warm_file is not None:  # and loads a file once
            for q in self.tasks:
                self._run += 1
                q.put((self._run, [(0, str(warm_file))]))
                self._receive(self._run, 1)
        self.start_s = time.perf_counter() - t0

    @property
    def workers(self) -> int:
        return len(self.processes)

    def _receive(self, run: int, count: int, timeout_s: float = 600.0) -> list[tuple]:
        got: list[tuple] = []
        while len(got) < count:
            try:
                item = self.results.get(timeout=timeout_s)
            except queue.Empty:
                raise RuntimeError(f"loader processes sent nothing for {timeout_s:g} s") from None
            if item[0] == run:
                got.append(item)
        return got

    def run(self, paths: Sequence[Path], threads: Sequence[Sequence[int]], x: torch.Tensor) -> LoadingRun:
        """As :func:`run_with_threads`, the loads in the worker processes (plan thread
        ``t`` on worker ``t``)."""
        k = len(paths)
        check_threads(threads, k)
        if len(threads) > self.workers:
            raise ValueError(f"{len(threads)} plan threads, {self.workers} loader processes")
        self._run += 1
        run = self._run
        ready = [threading.Event() for _ in range(k)]
        models: list[ChildModel | None] = [None] * k
        loads: list[tuple[int, float, float]] = [(0, 0.0, 0.0)] * k
        thread_of = {i: t for t, order in enumerate(threads) for i in order}
        failures: list[BaseException] = []

        def receiver() -> None:
            for _ in range(k):
                try:
                    _, i, raw, buffer, layout, start, _, error = self._receive(run, 1)[0]
                    if error is not None:
                        raise RuntimeError(f"loader process, child {i}: {error}")
                    raw["state"] = _unpack_state(raw["blocks"], buffer, layout)
                    models[i] = build_child(raw)
                except BaseException as e:  # noqa: BLE001 - handed to the inferring thread
                    failures.append(e)
                    for event in ready:
                        event.set()
                    return
                loads[i] = (thread_of[i], 1000 * (start - t0), 1000 * (time.perf_counter() - t0))
                ready[i].set()

        t0 = time.perf_counter()
        for t, order in enumerate(threads):
            self.tasks[t].put((run, [(i, str(paths[i])) for i in order]))
        collector = threading.Thread(target=receiver, daemon=True)
        collector.start()
        try:
            out, spans = _infer_in_order(k, ready, models, failures, x, t0)
            response = 1000 * (time.perf_counter() - t0)
        finally:
            collector.join()
        timings = [ChildTiming(i, loads[i][0], loads[i][1], loads[i][2], spans[i][0], spans[i][1])
                   for i in range(k)]
        return LoadingRun("processes", response, timings, out, [m for m in models if m is not None])

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.processes:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()

    def __enter__(self) -> "ProcessLoaderPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
