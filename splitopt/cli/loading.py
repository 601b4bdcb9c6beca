"""``splitopt profile-loading MODEL -o FILE --threads T`` and ``splitopt run-loading
INSTANCE PLAN --model MODEL``: the former names of ``splitopt profile`` of a block model
and ``splitopt run`` of a loading plan (hidden aliases, as they were: same options,
output and exit codes). What they do is the loading family's torch side's
(:mod:`splitopt.torch.loading.side`); options, paths, the instance and the plan are
checked before torch is imported (one line, exit 2; torch missing: exit 3).
"""

from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.profile import Cache, Objective
from splitopt.cli.run import Mode


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
    """Former name of `splitopt profile MODEL` of a block model: measure MODEL on this
    host into a loading instance (kept so that existing commands work)."""
    from splitopt.cli.common import check_output_path, errors, require_torch
    from splitopt.cli.former import former_name_notice
    from splitopt.cli.profile import write_profiled
    from splitopt.torch.side import side_of_verb

    former_name_notice("profile-loading", "profile")
    with errors():
        check_output_path(output, "--output")
        side = side_of_verb("profile-loading")
        side.check_profile_model(model)
        make_options = side.profile_options
        assert make_options is not None  # the loading side profiles its block models
        options = make_options(threads=threads, cache=cache.value, repeats=repeats, width=width, depth=depth,
                                       image_size=image_size, children_max=children_max, objective=objective.value,
                                       torch_threads=torch_threads, seed=seed, name=name)
        require_torch("profile-loading")
        write_profiled(side.profile(model, options), output)


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
    """Former name of `splitopt run` on a loading instance: write PLAN's child models, load
    them as the plan says and compare the first response with the evaluator's prediction
    and the monolithic model (kept so that existing commands work)."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import console, errors, print_json, require_torch
    from splitopt.cli.former import former_name_notice
    from splitopt.torch.side import side_of_verb

    former_name_notice("run-loading", "run")
    with errors():
        side = side_of_verb("run-loading")
        make_options = side.run_options
        assert make_options is not None  # the loading side runs its plans
        options = make_options(model=model, mode=mode.value, cache=cache.value, repeats=repeats,
                                   torch_threads=torch_threads, fine_tune=fine_tune, workdir=workdir)
        inst = load_instance(instance)
        side.check_family(inst, str(instance))
        the_plan = load_plan(inst, plan)
        side.check_run(inst, options, str(instance))
        require_torch("run-loading")
        report = side.run(inst, the_plan, options, plan_path=str(plan))
    if as_json:
        print_json(report)
    else:
        side.print_run(console, report)
    if not report["ok"]:
        raise typer.Exit(1)
