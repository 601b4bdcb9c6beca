"""Check a split model against the unsplit model and against the evaluator's bytes.

:func:`compare` runs a :class:`splitopt.torch.split_model.SplitModel` and the unsplit
module on the same inputs: a float plan must reproduce the output within
:data:`FLOAT_ATOL` (max abs difference), a quantized plan reports its relative MSE
(:func:`splitopt.torch.quant_error.relative_mse`). The bytes crossing each pair of
devices must equal the evaluator's, as the family's side counts them
(:meth:`splitopt.torch.side.TorchSide.evaluator_crossings`; relative 1e-9,
:func:`bytes_close`), and any further check the side makes (mesh plans: the bytes per
link of the instance, :mod:`splitopt.torch.mesh.compare`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from splitopt.torch.quant_error import relative_mse
from splitopt.torch.split_model import SplitModel
from splitopt.torch.transmission import Transmit

#: a float plan must reproduce the unsplit model's output within this max abs difference
FLOAT_ATOL = 1e-5


def evaluator_crossings(inst, plan) -> list[tuple[str, str, float]]:
    """``(source device, target device, bytes per sample)`` per crossing as the evaluator
    of ``inst``'s family counts them (edge/cloud: the one cut; chain: every device to the
    next; mesh: every device pair), in the order of the split's crossings; NotApplicable
    for plans that no layer-graph side cuts."""
    from splitopt.torch.side import partition_side

    return partition_side(plan, inst).evaluator_crossings(inst, plan)


def evaluator_sent_bytes(inst, plan) -> list[float]:
    """Bytes per sample per crossing as ``splitopt.evaluate`` counts them
    (:func:`evaluator_crossings` without the devices)."""
    return [b for _, _, b in evaluator_crossings(inst, plan)]


def bytes_close(a: float, b: float) -> bool:
    """Whether two byte counts agree (relative and absolute tolerance 1e-9)."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def compare(split: SplitModel, module: torch.nn.Module, inputs: torch.Tensor, inst=None,
            transmit: Transmit | None = None) -> dict[str, Any]:
    """Run ``split`` and the unsplit ``module`` on ``inputs`` and report (JSON-ready):
    per part its device, layers, received/sent tensors and seconds (summed over the
    samples); per crossing the tensors and bytes per sample (from the shapes, measured on
    the real tensors, and the evaluator's when ``inst`` is given); with an instance also
    what the family's side checks further (mesh plans: per link the bytes of the crossings
    routed as the instance routes them and the evaluator's, ``links``); ``max_abs_diff``
    and ``relative_mse`` of the split output against the unsplit one; ``ok``: bytes equal
    the evaluator's (relative 1e-9; the same device pairs; and the side's checks) and, for
    float plans, ``max_abs_diff <= FLOAT_ATOL``."""
    with torch.no_grad():
        ref = module.eval()(inputs)
    out = split.run(inputs, transmit)
    ref_t = ref if isinstance(ref, torch.Tensor) else ref[0]
    out_t = out if isinstance(out, torch.Tensor) else out[0]
    diff = float((out_t.double() - ref_t.double()).abs().max()) if out_t.numel() else 0.0
    evaluator: dict[tuple[str, str], float] | None = None
    report: dict[str, Any] = {}
    bytes_ok = True
    if inst is not None:
        from splitopt.torch.side import partition_side

        side = partition_side(split.plan, inst)
        evaluator = {(a, b): v for a, b, v in side.evaluator_crossings(inst, split.plan)}
        bytes_ok &= set(evaluator) == {(c.source, c.target) for c in split.crossings}
    crossings = []
    for m, c in enumerate(split.crossings):
        row = {"source": c.source, "target": c.target,
               "tensors": [{"tensor": n, "elements": e, "bits": b, "bytes": e * b / 8.0} for n, e, b in c.tensors],
               "bytes": c.bytes, "measured_bytes": split.last_run.crossing_bytes[m]}
        if evaluator is not None:
            evaluator_bytes = evaluator.get((c.source, c.target), 0.0)
            row["evaluator_bytes"] = evaluator_bytes
            bytes_ok &= bytes_close(c.bytes, evaluator_bytes)
        bytes_ok &= bytes_close(c.bytes, split.last_run.crossing_bytes[m])
        crossings.append(row)
    if inst is not None:
        extra, extra_ok = side.check_split(split, inst)
        report.update(extra)
        bytes_ok &= extra_ok
    parts = [{"device": p.device, "layers": list(p.layers), "inputs": list(p.inputs), "outputs": list(p.outputs),
              "sends": [list(s) for s in p.sends], "seconds": split.last_run.part_seconds[m]}
             for m, p in enumerate(split.parts)]
    float_ok = split.quantized or diff <= FLOAT_ATOL
    return {"samples": int(inputs.shape[0]), "quantized": split.quantized, "kind": split.kind, "parts": parts,
            "crossings": crossings, "transmitted_bytes": split.transmitted_bytes, **report,
            "max_abs_diff": diff, "relative_mse": relative_mse(out_t, ref_t), "float_atol": FLOAT_ATOL,
            "bytes_match": bool(bytes_ok), "ok": bool(bytes_ok and float_ok)}
