"""``splitopt sweep INSTANCE... [-s SOLVER ...]``: every instance x solver x seed as one job,
each in its own process pinned to its CPUs and killed at ``limit x 1.1 + grace``, on a
local process pool (default) or Ray (``--executor ray``); records go to a JSONL store
(``--out``) as they end, so running the same command again resumes where it stopped; the
table per instance and solver (medians) is printed, and written as Markdown and CSV."""

import os
from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.common import check_distinct_outputs, check_output_path, console, errors, write_output


def default_workers(threads: int) -> int:
    """Jobs at once by default: the CPUs this process may use, divided by each job's threads."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // threads)


def progress_printer(console):
    """A runner callback printing one line per finished job."""
    def progress(record, done, total):
        objective = record.get("objective")
        shown = "-" if objective is None else f"{objective:.6g}"
        console.print(f"[{done}/{total}] {Path(record['instance']).name} {record['solver']} seed {record['seed']}: "
                      f"{record.get('status')} {shown} ({record.get('wall_s', 0):.1f} s)", highlight=False,
                      markup=False)
    return progress

def sweep_command(
    instances: list[Path] = typer.Argument(..., help="Instance files (splitopt's format or peer dnn-partitioning files)."),
    solver: Optional[list[str]] = typer.Option(None, "--solver", "-s", help="Backend (repeatable; `splitopt solvers` lists them). Default: auto."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds 0 .. N-1 per instance and solver."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Wall-clock seconds per job, from reading the instance to the answer; the job's process is killed at limit x 1.1 + --grace."),
    threads: int = typer.Option(1, "--threads", help="Solver threads per job (and the CPUs it is pinned to)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Jobs at once (local) or CPUs of a local Ray instance. Default: this machine's CPUs / --threads."),
    executor: str = typer.Option("local", "--executor", help="local (a process pool on this machine) or ray (Ray tasks; the 'ray' extra)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: a running cluster's address (e.g. ray://HOST:10001, or auto on a cluster node); default: a local Ray instance."),
    out: Path = typer.Option(Path("sweep.jsonl"), "--out", "-o", help="JSONL store of the records; an existing one is resumed (its jobs are not run again)."),
    table: Optional[Path] = typer.Option(None, "--table", help="Also write the summary as Markdown to this file."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write the summary as CSV to this file."),
    grace: float = typer.Option(10.0, "--grace", help="Seconds past limit x 1.1 before a job is killed (start-up, reading)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No line per finished job (the table is printed as usual)."),
) -> None:
    """Run a sweep of solves and print its table (see the module docstring)."""
    from splitopt.core.errors import InvalidOption
    from splitopt.core.options import check_int, check_time_limit
    from splitopt.sweep.jobs import expand
    from splitopt.sweep.report import summary_rows, to_csv, to_markdown
    from splitopt.sweep.runner import run_sweep

    with errors():
        check_time_limit(time_limit, "--time-limit")
        check_int(seeds, "--seeds", 1, 1_000_000)
        check_int(threads, "--threads", 1, 1024)
        if workers is not None:
            check_int(workers, "--workers", 1, 4096)
        if not (0 <= grace <= 3600):
            raise InvalidOption(f"--grace: must be in [0, 3600] seconds, got {grace!r}")
        if ray_address is not None and executor != "ray":
            raise InvalidOption(f"--ray-address {ray_address}: applies to --executor ray only (the executor is "
                                f"{executor!r})")
        for path, option in ((out, "--out"), (table, "--table"), (csv_path, "--csv")):
            check_output_path(path, option, inputs=[Path(i) for i in instances])
        check_distinct_outputs((("--out", out), ("--table", table), ("--csv", csv_path)))
        jobs = expand(instances, solver or ["auto"], range(seeds), time_limit, threads)
        records = run_sweep(jobs, out, executor, workers or default_workers(threads), ray_address, grace,
                            None if quiet else progress_printer(console))
        rows = summary_rows(records)
        console.print(to_markdown(rows), highlight=False, markup=False)
        if table is not None:
            write_output(table, "--table", to_markdown(rows))
        if csv_path is not None:
            write_output(csv_path, "--csv", to_csv(rows))
