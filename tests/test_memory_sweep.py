"""The edge set's memory sweep (``splitopt.core.memory.edge_set_use``) is one pass with a
running sum; here it is checked against the direct definition (sum the live set at every
step, free what no later edge layer reads and is not sent) on random graphs with skips,
random down-sets and random bit-widths: the same sent tensors, weights, peak and peak
layer, exactly."""

from __future__ import annotations

import random

import pytest

from splitopt.api import parse_instance
from splitopt.core.memory import EdgeSetUse, edge_set_use
from splitopt.families.edge_cloud.examples import random_instance_data


def direct_edge_set_use(inst, on_edge, weight_bits, activation_bits) -> EdgeSetUse:
    """The module docstring's definition, step by step (quadratic)."""
    def bits_on_edge(tensor):
        return inst.input_by_name[tensor].bits if tensor in inst.input_by_name else activation_bits[tensor]

    produced = [t.name for t in inst.inputs] + [l.name for l in inst.layers if l.name in on_edge]
    sent = [(t, inst.tensor_elements(t) * inst.sent_bits(t, bits_on_edge(t)) / 8.0)
            for t in produced if any(r not in on_edge for r in inst.consumers[t])]
    sent_names = {t for t, _ in sent}
    weight_bytes = sum(inst.layer_by_name[n].weights * weight_bits[n] / 8.0 for n in on_edge)
    peak, peak_layer = 0.0, None
    if on_edge:
        size = {t: inst.tensor_elements(t) * bits_on_edge(t) / 8.0 for t in produced}
        last = {t: max([inst.position[r] for r in inst.consumers[t] if r in on_edge], default=-1) for t in produced}
        live = {t.name: size[t.name] for t in inst.inputs}
        for layer in inst.layers:
            if layer.name not in on_edge:
                continue
            live[layer.name] = size[layer.name]
            working = sum(live.values())
            if working > peak:
                peak, peak_layer = working, layer.name
            for t in list(live):
                if t not in sent_names and last[t] <= inst.position[layer.name]:
                    del live[t]
    return EdgeSetUse(tuple(sent), weight_bytes, peak, peak_layer)


def random_down_set(inst, rng: random.Random) -> frozenset[str]:
    """A set of layers closed under predecessors: a random prefix of a random choice."""
    chosen: set[str] = set()
    for layer in inst.layers:
        if all(i in chosen or i in inst.input_by_name for i in layer.inputs) and rng.random() < 0.8:
            chosen.add(layer.name)
    return frozenset(chosen)


@pytest.mark.parametrize("seed", range(60))
def test_one_pass_sweep_equals_the_live_set_definition(seed):
    rng = random.Random(seed)
    inst = parse_instance(random_instance_data(seed, rng.randint(2, 40), problem="split_bits", edge_required=False))
    for _ in range(5):
        on_edge = random_down_set(inst, rng)
        weight_bits = {l.name: rng.choice((2, 4, 8, 16)) for l in inst.layers}
        activation_bits = {l.name: rng.choice((1, 2, 3, 4, 6, 8, 16)) for l in inst.layers}
        fast = edge_set_use(inst, on_edge, weight_bits, activation_bits)
        assert fast == direct_edge_set_use(inst, on_edge, weight_bits, activation_bits)
