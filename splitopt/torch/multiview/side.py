"""The multiview family's torch side: ``splitopt run`` cuts a plan into sensor parts,
per-view aggregator parts and the fusion part and runs V views
(:func:`splitopt.torch.multiview.run.run_multiview`), optionally with the weights
``splitopt retrain --save`` wrote. Its plans do not export or run over TCP. Imports no
torch."""

from __future__ import annotations

from typing import Any, Mapping

from splitopt.torch.layer_graph import WeightsRunOptions
from splitopt.torch.side import TorchSide


class MultiviewSide(TorchSide):
    family = "multiview"
    run_options = WeightsRunOptions

    def run(self, inst: Any, plan: Any, options: WeightsRunOptions, plan_path: str | None = None) -> dict[str, Any]:
        from splitopt.torch.multiview.run import run_multiview

        return run_multiview(inst, plan, model=options.model, seed=options.seed, samples=options.samples,
                             weights=options.weights, input_shape=options.input_shape,
                             input_dtype=options.input_dtype, input_high=options.input_high)

    def print_run(self, console: Any, report: Mapping[str, Any]) -> None:
        from splitopt.torch.multiview.run import fusion_text

        width = report["width"]
        console.print(f"[bold]{report['instance']}[/bold] <- {report['model']} (seed {report['seed']}), "
                      f"{report['samples']} sample(s) x {len(report['views'])} views, fusion at {report['fusion']}, "
                      f"{fusion_text(width, len(report['views']))}; "
                      f"built and partitioned in {report['build_seconds']:.1f} s")
        for v in report["views"]:
            sent = [t["tensor"] for t in v["tensors"]]
            console.print(f"  {v['sensor']}: cut {v['cut']}, {len(v['sensor_layers'])} layers on the sensor, "
                          f"{len(v['aggregator_layers'])} on the aggregator; sends {sent or '-'}, "
                          f"{v['bytes']:,.1f} B/sample (evaluator {v['evaluator_bytes']:,.1f} B)")
        console.print(f"  max abs difference vs the unsplit multi-view network: {report['max_abs_diff']:.3g} "
                      f"(must be <= {report['float_atol']:g})")
        if "accuracy" in report:
            rec = report["instance_accuracy"]
            console.print(f"  accuracy of the split run with {report['weights']} on {report['accuracy_samples']} test "
                          f"digits, sent tensors packed: {report['accuracy']:.4f} (retrain measured "
                          f"{report['retrain_accuracy']:.4f} on 360; the instance says "
                          f"{'-' if rec is None else f'{rec:.4f}'})", highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
