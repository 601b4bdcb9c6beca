"""``splitopt profile-separable -o FILE`` and ``splitopt run-separable INSTANCE PLAN``:
the former names of ``splitopt profile sep_resnext`` and ``splitopt run`` of a separable
plan (hidden aliases, as they were: same options, output and exit codes). What they do
is the separable family's torch side's (:mod:`splitopt.torch.separable.side`); options,
paths, the instance and the plan are checked before torch is imported (one line, exit
2; torch missing: exit 3).
"""

from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.profile import DeviceProfile, Statistic


def profile_separable_command(
    output: Path = typer.Option(..., "--output", "-o", help="Separable instance JSON file to write."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Write the trained weights here (a torch file: both networks and the configuration)."),
    load: Optional[Path] = typer.Option(None, "--load", help="Take the networks from this checkpoint instead of training."),
    records: Optional[Path] = typer.Option(None, "--records", help="Also write the accuracy records (settings.separable.accuracy) and the accuracies measured to this JSON file."),
    epochs: int = typer.Option(25, "--epochs", help="Stage-1 epochs (a random policy per mini-batch); about 1.8 s each on one thread."),
    groups: int = typer.Option(4, "--groups", "-G", help="G: devices (must divide the 8 paths)."),
    alpha: int = typer.Option(2, "--alpha", help="Blocks per transmission step (every stage must start a step)."),
    blocks_per_stage: str = typer.Option("2,2,2", "--blocks-per-stage", help="Residual blocks in each of the three stages."),
    devices: DeviceProfile = typer.Option(DeviceProfile.host, "--devices", help="host: G devices that are this host (measured layer times); analytic: G devices of --mac-per-s."),
    mac_per_s: float = typer.Option(0.85e8, "--mac-per-s", help="analytic devices' MAC/s (default: the paper's Raspberry Pi 3B+, 1.7e8 FLOPS)."),
    bandwidth_mbps: Optional[float] = typer.Option(None, "--bandwidth-mbps", help="Every link's rate in Mbit/s (default: host: measured between two gloo processes; analytic: 300)."),
    link_latency_ms: float = typer.Option(0.0, "--link-latency-ms", help="Every link's fixed ms per transfer (with --bandwidth-mbps)."),
    samples: int = typer.Option(8, "--samples", help="Policies measured per accuracy record's class."),
    statistic: Statistic = typer.Option(Statistic.min, "--statistic", help="A record's accuracy: min (conservative) or mean of its class's policies."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="torch intra-op threads for training and timing."),
    seed: int = typer.Option(0, "--seed", help="Seed of the weights, the data split and the policies."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name (default separable_digits_<devices>)."),
) -> None:
    """Former name of `splitopt profile sep_resnext`: train (or --load) the Sep-ResNeXt on
    the digits, measure its layers and the accuracy of policy classes, and write the
    separable instance with the records (kept so that existing commands work)."""
    from splitopt.cli.common import check_output_path, errors, require_torch
    from splitopt.cli.former import former_name_notice
    from splitopt.cli.profile import write_profiled
    from splitopt.torch.side import side_of_verb

    former_name_notice("profile-separable", "profile sep_resnext")
    with errors():
        check_output_path(output, "--output")
        check_output_path(checkpoint, "--checkpoint")
        check_output_path(records, "--records")
        side = side_of_verb("profile-separable")
        make_options = side.profile_options
        assert make_options is not None  # the separable side profiles its network
        options = make_options(checkpoint=checkpoint, load=load, records=records, epochs=epochs,
                                       groups=groups, alpha=alpha, blocks_per_stage=blocks_per_stage,
                                       devices=devices.value, mac_per_s=mac_per_s, bandwidth_mbps=bandwidth_mbps,
                                       link_latency_ms=link_latency_ms, samples=samples, statistic=statistic.value,
                                       torch_threads=torch_threads, seed=seed, name=name)
        require_torch("profile-separable")
        write_profiled(side.profile(side.profile_models[0], options), output)


def run_separable_command(
    instance: Path = typer.Argument(..., help="Separable instance made by `splitopt profile-separable`."),
    plan: Path = typer.Argument(..., help="Separable plan JSON (splitopt-separable-plan/1, or the output of `solve --json`)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="The trained weights (default: the instance's model with seeded random weights; outputs and bytes are checked either way)."),
    repeats: int = typer.Option(10, "--repeats", help="Timed inferences (median)."),
    batch: int = typer.Option(1, "--batch", help="Images per inference (bytes are reported per image)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds before the workers are stopped."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Former name of `splitopt run` on a separable instance: run PLAN over G worker
    processes and compare outputs, bytes and latency with the evaluator (kept so that
    existing commands work)."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import console, errors, print_json, require_torch
    from splitopt.cli.former import former_name_notice
    from splitopt.torch.side import side_of_verb

    former_name_notice("run-separable", "run")
    with errors():
        side = side_of_verb("run-separable")
        make_options = side.run_options
        assert make_options is not None  # the separable side runs its plans
        options = make_options(checkpoint=checkpoint, repeats=repeats, batch=batch, timeout=timeout)
        inst = load_instance(instance)
        side.check_family(inst, str(instance))
        the_plan = load_plan(inst, plan)
        side.check_run_plan(inst, the_plan, options, str(plan))
        require_torch("run-separable")
        report = side.run(inst, the_plan, options, plan_path=str(plan))
    if as_json:
        print_json(report)
    else:
        side.print_run(console, report)
    if not report["ok"]:
        raise typer.Exit(1)
