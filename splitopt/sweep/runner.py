"""A sweep from jobs to records: skip the jobs already in the store (resume), run the rest
on the chosen executor, store each record as it ends, return every job's record in job
order (so that the outcome does not depend on the executor or the worker count)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from splitopt.core.errors import InvalidOption
from splitopt.sweep.jobs import Job
from splitopt.sweep.process import GRACE_S
from splitopt.sweep.store import Store

EXECUTORS = ("local", "ray")


def run_sweep(jobs: Sequence[Job], store_path: Path, executor: str = "local", workers: int = 1,
              ray_address: str | None = None, grace_s: float = GRACE_S,
              progress: Callable[[dict[str, Any], int, int], None] | None = None) -> list[dict[str, Any]]:
    """Run the jobs not yet in ``store_path`` and return the records of all ``jobs``, in
    order. ``progress(record, done, total)`` is called as each new record is stored."""
    if executor not in EXECUTORS:
        raise InvalidOption(f"--executor: {executor!r} is not one of {', '.join(EXECUTORS)}")
    if workers < 1:
        raise InvalidOption(f"--workers: must be at least 1, got {workers}")
    store = Store(store_path)
    keys = [job.key for job in jobs]
    todo = [job for job, key in zip(jobs, keys) if key not in store.done]
    total, done = len(jobs), len(jobs) - len(todo)

    def keep(record: dict[str, Any]) -> None:
        nonlocal done
        store.add(record)
        done += 1
        if progress is not None:
            progress(record, done, total)

    if todo:
        if executor == "local":
            from splitopt.sweep.local import run_local

            run_local(todo, workers, keep, grace_s)
        else:
            from splitopt.sweep.ray_executor import run_ray

            run_ray(todo, keep, ray_address, workers, grace_s)
    latest = {r["key"]: r for r in store}
    return [latest[k] for k in keys if k in latest]
