"""Child processes that never outlive their parent: what the multi-process runners
(``splitopt.netrun``: one process per device over TCP; ``splitopt.torch.separable_run``:
one gloo worker per device) share to start, watch and stop their children.

* in a child, :func:`exit_with_parent` ends the process as soon as its parent is gone,
  even when the parent was killed by SIGKILL (no orphan);
* in the parent, :func:`sigterm_interrupts` makes SIGTERM raise KeyboardInterrupt (as
  Ctrl-C does), so that one cleanup path stops the children on either, and
  :func:`stop_processes` terminates, then kills, every child still alive and joins them.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Sequence

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
