"""``splitopt export INSTANCE PLAN --model NAME --format onnx|pt2 -o DIR``: rebuild the
model as ``splitopt run`` does (:func:`splitopt.torch.models.build_model`), cut it by the
plan (the plans of the families whose torch side exports: split, split_bits, chain,
mesh) and write one file per part (mesh plans: per stage) and ``manifest.json`` into DIR
(:func:`splitopt.torch.export_parts.export_plan`). Then the saved parts
are loaded back and chained by the manifest on ``--samples`` synthetic inputs and checked
(:func:`splitopt.torch.export_parts.check_exported`): against the in-process split with
tensors sent unchanged, float plans also against the unsplit model, quantized plans also
with the manifest's transmission against the split's own (max abs difference within
``1e-5`` (pt2) or ``1e-4`` (ONNX) times ``max(1, max |output|)``; quantized ONNX parts: a
relative MSE of at most a quarter of the plan's own quantization error, as onnxruntime's
last-bit differences can flip quantized codes); the manifest's crossing bytes must equal
the evaluator's.

Exit status: 0 written and checked; 1 the saved parts do not reproduce the split; 2 bad
input (format, output directory, instance, plan, unknown model, module that does not
match the instance, a part that does not export), one line on stderr; 3 a missing extra
(torch; onnx for ``--format onnx``).
"""

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.model_options import (check_model_options, input_dtype_option, input_high_option,
                                        input_shape_option, seed_option)


class PartFormat(str, Enum):
    """The part formats (:data:`splitopt.torch.export_manifest.FORMATS`)."""

    onnx = "onnx"
    pt2 = "pt2"


def export_command(
    instance: Path = typer.Argument(..., help="Instance JSON file: problem split, split_bits, chain or mesh."),
    plan: Path = typer.Argument(..., help="Plan JSON file (or the output of `solve --json`)."),
    model: str = typer.Option(..., "--model", "-m", help="Model to rebuild: resnet50, mobilenet_v2, googlenet, tiny_gpt2, or a user model PATH.py:FACTORY / package.module:FACTORY (as for `run`)."),
    fmt: PartFormat = typer.Option(PartFormat.onnx, "--format", "-f", help="Part format: onnx (onnxruntime; the onnx extra) or pt2 (torch.export programs, torch.export.load)."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory to write the parts and manifest.json into (created if missing; files of the same names are overwritten)."),
    seed: int = seed_option(),
    samples: int = typer.Option(2, "--samples", "-n", help="Synthetic inputs to check the saved parts on (0: no check)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report (manifest summary and checks) as JSON."),
    input_shape: Optional[str] = input_shape_option(),
    input_dtype: Optional[str] = input_dtype_option(),
    input_high: Optional[int] = input_high_option(),
) -> None:
    """Write the MODEL cut by PLAN as one ONNX or torch.export (.pt2) file per part, with a
    manifest (manifest.json) naming each part's inputs and outputs, the tensors each device
    sends and receives, their shapes, dtypes and bits, the run order and the model outputs.

    Each part runs on its own (onnxruntime / torch.export.load; batch 1). Quantized plans:
    the parts compute with their quantize-dequantized weights and activations, as `splitopt
    run` does; the quantization of a tensor for transmission is not in the files but
    described in the manifest (bits; calibrated min/max, scale and zero point). After
    writing, the parts are loaded and chained on --samples inputs and compared with the
    in-process split. Exit status: 0 OK, 1 mismatch, 2 bad input, 3 missing extra."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import (check_output_dir, check_positive_count, console, errors, print_json,
                                     require_torch)
    from splitopt.core.options import MAX_SAMPLES
    from splitopt.core.errors import NotApplicable

    part_format = PartFormat(fmt).value
    with errors():
        # options, paths, instance and plan before torch is imported
        check_positive_count(samples, "--samples", low=0, high=MAX_SAMPLES)
        check_model_options(seed, input_high, input_shape, input_dtype)
        check_output_dir(output, "--output")
        require_torch("export")
        if part_format == "onnx":
            from splitopt.onnx.deps import require_onnx

            require_onnx("splitopt export --format onnx")
        inst = load_instance(instance)
        from splitopt.families.registry import family_of
        from splitopt.torch.side import problems_with, torch_side

        side = torch_side(family_of(inst))
        if side is None or not side.exports:
            raise NotApplicable(f"{instance}: problem '{inst.problem}' is not supported by `splitopt export` "
                                f"({', '.join(problems_with(lambda s: s.exports))})")
        the_plan = load_plan(inst, plan)
        from splitopt.torch.export_parts import export_plan

        report = export_plan(inst, the_plan, model=model, fmt=part_format, directory=output, seed=seed, samples=samples,
                             input_shape=input_shape, input_dtype=input_dtype, input_high=input_high)
    if as_json:
        print_json(report)
    else:
        console.print(f"[bold]{inst.name}[/bold] <- {model} (seed {seed}): {len(report['parts'])} {part_format} part(s) of a "
                      f"{'quantized' if report['quantized'] else 'float'} {inst.problem} plan in {output}/",
                      highlight=False)
        for k, p in enumerate(report["parts"]):
            console.print(f"  part {k} on {p['device']}: {p['file'] or '- (forwards only)'}, {p['layers']} layers; "
                          f"inputs {p['inputs'] or '-'}; outputs {p['outputs'] or '-'}", highlight=False)
        for c in report["crossings"]:
            console.print(f"  {c['source']} -> {c['target']}: {c['tensors'] or '-'}, {c['bytes']:,.1f} B/sample "
                          f"(evaluator {c['evaluator_bytes']:,.1f} B)", highlight=False)
        if samples:
            console.print(f"  saved parts chained vs the in-process split, {samples} sample(s): max abs difference "
                          f"{report['max_abs_diff']:.3g} (tolerance {report['tolerance']:.3g})", highlight=False)
            if "max_abs_diff_unsplit" in report:
                console.print(f"  vs the unsplit model: {report['max_abs_diff_unsplit']:.3g}", highlight=False)
            if "max_abs_diff_transmitted" in report:
                console.print(f"  with the manifest's transmission vs the split with its own: "
                              f"{report['max_abs_diff_transmitted']:.3g}", highlight=False)
            if "relative_mse_limit" in report:
                console.print(f"  relative MSE vs the split {report['relative_mse']:.3g}, with transmission "
                              f"{report['relative_mse_transmitted']:.3g} (ONNX, quantized: must be <= "
                              f"{report['relative_mse_limit']:.3g}, a share of the plan's own quantization error "
                              f"{report['split_relative_mse']:.3g})", highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
    if not report["ok"]:
        raise typer.Exit(1)
