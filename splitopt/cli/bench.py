"""``splitopt bench SUITE``: a named benchmark suite (``splitopt.sweep.suites``: the shipped
instances, the peer files, generated instances of growing size) run on the sweep runner:
every instance x solver x seed one job in its own process, killed at ``limit x 1.1 +
10 s``, on a local process pool (default) or Ray (``--executor ray``); records go to a JSONL
store (``--out``) as they end, so the same command resumes where it stopped, and come back
in job order (the same records for any worker count or executor). Prints the table per
instance and solver (family, problem, size, statuses, medians of objective, gap, build,
solve, wall and CPU seconds), writes it as Markdown and CSV, and draws time vs size and,
where a record carries an anytime curve, objective vs time (``splitopt.sweep.plots``)."""

import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.common import (PLOT_SUFFIXES, check_distinct_outputs, check_output_path, console, errors,
                                 write_output, writing)
from splitopt.cli.sweep import default_workers, progress_printer


def objective_plot_path(plot: Path) -> Path:
    """Where the objective-vs-time plot goes: beside ``--plot``, ``<stem>_objective_vs_time``."""
    return plot.with_name(f"{plot.stem}_objective_vs_time{plot.suffix}")


def _list_suites() -> None:
    from splitopt.sweep.suites import SUITES, default_solvers

    for s in SUITES.values():
        options = f" [{', '.join(s.options)}]" if s.options else ""
        console.print(f"{s.name}{options}: {s.description}", highlight=False, markup=False)
    console.print("default solvers (-s replaces them):", highlight=False)
    for what, names in default_solvers().items():
        console.print(f"  {what}: {', '.join(names)}", highlight=False, markup=False)


def bench_command(
    suite: Optional[str] = typer.Argument(None, metavar="SUITE", help="The suite: shipped, peer or scale (--list describes them)."),
    solver: Optional[list[str]] = typer.Option(None, "--solver", "-s", help="Backend (repeatable), instead of the suite's defaults; each runs on the instances of the families it applies to."),
    time_limit: float = typer.Option(60.0, "--time-limit", "-t", help="Wall-clock seconds per job, from reading the instance to the answer; the job's process is killed at limit x 1.1 + 10 s."),
    seeds: int = typer.Option(1, "--seeds", help="Solver seeds 0 .. N-1 per instance and solver."),
    threads: int = typer.Option(1, "--threads", help="Solver threads per job (and the CPUs it is pinned to)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Jobs at once (local) or CPUs of a local Ray instance. Default: this machine's CPUs / --threads."),
    executor: str = typer.Option("local", "--executor", help="local (a process pool on this machine) or ray (Ray tasks; the 'ray' extra)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: a running cluster's address; default: a local Ray instance."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="JSONL store of the records; an existing one is resumed. Default: bench_SUITE.jsonl. The scale suite writes its generated instances beside it, in OUT-STEM-instances/."),
    table: Optional[Path] = typer.Option(None, "--table", help="Also write the table as Markdown to this file."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write the table as CSV to this file."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Draw time vs size (log-log, median over seeds, build and solve apart) to this image (.png/.svg/.pdf); objective vs time goes beside it (STEM_objective_vs_time) where a record carries an anytime curve."),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="scale: comma-separated layer counts (default 100,300,1000,3000,10000)."),
    instances_dir: Optional[Path] = typer.Option(None, "--instances-dir", help="shipped: the folder of the instance files (default ./instances: the repository's, not installed with the package)."),
    peer_dir: Optional[Path] = typer.Option(None, "--peer-dir", help="peer: the peer dnn-partitioning folder (default ../shared/peer-instances/dnn-partitioning)."),
    list_suites: bool = typer.Option(False, "--list", help="List the suites and their default solvers, and exit."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No line per finished job (the table is printed as usual)."),
) -> None:
    """Run a named benchmark suite on the sweep runner (see the module docstring)."""
    from splitopt.core.errors import InvalidOption
    from splitopt.core.options import check_int, check_time_limit
    from splitopt.sweep.jobs import Job, expand
    from splitopt.sweep.report import BENCH_COLUMNS, bench_rows, to_csv, to_markdown
    from splitopt.sweep.runner import EXECUTORS, run_sweep
    from splitopt.sweep.suites import SUITES, SuiteOptions, parse_sizes, solvers_for
    from splitopt.sweep.suites import suite as find_suite

    with errors():
        if list_suites:
            _list_suites()
            return
        if suite is None:
            raise InvalidOption(f"SUITE: missing (suites: {', '.join(SUITES)}; --list describes them)")
        chosen = find_suite(suite)
        given = {"--sizes": sizes, "--instances-dir": instances_dir, "--peer-dir": peer_dir}
        for option, value in given.items():
            if value is not None and option not in chosen.options:
                raise InvalidOption(f"{option} {value}: applies to suite "
                                    f"{next(s.name for s in SUITES.values() if option in s.options)}, not {suite!r}")
        check_time_limit(time_limit, "--time-limit")
        check_int(seeds, "--seeds", 1, 1_000_000)
        check_int(threads, "--threads", 1, 1024)
        if workers is not None:
            check_int(workers, "--workers", 1, 4096)
        if executor not in EXECUTORS:
            raise InvalidOption(f"--executor: {executor!r} is not one of {', '.join(EXECUTORS)}")
        out = out if out is not None else Path(f"bench_{suite}.jsonl")
        for path, option in ((out, "--out"), (table, "--table"), (csv_path, "--csv")):
            check_output_path(path, option)
        check_output_path(plot, "--plot", PLOT_SUFFIXES)
        second_plot = None if plot is None else objective_plot_path(plot)
        check_output_path(second_plot, "--plot (objective vs time beside it)", PLOT_SUFFIXES)
        check_distinct_outputs((("--out", out), ("--table", table), ("--csv", csv_path), ("--plot", plot),
                                ("--plot (objective vs time beside it)", second_plot)))
        options = SuiteOptions(cache_dir=out.parent / f"{out.stem}-instances")
        if sizes is not None:
            options = replace(options, sizes=parse_sizes(sizes))
        if instances_dir is not None:
            options = replace(options, instances_dir=instances_dir)
        if peer_dir is not None:
            options = replace(options, peer_dir=peer_dir)
        if solver:
            from splitopt.backends.registry import check_backend

            for name in solver:
                check_backend(name, {})
        sources = solvers_for(chosen.sources(options), solver)
        jobs: list[Job] = []
        for source, names in sources:
            jobs += expand([source.path], names, range(seeds), time_limit, threads)
        n = workers or default_workers(threads)
        progress = None if quiet else progress_printer(console)

        t0 = time.perf_counter()
        records = run_sweep(jobs, out, executor, n, ray_address, progress=progress)
        rows = bench_rows(records)
        console.print(to_markdown(rows, BENCH_COLUMNS), highlight=False, markup=False)
        console.print(f"{len(records)} records in {out} ({time.perf_counter() - t0:.1f} s)", highlight=False,
                      markup=False)
        if table is not None:
            write_output(table, "--table", to_markdown(rows, BENCH_COLUMNS))
        if csv_path is not None:
            write_output(csv_path, "--csv", to_csv(rows, BENCH_COLUMNS))
        if plot is not None:
            from splitopt.sweep.plots import plot_objective_vs_time, plot_time_vs_size

            with writing(plot, "--plot"):
                plot_time_vs_size(records, plot, title=f"splitopt bench {suite}: time vs size")
            console.print(f"plot written to {plot}", highlight=False, markup=False)
            second = objective_plot_path(plot)
            with writing(second, "--plot"):
                drawn = plot_objective_vs_time(records, second, title=f"splitopt bench {suite}: objective vs time")
            console.print(f"plot written to {second}" if drawn is not None else
                          "objective vs time: no record carries an anytime curve (only the searches record one); "
                          "not drawn", highlight=False, markup=False)
