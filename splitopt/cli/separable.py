"""``splitopt profile-separable -o FILE`` and ``splitopt run-separable INSTANCE PLAN``:
the separable family's torch bridge (:mod:`splitopt.torch.separable_model`,
:mod:`splitopt.torch.separable_run`). Both import torch only when they run; options,
paths, the instance and the plan are checked first (one line, exit 2; torch missing:
exit 3).

The network is the small Sep-ResNeXt on scikit-learn's digits (built in code, no
download). Examples::

    splitopt profile-separable -o sep.json --checkpoint sep.pt --records records.json --epochs 25
    splitopt solve sep.json --json > plan.json
    splitopt run-separable sep.json plan.json --checkpoint sep.pt --repeats 20
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer


class DeviceProfile(str, Enum):
    host = "host"
    analytic = "analytic"


class Statistic(str, Enum):
    min = "min"
    mean = "mean"


def _blocks(text: str):
    from splitopt.core.errors import InvalidOption

    try:
        out = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InvalidOption(f"--blocks-per-stage: must be integers separated by commas, e.g. 2,2,2, got {text!r}") \
            from None
    if len(out) != 3 or any(not 1 <= v <= 16 for v in out):
        raise InvalidOption(f"--blocks-per-stage: three integers in [1, 16] (one per stage), got {text!r}")
    return out


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
    """Train (or --load) the Sep-ResNeXt on the digits, measure its layers and the
    accuracy of policy classes, and write the separable instance with the records."""
    from splitopt.cli.common import (check_number, check_output_path, check_positive_count, check_seed, console,
                                     errors, require_torch, write_output)
    from splitopt.core.errors import InvalidOption

    with errors():
        check_output_path(output, "--output")
        if checkpoint is not None:
            check_output_path(checkpoint, "--checkpoint")
        if records is not None:
            check_output_path(records, "--records")
        if load is not None and not load.is_file():
            raise InvalidOption(f"--load {load}: no such file")
        check_positive_count(epochs, "--epochs", high=10_000)
        check_positive_count(groups, "--groups", high=8)
        check_positive_count(alpha, "--alpha", high=48)
        check_positive_count(samples, "--samples", high=10_000)
        check_positive_count(torch_threads, "--torch-threads", high=256)
        check_number(mac_per_s, "--mac-per-s", 1.0, 1e21)
        check_number(bandwidth_mbps, "--bandwidth-mbps", 0.0, 1e15, low_open=True)
        check_number(link_latency_ms, "--link-latency-ms", 0.0, 1e6)
        if link_latency_ms and bandwidth_mbps is None:  # the measured links carry their own latency
            raise InvalidOption(f"--link-latency-ms {link_latency_ms:g}: applies with --bandwidth-mbps (without "
                                "it the links are measured, latency included)")
        check_seed(seed)
        per_stage = _blocks(blocks_per_stage)
        require_torch("profile-separable")
        import json

        import torch

        from splitopt.core.instance_io import instance_json
        from splitopt.torch.separable_model import SepConfig, accuracy, identity_policy, intensive_policy
        from splitopt.torch.separable_nas import load_models, save_models
        from splitopt.torch.separable_profile import TrainedPair, measured_records, profile_instance, train_pair

        torch.set_num_threads(torch_threads)
        if load is not None:
            try:
                model, reference, _ = load_models(load)
            except ValueError as e:
                raise InvalidOption(f"--load {e}") from None
            from splitopt.torch.separable_model import load_digits_split

            pair = TrainedPair(model, reference, load_digits_split(seed), seed=seed)
        else:
            try:
                config = SepConfig(groups=groups, alpha=alpha, blocks_per_stage=per_stage)
            except ValueError as e:
                raise InvalidOption(str(e)) from None
            pair = train_pair(config, seed=seed, epochs=epochs)
            if checkpoint is not None:
                save_models(checkpoint, pair.model, pair.reference, {"seed": seed, "epochs": epochs})
        c = pair.model.config
        recs, details = measured_records(pair.model, pair.data, samples=samples, statistic=statistic.value, seed=seed)
        link = None if bandwidth_mbps is None else {"bits_per_s": bandwidth_mbps * 1e6, "latency_ms": link_latency_ms}
        prof = profile_instance(pair.model, name=name or f"separable_digits_{devices.value}", devices=devices.value,
                                link=link, mac_per_s=mac_per_s, records=recs,
                                source={"seed": seed, "checkpoint": str(checkpoint or load or "") or None})
        write_output(output, "--output", instance_json(prof.instance))
        d = pair.data
        acc = {"no_communication": accuracy(pair.model, d.x_test, d.y_test, identity_policy(c)),
               "all_intensive_100_float32": accuracy(pair.model, d.x_test, d.y_test, intensive_policy(c))}
        if pair.reference is not None:
            acc["unseparated"] = accuracy(pair.reference, d.x_test, d.y_test, None)
        if records is not None:
            write_output(records, "--records", json.dumps({"accuracy": recs, "classes": details,
                                                           "test_accuracy": acc}, indent=1) + "\n")
        console.print(f"wrote {output}: G = {c.groups}, {c.blocks} blocks, alpha = {c.alpha}, {len(recs)} accuracy "
                      f"records; test accuracy " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()),
                      highlight=False)


def run_separable_command(
    instance: Path = typer.Argument(..., help="Separable instance made by `splitopt profile-separable`."),
    plan: Path = typer.Argument(..., help="Separable plan JSON (splitopt-separable-plan/1, or the output of `solve --json`)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="The trained weights (default: the instance's model with seeded random weights; outputs and bytes are checked either way)."),
    repeats: int = typer.Option(10, "--repeats", help="Timed inferences (median)."),
    batch: int = typer.Option(1, "--batch", help="Images per inference (bytes are reported per image)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds before the workers are stopped."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Run PLAN over G worker processes (one per device, gloo on localhost), each holding
    only its part, and compare: the head's logits with the single-process forward, the
    bytes sent with the evaluator's total_bytes, the median wall time with the
    evaluator's latency. Exit status: 0 outputs and bytes agree, 1 they do not, 2 bad
    input, 3 torch missing."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import check_number, check_positive_count, console, errors, print_json, require_torch
    from splitopt.core.errors import InvalidOption, NotApplicable, SplitoptError

    with errors():
        check_positive_count(repeats, "--repeats", high=10_000)
        check_positive_count(batch, "--batch", high=360)
        check_number(timeout, "--timeout", 1.0, 86_400.0)
        if checkpoint is not None and not checkpoint.is_file():
            raise InvalidOption(f"--checkpoint {checkpoint}: no such file")
        inst = load_instance(instance)
        if inst.problem != "separable":
            raise NotApplicable(f"{instance}: problem '{inst.problem}' is not a separable instance "
                                f"(made by `splitopt profile-separable`)")
        the_plan = load_plan(inst, plan)
        if the_plan.ring:
            raise NotApplicable(f"{plan}: a ring all-reduce plan is the unseparated model; run-separable runs "
                                f"separable policies")
        require_torch("run-separable")
        import torch

        from splitopt.families.separable.evaluate import evaluate
        from splitopt.torch.separable_model import load_digits_split
        from splitopt.torch.separable_profile import check_matches, model_from_source
        from splitopt.torch.separable_run import RunError, run_policy

        try:
            model, info = model_from_source(inst, checkpoint)
            check_matches(inst, model.config)
        except ValueError as e:
            raise InvalidOption(str(e)) from None
        torch.set_num_threads(1)
        metrics = evaluate(inst, the_plan)
        x = load_digits_split(info.get("seed", 0)).x_test[:batch]
        try:
            rep = run_policy(model, the_plan, x, repeats=repeats, timeout_s=timeout)
        except RunError as e:
            raise SplitoptError(f"run-separable: {e}") from None
        bytes_ok = abs(rep["bytes_per_sample"] - metrics.total_bytes) < 0.5
        report = {"instance": inst.name, "plan": str(plan), "weights": info.get("weights"), "batch": batch,
                  "repeats": repeats, "devices": model.config.groups, "outputs_equal": rep["ok"],
                  "max_abs_diff": rep["max_abs_diff"], "bytes_per_sample": rep["bytes_per_sample"],
                  "predicted_bytes": metrics.total_bytes, "bytes_equal": bytes_ok,
                  "sent_bytes": rep["sent_bytes"], "measured_ms": rep["median_ms"], "times_ms": rep["times_ms"],
                  "predicted_ms": metrics.latency_ms,
                  "ratio": rep["median_ms"] / metrics.latency_ms if metrics.latency_ms > 0 else None,
                  "ratio_to_ring": metrics.ratio_to_ring, "parts_params": rep["parts_params"],
                  "ok": bool(rep["ok"] and bytes_ok)}
    if as_json:
        print_json(report)
    else:
        console.print(f"[bold]{report['instance']}[/bold] <- {plan}: {report['devices']} processes (gloo, "
                      f"localhost), batch {batch}, {repeats} run(s), weights {report['weights']}", highlight=False)
        console.print(f"  bytes sent per image: {report['bytes_per_sample']:,.0f} (evaluator {metrics.total_bytes:,.0f}"
                      f", {metrics.ratio_to_ring:.2%} of the ring all-reduce)", highlight=False)
        console.print(f"  latency: measured {report['measured_ms']:.2f} ms (median), predicted "
                      f"{report['predicted_ms']:.2f} ms (ratio {report['ratio']:.2f})", highlight=False)
        console.print(f"  max abs difference vs the single-process forward: {report['max_abs_diff']:.3g}",
                      highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
    if not report["ok"]:
        raise typer.Exit(1)
