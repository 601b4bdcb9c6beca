"""Child processes that never outlive their parent: what the multi-process runners
(``splitopt.netrun``: one process per device over TCP; ``splitopt.torch.separable.run``:
one gloo worker per device) share to start, watch and stop their children.

* in a child, :func:`exit_with_parent` ends the process as soon as its parent is gone,
  even when the parent was killed by SIGKILL (no orphan);
* in the parent, :func:`sigterm_interrupts` makes SIGTERM raise KeyboardInterrupt (as
  Ctrl-C does), so that one cleanup path stops the children on either, and
  :func:`stop_processes` terminates, then kills, every child still alive and joins them;
  :func:`collect_reports` waits for one report per child, or for the first that fails,
  dies or passes the deadline (:class:`ChildFailure`, which each caller words).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable, Mapping, Sequence

#: seconds the children get to end after SIGTERM before SIGKILL
TERMINATE_GRACE_S = 3.0


def exit_with_parent(thread_name: str = "parent-watch") -> None:
    """In a child started by ``multiprocessing``: a daemon thread that ends the process
    (exit status 3) once the parent process is gone; nothing in a process without one."""
    import multiprocessing
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(3)

    threading.Thread(target=watch, daemon=True, name=thread_name).start()


def killed_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that has the kernel kill the child
    (SIGKILL) when the thread that started it ends, the process killed by SIGKILL
    included (Linux's ``PR_SET_PDEATHSIG``; it survives ``exec`` of a solver binary such as
    CBC); None where the platform has no such call. Written with ctypes because the
    standard library offers no parent-death signal; the function is looked up here, so the
    child only makes the one system call (``preexec_fn`` runs between fork and exec)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    PR_SET_PDEATHSIG = 1

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call: no signal will come
            os._exit(3)

    return preexec


def sigterm_interrupts() -> Any:
    """In the main thread: make SIGTERM raise KeyboardInterrupt (as Ctrl-C does); returns
    the handler to restore with ``signal.signal(signal.SIGTERM, ...)`` (None: unchanged,
    off the main thread, where no handler can be set)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    return signal.signal(signal.SIGTERM, interrupt)


def stop_processes(procs: Sequence[Any]) -> None:
    """Terminate, then kill (after :data:`TERMINATE_GRACE_S`), every process still alive,
    and join them all."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_S
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(2.0)


class ChildFailure(Exception):
    """What :func:`collect_reports` ran into: ``kind`` "timeout" (``done`` reports of
    ``world`` in ``timeout_s``), "died" (process ``rank`` ended, ``exitcode``, without a
    report) or "error" (``rank`` reported ``error``, with its ``trace``). Callers word it
    for their users."""

    def __init__(self, kind: str, rank: int | None = None, exitcode: int | None = None, error: str = "",
                 trace: str = "", done: int = 0, world: int = 0, timeout_s: float = 0.0):
        super().__init__(kind)
        self.kind, self.rank, self.exitcode, self.error, self.trace = kind, rank, exitcode, error, trace
        self.done, self.world, self.timeout_s = done, world, timeout_s
        self.pids: list[int] = []  # the processes of the run (set by run_spawned)


def collect_reports(procs: Sequence[Any], results: Any, timeout_s: float,
                    died: Callable[[Any], bool] = lambda p: not p.is_alive()) -> dict[int, dict[str, Any]]:
    """One report per process from ``results`` (a queue of ``(rank, report dict)``; a
    report with ``"error"`` is a failure) within ``timeout_s`` seconds, then every process
    joined (5 s each). ChildFailure on the deadline, on a process that ``died`` (checked
    while the queue is quiet) before reporting, or on an error report."""
    import queue as queue_mod

    world = len(procs)
    reports: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout_s
    while len(reports) < world:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ChildFailure("timeout", done=len(reports), world=world, timeout_s=timeout_s)
        try:
            rank, rep = results.get(timeout=min(0.5, left))
        except queue_mod.Empty:
            dead = [i for i, p in enumerate(procs) if died(p) and i not in reports]
            if dead:
                raise ChildFailure("died", rank=dead[0], exitcode=procs[dead[0]].exitcode) from None
            continue
        if "error" in rep:
            raise ChildFailure("error", rank=rank, error=rep["error"], trace=rep.get("trace", ""))
        reports[rank] = rep
    for p in procs:
        p.join(5.0)
    return reports


def run_spawned(target: Callable[..., Any], spec: Mapping[str, Any], names: Sequence[str], port_count: int,
                timeout_s: float) -> dict[int, dict[str, Any]]:
    """Start one ``spawn`` process per name, each running ``target(rank, spec, ports,
    results)`` (``ports``: ``port_count`` queues the processes share; ``results``: where each
    puts ``(rank, report)``), and collect one report each within ``timeout_s``
    (:func:`collect_reports`). Every process is ended and the queues closed whatever
    happens; SIGTERM interrupts meanwhile as Ctrl-C does. ChildFailure (with ``pids``) on a
    failure or the deadline, for the caller to word."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    ports = [ctx.Queue() for _ in range(port_count)]
    procs: list[Any] = []
    previous = sigterm_interrupts()
    try:
        for rank, name in enumerate(names):
            p = ctx.Process(target=target, args=(rank, dict(spec), ports, results), daemon=True, name=name)
            p.start()
            procs.append(p)
        try:
            return collect_reports(procs, results, timeout_s)
        except ChildFailure as f:
            f.pids = [p.pid for p in procs if p.pid is not None]
            raise
    finally:
        stop_processes(procs)
        for q in (results, *ports):
            q.close()
            q.cancel_join_thread()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
