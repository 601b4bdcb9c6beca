"""``splitopt profile MODEL -o FILE``: build an instance from a model (torch bridge:
capture, error tables, optional host latency). Imports torch only when it runs; the
output path is checked before the (minutes-long) profile starts."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer


class Preset(str, Enum):
    eyeriss = "eyeriss"
    splitnets = "splitnets"


def profile_command(
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
    from splitopt.cli.common import (check_output_path, check_positive_count, check_seed, console, errors,
                                     require_torch, write_output)
    from splitopt.core import presets
    from splitopt.core.errors import NotApplicable
    from splitopt.core.instance_io import instance_json

    with errors():
        # every option and the output path before torch is imported (seconds)
        check_output_path(output, "--output")
        check_positive_count(repeats, "--repeats", high=10_000)
        check_positive_count(calibration_images, "--calibration-images", low=0, high=10_000)
        check_seed(seed)
        if input_high is not None:
            check_positive_count(input_high, "--input-high", high=2**62)
        if edge_host and not measure:
            raise NotApplicable("--edge-host: needs --measure (the host's latencies are measured)")
        require_torch("profile")
        from splitopt.torch.models import build_model
        from splitopt.torch.profile import DEFAULT_BITS, profile as run_profile
        from splitopt.torch.user_model import capture_errors, factory_name, is_spec

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
        write_output(output, "--output", instance_json(inst))
        console.print(f"wrote {output}: {len(inst.layers)} layers, {sum(l.macs for l in inst.layers) / 1e9:.3f} GMAC, "
                      f"{sum(l.weights for l in inst.layers) / 1e6:.3f} M weights, problem {inst.settings.problem}",
                      highlight=False)
