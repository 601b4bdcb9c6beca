"""``splitopt run INSTANCE PLAN --model NAME``: rebuild the model, cut it by the plan,
run the parts on synthetic inputs and check them against the unsplit model and the
evaluator. Plans of every family: split, split_bits, chain, mesh and multiview
(:mod:`splitopt.torch.partition`).

NAME: ``resnet50``, ``mobilenet_v2``, ``googlenet`` (the builders of the shipped
instances, :data:`splitopt.torch.architectures.MODELS`, fed synthetic 224x224 images) or
``tiny_gpt2`` (fed random token ids), or a user model ``PATH.py:FACTORY`` /
``package.module:FACTORY`` (:mod:`splitopt.torch.user_model`; ``--input-shape``,
``--input-dtype``, ``--input-high`` set its synthetic inputs). Exit status: 0 the split matches (float plans:
max abs difference <= 1e-5; quantized plans: the relative MSE is reported) and its
crossing bytes equal the evaluator's; 1 it does not; 2 bad input (instance, plan,
unknown model, module that does not match the instance).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.model_options import (check_model_options, input_dtype_option, input_high_option,
                                        input_shape_option, seed_option)

def fusion_text(width: int | None, views: int) -> str:
    """How the views meet: View-Pool, nothing (one view), Conv-Reduce + View-Fuse/Recover."""
    if width is None:
        return "View-Pool" if views > 1 else "no fusion layer"
    return f"Conv-Reduce d={width} + {'View-Fuse' if views > 1 else 'Conv-Recover'}"


def run_command(
    instance: Path = typer.Argument(..., help="Instance JSON file (made by `profile` or instances/make_*instances.py): "
                                              "problem split, split_bits, chain, mesh or multiview."),
    plan: Path = typer.Argument(..., help="Plan JSON file (or the output of `solve --json`)."),
    model: str = typer.Option(..., "--model", "-m", help="Model to rebuild: resnet50, mobilenet_v2, googlenet, tiny_gpt2, or a user model PATH.py:FACTORY / package.module:FACTORY (the one given to `profile`)."),
    seed: int = seed_option(),
    samples: int = typer.Option(2, "--samples", "-n", help="Synthetic inputs to run (one at a time)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    input_shape: Optional[str] = input_shape_option(),
    input_dtype: Optional[str] = input_dtype_option(),
    input_high: Optional[int] = input_high_option(),
    weights: Optional[Path] = typer.Option(None, "--weights", help="Multiview instances of digits_cnn: a directory written by `splitopt retrain --save DIR`; the plan runs with the weights retrained for its width on real test digits (--samples of the 360), and the accuracy is reported beside the one the solver used."),
) -> None:
    """Cut the MODEL by PLAN into runnable torch modules, run them in sequence on synthetic
    inputs and compare with the unsplit model and the evaluator's bytes.

    Edge/cloud and chain plans: one part per device, the tensors crossing each boundary.
    Mesh plans: one part per stage (a device may have several parts when a path leaves it
    and comes back), each tensor sent once per destination device; the bytes are checked
    per device pair and, routed over the instance's links, per link against the mesh
    evaluator. Multiview plans: V different synthetic inputs as the views, one part per
    sensor, per-view aggregator parts and the fusion part (Conv-Reduce and the V*d -> c
    conv drawn with split-aware init seeded by --seed), compared with the unsplit
    multi-view network and, per view, the evaluator's sent bytes. ``--model digits_cnn``
    runs on scikit-learn's test digits (multiview: each view masked to its column band);
    with ``--weights DIR`` the backbone and the splitting module are those retrained by
    ``splitopt retrain --save DIR`` for the plan's width, and the accuracy of the split run
    (sent tensors packed at their bits) is reported. Exit status: 0 the
    split matches, 1 it does not, 2 bad input (instance, plan, unknown model, module that
    does not match the instance)."""
    from splitopt.api import load_instance, load_plan
    from splitopt.cli.common import (MAX_SAMPLES, check_positive_count, console, errors, print_json,
                                     require_torch)
    from splitopt.core.errors import InvalidOption, NotApplicable

    with errors():
        # options, instance and plan before torch is imported (seconds)
        check_positive_count(samples, "--samples", high=MAX_SAMPLES)
        check_model_options(seed, input_high, input_shape, input_dtype)
        if weights is not None and not weights.is_dir():
            raise InvalidOption(f"--weights {weights}: not a directory (written by `splitopt retrain --save DIR`)")
        require_torch("run")
        inst = load_instance(instance)
        problem = inst.problem
        if problem not in ("split", "split_bits", "chain", "mesh", "multiview"):
            raise NotApplicable(f"{instance}: problem '{problem}' is not supported by `splitopt run` "
                                "(split, split_bits, chain, mesh, multiview)")
        if weights is not None and problem != "multiview":
            raise NotApplicable("--weights: applies to multiview instances (made by `splitopt retrain --instance-out`)")
        the_plan = load_plan(inst, plan)
        from splitopt.torch.models import build_model, retrained, view_inputs
        from splitopt.torch.partition import FLOAT_ATOL, compare, partition

        t0 = time.perf_counter()
        module, rename, example, inputs, calibration = build_model(
            model, seed, inst, input_shape=input_shape, input_dtype=input_dtype, input_high=input_high)
        if problem == "multiview":
            from splitopt.torch.partition_multiview import compare_multiview, partition_multiview

            loaded, reduce, restore = None, None, None
            if weights is not None:
                module, loaded, reduce, restore = retrained(weights, model, module, inst, the_plan)
            split = partition_multiview(module, example, the_plan, inst, rename=rename, seed=seed, reduce=reduce,
                                        restore=restore)
            build_s = time.perf_counter() - t0
            views = len(split.views)
            view_batch = view_inputs(model, inputs, samples, views)
            report = compare_multiview(split, view_batch)
            if loaded is not None:
                from splitopt.families.multiview.data import data as mv_data
                from splitopt.torch.architectures import digits_data
                from splitopt.torch.split_weights import packed_accuracy

                labels = digits_data()[3][:view_batch.shape[0]]
                report.update({"weights": str(loaded.path), "accuracy": packed_accuracy(split, view_batch, labels),
                               "accuracy_samples": int(view_batch.shape[0]),
                               "instance_accuracy": mv_data(inst).accuracy.get((the_plan.fusion, the_plan.width)),
                               "retrain_accuracy": loaded.meta.get("accuracy_after_packed")})
        else:
            split = partition(module, example, the_plan, inst, rename=rename,
                              calibration=None if problem == "mesh" else calibration())
            build_s = time.perf_counter() - t0
            report = compare(split, module, inputs(samples), inst)
        report.update({"instance": inst.name, "model": model, "seed": seed, "build_seconds": build_s})
    if as_json:
        print_json(report)
    elif report["kind"] == "multiview":
        width = report["width"]
        console.print(f"[bold]{inst.name}[/bold] <- {model} (seed {seed}), {samples} sample(s) x {len(report['views'])} "
                      f"views, fusion at {report['fusion']}, "
                      f"{fusion_text(width, len(report['views']))}; "
                      f"built and partitioned in {build_s:.1f} s")
        for v in report["views"]:
            sent = [t["tensor"] for t in v["tensors"]]
            console.print(f"  {v['sensor']}: cut {v['cut']}, {len(v['sensor_layers'])} layers on the sensor, "
                          f"{len(v['aggregator_layers'])} on the aggregator; sends {sent or '-'}, "
                          f"{v['bytes']:,.1f} B/sample (evaluator {v['evaluator_bytes']:,.1f} B)")
        console.print(f"  max abs difference vs the unsplit multi-view network: {report['max_abs_diff']:.3g} "
                      f"(must be <= {FLOAT_ATOL:g})")
        if "accuracy" in report:
            rec = report["instance_accuracy"]
            console.print(f"  accuracy of the split run with {report['weights']} on {report['accuracy_samples']} test "
                          f"digits, sent tensors packed: {report['accuracy']:.4f} (retrain measured "
                          f"{report['retrain_accuracy']:.4f} on 360; the instance says "
                          f"{'-' if rec is None else f'{rec:.4f}'})", highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
    else:
        mesh = report["kind"] == "mesh"
        console.print(f"[bold]{inst.name}[/bold] <- {model} (seed {seed}), {samples} sample(s), "
                      f"{'quantized' if report['quantized'] else 'float'} {'mesh ' if mesh else ''}plan; "
                      f"built and partitioned in {build_s:.1f} s")
        for k, p in enumerate(report["parts"]):
            names = p["layers"]
            span = f"{names[0]} .. {names[-1]}" if len(names) > 1 else (names[0] if names else "-")
            label = f"part {k} on {p['device']}" if mesh else f"part {p['device']}"
            console.print(f"  {label}: {len(names)} layers ({span}); receives {p['inputs'] or '-'}; "
                          f"{p['seconds'] / samples * 1000:.1f} ms/sample")
        for c in report["crossings"]:
            ev = c.get("evaluator_bytes")
            ev_text = f" (evaluator {ev:,.1f} B)" if ev is not None else ""
            console.print(f"  {c['source']} -> {c['target']}: {len(c['tensors'])} tensor(s) "
                          f"{[t['tensor'] for t in c['tensors']]}, {c['bytes']:,.1f} B/sample{ev_text}")
        for link in report.get("links", []):
            if link["bytes"] or link["evaluator_bytes"]:
                console.print(f"  link {link['link']}: {link['bytes']:,.1f} B/sample routed "
                              f"(evaluator {link['evaluator_bytes']:,.1f} B)")
        console.print(f"  max abs difference vs unsplit: {report['max_abs_diff']:.3g}"
                      f"{'' if report['quantized'] else f' (float plan: must be <= {FLOAT_ATOL:g})'}; "
                      f"relative MSE {report['relative_mse']:.3g}")
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
    if not report["ok"]:
        raise typer.Exit(1)
