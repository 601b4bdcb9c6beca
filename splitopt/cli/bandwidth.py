"""``splitopt bandwidth INSTANCE``: how the optimal split moves with one link's
bandwidth (AUTO-SPLIT Table 8): re-solves over log-spaced bandwidths, or with
``--exact`` the exact breakpoints, each interval's plan proven optimal
(``splitopt.analysis.breakpoints``). Options and output paths are checked before the
instance is read; errors are one line, exit 2 (``splitopt.cli.common``)."""

import json
import math
from pathlib import Path
from typing import Any, Literal, Optional

import typer
from rich.markup import escape as esc

from splitopt.cli.common import set_option
from splitopt.cli.progress import quiet_option, showing_progress

#: default number of sweep points
DEFAULT_POINTS = 12


def bandwidth_command(
    instance: Path = typer.Argument(..., help="Instance JSON file (edge/cloud split or split_bits, chain, ...)."),
    link: Optional[str] = typer.Option(None, "--link", help="The link to vary, SOURCE->TARGET (quote it in a shell). Default: the one link the objective depends on, where there is one (the uplink of an edge/cloud instance, the link of a two-device chain)."),
    low: float = typer.Option(..., "--from", help="Lowest bandwidth, bits/s (e.g. 1e6)."),
    high: float = typer.Option(..., "--to", help="Highest bandwidth, bits/s (e.g. 2e7)."),
    points: Optional[int] = typer.Option(None, "--points", help=f"Sweep: number of log-spaced bandwidths, both ends included (default {DEFAULT_POINTS}); not with --exact."),
    exact: bool = typer.Option(False, "--exact", help="The exact breakpoints: the bandwidths where the optimal plan changes, each interval's plan proven optimal (parametric re-solving on the lines latency = a + b / bandwidth; edge/cloud and chain latency)."),
    solver: Optional[str] = typer.Option(None, "--solver", "-s", help="Backend of every solve (default: auto, as `solve`)."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Seconds per solve; a solve stopped by it is not proven, and with --exact its intervals are reported unproven."),
    tolerance: float = typer.Option(1e-6, "--tolerance", help="--exact: relative tolerance of equal objectives (certifying a breakpoint; an interval is proven when its plan is within it of the solves' bounds)."),
    threads: int = typer.Option(2, "--threads", help="Solver threads."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the solvers."),
    overrides: Optional[list[str]] = set_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON (what -o writes)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the table as JSON: with --exact the breakpoint table (per interval its bandwidths, plan, objective at both ends, line), else the sweep."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Draw objective against bandwidth (log scale), the breakpoints or plan changes marked (.png/.svg/.pdf)."),
    quiet: bool = quiet_option(),
) -> None:
    """Re-solve INSTANCE over a range of one link's bandwidth and show where the split
    moves: per bandwidth the plan (which layers run where) and its objective, the
    AUTO-SPLIT Table 8 ablation. With --exact: the bandwidths at which the optimal plan
    changes, found by parametric re-solving (a plan's latency is a + b / bandwidth; the
    optimum is the lower envelope of these lines, concave in 1/bandwidth), each interval's
    plan proven optimal, as a JSON table an edge runtime can look up (-o)."""
    from splitopt.cli.common import (EXIT_NO_PLAN, PLOT_SUFFIXES, check_distinct_outputs, check_output_path,
                                     check_positive_count, check_solve_options, errors, parse_set_options)
    from splitopt.core.options import check_seed
    from splitopt.core.errors import InvalidOption

    with errors():
        # every option and path before the instance is read
        from splitopt.analysis.breakpoints import check_range, parse_link

        check_range(low, high)
        if link is not None:
            parse_link(link)
        if exact and points is not None:
            raise InvalidOption(f"--points {points}: not used with --exact (it solves where the lines cross)")
        count = DEFAULT_POINTS if points is None else points
        check_positive_count(count, "--points", low=2, high=10_000)
        if not (math.isfinite(tolerance) and 0 <= tolerance < 1):
            raise InvalidOption(f"--tolerance: must be a number in [0, 1), got {tolerance}")
        check_solve_options(time_limit, threads, seed)
        check_seed(seed)
        check_output_path(output, "--output", inputs=[instance])
        check_output_path(plot, "--plot", PLOT_SUFFIXES)
        check_distinct_outputs((("--output", output), ("--plot", plot)))
        if solver is not None:
            from splitopt.backends.registry import check_backend

            check_backend(solver, {})
        sets = parse_set_options(overrides)
        from splitopt.api import load_instance

        inst = load_instance(instance, sets)
        if exact:
            found = _exact(inst, link, low, high, solver, time_limit, threads, seed, tolerance, as_json, output, plot,
                           quiet)
        else:
            found = _sweep(inst, link, low, high, count, solver, time_limit, threads, seed, as_json, output, plot,
                           quiet)
    if not found:
        raise typer.Exit(EXIT_NO_PLAN)


def _mbps(bandwidth: float) -> str:
    return f"{bandwidth / 1e6:.6g}"


def _table(title: str, columns: list[tuple[str, Literal["left", "right"]]]) -> Any:
    """A rich table with ``columns`` (name, justify)."""
    from rich.table import Table

    table = Table(title=esc(title))
    for name, justify in columns:
        table.add_column(name, justify=justify)
    return table


# ----- the sweep -------------------------------------------------------------------------------

def _sweep(inst: Any, link: Optional[str], low: float, high: float, points: int, solver: Optional[str],
           time_limit: Optional[float], threads: int, seed: int, as_json: bool, output: Optional[Path],
           plot: Optional[Path], quiet: bool = False) -> bool:
    from splitopt.analysis.breakpoints import PLAN_COLUMN, bandwidth_sweep, resolve_link, sweep_table
    from splitopt.cli.common import console, print_json, write_output, writing
    from splitopt.families.registry import family_of

    the_link = resolve_link(inst, link)
    with showing_progress(quiet, total=points):
        sweep = bandwidth_sweep(inst, the_link, low, high, points=points, solver=solver, time_limit=time_limit,
                                threads=threads, seed=seed)
    data = sweep_table(inst, the_link, sweep, low, high, solver)
    rows = data["points"]
    if output is not None:
        write_output(output, "--output", json.dumps(data, indent=1) + "\n")
    if plot is not None:
        from splitopt.analysis.plots import plot_sweep

        with writing(plot, "--plot"):
            plot_sweep(inst, data, str(plot))
    if as_json:
        print_json(data)
    else:
        unit = family_of(inst).objective_unit(inst)
        table = _table(f"{inst.name}: {the_link.source}->{the_link.target} bandwidth sweep ({solver or 'auto'})",
                       [("Mbit/s", "right"), (f"objective {unit}", "right"), (PLAN_COLUMN, "left"),
                        ("bytes sent", "right"), ("status", "right"), ("moved", "right")])
        for r in rows:
            table.add_row(_mbps(r["bandwidth"]), "-" if r["objective"] is None else f"{r['objective']:.4f}",
                          esc(r[PLAN_COLUMN] or "-"), "-" if r["bytes_sent"] is None else f"{r['bytes_sent']:,.0f}",
                          r["status"], "<-" if r["moved"] else "")
        console.print(table)
        moves = [r["bandwidth"] for r in rows if r["moved"]]
        console.print(f"plan changes between sampled points at {', '.join(_mbps(b) for b in moves)} Mbit/s"
                      if moves else "the plan is the same at every sampled point", highlight=False)
        if output is not None:
            console.print(f"table written to {esc(str(output))}", highlight=False)
        if plot is not None:
            console.print(f"plot written to {esc(str(plot))}", highlight=False)
    return any(r["plan"] is not None for r in rows)


# ----- exact breakpoints ------------------------------------------------------------------------

def _exact(inst: Any, link: Optional[str], low: float, high: float, solver: Optional[str],
           time_limit: Optional[float], threads: int, seed: int, tolerance: float, as_json: bool,
           output: Optional[Path], plot: Optional[Path], quiet: bool = False) -> bool:
    from splitopt.analysis.breakpoints import PLAN_COLUMN, bandwidth_breakpoints, plan_text
    from splitopt.cli.common import console, error_line, print_json, write_output, writing
    from splitopt.families.registry import family_of

    fam = family_of(inst)
    with showing_progress(quiet):
        table = bandwidth_breakpoints(inst, link, low, high, solver=solver, time_limit=time_limit, threads=threads,
                                      seed=seed, rtol=tolerance)
    data = table.to_dict(inst)
    if output is not None:
        write_output(output, "--output", json.dumps(data, indent=1) + "\n")
    if plot is not None and table.intervals:
        from splitopt.analysis.plots import plot_breakpoints

        with writing(plot, "--plot"):
            plot_breakpoints(inst, table, str(plot))
    if as_json:
        print_json(data)
        return bool(table.intervals)
    if not table.intervals:
        error_line(f"no plan: {table.message}")
        return False
    unit = fam.objective_unit(inst)
    out = _table(f"{inst.name}: {table.link[0]}->{table.link[1]} exact bandwidth breakpoints ({table.solver}, "
                 f"tolerance {table.rtol:g})",
                 [("from Mbit/s", "right"), ("to Mbit/s", "right"), (f"objective {unit} (from .. to)", "right"),
                  (PLAN_COLUMN, "left"), ("bytes sent", "right"), ("gap ms", "right"), ("proven", "right")])
    for iv in table.intervals:
        at_from, at_to = iv.objective_at_ends
        gap = f"{iv.gap_ms:.3g}" if math.isfinite(iv.gap_ms) else "-"
        out.add_row(_mbps(iv.bandwidth_from), _mbps(iv.bandwidth_to), f"{at_from:.4f} .. {at_to:.4f}",
                    esc(plan_text(inst, iv.plan)), f"{iv.line.b / 8000.0:,.0f}", gap, "yes" if iv.proven else "NO")
    console.print(out)
    marks = ", ".join(_mbps(b) for b in table.breakpoints) or "none"
    console.print(f"Breakpoints {marks} Mbit/s; {len(table.intervals)} interval(s); {table.solves} solves in "
                  f"{table.wall_s:.2f} s; {'every interval proven optimal' if table.proven else 'NOT all proven'}",
                  highlight=False)
    for note in table.notes:
        console.print(f"Note     {esc(note)}", highlight=False)
    if output is not None:
        console.print(f"table written to {esc(str(output))}", highlight=False)
    if plot is not None:
        console.print(f"plot written to {esc(str(plot))}", highlight=False)
    return True
