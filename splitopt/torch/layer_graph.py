"""What the torch sides of the layer-graph families share (their instances are captured
layer graphs, their plans place each layer on a device): the options of ``splitopt run``
on such an instance, and :class:`LayerGraphSide`, which rebuilds the model by name, cuts
it by the plan (:func:`splitopt.torch.partition.partition`), runs the parts and checks
them against the unsplit model and the evaluator (:func:`splitopt.torch.split_compare.compare`).

A family's side subclasses it and answers what differs: the device order, how the parts
are cut (one per device in order, or stages), what the evaluator says crosses each pair
of devices, and for runs over TCP the devices, links and the evaluator's figures per part
and link. Importing this module imports no torch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from splitopt.core.errors import InvalidOption
from splitopt.core.input_text import check_input_options
from splitopt.core.options import MAX_SAMPLES, check_count
from splitopt.torch.side import TorchSide


@dataclass(frozen=True)
class ModelRunOptions:
    """``splitopt run`` on a layer-graph instance: the model to rebuild (a built-in name, a
    user model ``PATH.py:FACTORY``), its seed, the synthetic inputs to run and, for user
    models, their shape, dtype and id range."""

    model: str
    seed: int = 0
    samples: int = 2
    input_shape: str | None = None
    input_dtype: str | None = None
    input_high: int | None = None

    def __post_init__(self) -> None:
        check_count(self.samples, "--samples", high=MAX_SAMPLES)
        check_input_options(self.seed, self.input_high, self.input_shape, self.input_dtype)


@dataclass(frozen=True)
class WeightsRunOptions(ModelRunOptions):
    """:class:`ModelRunOptions` and ``--weights DIR``: retrained weights to run with."""

    weights: Path | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weights is not None and not Path(self.weights).is_dir():
            raise InvalidOption(f"--weights {self.weights}: not a directory (written by `splitopt retrain --save DIR`)")


class LayerGraphSide(TorchSide):
    """The torch side of a layer-graph family whose plans cut a captured module into parts
    (:func:`splitopt.torch.partition.partition`), export (``splitopt export``) and run."""

    run_options = ModelRunOptions
    cuts_plans = True
    exports = True

    # ----- cutting a plan (the other hooks: TorchSide) -------------------------------------------
    def cut(self, capture: Any, plan: Any, inst: Any, order: list[str], example_input: Any, reference_bits: int,
            wbits: dict[str, int], abits: dict[str, int], ranges: dict[str, tuple[float, float]],
            quantized: bool) -> Any:
        """The :class:`splitopt.torch.split_model.SplitModel` of a plan already checked
        against the capture: by default one part per device of ``order``
        (:func:`splitopt.torch.partition_sequential.partition_sequential`)."""
        from splitopt.torch.partition_sequential import partition_sequential

        return partition_sequential(capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges,
                                    quantized)

    # ----- splitopt run --------------------------------------------------------------------------
    def run(self, inst: Any, plan: Any, options: ModelRunOptions, plan_path: str | None = None) -> dict[str, Any]:
        """Rebuild ``options.model``, cut it by ``plan`` and compare the split with the
        unsplit model and the evaluator on ``options.samples`` synthetic inputs
        (:func:`splitopt.torch.split_compare.compare`); the report adds the instance, the
        model, its seed and the seconds spent building and partitioning."""
        from splitopt.torch.models import build_model
        from splitopt.torch.partition import partition
        from splitopt.torch.split_compare import compare

        t0 = time.perf_counter()
        module, rename, example, inputs, calibration = build_model(
            options.model, options.seed, inst, input_shape=options.input_shape, input_dtype=options.input_dtype,
            input_high=options.input_high)
        split = partition(module, example, plan, inst, rename=rename,
                          calibration=None if self.staged else calibration())
        build_s = time.perf_counter() - t0
        report = compare(split, module, inputs(options.samples), inst)
        report.update({"instance": inst.name, "model": options.model, "seed": options.seed, "build_seconds": build_s})
        return report

    def print_run(self, console: Any, report: Mapping[str, Any]) -> None:
        """The parts (staged: each with its device), the bytes of each crossing beside the
        evaluator's (staged: also per link) and the difference from the unsplit model."""
        samples = report["samples"]
        kind = f"{report['kind']} " if self.staged else ""
        console.print(f"[bold]{report['instance']}[/bold] <- {report['model']} (seed {report['seed']}), {samples} "
                      f"sample(s), {'quantized' if report['quantized'] else 'float'} {kind}plan; "
                      f"built and partitioned in {report['build_seconds']:.1f} s")
        for k, p in enumerate(report["parts"]):
            names = p["layers"]
            span = f"{names[0]} .. {names[-1]}" if len(names) > 1 else (names[0] if names else "-")
            label = f"part {k} on {p['device']}" if self.staged else f"part {p['device']}"
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
        limit = "" if report["quantized"] else f" (float plan: must be <= {report['float_atol']:g})"
        console.print(f"  max abs difference vs unsplit: {report['max_abs_diff']:.3g}{limit}; "
                      f"relative MSE {report['relative_mse']:.3g}")
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")

    # ----- splitopt run --transport tcp (splitopt.netrun) ----------------------------------------
    def tcp_devices(self, inst: Any) -> tuple[list[str], list[Any]]:
        """The devices a run over TCP starts, in run order, and the link between each
        consecutive pair (:class:`splitopt.core.instance.Link`)."""
        raise NotImplementedError

    def tcp_predicted(self, inst: Any, metrics: Any) -> dict[str, Any]:
        """The evaluator's figures of a run over TCP from the plan's metrics: compute ms per
        device (``parts_ms``), ms per link (``links_ms``) and the total (``total_ms``)."""
        raise NotImplementedError

    def tcp_sent_bytes(self, inst: Any, plan: Any, metrics: Any) -> list[dict[str, float]]:
        """Per link of :meth:`tcp_devices`: tensor -> the evaluator's bytes
        (``elements * bits / 8``)."""
        raise NotImplementedError
