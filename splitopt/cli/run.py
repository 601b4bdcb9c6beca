"""``splitopt run INSTANCE PLAN``: run a plan on this host and check it against the
evaluator. What runs is the instance's family's (its torch side,
:func:`splitopt.torch.side.side_of`): a layer-graph plan rebuilds the model (``--model``),
cuts it by the plan and runs the parts on synthetic inputs, checked against the unsplit
model and the evaluator's bytes (multiview plans: the views through their sensors, with
``--weights`` the retrained splitting module); a loading plan writes, loads and runs its
child models; a separable plan runs over one worker process per device; an llm plan runs
one process per stage, passing hidden states token by token. ``--transport
tcp`` runs an edge/cloud or chain plan as one process per device exchanging the crossing
tensors over TCP (:mod:`splitopt.netrun`; ``--breakpoints TABLE`` in place of PLAN
switches plans as the bandwidth changes).

The options of one family are grouped in ``--help``; an option the instance's family
does not take is one line naming it (exit 2). Exit status: 0 the run matches; 1 it does
not (or a device process failed); 2 bad input; 3 torch is not installed.
"""

from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from splitopt.cli.model_options import check_model_options, input_dtype_option, input_high_option, input_shape_option
from splitopt.cli.profile import Cache

#: the panels of ``splitopt run --help``
INPUTS_PANEL = "User model inputs"
MULTIVIEW_PANEL = "Multiview options"
LOADING_PANEL = "Loading options"
SEPARABLE_PANEL = "Separable options"
PROCESS_PANEL = "Process/TCP options"
AGENTS_PANEL = "Device agents (edge/cloud and chain plans on `splitopt agent` devices)"


class Transport(str, Enum):
    memory = "memory"
    tcp = "tcp"


class Mode(str, Enum):
    threads = "threads"
    processes = "processes"


def run_command(
    instance: Path = typer.Argument(..., help="Instance JSON file (made by `splitopt profile`, `splitopt retrain --instance-out` or instances/make_*instances.py)."),
    plan: Optional[Path] = typer.Argument(None, help="Plan JSON file (or the output of `solve --json`); leave out with --breakpoints."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model to rebuild: resnet50, mobilenet_v2, googlenet, tiny_gpt2, digits_cnn, a user model PATH.py:FACTORY / package.module:FACTORY (the one given to `profile`), or the block model a loading instance was profiled from."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the model's random initialisation (the instances use 0; default 0)."),
    samples: Optional[int] = typer.Option(None, "--samples", "-n", help="Synthetic inputs to run, one at a time (default 2; --transport tcp and --agents: measured samples, default 5; --agents runs them again pipelined)."),
    repeats: Optional[int] = typer.Option(None, "--repeats", help="Loading, separable and llm plans: timed runs (median; default 3, 10 and 3)."),
    transport: Transport = typer.Option(Transport.memory, "--transport", help="memory: the parts run in this process (separable plans: one worker process per device); tcp: one process per device, the crossing tensors sent over TCP through a link paced at the instance's bandwidth and latency (edge/cloud and chain plans)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    agents: Optional[str] = typer.Option(None, "--agents", rich_help_panel=AGENTS_PANEL, help="Run the plan on device agents (`splitopt agent`), one per device of the plan, named as the devices: NAME=HOST:PORT,... or a JSON file {name: {\"address\": \"HOST:PORT\", \"peers\": {...}}}. The parts are exported as ONNX, deployed and run on --samples inputs after --warmup ones, one sample at a time (the latency), then again pipelined (the throughput; see --no-pipeline); outputs are checked against the unsplit model and bytes against the evaluator, and the measured ms per part, per link and end to end, and the samples/s, are printed beside the evaluator's."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", rich_help_panel=AGENTS_PANEL, help="With --agents: the file holding the agents' token (default: the SPLITOPT_AGENT_TOKEN environment variable)."),
    no_pipeline: bool = typer.Option(False, "--no-pipeline", rich_help_panel=AGENTS_PANEL, help="With --agents: measure the latency only, leaving out the second, pipelined run (samples streamed through the devices, the first device taking the next input as soon as it has handed the last one on) that measures the throughput in samples/s against the evaluator's 1000 / slowest stage ms."),
    input_shape: Optional[str] = input_shape_option(INPUTS_PANEL),
    input_dtype: Optional[str] = input_dtype_option(INPUTS_PANEL),
    input_high: Optional[int] = input_high_option(INPUTS_PANEL),
    weights: Optional[Path] = typer.Option(None, "--weights", rich_help_panel=MULTIVIEW_PANEL, help="Multiview instances of digits_cnn: a directory written by `splitopt retrain --save DIR`; the plan runs with the weights retrained for its width on real test digits (--samples of the 360), and the accuracy is reported beside the one the solver used."),
    mode: Optional[Mode] = typer.Option(None, "--mode", rich_help_panel=LOADING_PANEL, help="threads (default): threading.Thread loaders in this process; processes: warm loader processes handing tensors back in shared memory."),
    cache: Optional[Cache] = typer.Option(None, "--cache", rich_help_panel=LOADING_PANEL, help="Page cache before each run: warm (default) or cold (fsync + POSIX_FADV_DONTNEED)."),
    torch_threads: Optional[int] = typer.Option(None, "--torch-threads", rich_help_panel=LOADING_PANEL, help="torch intra-op threads for inference (default: those the instance was profiled with)."),
    fine_tune: Optional[int] = typer.Option(None, "--fine-tune", rich_help_panel=LOADING_PANEL, help="After the runs, this many SGD steps on the last child's trainable tail (synthetic labels)."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", rich_help_panel=LOADING_PANEL, help="Directory for the child files (default: a temporary one; removed after)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", rich_help_panel=SEPARABLE_PANEL, help="The trained weights (default: the instance's model with seeded random weights; outputs and bytes are checked either way)."),
    batch: Optional[int] = typer.Option(None, "--batch", rich_help_panel=SEPARABLE_PANEL, help="Images per inference (bytes are reported per image; default 1)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", rich_help_panel=PROCESS_PANEL, help="Seconds: separable plans: before the worker processes are stopped (default 120); --transport tcp: a connected peer may stay silent before the receiver drops the connection (default 30); llm plans: the same (default 60); --agents: an agent may stay silent inside an exchange (default 120)."),
    breakpoints: Optional[Path] = typer.Option(None, "--breakpoints", rich_help_panel=PROCESS_PANEL, help="--transport tcp: a breakpoint table (`splitopt bandwidth INSTANCE --exact -o TABLE`) in place of PLAN: every interval's plan is built at start; the plan in use follows the bandwidth (--bandwidth-schedule)."),
    bandwidth_schedule: Optional[str] = typer.Option(None, "--bandwidth-schedule", rich_help_panel=PROCESS_PANEL, help="With --breakpoints: SAMPLE:BITS_PER_S pairs, comma-separated, e.g. 0:20e6,5:2e6; before measured sample SAMPLE the table's link gets that bandwidth (the pacer) and the run switches to that interval's plan. Default: the link's bandwidth in the instance."),
    warmup: Optional[int] = typer.Option(None, "--warmup", rich_help_panel=PROCESS_PANEL, help="--transport tcp and --agents: samples run before the measured ones (not reported in the medians; default 1); llm plans: untimed generations before the timed ones (default 1)."),
    host: Optional[str] = typer.Option(None, "--host", rich_help_panel=PROCESS_PANEL, help="--transport tcp and llm plans: address the receiving processes bind to and the senders connect to (default 127.0.0.1)."),
    run_timeout: Optional[float] = typer.Option(None, "--run-timeout", rich_help_panel=PROCESS_PANEL, help="--transport tcp and llm plans: seconds for the whole run (building the model in every process included; default 1800, llm 900); then every process is stopped."),
    max_frame_bytes: Optional[int] = typer.Option(None, "--max-frame-bytes", rich_help_panel=PROCESS_PANEL, help="--transport tcp: largest frame payload a receiver accepts, bytes (default 256 MiB); a larger one is refused (one logged line) and the connection dropped."),
    chunk_bytes: Optional[int] = typer.Option(None, "--chunk-bytes", rich_help_panel=PROCESS_PANEL, help="--transport tcp: bytes the pacer writes at a time (each at the time its last bit would arrive over the link; default 1448)."),
    threads: Optional[int] = typer.Option(None, "--threads", rich_help_panel=PROCESS_PANEL, help="--transport tcp: torch threads per process (default: this process's torch default)."),
    check: Optional[bool] = typer.Option(None, "--check/--no-check", rich_help_panel=PROCESS_PANEL, help="--transport tcp: also run the single-process split (same parts, same packing) and compare outputs (default: check)."),
) -> None:
    """Run PLAN of INSTANCE on this host as the instance's family runs its plans, and
    compare it with the evaluator.

    Edge/cloud, chain and mesh plans: MODEL is rebuilt and cut into one part per device
    (mesh: per stage), run on synthetic inputs and compared with the unsplit model and
    the evaluator's bytes (mesh: also per link). Multiview plans: V different inputs as
    the views, one part per sensor, per-view aggregator parts and the fusion part;
    `--model digits_cnn` runs on scikit-learn's test digits, with --weights DIR the
    retrained backbone and splitting module. Loading plans: the child models written,
    loaded as the plan says and run; the first response against the evaluator's and
    the monolithic model's. Separable plans: one worker process per device (gloo,
    localhost); outputs, bytes and latency against the evaluator. --transport tcp:
    one process per device over TCP, measured ms per part and per link beside the
    evaluator's. Exit status: 0 the run matches, 1 it does not, 2 bad input, 3 torch
    missing."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import check_positive_count, console, errors, given_options, print_json, require_torch
    from splitopt.core.options import MAX_SAMPLES
    from splitopt.core.errors import InvalidOption, NotApplicable

    values = given_options(model=model, seed=seed, samples=samples, repeats=repeats, input_shape=input_shape,
                           input_dtype=input_dtype, input_high=input_high, weights=weights, mode=mode, cache=cache,
                           torch_threads=torch_threads, fine_tune=fine_tune, workdir=workdir, checkpoint=checkpoint,
                           batch=batch, timeout=timeout, breakpoints=breakpoints,
                           bandwidth_schedule=bandwidth_schedule, warmup=warmup, host=host, run_timeout=run_timeout,
                           max_frame_bytes=max_frame_bytes, chunk_bytes=chunk_bytes, threads=threads, check=check,
                           token_file=token_file)
    tcp = transport is Transport.tcp
    with errors():
        # what holds whatever the family, before the instance is read (the slow part)
        if samples is not None:
            check_positive_count(samples, "--samples", high=MAX_SAMPLES)
        check_model_options(seed or 0, input_high, input_shape, input_dtype)
        if weights is not None and not weights.is_dir():
            raise InvalidOption(f"--weights {weights}: not a directory (written by `splitopt retrain --save DIR`)")
        if agents is not None and tcp:
            raise InvalidOption("--agents: the agents carry the tensors; not with --transport tcp")
        if token_file is not None and agents is None:
            raise InvalidOption("--token-file: applies with --agents")
        if no_pipeline and agents is None:
            raise InvalidOption("--no-pipeline: applies with --agents")
        if agents is not None and plan is None:
            raise InvalidOption("PLAN: needed with --agents")
        if tcp and (plan is None) == (breakpoints is None):
            raise InvalidOption("run --transport tcp: give a PLAN file or --breakpoints TABLE (exactly one)")
        if not tcp and plan is None:
            raise InvalidOption("PLAN: needed (--breakpoints TABLE in its place goes with --transport tcp)")
        inst = load_instance(instance)
        require_torch("run")
        if agents is not None:
            report = _run_agents(inst, plan, dict(values, agents=agents, pipeline=not no_pipeline))
        elif tcp:
            report = _run_tcp(instance, inst, plan, values)
        else:
            assert plan is not None  # without --transport tcp PLAN is needed (checked above)
            the_plan = load_plan(inst, plan)
            from splitopt.torch.side import build_options, side_of

            side = side_of(inst, "run")
            if side.run_options is None:
                raise NotApplicable(f"run: problem '{inst.problem}' has no run of its plans")
            options = build_options(side.run_options, values, f"`splitopt run` on problem '{inst.problem}'")
            side.check_run(inst, options, str(instance))
            side.check_run_plan(inst, the_plan, options, str(plan))
            report = side.run(inst, the_plan, options, plan_path=str(plan))
    if as_json:
        print_json(report)
    elif agents is not None:
        from splitopt.cli.agents_report import print_agents_report

        print_agents_report(console, report)
    elif tcp:
        from splitopt.cli.netrun import print_tcp_report

        print_tcp_report(console, report)
    else:
        side.print_run(console, report)
    if not report["ok"]:
        raise typer.Exit(1)


def _run_agents(inst, plan: Optional[Path], values: dict[str, Any]) -> dict[str, Any]:
    """``--agents``: the options, the plan and the run on the agents
    (:func:`splitopt.agents.run_plan.run_on_agents`)."""
    from splitopt.agents.run_plan import AgentRunOptions, run_on_agents
    from splitopt.api import load_plan
    from splitopt.cli.progress import showing_progress
    from splitopt.netrun.setup import tcp_side
    from splitopt.onnx.deps import require_onnx
    from splitopt.torch.side import build_options

    assert plan is not None  # checked above
    tcp_side(inst, "run --agents")
    options = build_options(AgentRunOptions, values, f"`splitopt run --agents` on problem '{inst.problem}'")
    require_onnx("splitopt run --agents")
    the_plan = load_plan(inst, plan)
    with showing_progress(False):
        return run_on_agents(inst, the_plan, options, plan_path=str(plan))


def _run_tcp(instance: Path, inst, plan: Optional[Path], values: dict[str, Any]) -> dict[str, Any]:
    """``--transport tcp``: the options, the plan or table, and the run
    (:func:`splitopt.netrun.runner.run_tcp_options`)."""
    from splitopt.core.errors import InvalidPlan, NotApplicable
    from splitopt.core.jsonfile import read_json
    from splitopt.netrun.runner import run_tcp_options
    from splitopt.netrun.setup import read_table
    from splitopt.torch.side import build_options, problems_with, side_of

    side = side_of(inst, "run")
    if side.tcp_options is None:
        raise NotApplicable(f"--transport tcp: problem '{inst.problem}' is not supported (problems: "
                            f"{', '.join(problems_with(lambda s: s.tcp_options is not None))})")
    options = build_options(side.tcp_options, values, f"`splitopt run --transport tcp` on problem '{inst.problem}'")
    steps = options.schedule()
    plan_dict = read_json(plan, InvalidPlan) if plan is not None else None
    table = read_table(inst, options.breakpoints) if options.breakpoints is not None else None
    return run_tcp_options(instance, plan_dict, table, options, steps)
