"""The local executor: up to ``workers`` jobs at once, each a child process pinned to its
own CPUs (a slot of ``threads`` CPUs taken from this process's affinity set, shared
round robin when there are fewer CPUs than workers x threads)."""

from __future__ import annotations

import os
import queue
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

from splitopt.sweep.jobs import Job
from splitopt.sweep.process import GRACE_S, kill_all, run_job


def cpu_slots(workers: int, threads: int) -> list[tuple[int, ...]]:
    """``workers`` slots of ``threads`` CPUs each from the CPUs this process may use."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    return [tuple(cpus[(w * threads + t) % len(cpus)] for t in range(threads)) for w in range(workers)]


def run_local(jobs: Sequence[Job], workers: int, on_record: Callable[[dict[str, Any]], None],
              grace_s: float = GRACE_S) -> None:
    """Run ``jobs`` (in order of submission) on ``workers`` processes at a time, calling
    ``on_record`` in this thread as each ends; Ctrl-C kills every running child and
    re-raises (the records already passed on are kept)."""
    slots: "queue.Queue[tuple[int, ...]]" = queue.Queue()
    for slot in cpu_slots(workers, max((j.threads for j in jobs), default=1)):
        slots.put(slot)

    def run(job: Job) -> dict[str, Any]:
        slot = slots.get()
        try:
            return run_job(job, slot[: job.threads], grace_s)
        finally:
            slots.put(slot)

    pool = ThreadPoolExecutor(max_workers=workers)
    pending: set[Future] = set()
    try:
        pending = {pool.submit(run, job) for job in jobs}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                on_record(f.result())
    except BaseException:
        for f in pending:
            f.cancel()
        kill_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
