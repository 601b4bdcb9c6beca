"""The independent evaluator on hand-built instances, every expected number derived by
hand in the comments.

Unless a test says otherwise the hardware is compute-only (``offchip_bytes_per_s``
null): edge 1e9 MAC/s (1e6 MACs = 1 ms), cloud 1e12 MAC/s (1e9 MACs = 1 ms); the uplink
sends 8e6 bit/s = 1e6 B/s (1000 B = 1 ms) plus 2 ms fixed per transfer. Default error
tables: weight_error[b] = 0.1 / b, activation_error[b] = 0.01 / b.
"""

from __future__ import annotations

import pytest

from splitopt import InvalidInstance, evaluate, parse_instance
from splitopt.core.latency import analytical_latency_ms, layer_latency_ms
from splitopt.families.edge_cloud.evaluate import transfer_ms
from splitopt.families.edge_cloud.plan import edge_cloud_plan, uniform_plan
from splitopt.families.edge_cloud.data import cloud_device, edge_device

EDGE = {"name": "e", "mac_per_s": 1e9, "offchip_bytes_per_s": None, "onchip_bytes": 1e6,
        "memory_bytes": 1e9, "bit_widths": [2, 3, 4, 6, 8, 16]}
CLOUD = {"name": "c", "mac_per_s": 1e12, "offchip_bytes_per_s": None, "onchip_bytes": 1e7,
         "memory_bytes": 1e12, "bit_widths": [8, 16]}
LINK = {"source": "e", "target": "c", "bandwidth_bits_per_s": 8e6, "latency_ms": 2.0}


def layer(name, inputs, out, macs=0.0, weights=0.0, **extra):
    return {"name": name, "op": "op", "inputs": list(inputs), "macs": float(macs),
            "weights": float(weights), "output_shape": [out], **extra}


def build(layers, inputs=(("x", 100, 8),), edge=EDGE, cloud=CLOUD, link=LINK, **settings):
    """An instance; layers without error tables get the default ones for every bit-width
    the edge device offers."""
    bits = [b for b in edge["bit_widths"] if b < 16]
    for l in layers:
        l.setdefault("activation_error", {str(b): 0.01 / b for b in bits})
        if l["weights"] > 0:
            l.setdefault("weight_error", {str(b): 0.1 / b for b in bits})
    s = {"problem": "split_bits", "edge": edge["name"], "cloud": cloud["name"],
         "edge_memory_bytes": 1e6, "error_budget": None, "bit_widths": [4, 8], "cloud_bits": 16}
    s.update(settings)
    return parse_instance({
        "format": "splitopt-instance/1", "name": "hand",
        "graph": {"inputs": [{"name": n, "shape": [e], "bits": b} for n, e, b in inputs], "layers": layers},
        "devices": [edge, cloud], "links": [link], "settings": s,
    })


# ----- (a) skip connection held across the cut ---------------------------------------

def skip_instance():
    # x -> a -> b -> d -> c(cloud), and a -> c: a skip connection over the cut
    return build([
        layer("a", ["x"], 200, macs=1e6, weights=1000,
              weight_error={"4": 0.04, "8": 0.01}, activation_error={"4": 0.03, "8": 0.005}),
        layer("b", ["a"], 300, macs=2e6, activation_error={"4": 0.02, "8": 0.002}),
        layer("d", ["b"], 40, macs=5e5, weights=200,
              weight_error={"4": 0.05, "8": 0.004}, activation_error={"4": 0.06, "8": 0.003}),
        layer("c", ["d", "a"], 10, macs=1e9),
    ])


def test_skip_connection_is_held_until_the_end_and_sent_once():
    inst = skip_instance()
    plan = edge_cloud_plan(inst, {"a": (8, 8), "b": (4, 4), "d": (4, 8)})
    m = evaluate(inst, plan)
    # tensors on the edge: x 100 el * 8 b = 100 B; a 200 el * 8 b = 200 B;
    # b 300 el * 4 b = 150 B; d 40 el * 8 b = 40 B.
    # sent: a (read by cloud c) and d (read by c); x is read only by edge a -> not sent.
    assert m.sent_tensors == (("a", 200.0), ("d", 40.0))
    assert m.transmitted_bytes == pytest.approx(240.0)
    # one transfer: 2 ms + 240 B / 1e6 B/s = 2 + 0.24 ms
    assert m.transmit_ms == pytest.approx(2.24)
    # walk: step a: x 100 + a 200 = 300, x freed (last edge reader a);
    #       step b: a 200 + b 150 = 350, a kept (sent, held to the end);
    #       step d: a 200 + b 150 + d 40 = 390, b freed. Peak 390 at d.
    # (were a freed after its last edge reader b, step d would be 190 and the peak 350)
    assert m.edge_peak_activation_bytes == pytest.approx(390.0)
    assert m.peak_layer == "d"
    # weights: a 1000 * 8 b = 1000 B, b none, d 200 * 4 b = 100 B
    assert m.edge_weight_bytes == pytest.approx(1100.0)
    assert m.edge_memory_bytes == pytest.approx(1490.0)
    # compute: a 1 ms + b 2 ms + d 0.5 ms on the edge; c 1e9 / 1e12 = 1 ms on the cloud
    assert m.edge_compute_ms == pytest.approx(3.5)
    assert m.cloud_compute_ms == pytest.approx(1.0)
    assert m.total_ms == pytest.approx(3.5 + 2.24 + 1.0)
    # error: a w8 0.01 + a8 0.005; b weightless, a4 0.02; d w4 0.05 + a8 0.003
    assert m.error == pytest.approx(0.088)
    assert m.edge_layer_count == 3
    assert m.feasible and m.violations == ()


# ----- (b) fan-out sent once --------------------------------------------------------

def test_fan_out_to_two_cloud_layers_is_sent_once():
    inst = build([
        layer("a", ["x"], 500, macs=1e6),
        layer("c1", ["a"], 10, macs=1e9),
        layer("c2", ["a"], 10, macs=2e9),
        layer("c3", ["c1", "c2"], 10, macs=0),
    ])
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8)}))
    # a: 500 el * 8 b = 500 B, sent once although c1 and c2 both read it
    assert m.sent_tensors == (("a", 500.0),)
    assert m.transmit_ms == pytest.approx(2.0 + 0.5)
    # cloud: c1 1 ms + c2 2 ms + c3 0 ms
    assert m.cloud_compute_ms == pytest.approx(3.0)
    assert m.total_ms == pytest.approx(1.0 + 2.5 + 3.0)


# ----- (c) raw input sent when a cloud layer reads it ----------------------------------

def test_raw_input_is_sent_when_a_cloud_layer_reads_it_too():
    # x: 50 el * 16 b = 100 B, read by edge a and by cloud c
    inst = build([layer("a", ["x"], 60, macs=1e6), layer("c", ["a", "x"], 10, macs=1e9)],
                 inputs=(("x", 50, 16),))
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8)}))
    # sent: x at its own 16 bits = 100 B, a 60 el * 8 b = 60 B
    assert m.sent_tensors == (("x", 100.0), ("a", 60.0))
    assert m.transmit_ms == pytest.approx(2.0 + 0.16)
    # x is held (sent) during step a: 100 + 60
    assert m.edge_peak_activation_bytes == pytest.approx(160.0)


def test_transmit_bits_apply_to_layer_outputs_not_raw_inputs():
    inst = build([layer("a", ["x"], 60, macs=1e6), layer("c", ["a", "x"], 10, macs=1e9)],
                 inputs=(("x", 50, 16),), transmit_bits=4)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8)}))
    # x still at 16 b = 100 B; a at 4 b: 60 * 4 / 8 = 30 B
    assert m.sent_tensors == (("x", 100.0), ("a", 30.0))
    # memory is counted at the edge precision: x 100 + a 60 * 8 / 8 = 160
    assert m.edge_peak_activation_bytes == pytest.approx(160.0)
    # error: a is weightless; its output reaches the cloud at 4 bits: 0.01 / 4
    assert m.error == pytest.approx(0.0025)


# ----- (d) peak working set -------------------------------------------------------------

def test_peak_working_set_frees_tensors_after_their_last_edge_reader():
    # x(100 B) -> a(100) -> b(300); c reads a and b (50); d reads c (20). All on the edge.
    inst = build([
        layer("a", ["x"], 100), layer("b", ["a"], 300),
        layer("c", ["a", "b"], 50), layer("d", ["c"], 20),
    ])
    m = evaluate(inst, uniform_plan(inst, ["a", "b", "c", "d"], 8))
    # step a: x 100 + a 100 = 200, x freed; step b: a 100 + b 300 = 400;
    # step c: a 100 + b 300 + c 50 = 450, a and b freed; step d: c 50 + d 20 = 70.
    # (keeping x would make step c 550; freeing a after b would make it 350)
    assert m.edge_peak_activation_bytes == pytest.approx(450.0)
    assert m.peak_layer == "c"
    # edge-only: the result stays on the edge; nothing sent, no fixed link latency
    assert m.sent_tensors == ()
    assert m.transmitted_bytes == 0
    assert m.transmit_ms == 0.0


def test_peak_counts_the_steps_own_output_at_its_activation_bits():
    inst = build([layer("a", ["x"], 1000), layer("b", ["a"], 10)])
    # step a: x 100 + a 1000 el * 4 b = 500 -> 600; step b: a 500 + b 10 * 8 / 8 = 510
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (4, 4), "b": (8, 8)}))
    assert m.edge_peak_activation_bytes == pytest.approx(600.0)
    assert m.peak_layer == "a"


# ----- (e) sub-byte weight widths -------------------------------------------------------

def test_weight_bytes_at_sub_byte_widths():
    inst = build([layer("a", ["x"], 100, weights=1000), layer("b", ["a"], 100, weights=1000)],
                 bit_widths=[3, 6, 8])
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (6, 6), "b": (3, 8)}))
    # a: 1000 * 6 / 8 = 750 B; b: 1000 * 3 / 8 = 375 B
    assert m.edge_weight_bytes == pytest.approx(1125.0)
    # activations: step a: x 100 + a 100 * 6 / 8 = 75 -> 175; step b: 75 + 100 = 175
    assert m.edge_peak_activation_bytes == pytest.approx(175.0)
    assert m.edge_memory_bytes == pytest.approx(1300.0)


# ----- (f) quantization error ---------------------------------------------------------

def error_instance(**settings):
    return build([
        layer("a", ["x"], 80, weights=10, weight_error={"2": 0.4, "4": 0.2, "8": 0.1},
              activation_error={"2": 0.04, "4": 0.02, "8": 0.01}),
        layer("b", ["a"], 80, weights=10, weight_error={"2": 0.3, "4": 0.15, "8": 0.05},
              activation_error={"2": 0.03, "4": 0.015, "8": 0.005}),
        layer("c", ["b"], 8, macs=1e9),
    ], bit_widths=[2, 4, 8, 16], **settings)


def test_error_is_the_sum_over_edge_layers():
    inst = error_instance()
    # a: w4 0.2 + a8 0.01; b: w8 0.05 + a2 0.03
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (4, 8), "b": (8, 2)}))
    assert m.error == pytest.approx(0.29)
    # at the reference precision (16 = cloud_bits) a layer adds nothing: b w16 a16
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (4, 8), "b": (16, 16)}))
    assert m.error == pytest.approx(0.21)
    # cloud-only: zero
    assert evaluate(inst, edge_cloud_plan(inst, {})).error == 0.0


def test_transmit_bits_lower_the_cut_tensor_and_raise_its_error():
    inst = error_instance(transmit_bits=4)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8), "b": (8, 8)}))
    # b is cut and sent at 4 bits: 80 * 4 / 8 = 40 B, counted as a4 0.015 instead of a8;
    # a is not sent, it keeps a8: 0.1 + 0.01 + 0.05 + 0.015
    assert m.sent_tensors == (("b", 40.0),)
    assert m.error == pytest.approx(0.175)
    assert m.transmit_ms == pytest.approx(2.0 + 0.04)


def test_transmit_bits_above_the_activation_bits_send_more_but_keep_the_error():
    inst = error_instance(transmit_bits=8)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8), "b": (8, 2)}))
    # b sent at 8 bits: 80 B (more than its 2-bit 20 B); error counts min(2, 8) = 2 bits:
    # 0.1 + 0.01 + 0.05 + 0.03
    assert m.sent_tensors == (("b", 80.0),)
    assert m.error == pytest.approx(0.19)


def test_without_transmit_bits_the_cut_tensor_goes_at_its_activation_bits():
    inst = error_instance()
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8), "b": (8, 2)}))
    assert m.sent_tensors == (("b", 20.0),)  # 80 * 2 / 8


# ----- (g) violations -------------------------------------------------------------------

def test_memory_and_error_violations_are_listed():
    inst = error_instance(edge_memory_bytes=100.0, error_budget=0.1)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8)}))
    # memory: weights 10 B + step a: x 100 + a 80 = 180 -> 190 B > 100
    # error: 0.1 + 0.01 = 0.11 > 0.1
    assert m.edge_memory_bytes == pytest.approx(190.0)
    assert m.error == pytest.approx(0.11)
    assert not m.feasible
    assert len(m.violations) == 2
    assert "memory" in m.violations[0] and "190" in m.violations[0] and "100" in m.violations[0]
    assert "error" in m.violations[1] and "0.11" in m.violations[1] and "0.1" in m.violations[1]
    assert m.to_dict()["feasible"] is False


def test_budgets_met_exactly_are_feasible():
    inst = error_instance(edge_memory_bytes=190.0, error_budget=0.11)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8)}))
    assert m.feasible, m.violations


def test_only_the_memory_violation():
    inst = error_instance(edge_memory_bytes=189.0, error_budget=0.2)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 8)}))
    assert not m.feasible and len(m.violations) == 1 and "memory" in m.violations[0]


# ----- (h) cloud-only -----------------------------------------------------------------

def test_cloud_only_uses_no_edge_memory_and_sends_the_raw_inputs():
    inst = build([layer("a", ["x"], 100, macs=1e9, weights=5), layer("b", ["a", "y"], 10, macs=2e9)],
                 inputs=(("x", 100, 8), ("y", 30, 16)), edge_memory_bytes=1.0, error_budget=0.0)
    m = evaluate(inst, edge_cloud_plan(inst, {}))
    # x 100 * 8 / 8 = 100 B, y 30 * 16 / 8 = 60 B; 2 ms + 160 B / 1e6 B/s
    assert m.sent_tensors == (("x", 100.0), ("y", 60.0))
    assert m.transmit_ms == pytest.approx(2.16)
    assert m.edge_memory_bytes == 0.0 and m.edge_weight_bytes == 0.0
    assert m.peak_layer is None and m.edge_layer_count == 0
    assert m.edge_compute_ms == 0.0
    assert m.cloud_compute_ms == pytest.approx(3.0)
    assert m.total_ms == pytest.approx(5.16)
    assert m.error == 0.0 and m.feasible


# ----- (i) the analytical latency model ------------------------------------------------

ACCEL = {"name": "e", "mac_per_s": 1e9, "offchip_bytes_per_s": 1e9, "onchip_bytes": 1000.0,
         "memory_bytes": 1e9, "bit_widths": [4, 8, 16]}


def analytical_instance():
    # buffer 1000 B, half 500 B; 1e9 B/s: 1e6 B = 1 ms, so 1 B = 1e-6 ms
    return build([
        layer("a", ["x"], 300, macs=2e6, weights=4000),  # x: 800 el * 8 b = 800 B
        layer("b", ["a"], 100, macs=1e6),
        layer("c", ["a", "b", "y"], 2000, macs=0),      # y: 100 el * 8 b = 100 B; c is a sink
    ], inputs=(("x", 800, 8), ("y", 100, 8)), edge=ACCEL)


def test_analytical_compute_weights_and_raw_input():
    inst = analytical_instance()
    a, e = inst.layer_by_name["a"], edge_device(inst)
    # compute 2e6 / 1e9 s = 2 ms; weights 4000 * 4 / 8 = 2000 B; output 300 * 8 / 8 = 300 B
    # <= 500: no spill; raw x 800 B > 500: read from off-chip. 2 ms + 2800 B * 1e-6 ms/B
    assert analytical_latency_ms(inst, a, e, 4, 8) == pytest.approx(2.0028)
    # weights at 8 bits: 4000 B -> 2 + 4800e-6
    assert analytical_latency_ms(inst, a, e, 8, 8) == pytest.approx(2.0048)


def test_analytical_spill_when_output_exceeds_half_the_buffer():
    inst = analytical_instance()
    a, e = inst.layer_by_name["a"], edge_device(inst)
    # a at 16 activation bits: 300 * 2 = 600 B > 500: spill 600 * (1 + 2 readers b, c) = 1800
    # traffic 2000 (w4) + 1800 + 800 (x) = 4600 B
    assert analytical_latency_ms(inst, a, e, 4, 16) == pytest.approx(2.0046)
    # c (a sink, no readers) at 4 bits: 2000 * 4 / 8 = 1000 B > 500: spill with
    # max(1, 0 readers) = 1 reader: 1000 * 2 = 2000 B;
    # y 100 B <= 500 is not read off-chip; a and b are layers, not raw inputs. No MACs.
    c = inst.layer_by_name["c"]
    assert analytical_latency_ms(inst, c, e, 4, 4) == pytest.approx(2000e-6)


def test_analytical_no_spill_at_exactly_half_the_buffer():
    inst = build([layer("a", ["x"], 500, macs=1e6)], inputs=(("x", 500, 8),), edge=ACCEL)
    # output 500 el * 8 b = 500 B = half: no spill; x 500 B = half: not read off-chip
    a = inst.layer_by_name["a"]
    assert analytical_latency_ms(inst, a, edge_device(inst), 4, 8) == pytest.approx(1.0)


def test_analytical_raw_input_read_twice_counts_once():
    inst = build([layer("a", ["x", "x"], 10, macs=0)], inputs=(("x", 800, 8),), edge=ACCEL)
    # x 800 B > 500 read once: 800e-6 ms
    a = inst.layer_by_name["a"]
    assert analytical_latency_ms(inst, a, edge_device(inst), 8, 8) == pytest.approx(800e-6)


def test_null_offchip_bandwidth_is_compute_only():
    inst = build([layer("a", ["x"], 100000, macs=3e6, weights=1e6)], inputs=(("x", 100000, 8),))
    # EDGE has offchip null: 3e6 / 1e9 s = 3 ms whatever the traffic would be
    a = inst.layer_by_name["a"]
    assert analytical_latency_ms(inst, a, edge_device(inst), 8, 8) == pytest.approx(3.0)
    assert analytical_latency_ms(inst, a, edge_device(inst), 4, 4) == pytest.approx(3.0)


def test_evaluator_uses_the_analytical_model_on_both_sides():
    inst = analytical_instance()
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (4, 8)}))
    # edge: a at w4 a8 = 2.0028 ms. cloud (compute only, 1e12 MAC/s) at 16 bits:
    # b 1e6 / 1e12 s = 1e-3 ms, c 0.
    assert m.edge_compute_ms == pytest.approx(2.0028)
    assert m.cloud_compute_ms == pytest.approx(1e-3)
    # sent: y (read by cloud c) 100 B, a 300 B (read by b and c); x only by a: not sent
    assert m.sent_tensors == (("y", 100.0), ("a", 300.0))
    assert m.transmit_ms == pytest.approx(2.0 + 0.4)


def test_latency_overrides():
    table = {"w4a4": 1.5, "w4a8": 2.5, "w8a4": 3.5, "w8a8": 4.5}
    inst = build([
        layer("a", ["x"], 100, macs=1e9, weights=10, latency_ms={"e": table, "c": 0.25}),
        layer("b", ["a"], 10, macs=1e9, weights=10, latency_ms={"e": 7.0}),
    ])
    a, b = inst.layer_by_name["a"], inst.layer_by_name["b"]
    e, c = edge_device(inst), cloud_device(inst)
    assert layer_latency_ms(inst, a, e, 8, 4) == 3.5
    assert layer_latency_ms(inst, a, e, 4, 8) == 2.5
    assert layer_latency_ms(inst, a, c, 16, 16) == 0.25  # a number: any bits
    assert layer_latency_ms(inst, b, e, 4, 4) == 7.0
    # b has no cloud override: analytical, 1e9 MACs / 1e12 = 1 ms
    assert layer_latency_ms(inst, b, c, 16, 16) == pytest.approx(1.0)
    m = evaluate(inst, edge_cloud_plan(inst, {"a": (8, 4)}))
    # edge a 3.5 + a sent 100 * 4 / 8 = 50 B: 2.05 ms + cloud b 1 ms
    assert m.total_ms == pytest.approx(3.5 + 2.05 + 1.0)
    m = evaluate(inst, edge_cloud_plan(inst, {}))
    # cloud-only: a 0.25 + b 1 + x 100 B: 2.1 ms
    assert m.total_ms == pytest.approx(3.35)


def test_override_table_without_a_candidate_pair_is_refused_at_load():
    with pytest.raises(InvalidInstance, match=r"latency_ms\.e: .* no entry 'w4a4'") as err:
        build([layer("a", ["x"], 100, latency_ms={"e": {"w8a8": 1.0}})])
    assert "\n" not in str(err.value)


def test_override_table_without_the_requested_pair_names_it():
    full = {f"w{w}a{a}": 1.0 for w in (4, 8) for a in (4, 8)}
    inst = build([layer("a", ["x"], 100, latency_ms={"e": full})])
    with pytest.raises(InvalidInstance, match="w2a8") as err:  # a pair outside the candidates
        layer_latency_ms(inst, inst.layer_by_name["a"], edge_device(inst), 2, 8)
    assert "\n" not in str(err.value)


def test_transfer_ms():
    inst = build([layer("a", ["x"], 100)])
    assert transfer_ms(inst, 0) == 0.0  # nothing sent: no fixed latency
    assert transfer_ms(inst, 1000.0) == pytest.approx(3.0)  # 2 + 1000 B / 1e6 B/s
