"""``splitopt profile MODEL -o FILE``: build an instance from a model (torch bridge:
capture, error tables, optional host latency). Imports torch only when it runs; the
output path and the preset are checked before the (minutes-long) profile starts.

``--preset`` names the hardware: the papers' scenarios (``eyeriss``, ``splitnets``) or
device presets (``splitopt.core.presets``, listed by ``splitopt devices``) in order,
``--preset pi4,jetson,v100``, built into an edge/cloud, chain or mesh topology
(``--topology``). ``splitopt devices`` (no torch) lists the device presets.

MODEL by its suffix: ``MODEL.onnx`` goes to the ONNX bridge (:mod:`splitopt.onnx`: onnx +
onnxruntime, no torch; the onnx extra, its absence one line, exit 3), ``MODEL.pt2`` (a
``torch.export.save`` file) to the torch capture of the saved program; anything else is a
built-in name or a user factory spec."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from splitopt.cli.progress import quiet_option, showing_progress

#: the papers' scenarios ``--preset`` names (a device pair, a link and settings each)
SCENARIOS = ("eyeriss", "splitnets")
#: link bandwidth (bits/s) of topologies built from device presets
DEFAULT_PRESET_BANDWIDTH = 1e7


class Topology(str, Enum):
    edge_cloud = "edge-cloud"
    chain = "chain"
    mesh = "mesh"


def preset_hardware(preset: str, topology: Optional[Topology], bandwidth: float, bits: tuple[int, ...],
                    quantized: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Devices, links and settings of ``--preset`` (a scenario or a comma-separated list
    of device presets) and ``--topology`` (None: edge-cloud for two devices, chain for
    more). ``bits``: the edge bit-widths to offer (those the edge device supports);
    ``quantized``: error tables will be measured (edge/cloud: problem split_bits).
    InvalidOption (one line naming the option) for an unknown preset, a topology
    that does not fit, or a bad bandwidth."""
    from splitopt.cli.common import check_number
    from splitopt.core import presets
    from splitopt.core.errors import InvalidOption

    names = [p.strip() for p in preset.split(",")]
    if len(names) == 1 and names[0] in SCENARIOS:
        if topology not in (None, Topology.edge_cloud):
            raise InvalidOption(f"--topology {topology.value}: preset '{names[0]}' is an edge/cloud scenario; give "
                                "device presets for a chain or mesh, e.g. --preset pi4,jetson,v100")
        if names[0] == "eyeriss":
            devices, links = [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()]
            settings = {"problem": "split_bits" if quantized else "split", "edge": "eyeriss",
                        "cloud": "tpu", "bit_widths": list(bits), "cloud_bits": 16, "edge_memory_bytes": 4e6}
        else:
            devices = [presets.splitnets_sensor(), presets.splitnets_aggregator()]
            links = [presets.splitnets_bus_share(0.25)]
            settings = {"problem": "split", "edge": "sensor", "cloud": "aggregator", "bit_widths": [8],
                        "cloud_bits": 8, "edge_memory_bytes": 2e6}
        return devices, links, settings
    unknown = [n for n in names if n not in presets.DEVICE_PRESETS]
    if unknown or len(names) < 2:
        raise InvalidOption(f"--preset {preset}: give a scenario ({', '.join(SCENARIOS)}) or at least two device "
                            f"presets separated by commas (" + ", ".join(presets.preset_names()) + ")"
                            + (f"; unknown: {unknown[0]}" if unknown else ""))
    check_number(bandwidth, "--bandwidth", 1.0, 1e21)
    kind = topology.value if topology is not None else ("edge-cloud" if len(names) == 2 else "chain")
    devices, links, settings = presets.topology(names, kind, bandwidth)
    common = [b for b in (16, 8, 32) if all(b in d["bit_widths"] for d in devices)]
    if not common:
        raise InvalidOption(f"--preset {preset}: the devices share no bit-width for the reference precision")
    settings["cloud_bits"] = common[0]
    if kind == "edge-cloud":
        edge_bits = [b for b in bits if b in devices[0]["bit_widths"]]
        if quantized and edge_bits:
            settings.update(problem="split_bits", bit_widths=edge_bits)
        elif common[0] not in devices[0]["bit_widths"]:
            raise InvalidOption(f"--preset {preset}: edge '{names[0]}' cannot run the reference precision")
    return devices, links, settings


def devices_command(
    as_json: bool = typer.Option(False, "--json", help="Print every preset as JSON: its name, source and the device in the instance's form."),
) -> None:
    """List the device presets (vendor peak rates are assumptions; each states its
    source). Use one in an instance by copying its device object (`--json`) into
    "devices", or build the topology with `splitopt profile MODEL --preset A,B[,C...]
    [--topology edge-cloud|chain|mesh]`; change a rate with
    `--set devices[NAME].mac_per_s=...`."""
    from rich.table import Table

    from splitopt.cli.common import console, print_json
    from splitopt.core import presets

    rows = presets.list_presets()
    if as_json:
        print_json(rows)
        return
    table = Table(title="device presets (splitopt.core.presets; vendor peak rates are assumptions)")
    for col in ("preset", "MAC/s", "off-chip B/s", "on-chip B", "memory B", "bit widths", "source"):
        table.add_column(col, justify="left" if col in ("preset", "source", "bit widths") else "right")
    for row in rows:
        d = row["device"]
        off = "-" if d["offchip_bytes_per_s"] is None else f"{d['offchip_bytes_per_s']:.3g}"
        table.add_row(row["preset"], f"{d['mac_per_s']:.4g}", off, f"{d['onchip_bytes']:.3g}",
                      f"{d['memory_bytes']:.3g}", ",".join(str(b) for b in d["bit_widths"]), row["source"])
    console.print(table)


def profile_command(
    model: str = typer.Argument(..., help="resnet50, mobilenet_v2, googlenet or tiny_gpt2 (built in code, random init), a user model PATH.py:FACTORY or package.module:FACTORY, where FACTORY() returns an nn.Module or (module, example_input), an ONNX file MODEL.onnx (the onnx extra) or a torch.export program saved as MODEL.pt2."),
    output: Path = typer.Option(..., "--output", "-o", help="Instance JSON file to write."),
    preset: str = typer.Option("eyeriss", "--preset", help="eyeriss: Eyeriss edge, TPU cloud, 3 Mbit/s, split_bits {2,4,6,8} with the W8A8 error as budget and 4 MB; splitnets: 125 GOP/s sensor, 1.25 TOP/s aggregator, 25 % of a 1.2 Gbit/s bus, float split, 2 MB; or device presets in order, comma-separated (`splitopt devices` lists them), e.g. pi4,v100 (edge/cloud) or pi4,jetson,v100 (a chain; see --topology)."),
    topology: Optional[Topology] = typer.Option(None, "--topology", help="With device presets: edge-cloud (two devices), chain (links in the given order; the default for three or more) or mesh (a link from every device to every later one, shortest-path routing)."),
    bandwidth: float = typer.Option(DEFAULT_PRESET_BANDWIDTH, "--bandwidth", help="With device presets: every link's bandwidth, bits/s (vary it later with --set or `splitopt bandwidth`)."),
    calibration_images: int = typer.Option(8, "--calibration-images", "--calibration", help="Synthetic calibration inputs for the error tables (the first 8 are those of the shipped instances; 0: none; the problem becomes the float split)."),
    measure: bool = typer.Option(False, "--measure/--no-measure", help="Also measure every layer's latency on this host (median of --repeats) and add the host as device 'host'."),
    edge_host: bool = typer.Option(False, "--edge-host", help="With --measure: make the host the edge device (its measured latencies), linked to the cloud like the preset's edge."),
    repeats: int = typer.Option(5, "--repeats", help="Runs per layer latency (median)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the model's random weights (user models: torch's global seed while FACTORY runs)."),
    input_shape: Optional[str] = typer.Option(None, "--input-shape", help="User models, .onnx and .pt2 files: input shape with batch 1, e.g. 1,3,32,32 (default: the shape of the factory's example input, the ONNX model's declared shape with a dynamic batch as 1, the saved program's example input)."),
    input_dtype: Optional[str] = typer.Option(None, "--input-dtype", help="User models: input dtype, float32 (default; standard normal inputs) or int64 for token ids (uniform in [0, --input-high)); also float64, float16, bfloat16, int32."),
    input_high: Optional[int] = typer.Option(None, "--input-high", help="User models and .onnx/.pt2 files with integer inputs: exclusive upper bound of the random ids, e.g. the vocabulary size (default: the factory's example input max + 1)."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name (default: MODEL_PRESET for built-in models, the factory's name for user models)."),
    quiet: bool = quiet_option(),
) -> None:
    """Profile MODEL into an instance: torch.export capture (BN folding, activation fusion),
    MACs, weights, shapes, quantization-error tables on calibration inputs, and optionally
    per-layer latency measured on this host.

    MODEL is a built-in name or any traceable nn.Module of yours, e.g.
    `splitopt profile my_net.py:build --input-shape 1,3,32,32 -o my_net.json`;
    the run and calibration inputs are seeded synthetic ones of that shape and dtype."""
    from splitopt.cli.common import (check_output_path, check_positive_count, console, errors,
                                     require_torch, write_output)
    from splitopt.cli.model_options import check_model_options
    from splitopt.core.errors import NotApplicable
    from splitopt.core.instance_io import instance_json

    with errors():
        # every option and the output path before torch is imported (seconds); a user
        # model's source file is an input (it had been overwritten with the instance)
        where = model.rpartition(":")[0] if ":" in model else model
        source = [Path(where)] if where.endswith((".py", ".onnx", ".pt2")) else []
        check_output_path(output, "--output", inputs=source)
        check_positive_count(repeats, "--repeats", high=10_000)
        check_positive_count(calibration_images, "--calibration-images", low=0, high=10_000)
        check_model_options(seed, input_high, input_shape, input_dtype)
        if edge_host and not measure:
            raise NotApplicable("--edge-host: needs --measure (the host's latencies are measured)")
        # the bits of the error tables (splitopt.torch.profile.DEFAULT_BITS, kept off torch here)
        devices, links, settings = preset_hardware(preset, topology, bandwidth, (2, 4, 6, 8), calibration_images > 0)
        if edge_host and settings["problem"] not in ("split", "split_bits"):
            raise NotApplicable(f"--edge-host: applies to edge/cloud presets, not to a {settings['problem']}")
        if edge_host:
            links.append(dict(links[0], source="host"))
            settings["edge"] = "host"
        # MODEL by its suffix: an ONNX file (the onnx extra, no torch), a saved torch.export program, else a
        # built-in name or a user factory
        suffix = Path(model).suffix.lower() if not is_factory_spec(model) else ""
        with showing_progress(quiet):
            if suffix == ".onnx":
                inst = _profile_onnx(model, devices, links, settings, calibration_images, measure, repeats, input_shape,
                                     input_dtype, input_high, name)
            else:
                require_torch("profile")
                from splitopt.torch.profile import profile as run_profile

                if suffix == ".pt2":
                    module, example, calibration_fn, guard = _saved_program(model, input_shape, input_dtype, input_high)
                    rename, name = None, name or Path(model).stem
                else:
                    from splitopt.torch.models import build_model
                    from splitopt.torch.user_model import capture_errors as guard, factory_name, is_spec

                    module, rename, example, _, calibration_fn = build_model(
                        model, seed, input_shape=input_shape, input_dtype=input_dtype, input_high=input_high)
                    if name is None:
                        name = factory_name(model) if is_spec(model) else f"{model}_{preset.replace(',', '_')}"
                # the first 8 are those of the shipped instances; more are drawn on request
                calibration = (calibration_fn(max(calibration_images, 8))[:calibration_images]
                               if calibration_images > 0 else None)
                with guard(module, example, what=f"profiling '{model}'"):
                    inst = run_profile(module, example, devices, links, settings, name=name, input_high=input_high,
                                       calibration=calibration, measure_latency=measure, repeats=repeats, rename=rename)
        if inst.problem == "split_bits":  # the budget: the whole network's error at W8A8
            w8a8 = sum(l.weight_error.get(8, 0.0) + l.activation_error.get(8, 0.0) for l in inst.layers)
            inst = inst.with_settings(error_budget=w8a8)
        write_output(output, "--output", instance_json(inst))
        console.print(f"wrote {output}: {len(inst.layers)} layers, {sum(l.macs for l in inst.layers) / 1e9:.3f} GMAC, "
                      f"{sum(l.weights for l in inst.layers) / 1e6:.3f} M weights, problem {inst.problem}",
                      highlight=False)


def is_factory_spec(model: str) -> bool:
    """``PATH.py:FACTORY`` or ``package.module:FACTORY`` (not a model file)."""
    return ":" in Path(model).name


def _profile_onnx(model: str, devices: list, links: list, settings: dict, calibration: int, measure: bool,
                  repeats: int, input_shape: Optional[str], input_dtype: Optional[str], input_high: Optional[int],
                  name: Optional[str]):
    """The instance of an ONNX file (the onnx extra; no torch)."""
    from splitopt.core.errors import InvalidModel, NotApplicable
    from splitopt.onnx.deps import require_onnx

    if input_dtype is not None:
        raise NotApplicable("--input-dtype: an ONNX model declares its input types; not applicable to .onnx files")
    path = Path(model).expanduser()
    if not path.is_file():
        raise InvalidModel(f"model file '{model}' not found" if not path.exists() else f"model file '{model}' is not a file")
    require_onnx("splitopt profile MODEL.onnx")
    from splitopt.onnx.profile import profile_onnx

    return profile_onnx(path, devices, links, settings, name=name or path.stem, input_shape=input_shape,
                        input_high=input_high, calibration=calibration, measure_latency=measure, repeats=repeats)


def _saved_program(model: str, input_shape: Optional[str], input_dtype: Optional[str], input_high: Optional[int]):
    """``(program, example input, calibration inputs(n), error guard)`` of a
    ``torch.export.save`` file: the example is the saved example input unless
    ``--input-shape``/``--input-dtype`` ask for another; calibration inputs are seeded
    synthetic ones of that shape and dtype (those of user models)."""
    import contextlib

    import torch

    from splitopt.core.errors import InvalidModel, SplitoptError
    from splitopt.torch.capture import load_exported
    from splitopt.torch.seeds import CALIBRATION_SEED, RUN_INPUT_SEED
    from splitopt.core.input_text import parse_shape
    from splitopt.torch.user_model import one_line, parse_dtype, quiet_torch, synthetic_inputs

    path = Path(model).expanduser()
    if not path.is_file():
        raise InvalidModel(f"model file '{model}' not found" if not path.exists() else f"model file '{model}' is not a file")
    try:
        with quiet_torch():
            program, saved = load_exported(str(path))
    except ValueError as e:
        raise InvalidModel(str(e)) from e
    dtype = parse_dtype(input_dtype) if input_dtype is not None else (saved.dtype if saved is not None else torch.float32)
    if input_shape is not None:
        shape = parse_shape(input_shape)
    elif saved is not None:
        shape = (1, *saved.shape[1:])
    else:
        raise InvalidModel(f"--input-shape: needed for '{model}' (the saved program has a dynamic input shape "
                           f"and no example input); give e.g. --input-shape 1,3,224,224")
    high = input_high
    if not dtype.is_floating_point and high is None:
        if saved is not None and not saved.dtype.is_floating_point and saved.numel():
            high = int(saved.max()) + 1
        else:
            raise InvalidModel("--input-high: needed for a program with integer inputs (the exclusive upper bound "
                               "of the random ids)")
    per_sample = tuple(shape[1:])
    if saved is not None and tuple(saved.shape) == tuple(shape) and saved.dtype == dtype:
        example = saved
    else:
        example = synthetic_inputs(1, per_sample, dtype, high, RUN_INPUT_SEED)

    def calibration(n: int) -> torch.Tensor:
        return synthetic_inputs(n, per_sample, dtype, high, CALIBRATION_SEED)

    @contextlib.contextmanager
    def guard(module, example, what: str):
        try:
            with quiet_torch():
                yield
        except SplitoptError:
            raise
        except Exception as e:  # noqa: BLE001 - reported as bad input, one line
            raise InvalidModel(f"{what} failed: {one_line(e)}") from e

    return program, example, calibration, guard
