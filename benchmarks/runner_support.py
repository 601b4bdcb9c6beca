"""The run loop of the solver-comparison benchmarks (``run.py``, ``chain.py``, ``mesh.py``,
``multiview.py``, ``maxload.py``): their solves go through the sweep runner
(``splitopt.sweep.runner.run_sweep``), one process per solve, pinned to its CPUs and killed
at ``limit x 1.1 + 10 s``, on the local process pool (default) or Ray (``--executor ray``),
with a JSONL store (``--store``, default ``benchmarks/results/cache/<script>.jsonl``) that a
re-run resumes: the same command again re-renders the tables from the stored records and
runs only the jobs missing (``--fresh`` starts a new store).

A script's repeats are seeds: run ``r`` of a (instance, solver, limit, threads) job is the
job with seed ``r``. :func:`run_repeated` runs seed 0 of every job first, then the further
seeds of the jobs that the script's rule says to repeat (e.g. not an exact solve that
reached its limit), so a script keeps its own repeat rule.

Generated instances (a variant of a shipped file) are written to
``benchmarks/results/cache/instances/`` (:func:`cached_instance`): a job is a file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from splitopt.sweep.jobs import Job
from splitopt.sweep.runner import EXECUTORS, run_sweep

ROOT = Path(__file__).resolve().parents[1]
#: the stores and generated instances of the benchmark scripts
CACHE = ROOT / "benchmarks" / "results" / "cache"

Record = dict[str, Any]
#: the statuses of a run that did not answer
FAILED = ("ERROR", "KILLED")


def add_runner_options(parser: argparse.ArgumentParser, name: str) -> None:
    """``--executor``, ``-j/--workers``, ``--ray-address``, ``--store`` (default
    ``CACHE/<name>.jsonl``) and ``--fresh``."""
    group = parser.add_argument_group("sweep runner")
    group.add_argument("--executor", choices=EXECUTORS, default="local",
                       help="local: a process pool on this machine (default); ray: Ray tasks (the 'ray' extra)")
    group.add_argument("-j", "--workers", type=int, default=1,
                       help="solves at once (default 1: timings without other solves beside them)")
    group.add_argument("--ray-address", default=None, help="with --executor ray: a running cluster's address")
    group.add_argument("--store", type=Path, default=CACHE / f"{name}.jsonl",
                       help="JSONL store of the records; a re-run resumes from it (default %(default)s)")
    group.add_argument("--fresh", action="store_true", help="delete the store first: run every job again")


def cached_instance(data: Any, stem: str) -> Path:
    """Write an instance's JSON data to ``CACHE/instances/<stem>.json`` (unless it holds
    it already; atomically) and return the path."""
    folder = CACHE / "instances"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.json"
    text = json.dumps(data, sort_keys=True) + "\n"
    if not (path.is_file() and path.read_text() == text):
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def print_progress(record: Record, done: int, total: int) -> None:
    """One line per finished solve."""
    objective = record.get("objective")
    shown = "-" if objective is None else f"{objective:.6g}"
    print(f"[{done}/{total}] {Path(record['instance']).stem:40s} {record['solver']:22s} seed {record['seed']} "
          f"{record.get('status', '?'):18s} {shown:>12s}  {fmt(total_s(record), '.3f')} s", flush=True)


def run_repeated(jobs: Sequence[Job], args: argparse.Namespace,
                 repeats: int | Callable[[Job, Record], int] = 1) -> list[list[Record]]:
    """The records of each job (given with seed 0) and its repeats, in job order.
    ``repeats``: the runs per job, or a function of the job and its first record (e.g. 1
    for an exact solve that reached its limit). ``args``: the options of
    :func:`add_runner_options`. A job whose first run did not answer (:data:`FAILED`: an
    error, e.g. not applicable, or killed at its limit) is not repeated."""
    if args.workers < 1:
        raise SystemExit(f"-j/--workers: must be at least 1, got {args.workers}")
    args.store.parent.mkdir(parents=True, exist_ok=True)
    if args.fresh and args.store.exists():
        args.store.unlink()
        args.fresh = False  # one store per invocation: the second pass resumes it
    jobs = [replace(job, seed=0) for job in jobs]

    def sweep(todo: list[Job]) -> list[Record]:
        return run_sweep(todo, args.store, args.executor, args.workers, args.ray_address, progress=print_progress)

    first = sweep(jobs)
    more = [replace(job, seed=seed) for job, record in zip(jobs, first) if record.get("status") not in FAILED
            for seed in range(1, repeats if isinstance(repeats, int) else repeats(job, record))]
    later: dict[Job, list[Record]] = {}
    for job, record in zip(more, sweep(more) if more else []):
        later.setdefault(replace(job, seed=0), []).append(record)
    return [[record, *later.get(job, [])] for job, record in zip(jobs, first)]


def not_applicable(record: Record) -> bool:
    """The solver does not apply to the instance (``NotApplicable``): no row."""
    return record.get("status") == "ERROR" and str(record.get("message", "")).startswith("NotApplicable")


def total_s(record: Record) -> float | None:
    """Build + solve seconds of a record (``SolveResult.total_s``); None where the solve
    did not answer (killed, an error)."""
    if record.get("build_s") is None or record.get("solve_s") is None:
        return None
    return record["build_s"] + record["solve_s"]


def median(values: Iterable[Any]) -> float | None:
    """The median of the values that are not None (None if there are none)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def fmt(value: Any, spec: str) -> str:
    """``format(value, spec)``, "-" for None."""
    return "-" if value is None else format(value, spec)


def runner_line(args: argparse.Namespace) -> str:
    """How the solves ran, for a report's header."""
    ray = f" at {args.ray_address}" if args.executor == "ray" and args.ray_address else ""
    return (f"each solve its own process (the sweep runner, executor {args.executor}{ray}, {args.workers} at a "
            "time; repeats are seeds 0, 1, ...), so a solver library's first import in that process (OR-Tools: "
            "about 1 s) falls in its build or solve time")


def repeat_unless_at_limit(repeats: int, exact: Iterable[str]) -> Callable[[Job, Record], int]:
    """The repeat rule of ``mesh.py`` and ``chain.py``: ``repeats`` runs, but one for an
    ``exact`` solver whose first run reached 90 % of its limit (or did not answer)."""
    exact = set(exact)

    def rule(job: Job, record: Record) -> int:
        if job.solver in exact and job.time_limit_s is not None:
            t = total_s(record)
            if t is None or t >= 0.9 * job.time_limit_s:
                return 1
        return repeats

    return rule


def instance_name(path: str | Path) -> str:
    """The ``name`` of a splitopt instance file (its stem where it has none)."""
    data = json.loads(Path(path).read_text())
    return data.get("name", Path(path).stem) if isinstance(data, dict) else Path(path).stem
