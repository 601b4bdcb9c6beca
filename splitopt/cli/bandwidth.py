"""``splitopt bandwidth INSTANCE``: how the optimal split moves with one link's
bandwidth (AUTO-SPLIT Table 8): re-solves over log-spaced bandwidths, or with
``--exact`` the exact breakpoints, each interval's plan proven optimal
(``splitopt.analysis.breakpoints``). Options and output paths are checked before the
instance is read; errors are one line, exit 2 (``splitopt.cli.common``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional

import typer
from rich.markup import escape as esc

from splitopt.cli.common import set_option
from splitopt.cli.progress import quiet_option, showing_progress

#: default number of sweep points
DEFAULT_POINTS = 12


def bandwidth_command(
    instance: Path = typer.Argument(..., help="Instance JSON file (edge/cloud split or split_bits, chain, ...)."),
    link: Optional[str] = typer.Option(None, "--link", help="The link to vary, SOURCE->TARGET (quote it in a shell). Default: the uplink of an edge/cloud instance, or the only link."),
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
                                     check_positive_count, check_seed, check_solve_options, errors,
                                     parse_set_options)
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


# ----- text helpers ------------------------------------------------------------------------

def split_text(inst: Any, plan: Any, limit: int = 60) -> str:
    """Which layers run where, in one short line. Edge/cloud: the edge layers' count and
    last layer (``cloud-only`` for none) and, for a split_bits plan, the first edge
    layers' bit-widths (weight/activation); other per-layer plans: the layer count per
    device, in instance order."""
    device = getattr(plan, "device", None)
    if not isinstance(device, Mapping):
        text = str(plan)
        return text[:limit] + ("..." if len(text) > limit else "")
    runs: dict[str, list[str]] = {}
    for layer in inst.layers:
        runs.setdefault(device[layer.name], []).append(layer.name)
    if inst.problem in ("split", "split_bits"):
        edge = runs.get(inst.settings.edge, [])
        if not edge:
            return f"cloud-only ({inst.settings.cloud})"
        text = f"{len(edge)} on {inst.settings.edge} (to {edge[-1]})"
        if inst.problem == "split_bits":
            bits = " ".join(f"{plan.weight_bits[n]}/{plan.activation_bits[n]}" for n in edge[:3])
            text += f", w/a {bits}{' ...' if len(edge) > 3 else ''}"
        return text
    return " | ".join(f"{d.name} {len(runs[d.name])}" for d in inst.devices if runs.get(d.name))


def _mbps(bandwidth: float) -> str:
    return f"{bandwidth / 1e6:.6g}"


# ----- the sweep -------------------------------------------------------------------------------

def _sweep(inst: Any, link: Optional[str], low: float, high: float, points: int, solver: Optional[str],
           time_limit: Optional[float], threads: int, seed: int, as_json: bool, output: Optional[Path],
           plot: Optional[Path], quiet: bool = False) -> bool:
    from rich.table import Table

    from splitopt.analysis.breakpoints import (EXACT_OBJECTIVES, SWEEP_FORMAT, bandwidth_sweep, plan_line,
                                               resolve_link)
    from splitopt.cli.common import console, print_json, write_output, writing
    from splitopt.families.registry import family_of

    fam = family_of(inst)
    the_link = resolve_link(inst, link)
    with showing_progress(quiet, total=points):
        sweep = bandwidth_sweep(inst, the_link, low, high, points=points, solver=solver, time_limit=time_limit,
                                threads=threads, seed=seed)
    affine = inst.objective in EXACT_OBJECTIVES.get(fam.name, ())
    rows = []
    for p in sweep:
        res = p.result
        sent = None
        if affine and res.plan is not None:
            sent = plan_line(inst, the_link, res.plan, low, high).b / 8000.0
        rows.append({"bandwidth": p.bandwidth, "status": res.status.value, "objective": res.objective,
                     "bound": res.bound, "gap": res.gap, "moved": p.moved, "bytes_sent": sent,
                     "split": split_text(inst, res.plan) if res.plan is not None else None,
                     "plan": fam.plan_to_dict(inst, res.plan) if res.plan is not None else None})
    data = {"format": SWEEP_FORMAT, "instance": inst.name, "problem": inst.problem,
            "link": {"source": the_link.source, "target": the_link.target}, "bandwidth_unit": "bits/s",
            "objective_unit": fam.objective_unit(inst), "solver": solver or "auto", "points": rows}
    if output is not None:
        write_output(output, "--output", json.dumps(data, indent=1) + "\n")
    if plot is not None:
        with writing(plot, "--plot"):
            plot_sweep(inst, data, str(plot))
    if as_json:
        print_json(data)
    else:
        table = Table(title=esc(f"{inst.name}: {the_link.source}->{the_link.target} bandwidth sweep "
                                f"({solver or 'auto'})"))
        for col in ("Mbit/s", f"objective {fam.objective_unit(inst)}", "split", "bytes sent", "status", "moved"):
            table.add_column(col, justify="left" if col == "split" else "right")
        for r in rows:
            table.add_row(_mbps(r["bandwidth"]), "-" if r["objective"] is None else f"{r['objective']:.4f}",
                          esc(r["split"] or "-"), "-" if r["bytes_sent"] is None else f"{r['bytes_sent']:,.0f}",
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
    from rich.table import Table

    from splitopt.analysis.breakpoints import bandwidth_breakpoints
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
        with writing(plot, "--plot"):
            plot_breakpoints(inst, table, str(plot))
    if as_json:
        print_json(data)
        return bool(table.intervals)
    if not table.intervals:
        error_line(f"no plan: {table.message}")
        return False
    unit = fam.objective_unit(inst)
    out = Table(title=esc(f"{inst.name}: {table.link[0]}->{table.link[1]} exact bandwidth breakpoints "
                          f"({table.solver}, tolerance {table.rtol:g})"))
    for col in ("from Mbit/s", "to Mbit/s", f"objective {unit} (from .. to)", "split", "bytes sent", "gap ms",
                "proven"):
        out.add_column(col, justify="left" if col == "split" else "right")
    for iv in table.intervals:
        at_from, at_to = iv.objective_at_ends
        gap = f"{iv.gap_ms:.3g}" if math.isfinite(iv.gap_ms) else "-"
        out.add_row(_mbps(iv.bandwidth_from), _mbps(iv.bandwidth_to), f"{at_from:.4f} .. {at_to:.4f}",
                    esc(split_text(inst, iv.plan)), f"{iv.line.b / 8000.0:,.0f}", gap, "yes" if iv.proven else "NO")
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


# ----- plots --------------------------------------------------------------------------------------

def plot_breakpoints(inst: Any, table: Any, path: str | None = None):
    """Objective against bandwidth: each interval's line (latency = a + b / B), the
    breakpoints dashed, the solves marked; log axes where values span decades. Returns
    the Figure (written to ``path`` if given)."""
    from splitopt.analysis.plots import finish_plot, new_figure, scale_axis

    fig, axes = new_figure((7, 4))
    ax = axes[0, 0]
    colors = [f"C{i}" for i in range(10)]
    ys: list[float] = []
    for i, iv in enumerate(table.intervals):
        n = 40
        ratio = iv.bandwidth_to / iv.bandwidth_from
        xs = [iv.bandwidth_from * ratio ** (k / (n - 1)) for k in range(n)]
        label = split_text(inst, iv.plan, limit=40)
        ys += [iv.line.at_bandwidth(x) for x in xs]
        ax.plot([x / 1e6 for x in xs], [iv.line.at_bandwidth(x) for x in xs], color=colors[i % len(colors)],
                label=(label[:50] + ("..." if len(label) > 50 else "")) + ("" if iv.proven else " (unproven)"))
    for b in table.breakpoints:
        ax.axvline(b / 1e6, color="gray", linestyle="--", linewidth=0.8)
    probes = [p for p in table.probes if p.result.objective is not None]
    ax.scatter([p.bandwidth / 1e6 for p in probes], [p.result.objective for p in probes], s=12, color="black",
               zorder=3, label=f"solves ({len(table.probes)})")
    scale_axis(ax, "x", [b / 1e6 for iv in table.intervals for b in (iv.bandwidth_from, iv.bandwidth_to)])
    scale_axis(ax, "y", ys + [p.result.objective for p in probes])
    return finish_plot(fig, ax, f"{table.link[0]}->{table.link[1]} bandwidth (Mbit/s)",
                       f"objective ({family_unit(inst)})", f"{inst.name}: optimal plan vs bandwidth", path)


def plot_sweep(inst: Any, data: Mapping[str, Any], path: str | None = None):
    """Objective against bandwidth at the sweep's points, points where the plan moved
    marked; log axes where values span decades. Returns the Figure (written to ``path``
    if given)."""
    from splitopt.analysis.plots import finish_plot, new_figure, scale_axis

    pts = [r for r in data["points"] if r["objective"] is not None]
    fig, axes = new_figure((7, 4))
    ax = axes[0, 0]
    ax.plot([r["bandwidth"] / 1e6 for r in pts], [r["objective"] for r in pts], marker="o", markersize=4,
            color="tab:blue", label="optimum at each point")
    moved = [r for r in pts if r["moved"]]
    if moved:
        ax.scatter([r["bandwidth"] / 1e6 for r in moved], [r["objective"] for r in moved], s=60, facecolors="none",
                   edgecolors="tab:red", zorder=3, label="plan changed")
    scale_axis(ax, "x", [r["bandwidth"] / 1e6 for r in pts])
    scale_axis(ax, "y", [r["objective"] for r in pts])
    link = data["link"]
    return finish_plot(fig, ax, f"{link['source']}->{link['target']} bandwidth (Mbit/s)",
                       f"objective ({family_unit(inst)})", f"{inst.name}: bandwidth sweep", path)


def family_unit(inst: Any) -> str:
    from splitopt.families.registry import family_of

    return family_of(inst).objective_unit(inst)
