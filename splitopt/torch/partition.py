"""Cut a captured module by a plan into runnable ``torch.fx.GraphModule`` parts and run
them in sequence, handing tensors from device to device.

Supported plans: those of the layer-graph families whose torch side is a
:class:`splitopt.torch.layer_graph.LayerGraphSide` (edge/cloud and chain plans: one part
per device; mesh plans: one part per *stage*, a device may have several), by
:func:`partition`. Other plans (multiview) are cut by their family's own side; for them
``partition`` raises NotApplicable.

This module is the entry point: it finds the side of the instance's family (without an
instance: of the family whose plans are of the plan's type), checks the plan against the
capture and the instance, decides each layer's bits and calibrates the ranges of
quantized layers, then hands over to the side's :meth:`LayerGraphSide.cut` (by default
:mod:`splitopt.torch.partition_sequential`). The pieces it builds on:

* :mod:`splitopt.torch.part_builder`: how one part's fx graph is cut out of the exported
  program, quantized layers included;
* :mod:`splitopt.torch.split_model`: :class:`Part`, :class:`Crossing`,
  :class:`SplitModel` (running the parts) and :class:`RunStats`;
* :mod:`splitopt.torch.transmission`: the transmission hook (identity, or pack/unpack at
  the sent bits) and the activation ranges;
* :mod:`splitopt.torch.split_compare`: the split against the unsplit model and the
  evaluator's bytes (:func:`compare`).

Quantized plans: a layer with weight or activation bits below the reference precision
``cloud_bits`` (16 by default, :data:`DEFAULT_REFERENCE_BITS`) runs quantized; every
other layer runs in float. Staged plans (mesh) and plans without bit-widths run in float.

The names above are re-exported here, so ``from splitopt.torch.partition import
partition, compare, SplitModel`` keeps working.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from splitopt.core.errors import InvalidModel, InvalidPlan
from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.side import partition_side
from splitopt.torch.split_compare import FLOAT_ATOL, compare, evaluator_sent_bytes, relative_mse
from splitopt.torch.split_model import DEFAULT_REFERENCE_BITS, Crossing, Part, RunStats, SplitModel
from splitopt.torch.transmission import Transmit, calibrate, identity_transmit, packing_transmit

__all__ = [
    "DEFAULT_REFERENCE_BITS", "FLOAT_ATOL", "Crossing", "Part", "RunStats", "SplitModel", "Transmit",
    "calibrate", "capture_module", "check_against", "compare", "device_order", "evaluator_sent_bytes",
    "identity_transmit", "packing_transmit", "partition", "partition_side", "plan_bits", "relative_mse",
]


def partition(module: torch.nn.Module, example_input: torch.Tensor, plan, inst=None, *,
              capture: Capture | None = None, rename=None, devices: Sequence[str] | None = None,
              calibration: torch.Tensor | None = None, reference_bits: int | None = None) -> SplitModel:
    """Cut ``module`` by ``plan`` into runnable parts (see module docstring): one part per
    device for edge/cloud and chain plans, one part per stage for mesh plans.

    ``inst``: the instance the plan was made for (its layer names must equal the
    capture's, its input shape the example's; it fixes the device order, the sent bits,
    the reference precision ``cloud_bits`` and, for mesh plans, the source, the sink and
    the routes). ``capture``: a capture of ``module`` on ``example_input`` (made here,
    with ``rename``, when None). ``devices``: device order when there is no instance
    (mesh plans: the first device produces the raw input). ``calibration``: inputs
    (n, ...) whose float min/max set the activation ranges of quantized layers (default:
    the example input). Raises InvalidModel (untraceable module, wrong input shape,
    instance mismatch), InvalidPlan (unknown, missing or misplaced layer, unroutable mesh
    plan) or NotApplicable (plans of a family whose side cuts them itself, e.g.
    multiview: :func:`splitopt.torch.multiview.partition.partition_multiview`), each one
    line."""
    side = partition_side(plan, inst)
    if inst is not None and len(inst.inputs) != 1:
        raise InvalidModel(f"instance '{inst.name}' has {len(inst.inputs)} graph inputs; partition supports one")
    if inst is not None and tuple(example_input.shape) != (1, *inst.inputs[0].shape):
        raise InvalidModel(f"example input shape {tuple(example_input.shape)} does not match instance "
                           f"'{inst.name}' input '{inst.inputs[0].name}' (expected {(1, *inst.inputs[0].shape)})")
    if example_input.dim() == 0 or example_input.shape[0] != 1:
        raise InvalidModel(f"example input shape {tuple(example_input.shape)}: expected batch size 1 (1, ...)")
    if capture is None:
        input_bits = int(inst.inputs[0].bits) if inst is not None else 8
        capture = capture_module(module, example_input, rename=rename, input_bits=input_bits)
    names = [l.name for l in capture.layers]
    order = device_order(plan, inst, devices, names, side)
    check_against(capture, example_input, plan, inst, order, staged=side.staged)
    if inst is not None:
        side.check_partition_plan(inst, plan)
    if reference_bits is None:
        reference_bits = int(inst.settings.cloud_bits) if inst is not None else DEFAULT_REFERENCE_BITS
    wbits, abits = plan_bits(plan, names, reference_bits, side.staged)
    quantized = any(min(wbits[n], abits[n]) < reference_bits for n in names)
    needs_ranges = any(abits[n] < reference_bits for n in names)
    ranges: dict[str, tuple[float, float]] = {}
    if quantized:
        ranges = calibrate(capture, example_input if calibration is None else calibration)
        if needs_ranges:
            missing = [n for n in names if abits[n] < reference_bits and n not in ranges]
            if missing:
                raise InvalidPlan(f"plan.layers.{missing[0]}.activation_bits: the layer's output is not a float "
                                  "tensor and cannot be quantized")
    return side.cut(capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges, quantized)


def capture_module(module: torch.nn.Module, example_input: torch.Tensor, rename=None, input_bits: int = 8) -> Capture:
    """:func:`splitopt.torch.capture.capture`, with a failing ``torch.export`` or an
    example input that does not fit the module reported as one-line InvalidModel, torch's
    own failure output held back (:func:`splitopt.torch.user_model.capture_checked`, as
    ``profile`` does)."""
    from splitopt.torch.user_model import capture_checked

    return capture_checked(module, example_input, rename=rename, input_bits=input_bits)


def device_order(plan, inst=None, devices: Sequence[str] | None = None, layer_names: Sequence[str] = (),
                 side: Any = None) -> list[str]:
    """Devices in execution order: ``devices`` if given; with an instance, the order its
    family's side gives (edge/cloud: edge, cloud; chain: ``settings.chain``; mesh:
    ``instance.devices``, which for staged plans only names the devices: parts run in the
    order of the stages); otherwise the order of first use by the layers."""
    if devices is not None:
        return list(devices)
    if inst is not None:
        return (side or partition_side(plan, inst)).device_order(inst)
    order: list[str] = []
    for n in layer_names:
        if n in plan.device and plan.device[n] not in order:
            order.append(plan.device[n])
    return order


def check_against(cap: Capture, example_input: torch.Tensor, plan, inst, order: list[str],
                  staged: bool = False) -> None:
    """Check that the instance's layers are the capture's, that the plan places every
    captured layer (and no other) on a device of ``order``, and, unless ``staged``, that no
    layer runs on a device earlier in ``order`` than one of its inputs; raises
    InvalidModel / InvalidPlan naming the first mismatch."""
    names = [l.name for l in cap.layers]
    known = set(names)
    if inst is not None:
        inst_names = [l.name for l in inst.layers]
        for n in inst_names:
            if n not in known:
                raise InvalidModel(f"instance '{inst.name}' layer '{n}' is not a layer of the captured module "
                                   f"(the module has {len(names)} layers, the instance {len(inst_names)})")
        for n in names:
            if n not in set(inst_names):
                raise InvalidModel(f"captured layer '{n}' is not in instance '{inst.name}'")
    for n in plan.device:
        if n not in known:
            raise InvalidPlan(f"plan.layers.{n}: the module has no layer '{n}'")
    for n in names:
        if n not in plan.device:
            raise InvalidPlan(f"plan.layers: layer '{n}' of the module is missing")
        if plan.device[n] not in order:
            raise InvalidPlan(f"plan.layers.{n}.device: '{plan.device[n]}' is not one of the devices {order}")
    if staged:  # any device may read from any other: the stages order the parts
        return
    index = {d: i for i, d in enumerate(order)}
    for layer in cap.layers:
        for src in layer.inputs:
            if src != INPUT_NAME and index[plan.device[src]] > index[plan.device[layer.name]]:
                raise InvalidPlan(f"plan.layers.{layer.name}: runs on '{plan.device[layer.name]}' but its input "
                                  f"'{src}' runs on '{plan.device[src]}', later in {order}")


def plan_bits(plan, names: Sequence[str], reference_bits: int, staged: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Per layer (weight bits, activation bits): the plan's; staged plans (and plans without
    bit-widths) run every layer at the reference precision, i.e. in float."""
    if staged or not hasattr(plan, "weight_bits") or not hasattr(plan, "activation_bits"):
        return {n: reference_bits for n in names}, {n: reference_bits for n in names}
    return ({n: int(plan.weight_bits[n]) for n in names}, {n: int(plan.activation_bits[n]) for n in names})

