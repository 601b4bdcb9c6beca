"""The ``splitopt`` command line. Thin: it parses, calls the library, prints.

Exit codes: 0 a plan was found (OPTIMAL or FEASIBLE) or the command succeeded;
1 internal solver failure (a bug: please report); 2 bad input (instance, plan, option,
unknown solver); 3 solver package not installed; 4 no plan (INFEASIBLE or
NO_SOLUTION_FOUND).
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from splitopt.errors import (
    InvalidInstance,
    InvalidPlan,
    NotApplicable,
    SolverFailure,
    SolverUnavailable,
    SplitoptError,
    UnknownSolver,
)

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Decide how to split a DNN across devices (edge/cloud, chains, meshes, multi-view sensors) by solving mathematical programs.",
)
console = Console(soft_wrap=True)


def _error_line(text: str) -> None:
    """One line on stderr, never wrapped, whatever the terminal width."""
    sys.stderr.write(" ".join(text.split()) + "\n")

EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_NO_PLAN = 1, 2, 3, 4


class Problem(str, Enum):
    split = "split"
    split_bits = "split_bits"


class SweepMode(str, Enum):
    exact = "exact"
    grid = "grid"


@contextmanager
def _errors():
    """Turn package errors into one line on stderr and an exit code; no traceback."""
    try:
        yield
    except (InvalidInstance, InvalidPlan, UnknownSolver, NotApplicable) as e:
        _error_line(f"error: {e}")
        raise typer.Exit(EXIT_BAD_INPUT)
    except SolverUnavailable as e:
        _error_line(f"error: {e}")
        raise typer.Exit(EXIT_UNAVAILABLE)
    except SolverFailure as e:
        _error_line(f"solver failure (a bug in splitopt): {e}")
        raise typer.Exit(EXIT_FAILURE)
    except SplitoptError as e:
        _error_line(f"error: {e}")
        raise typer.Exit(EXIT_FAILURE)


def _load(path: Path, problem: Optional[Problem] = None):
    from splitopt.instance import load_instance

    inst = load_instance(path)
    if problem is not None and problem.value != inst.settings.problem:
        if not inst.is_two_tier:
            raise NotApplicable(
                f"--problem {problem.value}: applies to edge/cloud instances (split, split_bits), "
                f"not to problem '{inst.settings.problem}'"
            )
        inst = inst.with_settings(problem=problem.value)
    return inst


def _print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _plots(inst, metrics, gantt: Optional[Path], breakdown: Optional[Path]) -> None:
    """Draw the schedule (Gantt) and the per-device latency breakdown, for families whose
    metrics carry a schedule."""
    if gantt is None and breakdown is None:
        return
    from splitopt import schedule as sched

    tasks = getattr(metrics, "schedule", None)
    if tasks is None:
        raise NotApplicable(f"--gantt/--breakdown: problem '{inst.settings.problem}' has no multi-device schedule")
    if gantt is not None:
        sched.plot_gantt(tasks, gantt, title=f"{inst.name}: makespan {sched.makespan_ms(tasks):.3f} ms")
    if breakdown is not None:
        sched.plot_breakdown(sched.breakdown(tasks), breakdown, title=f"{inst.name}: per-device latency")


@app.command()
def solve(
    instance: Path = typer.Argument(..., help="Instance JSON file."),
    solver: Optional[str] = typer.Option(None, "--solver", "-s", help="Backend name; `splitopt solvers` lists them. Default: milp-cbc for split/split_bits, cpsat for chain/mesh/multiview."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Seconds; on reaching it the best plan found is returned with status FEASIBLE and its gap."),
    problem: Optional[Problem] = typer.Option(None, "--problem", help="Override the instance's problem: split (float cut) or split_bits (cut + bit-widths)."),
    threads: int = typer.Option(2, "--threads", help="Solver threads."),
    seed: int = typer.Option(0, "--seed", help="Random seed for solvers and heuristics."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (the plan in the format `evaluate` reads)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Stream the solver's own log to stderr."),
    export_model: Optional[Path] = typer.Option(None, "--export-model", help="Write the built program: .lp/.mps (MILP backends) or .txt/.pb (cpsat)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the plan JSON to this file."),
    layers: bool = typer.Option(True, "--layers/--no-layers", help="Show the per-layer table of edge layers."),
    gantt: Optional[Path] = typer.Option(None, "--gantt", help="Multi-device problems: draw the schedule (one row per device and link) to this image file."),
    breakdown: Optional[Path] = typer.Option(None, "--breakdown", help="Multi-device problems: draw the per-device compute/send breakdown to this image file."),
) -> None:
    """Solve INSTANCE and print the plan (cut, devices, bit-widths), latency, memory, status and gap.
    A peer dnn-partitioning file is accepted too: it is solved as `dnnp-solve` does."""
    from splitopt.dnnp import is_dnnp_file
    from splitopt.report import print_result, result_to_dict
    from splitopt.solve import solve as run

    if is_dnnp_file(instance):
        from splitopt.dnnp_cli import dnnp_solve

        return dnnp_solve(instance, solver=solver or "cpsat", time_limit=time_limit, threads=threads, seed=seed,
                          as_json=as_json, output=output, verbose=verbose)

    with _errors():
        inst = _load(instance, problem)
        result = run(inst, solver=solver, time_limit=time_limit, threads=threads, seed=seed,
                     verbose=verbose, export_path=export_model)
        if output is not None and result.plan is not None:
            output.write_text(json.dumps(result.plan.to_dict(inst), indent=1) + "\n")
        if result.metrics is not None:
            _plots(inst, result.metrics, gantt, breakdown)
        if as_json:
            _print_json(result_to_dict(inst, result))
        else:
            print_result(console, inst, result, show_layers=layers)
            if export_model is not None:
                console.print(f"[bold]Model[/bold]    written to {export_model}")
    if not result.status.has_plan:
        raise typer.Exit(EXIT_NO_PLAN)


@app.command()
def evaluate(
    instance: Path = typer.Argument(..., help="Instance JSON file."),
    plan: Path = typer.Argument(..., help="Plan JSON file (or the output of `solve --json`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
    layers: bool = typer.Option(True, "--layers/--no-layers", help="Show the per-layer table of edge layers."),
    gantt: Optional[Path] = typer.Option(None, "--gantt", help="Multi-device problems: draw the schedule to this image file."),
    breakdown: Optional[Path] = typer.Option(None, "--breakdown", help="Multi-device problems: draw the per-device breakdown to this image file."),
) -> None:
    """Evaluate PLAN on INSTANCE with the independent evaluator."""
    from splitopt.evaluator import evaluate as run
    from splitopt.plan import load_plan
    from splitopt.report import print_metrics

    with _errors():
        inst = _load(instance)
        p = load_plan(inst, plan)
        metrics = run(inst, p)
        _plots(inst, metrics, gantt, breakdown)
        if as_json:
            _print_json({"instance": inst.name, "problem": inst.settings.problem, "metrics": metrics.to_dict()})
        else:
            console.print(f"[bold]splitopt[/bold] {inst.name} | problem {inst.settings.problem} | evaluate {plan}")
            print_metrics(console, inst, p, metrics, show_layers=layers)


@app.command()
def validate(instance: Path = typer.Argument(..., help="Instance JSON file.")) -> None:
    """Check INSTANCE against the JSON Schema and for consistency."""
    with _errors():
        inst = _load(instance)
        macs = sum(l.macs for l in inst.layers)
        weights = sum(l.weights for l in inst.layers)
        console.print(
            f"ok: {inst.name}: {len(inst.layers)} layers, {macs / 1e9:.3f} GMAC, {weights / 1e6:.3f} M weights, "
            f"problem {inst.settings.problem}, edge '{inst.settings.edge}', cloud '{inst.settings.cloud}'",
            highlight=False,
        )


@app.command()
def solvers(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the backends and whether each is installed."""
    from splitopt.solvers import registry

    rows = []
    for name in registry.BACKENDS:
        cls = registry.backend_class(name)
        rows.append({"name": name, "kind": cls.kind, "problems": list(cls.problems),
                     "installed": cls.is_installed(), "description": cls.description})
    if as_json:
        _print_json(rows)
        return
    table = Table(title="splitopt backends")
    for col in ("name", "kind", "problems", "installed", "description"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], r["kind"], ", ".join(r["problems"]), "yes" if r["installed"] else "no", r["description"])
    console.print(table)


def _accuracy_pareto(inst, solver: str, points: int, time_limit: float | None, as_json: bool,
                     plot: Path | None) -> None:
    """The latency / accuracy front of a multiview instance (``splitopt.pareto.accuracy_front``)."""
    from splitopt.pareto import accuracy_front, plot_accuracy_front

    try:
        front = accuracy_front(inst, solver=solver, time_limit=time_limit, points=points)
    except ValueError as e:
        raise NotApplicable(f"pareto: {e}") from None
    if plot is not None:
        plot_accuracy_front(inst, front, str(plot))
    if as_json:
        _print_json([{"min_accuracy": p.min_accuracy, "accuracy": p.accuracy, "latency_ms": p.latency_ms,
                      "status": p.result.status.value, "gap": p.result.gap, "fusion": p.result.plan.fusion,
                      "width": p.result.plan.width, "plan": p.result.plan.to_dict(inst)} for p in front])
        return
    table = Table(title=f"{inst.name}: latency / accuracy front ({solver})")
    for col in ("accuracy", "latency ms", "fusion", "width d", "sent B", "status"):
        table.add_column(col, justify="right")
    for p in front:
        plan, m = p.result.plan, p.result.metrics
        table.add_row("-" if p.accuracy is None else f"{p.accuracy:.4f}", f"{p.latency_ms:.4f}", plan.fusion,
                      "none" if plan.width is None else str(plan.width),
                      f"{sum(v.sent_bytes for v in m.views):,.0f}", p.result.status.value)
    console.print(table)
    if plot is not None:
        console.print(f"plot written to {plot}")


@app.command()
def pareto(
    instance: Path = typer.Argument(..., help="Instance JSON file (split/split_bits: latency vs error; multiview with measured accuracies: latency vs accuracy)."),
    solver: Optional[str] = typer.Option(None, "--solver", "-s", help="Exact backend (default: milp-cbc for split/split_bits, cpsat for multiview)."),
    mode: SweepMode = typer.Option(SweepMode.exact, "--mode", help="exact: every corner of the front; grid: evenly spaced budgets."),
    points: int = typer.Option(50, "--points", help="Most points to compute."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Seconds per solve."),
    as_json: bool = typer.Option(False, "--json", help="Print the front as JSON."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a plot of the front (PNG/SVG/PDF)."),
) -> None:
    """Latency/quantization-error Pareto front by the epsilon-constraint method (AUTO-SPLIT Fig. 5);
    on a multiview instance with measured accuracies, the latency/accuracy front over the
    compression width d (every measured accuracy level; --mode is not used)."""
    from splitopt.pareto import pareto_front, plot_front

    with _errors():
        inst = _load(instance)
        if inst.settings.problem == "multiview":
            _accuracy_pareto(inst, solver or "cpsat", points, time_limit, as_json, plot)
            return
        if not inst.is_two_tier:
            raise NotApplicable(f"pareto: the latency/error front is defined for problems split and split_bits "
                                f"(and latency/accuracy for multiview), not '{inst.settings.problem}'")
        solver = solver or "milp-cbc"
        inst = _load(instance, Problem.split_bits)
        front = pareto_front(inst, solver=solver, mode=mode.value, points=points, time_limit=time_limit)
        if plot is not None:
            plot_front(inst, front, str(plot))
        if as_json:
            _print_json([
                {"error_budget": p.budget, "error": p.error, "latency_ms": p.latency_ms, "status": p.result.status.value,
                 "gap": p.result.gap, "edge_layers": len(p.result.plan.edge_layers(inst)),
                 "plan": p.result.plan.to_dict(inst)}
                for p in front
            ])
            return
        table = Table(title=f"{inst.name}: latency / error Pareto front ({solver}, {mode.value})")
        for col in ("error", "latency ms", "edge layers", "edge memory B", "status"):
            table.add_column(col, justify="right")
        for p in front:
            m = p.result.metrics
            table.add_row(f"{p.error:.6g}", f"{p.latency_ms:.4f}", str(m.edge_layer_count),
                          f"{m.edge_memory_bytes:,.0f}", p.result.status.value)
        console.print(table)
        if plot is not None:
            console.print(f"plot written to {plot}")


@app.command()
def schema() -> None:
    """Print the instance JSON Schema."""
    from splitopt.instance import instance_schema

    _print_json(instance_schema())


@app.command("dnnp-eval")
def dnnp_eval(
    instance: Path = typer.Argument(..., help="A peer dnn-partitioning input file (throughput- or latency-inputs)."),
    placement: Path = typer.Argument(..., help="A placement in the peer's expert format (human-experts/*.json)."),
) -> None:
    """Check PLACEMENT on a peer dnn-partitioning INSTANCE; print its max-load and latency (ms) as JSON."""
    from splitopt.dnnp import check_placement, latency, load_dnnp, load_expert, max_load

    with _errors():
        inst = load_dnnp(instance)
        plan = load_expert(inst, placement)
        value, loads = max_load(inst, plan)
        try:
            lat: float | str = latency(inst, plan)
        except InvalidPlan as e:
            lat = f"undefined ({e})"
        _print_json({"instance": inst.name, "max_load_ms": value, "loads_ms": loads,
                     "latency_ms": lat, "violations": check_placement(inst, plan)})


class Preset(str, Enum):
    eyeriss = "eyeriss"
    splitnets = "splitnets"


@app.command()
def profile(
    model: str = typer.Argument(..., help="resnet50, mobilenet_v2, googlenet or tiny_gpt2 (built in code, random init), or a user model PATH.py:FACTORY or package.module:FACTORY, where FACTORY() returns an nn.Module or (module, example_input)."),
    output: Path = typer.Option(..., "--output", "-o", help="Instance JSON file to write."),
    preset: Preset = typer.Option(Preset.eyeriss, "--preset", help="eyeriss: Eyeriss edge, TPU cloud, 3 Mbit/s, split_bits {2,4,6,8} with the W8A8 error as budget and 4 MB; splitnets: 125 GOP/s sensor, 1.25 TOP/s aggregator, 25 % of a 1.2 Gbit/s bus, float split, 2 MB."),
    calibration_images: int = typer.Option(8, "--calibration-images", help="Synthetic calibration inputs for the error tables (the first 8 are those of the shipped instances; 0: none; the problem becomes the float split)."),
    measure: bool = typer.Option(False, "--measure/--no-measure", help="Also measure every layer's latency on this host (median of --repeats) and add the host as device 'host'."),
    edge_host: bool = typer.Option(False, "--edge-host", help="With --measure: make the host the edge device (its measured latencies), linked to the cloud like the preset's edge."),
    repeats: int = typer.Option(5, "--repeats", help="Runs per layer latency (median)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the model's random weights (user models: torch's global seed while FACTORY runs)."),
    input_shape: Optional[str] = typer.Option(None, "--input-shape", help="User models: input shape with batch 1, e.g. 1,3,32,32 (default: the shape of the factory's example input)."),
    input_dtype: Optional[str] = typer.Option(None, "--input-dtype", help="User models: input dtype, float32 (default; standard normal inputs) or int64 for token ids (uniform in [0, --input-high)); also float64, float16, bfloat16, int32."),
    input_high: Optional[int] = typer.Option(None, "--input-high", help="User models with integer inputs: exclusive upper bound of the random ids, e.g. the vocabulary size (default: the factory's example input max + 1)."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name (default: MODEL_PRESET for built-in models, the factory's name for user models)."),
) -> None:
    """Profile MODEL into an instance: torch.export capture (BN folding, activation fusion),
    MACs, weights, shapes, quantization-error tables on calibration inputs, and optionally
    per-layer latency measured on this host.

    MODEL is a built-in name or any traceable nn.Module of yours, e.g.
    `splitopt profile my_net.py:build --input-shape 1,3,32,32 -o my_net.json`;
    the run and calibration inputs are seeded synthetic ones of that shape and dtype."""
    from splitopt import presets
    from splitopt.instance import save_instance
    from splitopt.torch.profile import DEFAULT_BITS, profile as run_profile
    from splitopt.torch.run_cli import build_model
    from splitopt.torch.user_model import capture_errors, factory_name, is_spec

    with _errors():
        if edge_host and not measure:
            raise NotApplicable("--edge-host: needs --measure (the host's latencies are measured)")
        module, rename, example, _, calibration_fn = build_model(
            model, seed, input_shape=input_shape, input_dtype=input_dtype, input_high=input_high)
        # the first 8 are those of the shipped instances; more are drawn on request
        calibration = calibration_fn(max(calibration_images, 8))[:calibration_images] if calibration_images > 0 else None
        if preset is Preset.eyeriss:
            devices, links = [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()]
            settings = {"problem": "split_bits" if calibration is not None else "split", "edge": "eyeriss",
                        "cloud": "tpu", "bit_widths": list(DEFAULT_BITS), "cloud_bits": 16, "edge_memory_bytes": 4e6}
        else:
            devices = [presets.splitnets_sensor(), presets.splitnets_aggregator()]
            links = [presets.splitnets_bus_share(0.25)]
            settings = {"problem": "split", "edge": "sensor", "cloud": "aggregator", "bit_widths": [8],
                        "cloud_bits": 8, "edge_memory_bytes": 2e6}
        if edge_host:
            links.append(dict(links[0], source="host"))
            settings["edge"] = "host"
        if name is None:
            name = factory_name(model) if is_spec(model) else f"{model}_{preset.value}"
        with capture_errors(module, example, what=f"profiling '{model}'"):
            inst = run_profile(module, example, devices, links, settings, name=name,
                               calibration=calibration, measure_latency=measure, repeats=repeats, rename=rename)
        if inst.settings.problem == "split_bits":  # the budget: the whole network's error at W8A8
            w8a8 = sum(l.weight_error.get(8, 0.0) + l.activation_error.get(8, 0.0) for l in inst.layers)
            inst = inst.with_settings(error_budget=w8a8)
        save_instance(inst, output)
        console.print(f"wrote {output}: {len(inst.layers)} layers, {sum(l.macs for l in inst.layers) / 1e9:.3f} GMAC, "
                      f"{sum(l.weights for l in inst.layers) / 1e6:.3f} M weights, problem {inst.settings.problem}",
                      highlight=False)


from splitopt.dnnp_cli import dnnp_solve  # noqa: E402  (it imports this module's helpers)
from splitopt.torch.retrain_cli import retrain_command  # noqa: E402  (imports torch only when run)
from splitopt.torch.run_cli import run_command  # noqa: E402  (imports torch only when run)

app.command("dnnp-solve")(dnnp_solve)
app.command("run")(run_command)
app.command("retrain")(retrain_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
