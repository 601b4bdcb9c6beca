"""``splitopt profile MODEL -o FILE``: build an instance from a model. Which profiler runs
is decided by the model (or ``--family``): a model a family's torch side profiles itself
(a block model of the loading family, the separable family's ``sep_resnext``;
:attr:`splitopt.torch.side.TorchSide.profile_models`), else a layer-graph model (a
built-in name, a user factory ``PATH.py:FACTORY``, an ``.onnx`` or ``.pt2`` file;
:mod:`splitopt.torch.profile_model`) on the hardware of ``--preset``/``--topology``,
whose family the topology decides. The options of one profiler are grouped in
``--help``; an option the chosen profiler does not take is one line naming it (exit 2).
Every option and output path is checked before torch is imported (the profile itself
takes seconds to minutes).

``splitopt devices`` (no torch) lists the device presets.
"""

from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from splitopt.cli.model_options import input_dtype_option, input_high_option, input_shape_option
from splitopt.cli.progress import quiet_option, showing_progress

#: the panels of ``splitopt profile --help``
LAYER_GRAPH_PANEL = "Layer-graph models (built-in, PATH.py:FACTORY, .onnx, .pt2)"
LOADING_PANEL = "Loading options (block models)"
SEPARABLE_PANEL = "Separable options (sep_resnext)"
LLM_PANEL = "Decoder options (gpt2, gpt2-l.., llama-l..)"
AGENTS_PANEL = "Device agents (layer-graph models measured on `splitopt agent` devices)"
#: link bandwidth (bits/s) of topologies built from device presets (help text; the default
#: is :data:`splitopt.torch.profile_model.DEFAULT_PRESET_BANDWIDTH`)
DEFAULT_PRESET_BANDWIDTH = 1e7


class Topology(str, Enum):
    """The topologies of device presets (``Family.topology``; a test checks they are the
    registered families')."""

    edge_cloud = "edge-cloud"
    chain = "chain"  # not a family: the --topology value a user types (Family.topology; tested to match)
    mesh = "mesh"  # not a family: the --topology value a user types (Family.topology; tested to match)


class Cache(str, Enum):
    warm = "warm"
    cold = "cold"


class Objective(str, Enum):
    latency = "latency"
    balance = "balance"


class DeviceProfile(str, Enum):
    host = "host"
    analytic = "analytic"


class Statistic(str, Enum):
    min = "min"
    mean = "mean"


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
    model: str = typer.Argument(..., help="resnet50, mobilenet_v2, googlenet or tiny_gpt2 (built in code, random init), a user model PATH.py:FACTORY or package.module:FACTORY, where FACTORY() returns an nn.Module or (module, example_input), an ONNX file MODEL.onnx (the onnx extra) or a torch.export program saved as MODEL.pt2; a block model of the loading family (resnet152, inception_v3, densenet201, mobilenet_v1: measured loading from checkpoint files); sep_resnext (the separable family's network on the digits, trained here); a decoder language model built from its config (gpt2, gpt2-l{layers}-h{hidden}-a{heads}-v{vocab}, llama-l{layers}-h{hidden}-a{heads}-kv{kv_heads}-i{intermediate}-v{vocab}: an llm instance)."),
    output: Path = typer.Option(..., "--output", "-o", help="Instance JSON file to write."),
    family: Optional[str] = typer.Option(None, "--family", help="The family to profile MODEL for, where MODEL alone does not say it: a family with its own profiler (loading, separable) or with a topology of device presets (edge_cloud, chain, mesh: as --topology). Default: the family whose profiler builds MODEL, else a layer-graph model's topology."),
    repeats: Optional[int] = typer.Option(None, "--repeats", help="Timed runs per measurement (median; default 5)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the model's random weights (user models: torch's global seed while FACTORY runs; default 0)."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name (default: MODEL_PRESET for built-in models, the factory's name for user models, loading_MODEL_host, separable_digits_DEVICES)."),
    torch_threads: Optional[int] = typer.Option(None, "--torch-threads", help="Block models and sep_resnext: torch intra-op threads for inference and training (default 1)."),
    preset: Optional[str] = typer.Option(None, "--preset", rich_help_panel=LAYER_GRAPH_PANEL, help="eyeriss (default): Eyeriss edge, TPU cloud, 3 Mbit/s, split_bits {2,4,6,8} with the W8A8 error as budget and 4 MB; splitnets: 125 GOP/s sensor, 1.25 TOP/s aggregator, 25 % of a 1.2 Gbit/s bus, float split, 2 MB; or device presets in order, comma-separated (`splitopt devices` lists them), e.g. pi4,v100 (edge/cloud) or pi4,jetson,v100 (a chain; see --topology)."),
    topology: Optional[Topology] = typer.Option(None, "--topology", rich_help_panel=LAYER_GRAPH_PANEL, help="With device presets: edge-cloud (two devices), chain (links in the given order; the default for three or more) or mesh (a link from every device to every later one, shortest-path routing)."),
    bandwidth: Optional[float] = typer.Option(None, "--bandwidth", rich_help_panel=LAYER_GRAPH_PANEL, help=f"With device presets: every link's bandwidth, bits/s (default {DEFAULT_PRESET_BANDWIDTH:g}; vary it later with --set or `splitopt bandwidth`)."),
    calibration_images: Optional[int] = typer.Option(None, "--calibration-images", "--calibration", rich_help_panel=LAYER_GRAPH_PANEL, help="Synthetic calibration inputs for the error tables (default 8, the first 8 are those of the shipped instances; 0: none; the problem becomes the float split)."),
    measure: Optional[bool] = typer.Option(None, "--measure/--no-measure", rich_help_panel=LAYER_GRAPH_PANEL, help="Also measure every layer's latency on this host (median of --repeats) and add the host as device 'host' (default: no)."),
    edge_host: Optional[bool] = typer.Option(None, "--edge-host", rich_help_panel=LAYER_GRAPH_PANEL, help="With --measure: make the host the edge device (its measured latencies), linked to the cloud like the preset's edge."),
    agents: Optional[str] = typer.Option(None, "--agents", rich_help_panel=AGENTS_PANEL, help="The devices are device agents (`splitopt agent`): NAME=HOST:PORT,... or a JSON file {name: {\"address\": \"HOST:PORT\", \"peers\": {...}}} (what `splitopt testbed up --out` writes). Every agent measures every layer's latency (median of --repeats; its threads), every link of --topology is probed both ways, and each device's memory is the agent's --memory-bytes; devices are named after the agents. Edge/cloud: the first agent is the edge, the second the cloud; chain: the agents' order. Not with --preset, --bandwidth or --measure."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", rich_help_panel=AGENTS_PANEL, help="With --agents: the file holding the agents' token (default: the SPLITOPT_AGENT_TOKEN environment variable)."),
    edge: Optional[str] = typer.Option(None, "--edge", rich_help_panel=AGENTS_PANEL, help="With --agents and --topology edge-cloud: the agent that is the edge (default: the first)."),
    cloud: Optional[str] = typer.Option(None, "--cloud", rich_help_panel=AGENTS_PANEL, help="With --agents and --topology edge-cloud: the agent that is the cloud (default: the second, or the first that is not --edge)."),
    input_shape: Optional[str] = input_shape_option(LAYER_GRAPH_PANEL),
    input_dtype: Optional[str] = input_dtype_option(LAYER_GRAPH_PANEL),
    input_high: Optional[int] = input_high_option(LAYER_GRAPH_PANEL),
    threads: Optional[int] = typer.Option(None, "--threads", "-T", rich_help_panel=LOADING_PANEL, help="T: threads that load child models in parallel (needed for a block model)."),
    cache: Optional[Cache] = typer.Option(None, "--cache", rich_help_panel=LOADING_PANEL, help="Page cache before each timed load: warm (default; file read once before) or cold (fsync + POSIX_FADV_DONTNEED)."),
    width: Optional[float] = typer.Option(None, "--width", "--scale", rich_help_panel=LOADING_PANEL, help="Channel multiplier (default 1: the published model)."),
    depth: Optional[float] = typer.Option(None, "--depth", rich_help_panel=LOADING_PANEL, help="Multiplier of the repeated blocks per stage (default 1: the published model)."),
    image_size: Optional[int] = typer.Option(None, "--image-size", rich_help_panel=LOADING_PANEL, help="Input side in pixels (default 224; Inception-V3 299)."),
    children_max: Optional[int] = typer.Option(None, "--children-max", rich_help_panel=LOADING_PANEL, help="Most child models a plan may have (default max(8, the paper's Table 2 plan), at most the blocks)."),
    objective: Optional[Objective] = typer.Option(None, "--objective", rich_help_panel=LOADING_PANEL, help="latency (default: first response) or balance (heaviest child's load)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", rich_help_panel=SEPARABLE_PANEL, help="Write the trained weights here (a torch file: both networks and the configuration)."),
    load: Optional[Path] = typer.Option(None, "--load", rich_help_panel=SEPARABLE_PANEL, help="Take the networks from this checkpoint instead of training."),
    records: Optional[Path] = typer.Option(None, "--records", rich_help_panel=SEPARABLE_PANEL, help="Also write the accuracy records (settings.separable.accuracy) and the accuracies measured to this JSON file."),
    epochs: Optional[int] = typer.Option(None, "--epochs", rich_help_panel=SEPARABLE_PANEL, help="Stage-1 epochs (a random policy per mini-batch; default 25); about 1.8 s each on one thread."),
    groups: Optional[int] = typer.Option(None, "--groups", "-G", rich_help_panel=SEPARABLE_PANEL, help="G: devices (default 4; must divide the 8 paths)."),
    alpha: Optional[int] = typer.Option(None, "--alpha", rich_help_panel=SEPARABLE_PANEL, help="Blocks per transmission step (default 2; every stage must start a step)."),
    blocks_per_stage: Optional[str] = typer.Option(None, "--blocks-per-stage", rich_help_panel=SEPARABLE_PANEL, help="Residual blocks in each of the three stages (default 2,2,2)."),
    devices: Optional[str] = typer.Option(None, "--devices", rich_help_panel=SEPARABLE_PANEL, help="sep_resnext: host (default): G devices that are this host (measured layer times); analytic: G devices of --mac-per-s. A decoder: device names, comma-separated, each a process of this host with its measured times (default host,host2)."),
    mac_per_s: Optional[float] = typer.Option(None, "--mac-per-s", rich_help_panel=SEPARABLE_PANEL, help="analytic devices' MAC/s (default 0.85e8: the paper's Raspberry Pi 3B+, 1.7e8 FLOPS)."),
    bandwidth_mbps: Optional[float] = typer.Option(None, "--bandwidth-mbps", rich_help_panel=SEPARABLE_PANEL, help="Every link's rate in Mbit/s (default: host: measured between two gloo processes; analytic: 300)."),
    link_latency_ms: Optional[float] = typer.Option(None, "--link-latency-ms", rich_help_panel=SEPARABLE_PANEL, help="Every link's fixed ms per transfer (with --bandwidth-mbps)."),
    samples: Optional[int] = typer.Option(None, "--samples", rich_help_panel=SEPARABLE_PANEL, help="Policies measured per accuracy record's class (default 8)."),
    statistic: Optional[Statistic] = typer.Option(None, "--statistic", rich_help_panel=SEPARABLE_PANEL, help="A record's accuracy: min (default; conservative) or mean of its class's policies."),
    prompt_tokens: Optional[int] = typer.Option(None, "--prompt-tokens", rich_help_panel=LLM_PANEL, help="P: the scenario's prompt tokens (default 64)."),
    generated_tokens: Optional[int] = typer.Option(None, "--generated-tokens", rich_help_panel=LLM_PANEL, help="G: the scenario's generated tokens (default 32)."),
    prompt_lengths: Optional[str] = typer.Option(None, "--prompt-lengths", rich_help_panel=LLM_PANEL, help="Prompt lengths whose prefill is measured, increasing, comma-separated (default P/4,P/2,P,2P)."),
    contexts: Optional[str] = typer.Option(None, "--contexts", rich_help_panel=LLM_PANEL, help="Contexts at which one decode step is measured, increasing, at least two (default P/2,P+1,P+G/2,P+G)."),
    quiet: bool = quiet_option(),
) -> None:
    """Profile MODEL into an instance.

    A layer-graph model (built in, yours, .onnx or .pt2): torch.export capture (BN
    folding, activation fusion), MACs, weights, shapes, quantization-error tables on
    calibration inputs, and optionally per-layer latency measured on this host; the
    hardware from --preset/--topology decides the family (edge/cloud, chain, mesh), e.g.
    `splitopt profile my_net.py:build --input-shape 1,3,32,32 -o my_net.json`. A block
    model: its blocks measured on this host (inference, load from checkpoint files) into
    a loading instance (`--threads T` loaders). sep_resnext: the Sep-ResNeXt trained (or
    --load-ed) on the digits, its layers and the accuracy of policy classes measured into
    a separable instance. A decoder (gpt2, or gpt2-l4-h256-a4-v4096 and
    llama-l6-h384-a6-kv2-i1024-v4096 style names: the sizes in the name): the Hugging Face
    model built from its config with random weights, each part's prefill and decode step
    measured on this host into an llm instance over --devices processes of this host.
    With --agents (a layer-graph model): the devices and links are those of running
    device agents, measured by them (`splitopt profile mobilenet_v2 --agents
    agents.json --topology chain -o mb.json`)."""
    from splitopt.cli.common import check_output_path, errors, given_options, require_torch

    values = given_options(repeats=repeats, seed=seed, name=name, torch_threads=torch_threads, preset=preset,
                           topology=topology, bandwidth=bandwidth, calibration_images=calibration_images,
                           measure=measure, edge_host=edge_host, agents=agents, token_file=token_file, edge=edge,
                           cloud=cloud, input_shape=input_shape, input_dtype=input_dtype,
                           input_high=input_high, threads=threads, cache=cache, width=width, depth=depth,
                           image_size=image_size, children_max=children_max, objective=objective,
                           checkpoint=checkpoint, load=load, records=records, epochs=epochs, groups=groups,
                           alpha=alpha, blocks_per_stage=blocks_per_stage, devices=devices, mac_per_s=mac_per_s,
                           bandwidth_mbps=bandwidth_mbps, link_latency_ms=link_latency_ms, samples=samples,
                           statistic=statistic, prompt_tokens=prompt_tokens, generated_tokens=generated_tokens,
                           prompt_lengths=prompt_lengths, contexts=contexts)
    with errors():
        # every option and output path before torch is imported (seconds); a user model's
        # source file is an input (it had been overwritten with the instance)
        from splitopt.torch.profile_model import model_sources, needs_torch, profile_model

        check_output_path(output, "--output", inputs=model_sources(model))
        side, values = _profiler(model, family, values)
        options_type = side.profile_options if side is not None else _layer_graph_options()
        _check_outputs(options_type, values, output)
        from splitopt.torch.side import build_options

        what = f"`splitopt profile {model}`"
        options = build_options(options_type, values, what)
        if side is not None or needs_torch(model):
            require_torch("profile")
        with showing_progress(quiet):
            profiled = side.profile(model, options) if side is not None else profile_model(model, options)
        write_profiled(profiled, output)


def _layer_graph_options() -> type:
    from splitopt.torch.profile_model import LayerGraphProfileOptions

    return LayerGraphProfileOptions


def _profiler(model: str, family: Optional[str], values: dict[str, Any]):
    """``(side, values)``: the torch side whose own profiler builds MODEL (None: a
    layer-graph model), from ``--family`` or else from the model; ``--family`` of a
    family with a topology sets the topology. InvalidOption (one line) for a family that
    profiles nothing, or one that does not build MODEL."""
    from splitopt.core.errors import InvalidOption
    from splitopt.families.registry import FAMILIES
    from splitopt.families.registry import family as family_named
    from splitopt.torch.side import sides, torch_side

    if family is None:
        return next((s for s in sides() if s.builds_model(model)), None), values
    if family not in FAMILIES:
        raise InvalidOption(f"--family {family}: unknown family (families: {', '.join(FAMILIES)})")
    fam = family_named(family)
    side = torch_side(fam)
    if side is not None and side.profile_models:
        side.check_profile_model(model)
        return side, values
    if fam.topology is None:
        raise InvalidOption(f"--family {family}: no profiler builds its instances from a model")
    if values.get("topology", fam.topology) != fam.topology:
        raise InvalidOption(f"--family {family}: its topology is {fam.topology}, not --topology {values['topology']}")
    return None, dict(values, topology=fam.topology)


def _check_outputs(options_type: type, values: dict[str, Any], output: Path) -> None:
    """The files the profiler writes besides ``--output`` (its options marked ``output``):
    each writable and none the same file as another."""
    import dataclasses

    from splitopt.cli.common import check_distinct_outputs, check_output_path
    from splitopt.torch.side import option_name

    outputs = [("--output", output)]
    for f in dataclasses.fields(options_type):
        if f.metadata.get("output") and values.get(f.name) is not None:
            check_output_path(values[f.name], option_name(f.name))
            outputs.append((option_name(f.name), values[f.name]))
    check_distinct_outputs(outputs)


def write_profiled(profiled, output: Path) -> None:
    """Write a profiler's instance to ``output`` and its other files, and say so."""
    from splitopt.cli.common import console, write_output
    from splitopt.core.instance_io import instance_json

    write_output(output, "--output", instance_json(profiled.instance))
    for option, path, text in profiled.outputs:
        write_output(path, option, text)
    console.print(f"wrote {output}: {profiled.summary}", highlight=False)
