"""The random instance generator: deterministic, valid, and varied enough to exercise
what the evaluator and the formulations must get right."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings

from splitopt import evaluate, parse_instance
from splitopt.core.instance_io import to_dict
from splitopt.core.latency import layer_latency_ms
from splitopt.families.edge_cloud.examples import random_instance

from splitopt.families.edge_cloud.strategies import instances, split_bits_instances, split_instances
from splitopt.families.edge_cloud.plan import edge_cloud_plan, uniform_plan
from splitopt.families.edge_cloud.data import candidate_bits, cloud_device, edge_device, uplink

SEEDS = range(300)


def test_same_seed_same_instance():
    for seed in (0, 1, 12345):
        assert to_dict(random_instance(seed, 6)) == to_dict(random_instance(seed, 6))
    assert to_dict(random_instance(0, 6)) != to_dict(random_instance(1, 6))


def test_arguments_are_honoured():
    inst = random_instance(7, 5, problem="split", bit_widths=[2, 8], cloud_bits=16, overrides=True, n_inputs=2)
    s = inst.settings
    assert (inst.problem, s.bit_widths, s.cloud_bits) == ("split", (2, 8), 16)
    assert [l.name for l in inst.layers] == ["l0", "l1", "l2", "l3", "l4"]
    assert len(inst.inputs) == 2
    assert any(l.latency_ms for l in inst.layers)
    assert not any(l.latency_ms for l in random_instance(7, 5, overrides=False).layers)


@pytest.mark.parametrize("kwargs", [{"n_layers": 0}, {"n_layers": 3, "problem": "float"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        random_instance(0, **kwargs)


@settings(max_examples=60)
@given(instances(min_layers=1, max_layers=9))
def test_structure(inst):
    # re-validates through the JSON form
    assert to_dict(parse_instance(to_dict(inst))) == to_dict(inst)
    assert len(inst.inputs) in (1, 2)
    for i, layer in enumerate(inst.layers):
        assert len(set(layer.inputs)) in (1, 2, 3)
        assert all(src in inst.input_by_name or inst.position[src] < i for src in layer.inputs)
        quantized = [b for b in inst.settings.bit_widths if b < inst.settings.cloud_bits]
        for table in (layer.activation_error, layer.weight_error if layer.weights > 0 else None):
            if table is None:
                continue
            values = [table[b] for b in quantized]
            assert all(v > 0 for v in values)
            assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    assert all(inst.consumers[t.name] for t in inst.inputs)


@settings(max_examples=60)
@given(instances(problem="split_bits", min_layers=1, max_layers=8))
def test_cloud_only_is_feasible_unless_a_layer_is_required_on_the_edge(inst):
    m = evaluate(inst, edge_cloud_plan(inst, {}))
    assert m.error == 0.0 and m.edge_memory_bytes == 0.0
    assert {t for t, _ in m.sent_tensors} <= set(inst.input_by_name)
    assert m.feasible == (not inst.settings.edge_required)


def test_edge_required_can_be_turned_off():
    assert any(random_instance(seed, 4).settings.edge_required for seed in range(100))
    assert not any(random_instance(seed, 4, edge_required=False).settings.edge_required for seed in range(100))


@settings(max_examples=40)
@given(split_instances())
def test_split_plans_evaluate(inst):
    # every layer on the edge at the reference precision: latency tables cover it
    m = evaluate(inst, uniform_plan(inst, [l.name for l in inst.layers]))
    assert m.error == 0.0 and m.total_ms > 0


@settings(max_examples=40)
@given(split_bits_instances())
def test_every_candidate_pair_has_a_latency(inst):
    bits = candidate_bits(inst)
    for layer in inst.layers:
        for w in bits:
            for a in bits:
                assert math.isfinite(layer_latency_ms(inst, layer, edge_device(inst), w, a))
        cloud_bits = inst.settings.cloud_bits
        assert math.isfinite(layer_latency_ms(inst, layer, cloud_device(inst), cloud_bits, cloud_bits))


def test_variety_over_seeds():
    """Over 300 seeds each feature the brief asks for turns up, and none is universal."""
    seen = {k: 0 for k in ("two_inputs", "skip", "fan_out", "weightless", "overrides", "analytical",
                           "no_offchip", "spill", "transmit_bits", "zero_link_latency", "no_error_budget",
                           "zero_error_budget", "only_cloud_fits_memory", "all_edge_fits_memory",
                           "cloud_bits_8", "edge_required")}
    for seed in SEEDS:
        inst = random_instance(seed, 6)
        s, e = inst.settings, edge_device(inst)
        names = set(inst.layer_by_name)
        seen["two_inputs"] += len(inst.inputs) == 2
        seen["skip"] += any(any(src in names and inst.position[src] < i - 1 for src in l.inputs)
                            for i, l in enumerate(inst.layers))
        seen["fan_out"] += any(len(c) > 1 for c in inst.consumers.values())
        seen["weightless"] += any(l.weights == 0 for l in inst.layers)
        seen["overrides"] += any(l.latency_ms for l in inst.layers)
        seen["analytical"] += any(not l.latency_ms for l in inst.layers)
        seen["no_offchip"] += e.offchip_bytes_per_s is None
        seen["spill"] += e.offchip_bytes_per_s is not None and any(
            l.output_elements * max(s.bit_widths) / 8 > e.onchip_bytes / 2 for l in inst.layers)
        seen["transmit_bits"] += s.transmit_bits is not None
        seen["zero_link_latency"] += uplink(inst).latency_ms == 0
        seen["no_error_budget"] += s.error_budget is None
        seen["zero_error_budget"] += s.error_budget == 0
        seen["cloud_bits_8"] += s.cloud_bits == 8
        seen["edge_required"] += bool(s.edge_required)
        # memory: the smallest edge plan (first layer alone at the lowest bits) vs all-edge
        low = min(s.bit_widths)
        first = evaluate(inst, uniform_plan(inst, ["l0"], low))
        seen["only_cloud_fits_memory"] += first.edge_memory_bytes > s.edge_memory_bytes
        everything = evaluate(inst, uniform_plan(inst, list(names), max(s.bit_widths)))
        seen["all_edge_fits_memory"] += everything.edge_memory_bytes <= s.edge_memory_bytes
    for feature, count in seen.items():
        assert 0 < count < len(SEEDS), (feature, count)
