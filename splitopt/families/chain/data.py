"""Data of a chain instance shared by the evaluator, the program and the methods: the
links along the chain, every tensor's producer, live range and sizes, and the compute
table (ms per layer and chain device), each computed once per instance."""

from __future__ import annotations

from dataclasses import dataclass

from splitopt.core.latency import layer_latency_ms
from splitopt.families.chain.settings import ChainInstance


def chain_links(inst: ChainInstance):
    """The links chain[m] -> chain[m+1], m = 0..M-2."""
    chain = inst.settings.chain
    return [inst.link_between[(a, b)] for a, b in zip(chain, chain[1:])]



@dataclass(frozen=True)
class ChainTensors:
    """Per tensor (graph inputs and layer outputs): producer (None for a raw input), the
    execution step range it is live over, and its sizes. Shared by the evaluator, the
    program and the baselines so that all read the same data."""

    names: tuple[str, ...]
    producer: dict[str, str | None]
    consumers: dict[str, tuple[str, ...]]
    first_step: dict[str, int]
    last_step: dict[str, int]
    held_bytes: dict[str, float]
    sent_bytes: dict[str, float]


def chain_tensors(inst: ChainInstance) -> ChainTensors:
    return inst.derived(("chain", "tensors"), lambda: _chain_tensors(inst))


def _chain_tensors(inst: ChainInstance) -> ChainTensors:
    bits = inst.settings.cloud_bits
    names: list[str] = []
    producer: dict[str, str | None] = {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    held: dict[str, float] = {}
    sent: dict[str, float] = {}
    for t in inst.inputs:
        names.append(t.name)
        producer[t.name] = None
        first[t.name] = 0
        held[t.name] = t.elements * t.bits / 8.0
    for layer in inst.layers:
        names.append(layer.name)
        producer[layer.name] = layer.name
        first[layer.name] = inst.position[layer.name]
        held[layer.name] = layer.output_elements * bits / 8.0
    for name in names:
        readers = inst.consumers[name]
        last[name] = max([inst.position[r] for r in readers], default=first[name])
        sent[name] = inst.tensor_elements(name) * inst.sent_bits(name, bits) / 8.0
    return ChainTensors(tuple(names), producer, dict(inst.consumers), first, last, held, sent)


def compute_table(inst: ChainInstance) -> dict[str, list[float]]:
    """Layer -> latency (ms) on each chain device, at the reference precision."""
    return inst.derived(("chain", "compute"), lambda: _compute_table(inst))


def _compute_table(inst: ChainInstance) -> dict[str, list[float]]:
    b = inst.settings.cloud_bits
    devices = [inst.device_by_name[m] for m in inst.settings.chain]
    return {layer.name: [layer_latency_ms(inst, layer, d, b, b) for d in devices] for layer in inst.layers}
