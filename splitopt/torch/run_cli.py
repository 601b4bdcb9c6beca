"""``splitopt run INSTANCE PLAN --model NAME``: rebuild the model, cut it by the plan,
run the parts on synthetic inputs and check them against the unsplit model and the
evaluator.

Register it on the app with ``app.command("run")(run_command)``.

NAME: ``resnet50``, ``mobilenet_v2``, ``googlenet`` (the builders of the shipped
instances, :data:`splitopt.torch.architectures.MODELS`, fed synthetic 224x224 images) or
``tiny_gpt2`` (fed random token ids). Exit status: 0 the split matches (float plans:
max abs difference <= 1e-5; quantized plans: the relative MSE is reported) and its
crossing bytes equal the evaluator's; 1 it does not; 2 bad input (instance, plan,
unknown model, module that does not match the instance).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

#: seed of the synthetic run inputs (distinct from the calibration seed 1234 and BN seed 4321)
RUN_INPUT_SEED = 2024
#: calibration inputs of quantized plans: those of the instances (make_instances.py)
CALIBRATION_SEED = 1234
CALIBRATION_IMAGES = 8


def model_names() -> list[str]:
    from splitopt.torch.architectures import MODELS, SMALL_MODELS

    return sorted(MODELS) + sorted(SMALL_MODELS)


def build_model(name: str, seed: int, inst=None):
    """``(module, rename, example input, run inputs(n), calibration inputs)`` of model
    ``name``; InvalidModel for an unknown name."""
    from splitopt.errors import InvalidModel
    from splitopt.torch import architectures as arch

    if name in arch.MODELS:
        module, rename = arch.MODELS[name](seed=seed)
        size = int(inst.inputs[0].shape[-1]) if inst is not None and inst.inputs[0].shape else 224
        example = arch.synthetic_images(1, size=size, seed=RUN_INPUT_SEED)
        return (module, rename, example, lambda n: arch.synthetic_images(n, size=size, seed=RUN_INPUT_SEED),
                lambda: arch.synthetic_images(CALIBRATION_IMAGES, size=size, seed=CALIBRATION_SEED))
    if name in arch.SMALL_MODELS:
        module, rename = arch.SMALL_MODELS[name](seed=seed)
        example = arch.synthetic_tokens(1, seed=RUN_INPUT_SEED)
        return (module, rename, example, lambda n: arch.synthetic_tokens(n, seed=RUN_INPUT_SEED),
                lambda: arch.synthetic_tokens(CALIBRATION_IMAGES, seed=CALIBRATION_SEED))
    raise InvalidModel(f"--model: unknown model '{name}' (choose from {', '.join(model_names())})")


def run_command(
    instance: Path = typer.Argument(..., help="Instance JSON file (made by `profile` or instances/make_instances.py)."),
    plan: Path = typer.Argument(..., help="Plan JSON file (or the output of `solve --json`)."),
    model: str = typer.Option(..., "--model", "-m", help="Model to rebuild: resnet50, mobilenet_v2, googlenet, tiny_gpt2."),
    seed: int = typer.Option(0, "--seed", help="Seed of the model's random initialisation (the instances use 0)."),
    samples: int = typer.Option(2, "--samples", "-n", help="Synthetic inputs to run (one at a time)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Cut the MODEL by PLAN into one torch module per device, run the parts in sequence on
    synthetic inputs and compare with the unsplit model and the evaluator's bytes."""
    from splitopt.cli import _errors, _print_json, console

    with _errors():
        from splitopt.instance import load_instance
        from splitopt.plan import load_plan
        from splitopt.errors import InvalidModel
        from splitopt.torch.partition import FLOAT_ATOL, compare, partition

        if samples < 1:
            raise InvalidModel(f"--samples: must be at least 1, got {samples}")
        inst = load_instance(instance)
        the_plan = load_plan(inst, plan)
        t0 = time.perf_counter()
        module, rename, example, inputs, calibration = build_model(model, seed, inst)
        split = partition(module, example, the_plan, inst, rename=rename, calibration=calibration())
        build_s = time.perf_counter() - t0
        report = compare(split, module, inputs(samples), inst)
        report.update({"instance": inst.name, "model": model, "seed": seed, "build_seconds": build_s})
    if as_json:
        _print_json(report)
    else:
        console.print(f"[bold]{inst.name}[/bold] <- {model} (seed {seed}), {samples} sample(s), "
                      f"{'quantized' if report['quantized'] else 'float'} plan; built and partitioned in {build_s:.1f} s")
        for p in report["parts"]:
            names = p["layers"]
            span = f"{names[0]} .. {names[-1]}" if len(names) > 1 else (names[0] if names else "-")
            console.print(f"  part {p['device']}: {len(names)} layers ({span}); receives {p['inputs'] or '-'}; "
                          f"{p['seconds'] / samples * 1000:.1f} ms/sample")
        for c in report["crossings"]:
            ev = c.get("evaluator_bytes")
            ev_text = f" (evaluator {ev:,.1f} B)" if ev is not None else ""
            console.print(f"  {c['source']} -> {c['target']}: {len(c['tensors'])} tensor(s) "
                          f"{[t['tensor'] for t in c['tensors']]}, {c['bytes']:,.1f} B/sample{ev_text}")
        console.print(f"  max abs difference vs unsplit: {report['max_abs_diff']:.3g}"
                      f"{'' if report['quantized'] else f' (float plan: must be <= {FLOAT_ATOL:g})'}; "
                      f"relative MSE {report['relative_mse']:.3g}")
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
    if not report["ok"]:
        raise typer.Exit(1)
