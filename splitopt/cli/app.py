"""The ``splitopt`` command line. Thin: it parses, checks options and output paths before
any work, calls the library, prints. Nothing in the library imports it. The torch
bridge's commands (profile, run, retrain) import torch only when they run; without the
torch extra they say so in one line (exit 3). Exit codes: ``splitopt.cli.common``.
"""

import json
import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape as esc

from splitopt.cli.common import (
    EXIT_NO_PLAN,
    OneLineErrorsGroup,
    PLOT_SUFFIXES,
    check_distinct_outputs,
    check_output_path,
    check_positive_count,
    check_solve_options,
    console,
    error_line,
    errors,
    parse_set_options,
    parse_solver_options,
    print_json,
    set_option,
    write_output,
    writing,
)
from splitopt.cli.loading import profile_loading_command, run_loading_command
from splitopt.cli.netrun import run_tcp_command
from splitopt.cli.separable import profile_separable_command, run_separable_command
from splitopt.cli.sweep import sweep_command
from splitopt.cli.bench import bench_command
from splitopt.cli.bandwidth import bandwidth_command
from splitopt.cli.profile import devices_command, profile_command
from splitopt.cli.progress import quiet_option, showing_progress
from splitopt.cli.retrain import retrain_command
from splitopt.cli.run import run_command
from splitopt.cli.export import export_command
from splitopt.cli.testbed import testbed_app
from splitopt.cli.agent import agent_command
from splitopt.core.errors import NotApplicable

app = typer.Typer(
    cls=OneLineErrorsGroup,
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Decide how to split a DNN across devices (edge/cloud, chains, meshes, multi-view sensors, the peer "
         "max-load benchmark) by solving mathematical programs.",
)

#: the most points a Pareto front may ask for (each is one solve)
MAX_POINTS = 10_000
#: what --export-model writes, by backend family of formats
EXPORT_SUFFIXES = (".lp", ".mps", ".txt", ".pbtxt", ".pb")


class SweepMode(str, Enum):
    exact = "exact"
    grid = "grid"


def _load(path: Path, problem: Optional[str] = None, objective: Optional[str] = None,
          contiguity: Optional[str] = None, overrides: tuple = ()):
    """Load an instance; ``--problem`` (another problem of its family), ``--objective``
    and the family options (``--contiguity``) override (``splitopt.api.adjust_instance``)."""
    from splitopt.api import adjust_instance, load_instance

    inst = load_instance(path, overrides)  # --set: edits of the file's JSON, checked with it
    options = {} if contiguity is None else {"contiguity": contiguity}
    return adjust_instance(inst, problem, objective, options, prefix="--")


def _check_choices(problem: Optional[str], contiguity: Optional[str]) -> None:
    """Before the instance is read: ``--problem`` is a registered problem and the family
    options (``--contiguity``) take their values."""
    if problem is None and contiguity is None:
        return  # nothing to import (start-up time)
    from splitopt.api import check_option, check_problem

    if problem is not None:
        check_problem(problem, "--problem")
    if contiguity is not None:
        check_option("contiguity", contiguity, "--contiguity")


def _check_plot_options(gantt: Optional[Path], breakdown: Optional[Path]) -> None:
    check_output_path(gantt, "--gantt", PLOT_SUFFIXES)
    check_output_path(breakdown, "--breakdown", PLOT_SUFFIXES)


def _plots(inst, metrics, gantt: Optional[Path], breakdown: Optional[Path]) -> None:
    """Draw the plan (its family's picture: ``--gantt``) and the per-device latency
    breakdown."""
    if gantt is None and breakdown is None:
        return
    from splitopt.analysis import plots
    from splitopt.families.registry import family_of

    family = family_of(inst)
    if gantt is not None:
        if family.plan_drawing(inst, metrics) is None:
            raise NotApplicable(f"--gantt: this plan of problem '{inst.problem}' has no schedule to draw (e.g. an "
                                "undefined latency)")
        with writing(gantt, "--gantt"):
            plots.plot_plan(inst, metrics, gantt)
    if breakdown is not None:
        rows = family.breakdown(inst, metrics)
        if not rows:
            raise NotApplicable(f"--breakdown: this plan of problem '{inst.problem}' has no per-device breakdown")
        with writing(breakdown, "--breakdown"):
            plots.plot_breakdown(rows, breakdown, title=f"{inst.name}: per-device latency")


def _check_plots_apply(inst, gantt: Optional[Path], breakdown: Optional[Path]) -> None:
    """Before solving: the family must draw its plans (``--gantt``) or have schedules
    (``--breakdown``) if a plot is asked for."""
    if gantt is None and breakdown is None:
        return  # nothing to import (start-up time)
    from splitopt.families.registry import family_of

    family = family_of(inst)
    if gantt is not None and not family.draws_plans(inst):
        raise NotApplicable(f"--gantt: problem '{inst.problem}' has no multi-device schedule")
    if breakdown is not None and not family.has_schedule:
        raise NotApplicable(f"--breakdown: problem '{inst.problem}' has no multi-device schedule")


@app.command()
def solve(
    instance: Path = typer.Argument(..., help="Instance JSON file (splitopt's format or a peer dnn-partitioning file)."),
    solver: Optional[str] = typer.Option(None, "--solver", "-s", help="Backend name; `splitopt solvers` lists them. Default: auto (a short exact run, then evolutionary search, then the exact program for the rest of the time limit); with --option or --export-model and no --solver, the family's exact default: milp-cbc for split/split_bits, cpsat otherwise."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Wall-clock seconds from reading the instance to the answer, building the program included; on reaching it the best plan found is returned with status FEASIBLE and its gap."),
    problem: Optional[str] = typer.Option(None, "--problem", help="Override the instance's problem with another of its family's: split (float cut) or split_bits (cut + bit-widths) for an edge/cloud instance."),
    objective: Optional[str] = typer.Option(None, "--objective", help="Override the instance's objective: chain: latency or throughput; maxload: throughput (max-load) or latency; loading: latency (first response) or balance (heaviest child load); separable: latency or bytes (sent over all steps); llm: ttft (time to first token), token_latency (one stream) or throughput (time per token over the streams)."),
    contiguity: Optional[str] = typer.Option(None, "--contiguity", help="maxload: the contiguity rule, splitopt (default: backward-only colour classes free) or authors (the peer dp.cpp's: they get artificial forward nodes and are held to contiguity too)."),
    threads: int = typer.Option(2, "--threads", help="Solver threads."),
    seed: int = typer.Option(0, "--seed", help="Random seed for solvers and heuristics."),
    overrides: Optional[list[str]] = set_option(),
    option: Optional[list[str]] = typer.Option(None, "--option", help="A solver option NAME=VALUE, passed through (repeatable), e.g. --option mip_gap=0.01; an unknown name is refused."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (the plan in the format `evaluate` reads)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Stream the solver's own log to stderr."),
    export_model: Optional[Path] = typer.Option(None, "--export-model", help="Write the built program: .lp/.mps (MILP backends) or .txt/.pb (cpsat)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the plan JSON to this file."),
    layers: bool = typer.Option(True, "--layers/--no-layers", help="Show the per-layer table (edge layers, schedule)."),
    gantt: Optional[Path] = typer.Option(None, "--gantt", help="Draw the plan's schedule (one row per device and link) to this image file (.png/.svg/.pdf)."),
    breakdown: Optional[Path] = typer.Option(None, "--breakdown", help="Draw the per-device compute/send breakdown to this image file (.png/.svg/.pdf)."),
    quiet: bool = quiet_option(),
) -> None:
    """Solve INSTANCE and print the plan (cut, devices, bit-widths, schedule), its cost,
    status and gap. A peer dnn-partitioning file is read as problem maxload (objective
    from its folder: latency-inputs -> latency, else throughput)."""
    from splitopt.api import default_backend_of, plan_to_dict, result_to_dict
    from splitopt.backends.registry import check_backend
    from splitopt.cli.report import print_result
    from splitopt.core.options import solve_time_left
    from splitopt.solve import solve as run

    with errors():
        # every option and path is checked before the instance is read (the slow part)
        check_solve_options(time_limit, threads, seed)
        _check_choices(problem, contiguity)
        options = parse_solver_options(option)
        sets = parse_set_options(overrides)
        check_output_path(output, "--output", inputs=[instance])
        check_output_path(export_model, "--export-model", EXPORT_SUFFIXES, inputs=[instance])
        _check_plot_options(gantt, breakdown)
        check_distinct_outputs((("--output", output), ("--export-model", export_model), ("--gantt", gantt),
                                ("--breakdown", breakdown)))
        if solver is not None or options:
            default = solver or default_backend_of(instance, sets)
            if default is not None:
                check_backend(default, options)
        started = time.monotonic()
        inst = _load(instance, problem, objective, contiguity, overrides=sets)
        _check_plots_apply(inst, gantt, breakdown)
        # the time limit runs from reading the instance: what is left goes to the solve
        with showing_progress(quiet or verbose):  # --verbose: the solver's own log is the progress
            result = run(inst, solver=solver, time_limit=solve_time_left(time_limit, started), threads=threads,
                         seed=seed, verbose=verbose, export_path=export_model, options=options)
        if output is not None and result.plan is not None:
            write_output(output, "--output", json.dumps(plan_to_dict(inst, result.plan), indent=1) + "\n")
        if result.metrics is not None:
            _plots(inst, result.metrics, gantt, breakdown)
        if as_json:
            print_json(result_to_dict(inst, result))
        else:
            print_result(console, inst, result, show_layers=layers)
            if export_model is not None:
                console.print(f"[bold]Model[/bold]    written to {esc(str(export_model))}", highlight=False)
    if not result.status.has_plan:
        raise typer.Exit(EXIT_NO_PLAN)


@app.command()
def evaluate(
    instance: Path = typer.Argument(..., help="Instance JSON file."),
    plan: Path = typer.Argument(..., help="Plan JSON file (or the output of `solve --json`; for a peer file, an expert placement file)."),
    objective: Optional[str] = typer.Option(None, "--objective", help="Override the instance's objective (see `solve`)."),
    overrides: Optional[list[str]] = set_option(),
    contiguity: Optional[str] = typer.Option(None, "--contiguity", help="maxload: the contiguity rule, splitopt or authors (see `solve`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
    layers: bool = typer.Option(True, "--layers/--no-layers", help="Show the per-layer table."),
    gantt: Optional[Path] = typer.Option(None, "--gantt", help="Draw the plan's schedule to this image file."),
    breakdown: Optional[Path] = typer.Option(None, "--breakdown", help="Draw the per-device breakdown to this image file."),
) -> None:
    """Evaluate PLAN on INSTANCE with the family's independent evaluator."""
    from splitopt.api import evaluate as run
    from splitopt.api import load_plan
    from splitopt.cli.report import print_metrics

    with errors():
        _check_plot_options(gantt, breakdown)
        _check_choices(None, contiguity)
        sets = parse_set_options(overrides)
        inst = _load(instance, objective=objective, contiguity=contiguity, overrides=sets)
        _check_plots_apply(inst, gantt, breakdown)
        p = load_plan(inst, plan)
        metrics = run(inst, p)
        _plots(inst, metrics, gantt, breakdown)
        if as_json:
            print_json({"instance": inst.name, "problem": inst.problem, "metrics": metrics.to_dict()})
        else:
            console.print(f"[bold]splitopt[/bold] {esc(inst.name)} | problem {inst.problem} | evaluate {esc(str(plan))}",
                          highlight=False)
            print_metrics(console, inst, p, metrics, show_layers=layers)


@app.command()
def validate(instance: Path = typer.Argument(..., help="Instance JSON file (or a peer dnn-partitioning file)."),
             overrides: Optional[list[str]] = set_option()) -> None:
    """Check INSTANCE against the JSON Schema, for consistency and by its family."""
    from splitopt.families.registry import family_of

    with errors():
        inst = _load(instance, overrides=parse_set_options(overrides))
        console.print(f"ok: {esc(family_of(inst).summary(inst))}", highlight=False)


@app.command()
def solvers(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the backends (generic, then each family's methods) and whether each is installed."""
    from rich.table import Table

    from splitopt.backends.registry import entries

    rows = entries()
    if as_json:
        print_json(rows)
        return
    table = Table(title="splitopt backends")
    for col in ("name", "kind", "families", "installed", "description"):
        table.add_column(col)
    for r in rows:
        kind = r["kind"] + (", hint" if r["hint"] else "")  # a baseline the exact backends start from
        table.add_row(r["name"], kind, r["families"], "yes" if r["installed"] else "no", r["description"])
    console.print(table)


def _no_front(inst, solver: str, time_limit: float | None) -> None:
    """An empty front: the instance as given has no plan under ``solver``. One line with
    its status and the limit that binds (the solve's diagnosis), exit 4."""
    from splitopt.solve import solve

    result = solve(inst, solver, time_limit)
    error_line(f"pareto: no point on the front: {result.status.value}"
               + (f" ({result.message})" if result.message else ""))
    raise typer.Exit(EXIT_NO_PLAN)


@app.command()
def pareto(
    instance: Path = typer.Argument(..., help="Instance JSON file (split/split_bits: latency vs error; multiview with measured accuracies: latency vs accuracy; separable: latency vs bytes; llm: time to first token vs tokens/s, or tokens/s vs error)."),
    solver: Optional[str] = typer.Option(None, "--solver", "-s", help="Backend of each solve of the sweep (default: the family's exact default, as `solve --option` uses: milp-cbc for split/split_bits, cpsat for multiview and separable; auto for llm); a front is proven only where every solve is OPTIMAL, so a heuristic gives a FEASIBLE front."),
    mode: SweepMode = typer.Option(SweepMode.exact, "--mode", help="exact: every corner of the front; grid: evenly spaced budgets."),
    against: Optional[str] = typer.Option(None, "--against", help="Which front, where a problem has several (llm: throughput, the default: time to first token against the pipeline's tokens/s; error: the pipeline's time per token against the summed weight error)."),
    points: int = typer.Option(50, "--points", help="Most points to compute (at least 1)."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Seconds per solve."),
    as_json: bool = typer.Option(False, "--json", help="Print the front as JSON."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a plot of the front (.png/.svg/.pdf)."),
    overrides: Optional[list[str]] = set_option(),
    quiet: bool = quiet_option(),
) -> None:
    """Latency/quantization-error Pareto front by the epsilon-constraint method (AUTO-SPLIT Fig. 5);
    on a multiview instance with measured accuracies, the latency/accuracy front over the
    compression width d (every measured accuracy level; --mode is not used); on a separable
    instance, the latency/bytes front (each corner: least latency under the byte budget,
    then fewest bytes at that latency; --mode is not used); on an llm instance, time to
    first token against the pipeline's tokens/s (each corner: most tokens/s under a limit
    on the time to first token, then the least time to first token at those tokens/s) or,
    with --against error, the time per token against the weight error."""
    from rich.table import Table

    from splitopt.analysis.pareto import front_backend, pareto_front
    from splitopt.analysis.plots import plot_front
    from splitopt.backends.registry import check_backend
    from splitopt.core.options import check_time_limit
    from splitopt.families.registry import family_of

    with errors():
        check_positive_count(points, "--points", high=MAX_POINTS)
        check_time_limit(time_limit, "--time-limit")
        check_output_path(plot, "--plot", PLOT_SUFFIXES)
        if solver is not None:
            check_backend(solver, {})
        inst = _load(instance, overrides=parse_set_options(overrides))
        solver = solver or front_backend(family_of(inst))
        with showing_progress(quiet):
            front = pareto_front(inst, solver=solver, mode=mode.value, points=points, time_limit=time_limit,
                                 against=against)
        if not front.points:
            _no_front(front.instance, solver, time_limit)
        if plot is not None:
            with writing(plot, "--plot"):
                plot_front(front.instance, front, plot)
        if as_json:
            print_json(front.records)
            return
        how = solver if front.mode is None else f"{solver}, {front.mode}"
        table = Table(title=esc(f"{inst.name}: {front.title} ({how})"))
        for col in front.columns:
            table.add_column(col, justify="right")
        for row in front.rows:
            table.add_row(*(esc(cell) for cell in row))
        console.print(table)
        if plot is not None:
            console.print(f"plot written to {esc(str(plot))}")


@app.command()
def schema() -> None:
    """Print the instance JSON Schema."""
    from splitopt.api import instance_schema

    print_json(instance_schema())


@app.command("dnnp-solve", hidden=True)
def dnnp_solve(
    file: Path = typer.Argument(..., help="A peer dnn-partitioning input file."),
    solver: str = typer.Option("cpsat", "--solver", "-s", help="cpsat, milp-highs or milp-cbc."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Wall-clock seconds."),
    threads: int = typer.Option(2, "--threads", help="Solver threads."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the solver."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the placement (expert-file layout)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Stream the solver's own log to stderr."),
) -> None:
    """Former name of `splitopt solve FILE` on a peer file (kept so that existing commands work)."""
    from splitopt.cli.former import former_name_notice

    former_name_notice("dnnp-solve", "solve")
    solve(file, solver=solver, time_limit=time_limit, problem=None, objective=None, contiguity=None, threads=threads,
          seed=seed,
          option=None, overrides=None, as_json=as_json, verbose=verbose, export_model=None, output=output,
          layers=True, gantt=None, breakdown=None, quiet=False)


@app.command("dnnp-eval", hidden=True)
def dnnp_eval(
    instance: Path = typer.Argument(..., help="A peer dnn-partitioning input file (throughput- or latency-inputs)."),
    placement: Path = typer.Argument(..., help="A placement in the peer's expert format (human-experts/*.json)."),
) -> None:
    """Former command: check PLACEMENT on a peer INSTANCE; print its max-load, loads, latency
    and broken rules as JSON (`splitopt evaluate FILE PLACEMENT --json` gives the same)."""
    from splitopt.api import evaluate as run
    from splitopt.api import load_plan
    from splitopt.families.registry import family_of, readers
    from splitopt.cli.former import former_name_notice

    former_name_notice("dnnp-eval", "evaluate FILE PLACEMENT --json")
    with errors():
        inst = _load(instance)
        family = family_of(inst)
        if family not in readers():
            raise NotApplicable(f"dnnp-eval: {instance} is not a peer dnn-partitioning file")
        print_json(family.foreign_report(inst, run(inst, load_plan(inst, placement))))


app.command("profile")(profile_command)
app.command("run")(run_command)
app.command("export")(export_command)
app.command("retrain")(retrain_command)
# the former names (hidden; they work as before and, on a terminal, name the command replacing them)
app.command("run-tcp", hidden=True)(run_tcp_command)
app.command("profile-loading", hidden=True)(profile_loading_command)
app.command("run-loading", hidden=True)(run_loading_command)
app.command("profile-separable", hidden=True)(profile_separable_command)
app.command("run-separable", hidden=True)(run_separable_command)
app.command("sweep")(sweep_command)
app.command("bench")(bench_command)
app.command("bandwidth")(bandwidth_command)
app.command("devices")(devices_command)
app.add_typer(testbed_app, name="testbed")
app.command("agent")(agent_command)


def main() -> None:
    from splitopt.cli.deferred_imports import defer_unused_imports
    from splitopt.core.child_processes import sigterm_interrupts

    defer_unused_imports()  # this process is the command line's: pandas, rich.markdown, rich.traceback where used
    sigterm_interrupts()  # SIGTERM (kill, timeout) stops a solve as Ctrl-C does: incumbent kept, no child left
    app()
