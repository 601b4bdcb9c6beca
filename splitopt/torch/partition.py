"""Cut a captured module by a plan into runnable ``torch.fx.GraphModule`` parts and run
them in sequence, handing tensors from device to device.

Supported plans: edge/cloud (``split``, ``split_bits``) and ``chain`` plans (one part per
device) and ``mesh`` plans (one part per *stage*; a device may have several), by
:func:`partition`. Multiview plans (``multiview``):
:func:`splitopt.torch.partition_multiview.partition_multiview`; ``partition`` raises
NotApplicable for them.

This module is the entry point: it checks the plan against the capture and the
instance, decides each layer's bits and calibrates the ranges of quantized layers, then
hands over to

* :mod:`splitopt.torch.partition_chain`: edge/cloud and chain plans, one part per device,
  crossings per boundary;
* :mod:`splitopt.torch.partition_mesh`: mesh plans, parts are stages, crossings per
  device pair;
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
other layer runs in float. Mesh plans (and plans without bit-widths) run in float.

The names above are re-exported here, so ``from splitopt.torch.partition import
partition, compare, SplitModel`` keeps working.
"""

from __future__ import annotations

from typing import Sequence

import torch

from splitopt.core.errors import InvalidModel, InvalidPlan
from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.partition_chain import partition_chain
from splitopt.torch.partition_mesh import (as_mesh_plan, mesh_layer_order, mesh_stages,
                                           partition_mesh)
from splitopt.torch.split_compare import (FLOAT_ATOL, compare, evaluator_link_bytes, evaluator_mesh_crossings,
                                          evaluator_sent_bytes, relative_mse)
from splitopt.torch.split_model import DEFAULT_REFERENCE_BITS, Crossing, Part, RunStats, SplitModel
from splitopt.torch.transmission import Transmit, calibrate, identity_transmit, packing_transmit

__all__ = [
    "DEFAULT_REFERENCE_BITS", "FLOAT_ATOL", "Crossing", "Part", "RunStats", "SplitModel", "Transmit",
    "calibrate", "capture_module", "check_against", "compare", "device_order", "evaluator_link_bytes",
    "evaluator_mesh_crossings", "evaluator_sent_bytes", "identity_transmit", "is_mesh", "mesh_layer_order",
    "mesh_stages", "packing_transmit", "partition", "plan_bits", "relative_mse",
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
    plan) or NotApplicable (multiview instances:
    :func:`splitopt.torch.partition_multiview.partition_multiview`), each one
    line."""
    from splitopt.core.errors import NotApplicable

    if inst is not None and inst.problem not in ("split", "split_bits", "chain", "mesh"):
        raise NotApplicable(f"partition: problem '{inst.problem}' is not supported by partition "
                            "(edge/cloud, chain and mesh plans; multiview plans: splitopt.torch.partition_multiview)")
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
    mesh = is_mesh(plan, inst)
    names = [l.name for l in capture.layers]
    order = device_order(plan, inst, devices, names)
    check_against(capture, example_input, plan, inst, order, mesh=mesh)
    if mesh and inst is not None:
        from splitopt.families.mesh.plan import check_plan as check_mesh_plan

        check_mesh_plan(inst, as_mesh_plan(plan))
    if reference_bits is None:
        reference_bits = int(inst.settings.cloud_bits) if inst is not None else DEFAULT_REFERENCE_BITS
    wbits, abits = plan_bits(plan, names, reference_bits, mesh)
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
    if mesh:
        return partition_mesh(capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges,
                              quantized)
    return partition_chain(capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges,
                           quantized)


def capture_module(module: torch.nn.Module, example_input: torch.Tensor, rename=None, input_bits: int = 8) -> Capture:
    """:func:`splitopt.torch.capture.capture`, with a failing ``torch.export`` or an
    example input that does not fit the module reported as one-line InvalidModel, torch's
    own failure output held back (:func:`splitopt.torch.user_model.capture_checked`, as
    ``profile`` does)."""
    from splitopt.torch.user_model import capture_checked

    return capture_checked(module, example_input, rename=rename, input_bits=input_bits)


def is_mesh(plan, inst=None) -> bool:
    """Whether ``plan`` is partitioned as a mesh plan: the instance's problem is ``mesh``,
    or, without an instance, the plan is a :class:`splitopt.families.mesh.plan.MeshPlan`."""
    if inst is not None:
        return inst.problem == "mesh"
    from splitopt.families.mesh.plan import MeshPlan

    return isinstance(plan, MeshPlan)


def device_order(plan, inst=None, devices: Sequence[str] | None = None, layer_names: Sequence[str] = ()) -> list[str]:
    """Devices in execution order: ``devices`` if given; edge/cloud instances: edge, cloud;
    chain instances: ``settings.chain``; mesh instances: ``instance.devices`` (for mesh
    plans the order only names the devices: parts run in the order of the stages);
    otherwise the order of first use by the layers."""
    if devices is not None:
        return list(devices)
    if inst is not None and inst.problem in ("split", "split_bits"):
        return [inst.settings.edge, inst.settings.cloud]
    if inst is not None and inst.problem == "chain":
        return list(inst.settings.chain)
    if inst is not None and inst.problem == "mesh":
        return [d.name for d in inst.devices]
    order: list[str] = []
    for n in layer_names:
        if n in plan.device and plan.device[n] not in order:
            order.append(plan.device[n])
    return order


def check_against(cap: Capture, example_input: torch.Tensor, plan, inst, order: list[str], mesh: bool = False) -> None:
    """Check that the instance's layers are the capture's, that the plan places every
    captured layer (and no other) on a device of ``order``, and, unless ``mesh``, that no
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
    if mesh:  # any device may read from any other: the stages order the parts
        return
    index = {d: i for i, d in enumerate(order)}
    for layer in cap.layers:
        for src in layer.inputs:
            if src != INPUT_NAME and index[plan.device[src]] > index[plan.device[layer.name]]:
                raise InvalidPlan(f"plan.layers.{layer.name}: runs on '{plan.device[layer.name]}' but its input "
                                  f"'{src}' runs on '{plan.device[src]}', later in {order}")


def plan_bits(plan, names: Sequence[str], reference_bits: int, mesh: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Per layer (weight bits, activation bits): the plan's; mesh plans (and plans without
    bit-widths) run every layer at the reference precision, i.e. in float."""
    if mesh or not hasattr(plan, "weight_bits") or not hasattr(plan, "activation_bits"):
        return {n: reference_bits for n in names}, {n: reference_bits for n in names}
    return ({n: int(plan.weight_bits[n]) for n in names}, {n: int(plan.activation_bits[n]) for n in names})

