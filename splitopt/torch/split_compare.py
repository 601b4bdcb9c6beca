"""Check a split model against the unsplit model and against the evaluator's bytes.

:func:`compare` runs a :class:`splitopt.torch.split_model.SplitModel` and the unsplit
module on the same inputs: a float plan must reproduce the output within
:data:`FLOAT_ATOL` (max abs difference), a quantized plan reports its relative MSE
(:func:`splitopt.torch.quant_error.relative_mse`). The bytes crossing each boundary must
equal the evaluator's (:func:`evaluator_sent_bytes`; relative 1e-9, :func:`bytes_close`).

Mesh plans, like with like: (1) per device pair, the bytes of the (tensor, destination)
pairs the evaluator's ``MeshData.destinations`` and ``sent_bytes`` give
(:func:`evaluator_mesh_crossings`); (2) per link, the evaluator charges every hop of a
tensor's route, once per link of the union of its routes (multicast tree):
:meth:`SplitModel.link_bytes` routes each crossing's tensors over the instance's routes
(``MeshData.route``) the same way and must equal ``metrics.links`` bytes
(:func:`evaluator_link_bytes`). A tensor sent two hops thus counts once in (1) and twice
in (2).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from splitopt.torch.partition_mesh import as_mesh_plan
from splitopt.torch.quant_error import relative_mse
from splitopt.torch.split_model import SplitModel
from splitopt.torch.transmission import Transmit

#: a float plan must reproduce the unsplit model's output within this max abs difference
FLOAT_ATOL = 1e-5


def evaluator_sent_bytes(inst, plan) -> list[float]:
    """Bytes per sample per crossing as ``splitopt.evaluate`` counts them: edge/cloud
    ``[metrics.transmitted_bytes]``; chain ``metrics.devices[m].sent_bytes`` for every
    device but the last; mesh the bytes of :func:`evaluator_mesh_crossings` (per device
    pair, in the order of :class:`SplitModel`'s mesh crossings). Raises NotApplicable for
    other families."""
    from splitopt.core.errors import NotApplicable
    from splitopt.api import evaluate

    if inst.problem == "mesh":
        return [b for _, _, b in evaluator_mesh_crossings(inst, plan)]
    metrics = evaluate(inst, plan)
    if inst.problem in ("split", "split_bits"):
        return [float(metrics.transmitted_bytes)]
    if inst.problem == "chain":
        return [float(d.sent_bytes) for d in metrics.devices[:-1]]
    raise NotApplicable(f"partition: problem '{inst.problem}' is not supported (edge/cloud, chain and mesh)")


def evaluator_mesh_crossings(inst, plan) -> list[tuple[str, str, float]]:
    """Mesh plans: ``(producer device, destination device, bytes per sample)`` for every
    device pair, from the data the mesh evaluator schedules its transfers with
    (``MeshData.destinations``: a tensor's readers' devices and, for final outputs, the
    sink; ``MeshData.sent_bytes``): each (tensor, destination) once, whatever the route;
    pairs sorted by the devices' positions in ``instance.devices``."""
    from splitopt.families.mesh.data import MeshData
    from splitopt.families.mesh.plan import check_plan as check_mesh_plan

    data = MeshData(inst)
    plan = as_mesh_plan(plan)
    check_mesh_plan(inst, plan, data=data)
    pairs: dict[tuple[str, str], float] = {}
    for t in data.tensors:
        a = data.producer_device(plan.device, t)
        for b in data.destinations(plan.device, t):
            pairs[(a, b)] = pairs.get((a, b), 0.0) + data.sent_bytes[t]
    return [(a, b, v) for (a, b), v in sorted(pairs.items(), key=lambda kv: (data.dev_index[kv[0][0]],
                                                                             data.dev_index[kv[0][1]]))]


def evaluator_link_bytes(inst, plan) -> dict[str, float]:
    """Mesh plans: bytes per sample over each link ``"u->v"`` as
    :func:`splitopt.families.mesh.evaluate.evaluate` charges them (``metrics.links``:
    every hop of every tensor's multicast tree)."""
    from splitopt.families.mesh.evaluate import evaluate as mesh_evaluate

    return {l.link: float(l.bytes) for l in mesh_evaluate(inst, as_mesh_plan(plan)).links}


def bytes_close(a: float, b: float) -> bool:
    """Whether two byte counts agree (relative and absolute tolerance 1e-9)."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def compare(split: SplitModel, module: torch.nn.Module, inputs: torch.Tensor, inst=None,
            transmit: Transmit | None = None) -> dict[str, Any]:
    """Run ``split`` and the unsplit ``module`` on ``inputs`` and report (JSON-ready):
    per part its device, layers, received/sent tensors and seconds (summed over the
    samples); per crossing the tensors and bytes per sample (from the shapes, measured on
    the real tensors, and the evaluator's when ``inst`` is given); for mesh plans with an
    instance also per link the bytes of the crossings routed as the instance routes them
    and the evaluator's (``links``); ``max_abs_diff`` and ``relative_mse`` of the split
    output against the unsplit one; ``ok``: bytes equal the evaluator's (relative 1e-9;
    mesh: per device pair and per link, and the same pairs) and, for float plans,
    ``max_abs_diff <= FLOAT_ATOL``."""
    with torch.no_grad():
        ref = module.eval()(inputs)
    out = split.run(inputs, transmit)
    ref_t = ref if isinstance(ref, torch.Tensor) else ref[0]
    out_t = out if isinstance(out, torch.Tensor) else out[0]
    diff = float((out_t.double() - ref_t.double()).abs().max()) if out_t.numel() else 0.0
    mesh = split.kind == "mesh"
    evaluator: dict[tuple[str, str], float] | list[float] | None = None
    if inst is not None:
        evaluator = ({(a, b): v for a, b, v in evaluator_mesh_crossings(inst, split.plan)} if mesh
                     else evaluator_sent_bytes(inst, split.plan))
    crossings = []
    bytes_ok = True
    for m, c in enumerate(split.crossings):
        row = {"source": c.source, "target": c.target,
               "tensors": [{"tensor": n, "elements": e, "bits": b, "bytes": e * b / 8.0} for n, e, b in c.tensors],
               "bytes": c.bytes, "measured_bytes": split.last_run.crossing_bytes[m]}
        if evaluator is not None:
            row["evaluator_bytes"] = evaluator.get((c.source, c.target), 0.0) if mesh else evaluator[m]
            bytes_ok &= bytes_close(c.bytes, row["evaluator_bytes"])
        bytes_ok &= bytes_close(c.bytes, split.last_run.crossing_bytes[m])
        crossings.append(row)
    report: dict[str, Any] = {}
    if mesh and evaluator is not None:
        bytes_ok &= set(evaluator) == {(c.source, c.target) for c in split.crossings}
        ours, theirs = split.link_bytes(), evaluator_link_bytes(inst, split.plan)
        links = [{"link": k, "bytes": ours.get(k, 0.0), "evaluator_bytes": theirs.get(k, 0.0)}
                 for k in dict.fromkeys([*theirs, *ours])]
        bytes_ok &= all(bytes_close(l["bytes"], l["evaluator_bytes"]) for l in links)
        report["links"] = links
        report["link_bytes"] = sum(ours.values())
    parts = [{"device": p.device, "layers": list(p.layers), "inputs": list(p.inputs), "outputs": list(p.outputs),
              "sends": [list(s) for s in p.sends], "seconds": split.last_run.part_seconds[m]}
             for m, p in enumerate(split.parts)]
    float_ok = split.quantized or diff <= FLOAT_ATOL
    return {"samples": int(inputs.shape[0]), "quantized": split.quantized, "kind": split.kind, "parts": parts,
            "crossings": crossings, "transmitted_bytes": split.transmitted_bytes, **report,
            "max_abs_diff": diff, "relative_mse": relative_mse(out_t, ref_t), "float_atol": FLOAT_ATOL,
            "bytes_match": bool(bytes_ok), "ok": bool(bytes_ok and float_ok)}
