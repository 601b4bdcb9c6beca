"""The edge set's traffic and memory: which tensors cross from a set of layers run on
one device (the edge, a sensor) to the rest, and the device's memory over the execution
order (the live-range sweep of AUTO-SPLIT Eq. 3 / Fig. 4 and SplitNets App. G).

* sent: every tensor produced on the edge (raw inputs included) that some layer off the
  edge reads, once, at its sent bits (``Instance.sent_bits``), in bytes;
* memory (bytes): weights of the edge layers at their weight bits plus the peak working
  set, walking the edge layers in execution order: a tensor is allocated when produced
  (raw inputs: at the start), the working set at a step counts every live tensor plus
  the step's own output, and a tensor is freed after its last edge reader unless it is
  sent, in which case it is held until it is sent after the edge part ends. No edge
  layer: no memory (the input streams to the link).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Mapping

from splitopt.core.instance import Instance


@dataclass(frozen=True)
class EdgeSetUse:
    """Sent tensors (name, bytes), weight bytes, peak activation bytes and the layer at
    which the peak occurs (None with no edge layer)."""

    sent: tuple[tuple[str, float], ...]
    weight_bytes: float
    peak_activation_bytes: float
    peak_layer: str | None

    @property
    def sent_bytes(self) -> float:
        return sum(b for _, b in self.sent)

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.peak_activation_bytes


def edge_set_use(inst: Instance, on_edge: AbstractSet[str], weight_bits: Mapping[str, int],
                 activation_bits: Mapping[str, int]) -> EdgeSetUse:
    """Traffic and memory of running the layers ``on_edge`` (a set closed under
    predecessors) on one device at the given bit-widths (see the module docstring)."""

    def bits_on_edge(tensor: str) -> int:
        if tensor in inst.input_by_name:
            return inst.input_by_name[tensor].bits
        return activation_bits[tensor]

    produced = [t.name for t in inst.inputs] + [l.name for l in inst.layers if l.name in on_edge]
    sent: list[tuple[str, float]] = []
    for tensor in produced:
        if any(r not in on_edge for r in inst.consumers[tensor]):
            sent.append((tensor, inst.tensor_elements(tensor) * inst.sent_bits(tensor, bits_on_edge(tensor)) / 8.0))
    sent_names = {t for t, _ in sent}

    weight_bytes = sum(inst.layer_by_name[n].weights * weight_bits[n] / 8.0 for n in on_edge)
    peak_bits, peak_layer = 0, None
    if on_edge:
        # One pass with a running sum (linear in layers + edges, where walking the live set at
        # every step was quadratic on graphs with long skips). Sizes are whole bits, so the
        # running sum is exact and equals summing the live set at each step.
        size = {t: inst.tensor_elements(t) * bits_on_edge(t) for t in produced}
        edge_steps = [inst.position[l.name] for l in inst.layers if l.name in on_edge]
        first_step = edge_steps[0]
        freed_at: dict[int, int] = {}  # step -> bits freed after that step's working set
        for tensor in produced:
            if tensor in sent_names:
                continue  # held until it is sent, after the edge part
            steps = [inst.position[r] for r in inst.consumers[tensor] if r in on_edge]
            made = first_step if tensor in inst.input_by_name else inst.position[tensor]
            free = max(steps) if steps else made
            freed_at[max(free, made)] = freed_at.get(max(free, made), 0) + size[tensor]
        live = sum(size[t.name] for t in inst.inputs)
        for layer in inst.layers:
            n = layer.name
            if n not in on_edge:
                continue
            live += size[n]
            if live > peak_bits:
                peak_bits, peak_layer = live, n
            live -= freed_at.get(inst.position[n], 0)
    peak = peak_bits / 8.0
    return EdgeSetUse(tuple(sent), weight_bytes, peak, peak_layer)
