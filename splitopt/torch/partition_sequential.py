"""Partition a plan into one part per device, the devices in a sequence: what the
edge/cloud (``split``, ``split_bits``) and ``chain`` families' sides cut their plans with
(:meth:`splitopt.torch.layer_graph.LayerGraphSide.cut`).

The devices are ordered (by the family's side: edge/cloud: edge then cloud; chain:
``settings.chain``; without an instance the order in which the layers first use them;
:func:`splitopt.torch.partition.device_order`) and every device gets one part
(:mod:`splitopt.torch.part_builder`), run in that order. A part returns the outputs of
its layers that later parts read and the model output when it produces it. Which
tensors cross each boundary ``m -> m+1`` follows those families' evaluators: every
tensor produced on a device <= m and read by a layer on a device > m, each once per
boundary (a tensor read two devices further is forwarded, crossing both boundaries); the
raw input is produced on the first device. Per sample a tensor costs ``elements * bits / 8`` bytes, ``bits`` =
``Instance.sent_bits`` of the producing layer's activation bits (the raw input at its
own bits; :func:`splitopt.torch.split_model.sent_bits`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from splitopt.core.errors import SplitoptError
from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.part_builder import PartBuilder, PartContext, model_outputs
from splitopt.torch.split_model import Crossing, Part, SplitModel, sent_bits, tensor_elements


def partition_sequential(capture: Capture, plan, inst, order: list[str], example_input: torch.Tensor,
                         reference_bits: int, wbits: dict[str, int], abits: dict[str, int],
                         ranges: dict[str, tuple[float, float]], quantized: bool) -> SplitModel:
    """A plan already checked against the capture
    (:func:`splitopt.torch.partition.partition` does): one part per device of ``order``,
    crossings per boundary. ``wbits``/``abits``: per layer weight and activation bits;
    ``ranges``: calibrated (min, max) of quantized layers' outputs; ``quantized``: some
    layer runs below ``reference_bits``."""
    names = [l.name for l in capture.layers]
    index = {d: i for i, d in enumerate(order)}
    dev = {n: index[plan.device[n]] for n in names}
    ctx = PartContext(capture, plan, order, dev, reference_bits, ranges, wbits=wbits, abits=abits)
    crossings = sequential_crossings(capture, abits, inst, order, dev)
    output_names, out_at = model_outputs(ctx)

    parts = []
    for m, d in enumerate(order):
        later = {n for c in crossings[m:m + 1] for n in c.names}
        outputs = [(l.out_node, l.name) for l in capture.layers if dev[l.name] == m and l.name in later]
        pairs = [(name, ctx.nodes[node]) for node, name in outputs]
        pairs += [(name, a) for home, name, a in out_at if home == m and name not in {p[0] for p in pairs}]
        if not any(dev[n] == m for n in names) and not pairs:
            parts.append(Part(d, (), (), (), None))
            continue
        parts.append(PartBuilder(ctx, m).build(pairs))
    check_sequential_flow(parts, crossings, output_names)
    return SplitModel(capture, plan, order, parts, crossings, tuple(output_names), example_input, quantized, ranges,
                      inst=inst)


def sequential_crossings(cap: Capture, abits: Mapping[str, int], inst, order: list[str],
                         dev: Mapping[str, int]) -> list[Crossing]:
    """One Crossing per boundary ``order[m] -> order[m+1]``: every tensor (raw input, then
    capture order) produced on a device <= m and read on a device > m. ``dev``: layer ->
    index of its device in ``order``."""
    elements = tensor_elements(cap)
    src = {INPUT_NAME: 0, **dev}
    far = dict(src)
    for layer in cap.layers:
        for s in layer.inputs:
            far[s] = max(far[s], dev[layer.name])
    names = [INPUT_NAME] + [l.name for l in cap.layers]
    out = []
    for m in range(len(order) - 1):
        sent = tuple((n, elements[n], sent_bits(n, cap, abits, inst)) for n in names if src[n] <= m < far[n])
        out.append(Crossing(order[m], order[m + 1], sent))
    return out


def check_sequential_flow(parts: list[Part], crossings: list[Crossing], output_names: Sequence[str]) -> None:
    """Every tensor a part receives must have been produced on an earlier device and sent
    over every boundary in between (the evaluators' accounting); raises SplitoptError
    naming the first tensor the graph needs but the accounting does not send."""
    produced_at = {INPUT_NAME: 0}
    for m, p in enumerate(parts):
        for n in p.outputs:
            produced_at.setdefault(n, m)
    for m, p in enumerate(parts):
        for n in p.inputs:
            src = produced_at.get(n)
            if src is None or src > m:
                raise SplitoptError(f"partition: part '{p.device}' reads '{n}', which no earlier part produces")
            for k in range(src, m):
                if n not in crossings[k].names:
                    raise SplitoptError(f"partition: part '{p.device}' reads '{n}', but it is not sent over "
                                        f"{crossings[k].source} -> {crossings[k].target}")
    for n in output_names:
        if n not in produced_at:
            raise SplitoptError(f"partition: no part produces the model output '{n}'")

