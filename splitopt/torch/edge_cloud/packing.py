"""The tensors an edge/cloud plan sends across its cut, packed at the plan's sent bits
(:mod:`splitopt.torch.packing`), in the order the edge/cloud evaluator lists them
(``Metrics.sent_tensors``); :func:`splitopt.torch.packing.check_against_evaluator` then
checks them against the evaluator's bytes."""

from __future__ import annotations

from typing import Mapping

import torch

from splitopt.core.errors import InvalidPlan
from splitopt.torch.packing import PackedTensor, pack


def pack_sent_tensors(inst, plan, tensors: Mapping[str, torch.Tensor],
                      ranges: Mapping[str, tuple[float, float]] | None = None) -> dict[str, PackedTensor]:
    """Pack every tensor the edge/cloud ``plan`` sends across the cut, at the plan's sent
    bits (``inst.sent_bits``: raw inputs at their own bits, layer outputs at
    ``transmit_bits`` or their activation bits). ``tensors`` maps tensor names to values
    (at least the sent ones); ``ranges`` optional calibrated (lo, hi) per tensor (default:
    each tensor's own min/max). Returns ``{tensor: PackedTensor}`` in the evaluator's
    order. Raises InvalidPlan if a sent tensor is missing or its shape differs from the
    instance's."""
    from splitopt.families.edge_cloud.evaluate import evaluate as evaluate_edge_cloud

    metrics = evaluate_edge_cloud(inst, plan)
    out = {}
    for name, _ in metrics.sent_tensors:
        if name not in tensors:
            raise InvalidPlan(f"tensor '{name}' crosses the cut but no value was given for it")
        t = tensors[name]
        want = inst.input_by_name[name].shape if name in inst.input_by_name else inst.layer_by_name[name].output_shape
        if tuple(t.shape) not in (tuple(want), (1, *want)):
            raise InvalidPlan(f"tensor '{name}' has shape {tuple(t.shape)}, the instance says {tuple(want)} "
                              f"(optionally with a leading batch dim of 1)")
        ab = inst.input_by_name[name].bits if name in inst.input_by_name else plan.activation_bits[name]
        lo, hi = (ranges or {}).get(name, (None, None))
        out[name] = pack(t, inst.sent_bits(name, ab), lo, hi)
    return out
