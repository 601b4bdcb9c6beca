"""``splitopt profile-loading MODEL -o FILE --threads T`` and ``splitopt run-loading
INSTANCE PLAN --model MODEL``: the loading family's torch bridge
(:mod:`splitopt.torch.loading`). Both import torch only when they run; options, paths,
the instance and the plan are checked first (one line, exit 2; torch missing: exit 3).

Models (built in code, random init): ``resnet152``, ``inception_v3``, ``densenet201``,
``mobilenet_v1`` (:mod:`splitopt.torch.loading_models`), ``--width``/``--depth`` to
shrink them. Examples::

    splitopt profile-loading resnet152 -o r152.json --threads 2 --cache warm --repeats 5
    splitopt solve r152.json --time-limit 30 --json > plan.json
    splitopt run-loading r152.json plan.json --model resnet152 --mode threads --repeats 3
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

#: the block models (mirrors splitopt.torch.loading_models.MODEL_NAMES, which needs torch)
BLOCK_MODELS = ("resnet152", "inception_v3", "densenet201", "mobilenet_v1")


class Cache(str, Enum):
    warm = "warm"
    cold = "cold"


class Mode(str, Enum):
    threads = "threads"
    processes = "processes"


class Objective(str, Enum):
    latency = "latency"
    balance = "balance"


def _check_model(model: str, option: str = "MODEL") -> None:
    from splitopt.core.errors import InvalidOption

    if model not in BLOCK_MODELS:
        raise InvalidOption(f"{option}: unknown block model '{model}' (choose from {', '.join(BLOCK_MODELS)})")


def profile_loading_command(
    model: str = typer.Argument(..., help="resnet152, inception_v3, densenet201 or mobilenet_v1 (built in code, random init)."),
    output: Path = typer.Option(..., "--output", "-o", help="Loading instance JSON file to write."),
    threads: int = typer.Option(..., "--threads", "-T", help="T: threads that load child models in parallel."),
    cache: Cache = typer.Option(Cache.warm, "--cache", help="Page cache before each timed load: warm (file read once before) or cold (fsync + POSIX_FADV_DONTNEED)."),
    repeats: int = typer.Option(5, "--repeats", help="Timed runs per measurement (median)."),
    width: float = typer.Option(1.0, "--width", "--scale", help="Channel multiplier (1: the published model)."),
    depth: float = typer.Option(1.0, "--depth", help="Multiplier of the repeated blocks per stage (1: the published model)."),
    image_size: Optional[int] = typer.Option(None, "--image-size", help="Input side in pixels (default 224; Inception-V3 299)."),
    children_max: Optional[int] = typer.Option(None, "--children-max", help="Most child models a plan may have (default max(8, the paper's Table 2 plan), at most the blocks)."),
    objective: Objective = typer.Option(Objective.latency, "--objective", help="latency (first response) or balance (heaviest child's load)."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="torch intra-op threads for inference (1 leaves the other cores to the loading threads; run-loading uses the same)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    name: Optional[str] = typer.Option(None, "--name", help="Instance name (default loading_MODEL_host)."),
) -> None:
    """Measure MODEL on this host into a loading instance: per block its inference time,
    MACs, weights and the time to load it from its own checkpoint file; the per-file fixed
    cost, one thread's rate and what T threads get together."""
    from splitopt.cli.common import (check_number, check_output_path, check_positive_count, check_seed, console,
                                     errors, require_torch, write_output)
    from splitopt.core.errors import InvalidOption

    with errors():
        check_output_path(output, "--output")
        _check_model(model)
        check_positive_count(threads, "--threads", high=64)
        check_positive_count(repeats, "--repeats", high=1000)
        check_positive_count(torch_threads, "--torch-threads", high=256)
        check_number(width, "--width", 0.0, 4.0, low_open=True)
        check_number(depth, "--depth", 0.0, 4.0, low_open=True)
        if image_size is not None:
            check_positive_count(image_size, "--image-size", low=32, high=1024)
        if children_max is not None:
            check_positive_count(children_max, "--children-max", high=1024)
        check_seed(seed)
        require_torch("profile-loading")
        import torch

        from splitopt.core.instance_io import instance_json
        from splitopt.torch.loading_models import BlockModelConfig
        from splitopt.torch.loading_profile import profile_loading

        try:
            config = BlockModelConfig(model, width=width, depth=depth, image_size=image_size)
        except ValueError as e:
            raise InvalidOption(str(e)) from None
        torch.set_num_threads(torch_threads)
        result = profile_loading(config, threads, seed=seed, cache=cache.value, repeats=repeats,
                                 children_max=children_max, name=name, objective=objective.value)
        inst = result.instance
        write_output(output, "--output", instance_json(inst))
        m = result.measurements
        o = inst.settings.loading
        console.print(f"wrote {output}: {len(inst.layers)} blocks, {sum(l.weights for l in inst.layers) / 1e6:.3f} M "
                      f"weights, inference {m['inference_ms']:.1f} ms, monolithic load {m['monolithic_load_ms']:.1f} ms "
                      f"({cache.value} cache), child fixed cost {o['child_fixed_ms']:.2f} ms, one thread "
                      f"{o['thread_bytes_per_s'] / 1e6:.0f} MB/s", highlight=False)


def run_loading_command(
    instance: Path = typer.Argument(..., help="Loading instance made by `splitopt profile-loading`."),
    plan: Path = typer.Argument(..., help="Loading plan JSON (splitopt-loading-plan/1, or the output of `solve --json`)."),
    model: str = typer.Option(..., "--model", "-m", help="The instance's model: resnet152, inception_v3, densenet201 or mobilenet_v1 (its width, depth and seed come from the instance)."),
    mode: Mode = typer.Option(Mode.threads, "--mode", help="threads: threading.Thread loaders in this process; processes: warm loader processes handing tensors back in shared memory."),
    cache: Cache = typer.Option(Cache.warm, "--cache", help="Page cache before each run: warm or cold (fsync + POSIX_FADV_DONTNEED)."),
    repeats: int = typer.Option(3, "--repeats", help="Timed runs of the plan and of the monolithic model (median)."),
    torch_threads: Optional[int] = typer.Option(None, "--torch-threads", help="torch intra-op threads for inference (default: those the instance was profiled with)."),
    fine_tune: int = typer.Option(0, "--fine-tune", help="After the runs, this many SGD steps on the last child's trainable tail (synthetic labels)."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Directory for the child files (default: a temporary one; removed after)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Write PLAN's child models, load them as the plan says (each thread its children in
    order) while the main thread runs inference of each child as soon as it and the one
    before are done, and compare the first response with the evaluator's prediction and
    with the monolithic model. Exit status: 0 the output equals the unsplit model's, 1 it
    does not, 2 bad input, 3 torch missing."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import (check_output_dir, check_positive_count, console, errors, print_json,
                                     require_torch)
    from splitopt.core.errors import InvalidOption, NotApplicable

    with errors():
        _check_model(model, "--model")
        check_positive_count(repeats, "--repeats", high=1000)
        check_positive_count(fine_tune, "--fine-tune", low=0, high=10_000)
        if torch_threads is not None:
            check_positive_count(torch_threads, "--torch-threads", high=256)
        if workdir is not None:
            if not workdir.is_dir():
                raise InvalidOption(f"--workdir {workdir}: not a directory")
            check_output_dir(workdir, "--workdir")
        inst = load_instance(instance)
        if inst.problem != "loading":
            raise NotApplicable(f"{instance}: problem '{inst.problem}' is not a loading instance "
                                f"(made by `splitopt profile-loading`)")
        the_plan = load_plan(inst, plan)
        source = inst.source if isinstance(inst.source, dict) else {}
        made_from = (source.get("block_model") or {}).get("model") if isinstance(source.get("block_model"), dict) \
            else None
        if made_from is None:
            raise InvalidOption(f"{instance}: no source.block_model (not made by `splitopt profile-loading`)")
        if made_from != model:
            raise InvalidOption(f"--model {model}: instance '{inst.name}' was profiled from '{made_from}'")
        profiled_threads = source.get("torch_threads", 1)
        if (isinstance(profiled_threads, bool) or not isinstance(profiled_threads, int)
                or not 1 <= profiled_threads <= 256):
            raise InvalidOption(f"{instance}: source.torch_threads: must be an integer in [1, 256] (the intra-op "
                                f"threads it was profiled with), got {profiled_threads!r}")
        require_torch("run-loading")
        import torch

        from splitopt.torch.loading import run_loading
        from splitopt.torch.loading_finetune import fine_tune_last_child, synthetic_labels
        from splitopt.torch.loading_models import synthetic_input

        torch.set_num_threads(torch_threads or profiled_threads)
        report = run_loading(inst, the_plan, mode=mode.value, cache=cache.value, repeats=repeats, workdir=workdir,
                             keep_children=fine_tune > 0)
        children = report.pop("child_models", None)
        if fine_tune > 0:
            from splitopt.torch.loading import model_config_of

            config, _ = model_config_of(inst)
            try:
                report["fine_tune"] = fine_tune_last_child(children, synthetic_input(config, 4, seed=11),
                                                           synthetic_labels(4, config.num_classes), steps=fine_tune)
            except ValueError as e:
                raise NotApplicable(f"--fine-tune: {e}") from None
    if as_json:
        print_json(report)
    else:
        p, m = report["predicted"], report["measured"]
        console.print(f"[bold]{report['instance']}[/bold] <- {model}: {report['k']} children on {report['threads']} "
                      f"thread(s) (case {report['case']}), {mode.value}, {cache.value} cache, {repeats} run(s), "
                      f"torch {report['torch_threads']} thread(s)", highlight=False)
        for c, pc in zip(m["children"], p["children"]):
            console.print(f"  child {c['index']} ({report['children'][c['index']]}, "
                          f"{report['child_bytes'][c['index']] / 1e6:.2f} MB) thread {c['thread']}: "
                          f"load {c['load_start_ms']:.1f}-{c['load_end_ms']:.1f} ms "
                          f"(predicted {pc['load_start_ms']:.1f}-{pc['load_end_ms']:.1f}), inference "
                          f"{c['infer_start_ms']:.1f}-{c['infer_end_ms']:.1f} ms "
                          f"(predicted {pc['infer_start_ms']:.1f}-{pc['infer_end_ms']:.1f})", highlight=False)
        console.print(f"  first response: measured {m['first_response_ms']:.1f} ms, predicted "
                      f"{p['first_response_ms']:.1f} ms (ratio {report['ratio']:.2f})", highlight=False)
        if "measured_monolithic" in report:
            mm = report["measured_monolithic"]
            console.print(f"  monolithic: measured {mm['first_response_ms']:.1f} ms, predicted "
                          f"{p['monolithic_ms']:.1f} ms; speedup measured {report['speedup']:.2f}x, predicted "
                          f"{p['speedup']:.2f}x", highlight=False)
        if "fine_tune" in report:
            ft = report["fine_tune"]
            console.print(f"  fine-tuned {ft['trainable_blocks']} ({ft['trainable_parameters']:,} parameters) "
                          f"{ft['steps']} steps: loss {ft['losses'][0]:.3f} -> {ft['losses'][-1]:.3f}",
                          highlight=False)
        console.print(f"  max abs difference vs the unsplit model: {report['max_abs_diff']:.3g} "
                      f"(must be <= {report['tolerance']:.3g})", highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
    if not report["ok"]:
        raise typer.Exit(1)
