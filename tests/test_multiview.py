"""The multiview shared-bus family (``splitopt.families.multiview``): evaluator by hand,
SplitNets Tables 4 and 6 on the shipped instances, baselines, bad input and
infeasibility. (Every exact backend against brute force on random small instances:
``tests/test_contracts.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from splitopt import InvalidInstance, InvalidPlan, NotApplicable, Status, evaluate, load_instance, parse_instance
from types import SimpleNamespace

from splitopt.core.schedule import overlaps
from splitopt.families.multiview import architecture, data as data_module, evaluate as evaluate_module
from splitopt.families.multiview import plan as plan_module, start as start_module
from splitopt.families.multiview.methods import all_on_aggregator
from splitopt.solve import solve
from splitopt.core.options import SolveOptions

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
EXACT = ("cpsat", "milp-cbc", "milp-highs")
#: the family's functions these tests call, under short names
mv = SimpleNamespace(data=data_module.data, arch_layers=architecture.arch_layers, view_costs=evaluate_module.view_costs,
                     MultiviewPlan=plan_module.MultiviewPlan, plan_from_dict=plan_module.plan_from_dict,
                     uniform_plan=plan_module.uniform_plan, start_plan=start_module.start_plan)


# ----- small hand instances ---------------------------------------------------------------------

def small(layers, V=2, mode="serial", widths=(), memory=1e9, bus_bits=8e6, sensor_macs=1e9, agg_macs=1e10,
          link_latency=0.0, input_shape=(1000,), required=(), extra_links=0, fusions=None, **mv_extra):
    """Sensors s0..s{V-1} at ``sensor_macs`` (a number or one per sensor), aggregator 'agg';
    bus at ``bus_bits`` bits/s (8e6: 1000 B take 1 ms); 8-bit tensors; compute-only devices."""
    sensors = [f"s{i}" for i in range(V + extra_links)]
    speeds = sensor_macs if isinstance(sensor_macs, (list, tuple)) else [sensor_macs] * len(sensors)
    speeds = list(speeds) + [speeds[-1]] * (len(sensors) - len(speeds))
    devices = [{"name": s, "mac_per_s": r, "offchip_bytes_per_s": None, "onchip_bytes": 1e5, "memory_bytes": 1e12,
                "bit_widths": [8]} for s, r in zip(sensors, speeds)]
    devices.append({"name": "agg", "mac_per_s": agg_macs, "offchip_bytes_per_s": None, "onchip_bytes": 1e5,
                    "memory_bytes": 1e12, "bit_widths": [8]})
    for l in layers:
        l.setdefault("op", "conv")
        l.setdefault("weights", 0.0)
    multiview = {"sensors": sensors[:V], "compression_widths": list(widths), **mv_extra}
    if fusions is not None:
        multiview["fusion_candidates"] = fusions
    return parse_instance({
        "format": "splitopt-instance/1", "name": "small",
        "graph": {"inputs": [{"name": "x", "shape": list(input_shape), "bits": 8}], "layers": layers},
        "devices": devices,
        "buses": [{"name": "bus", "bandwidth_bits_per_s": bus_bits, "mode": mode}],
        "links": [{"source": s, "target": "agg", "bus": "bus", "latency_ms": link_latency} for s in sensors],
        "settings": {"problem": "multiview", "edge": "s0", "cloud": "agg", "cloud_bits": 8, "bit_widths": [8],
                     "edge_memory_bytes": memory, "error_budget": None, "edge_required": list(required),
                     "multiview": multiview},
    })


def chain3():
    """x(1000 B) -> a (1e6 MACs, 500 B) -> b (2e6 MACs, 100 B) -> c (1e5 MACs, 10 B)."""
    return [{"name": "a", "inputs": ["x"], "macs": 1e6, "output_shape": [500]},
            {"name": "b", "inputs": ["a"], "macs": 2e6, "output_shape": [100]},
            {"name": "c", "inputs": ["b"], "macs": 1e5, "output_shape": [10]}]


def spans(metrics, resource):
    return [(round(t.start_ms, 9), round(t.end_ms, 9)) for t in metrics.schedule if t.resource == resource]


def test_hand_schedule_serial_bus():
    # sensor 1e9 MAC/s: a = 1 ms, b = 2 ms; bus 1000 B/ms; aggregator 1e10 MAC/s: a 0.1, b 0.2, c 0.01
    inst = small(chain3(), V=2)
    plan = mv.MultiviewPlan("c", None, {"s0": "x", "s1": "a"}, ("s0", "s1"), ("s0", "s1"))
    m = evaluate(inst, plan)
    # s0 sends the raw 1000 B at once: bus [0, 1]; s1 computes a [0, 1] and sends 500 B: bus [1, 1.5]
    assert spans(m, "bus") == [(0.0, 1.0), (1.0, 1.5)]
    # aggregator (fusion at c: a, b, c are per-view): view s0 runs a, b, c (0.31 ms) [1, 1.31];
    # view s1 runs b, c (0.21 ms) [1.5, 1.71]; then the View-Pool of 2 views of c's 10 elements (10 ops)
    agg = spans(m, "agg")
    assert agg[:2] == [(1.0, 1.31), (1.5, 1.71)]
    assert m.makespan_ms == pytest.approx(1.71 + 10 / 1e10 * 1e3, abs=1e-12)
    assert [v.sent_bytes for v in m.views] == [1000.0, 500.0]
    assert m.device_compute_ms["s1"] == pytest.approx(1.0)
    assert not overlaps(m.schedule)
    # the other bus order: s1 first waits for its sensor: bus [1, 1.5], then s0 [1.5, 2.5]
    m2 = evaluate(inst, mv.MultiviewPlan("c", None, {"s0": "x", "s1": "a"}, ("s1", "s0"), ("s1", "s0")))
    assert spans(m2, "bus") == [(1.0, 1.5), (1.5, 2.5)]
    assert m2.makespan_ms > m.makespan_ms


def test_hand_schedule_share_bus_and_link_latency():
    # share mode, 2 links on the 8e6 bit/s bus: each link 4e6 bit/s (1000 B = 2 ms), plus 0.25 ms per transfer
    inst = small(chain3(), V=2, mode="share", link_latency=0.25)
    m = evaluate(inst, mv.uniform_plan(inst, "c", None, "x"))
    assert spans(m, "s0->agg") == [(0.0, 2.25)] and spans(m, "s1->agg") == [(0.0, 2.25)]
    # both arrive at 2.25; aggregator runs a, b, c per view, 0.31 ms each, back to back
    assert spans(m, "agg")[:2] == [(2.25, 2.56), (2.56, 2.87)]
    assert m.bus_busy_ms == pytest.approx(4.5)


def test_hand_compression_costs():
    # fusion tensor a: 8 channels x 4 x 4 = 128 B; Conv-Reduce to d = 2: 16*8*2 = 256 MACs, 8*2+2 weights;
    # View-Fuse over V = 3: concat 6 channels, 1x1 conv 6 -> 8: 16*6*8 = 768 MACs, 6*8+8 weights
    layers = [{"name": "a", "inputs": ["x"], "macs": 1e6, "weights": 10, "output_shape": [8, 4, 4]},
              {"name": "b", "inputs": ["a"], "macs": 1e5, "output_shape": [10]}]
    inst = small(layers, V=3, widths=[2], input_shape=(3, 4, 4))
    arch = {l.name: l for l in mv.arch_layers(inst, "a", 2)}
    assert (arch["mv.reduce"].macs, arch["mv.reduce"].weights, arch["mv.reduce"].output_shape) == (256, 18, (2, 4, 4))
    assert (arch["mv.fuse"].macs, arch["mv.fuse"].weights, arch["mv.fuse"].output_shape) == (768, 56, (8, 4, 4))
    assert arch["b"].inputs == ("mv.fuse",)
    m = evaluate(inst, mv.uniform_plan(inst, "a", 2, "mv.reduce"))
    v = m.views[0]
    assert v.sent_bytes == 32  # 2 x 4 x 4 at 8 bits
    assert v.sensor_ms == pytest.approx((1e6 + 256) / 1e9 * 1e3)
    assert v.aggregator_ms == 0.0
    assert m.fusion_ms == pytest.approx((768 + 1e5) / 1e10 * 1e3)
    # App. G memory: weights 10 + 18; activations: at a, input 48 + a 128 = 176; at mv.reduce the
    # input is freed: a 128 + reduce 32 = 160; peak 176 at a
    assert v.weight_bytes == 28 and v.activation_bytes == 176 and v.peak_layer == "a"
    # without compression: View-Pool of 3 views: (3 - 1) * 128 ops
    assert {l.name: l for l in mv.arch_layers(inst, "a", None)}["mv.fuse"].macs == 256


def test_memory_walk_counts_residuals():
    # x -> a -> b; c = add(a, b): a stays live while b runs (residual), App. G
    layers = [{"name": "a", "inputs": ["x"], "macs": 1e3, "output_shape": [100]},
              {"name": "b", "inputs": ["a"], "macs": 1e3, "output_shape": [50]},
              {"name": "c", "op": "add", "inputs": ["a", "b"], "macs": 1e2, "output_shape": [100]},
              {"name": "d", "inputs": ["c"], "macs": 1e2, "output_shape": [5]}]
    inst = small(layers, V=1, input_shape=(20,))
    assert "b" not in mv.data(inst).cuts  # not a single-tensor cut: c also reads a
    m = evaluate(inst, mv.uniform_plan(inst, "c", None, "c"))
    # peak at c: the input is freed after a; a (100) is still live at c, with b (50) and c (100)
    assert m.views[0].activation_bytes == 250
    assert m.views[0].peak_layer == "c"


# ----- SplitNets Tables 4 and 6 -----------------------------------------------------------------

@pytest.fixture(scope="module")
def single():
    return load_instance(INSTANCES / "splitnets_mobilenetv2_single_bus25.json")


@pytest.fixture(scope="module")
def r18_share():
    return load_instance(INSTANCES / "splitnets_resnet18_multiview12_share.json")


@pytest.fixture(scope="module")
def r18_serial():
    return load_instance(INSTANCES / "splitnets_resnet18_multiview12_serial.json")


def test_table4_all_on_aggregator_single_sensor(single):
    # 3x224x224 B over 25 % of the 1.2 Gb/s bus (four sensors' links share it): 37.5 MB/s -> 4.01 ms;
    # MobileNetV2 (~301 M OPs) on the 1.25 TOP/s aggregator: 0.24 ms; Table 4: 4.25 ms
    out = all_on_aggregator(single, SolveOptions())
    m = evaluate(single, out.plan)
    assert m.views[0].sent_bytes == 3 * 224 * 224
    assert m.views[0].transfer_ms == pytest.approx(150528 / 37.5e6 * 1e3, rel=1e-12)
    assert round(m.views[0].transfer_ms, 2) == 4.01
    assert round(m.aggregator_compute_ms, 2) == 0.24
    assert round(m.makespan_ms, 2) == 4.25
    assert out.status is Status.FEASIBLE


def test_table4_all_on_sensor_breaks_memory(single):
    # Table 4: 2.46 ms on the sensor; our MAC count gives 2.41 ms (within 3 %); > 2 MB peak memory.
    # One view fused at the output: no fusion layer, nothing sent (Table 4: communication 0)
    out = solve(single, "all-on-sensor")
    m = evaluate(single, out.plan)
    assert out.status is Status.NO_SOLUTION_FOUND
    assert m.views[0].sensor_ms == pytest.approx(2.46, rel=0.03)
    assert m.views[0].memory_bytes > 2e6 and "sensor 'sensor0' memory" in m.violations[0]
    assert m.views[0].sent_bytes == 0 and m.makespan_ms == m.views[0].sensor_ms


def test_table6_all_on_aggregator_12_sensors(r18_share, r18_serial):
    # 12 sensors, 12.5 MB/s each (share): 150,528 B -> 12.0 ms each, all in parallel
    m = evaluate(r18_share, all_on_aggregator(r18_share, SolveOptions()).plan)
    assert all(round(v.transfer_ms, 1) == 12.0 for v in m.views)
    assert max(t.end_ms for t in m.schedule if t.kind == "transfer") == pytest.approx(12.04224)
    # aggregator runs 12 x ResNet-18 up to layer4 (1.816 G MACs each: 12 x 1.453 ms = 17.44 ms) and fc
    # once; Table 6 prints 17.7 ms for 21.8 G OPs (21.8 G / 1.25 T = 17.4 ms): we match the OPs
    assert m.aggregator_compute_ms == pytest.approx(17.44, abs=0.01)
    assert m.makespan_ms == pytest.approx(29.48, abs=0.01)  # Table 6: 29.7 ms
    # serial bus: 12 transfers back to back at 150 MB/s, 1.0035 ms each, 12.04 ms in all
    ms = evaluate(r18_serial, all_on_aggregator(r18_serial, SolveOptions()).plan)
    bus = sorted(spans(ms, "hmd_bus"))
    assert len(bus) == 12 and bus[-1][1] == pytest.approx(12.04224)
    assert bus[0] == (0.0, pytest.approx(1.00352))
    assert ms.makespan_ms < m.makespan_ms  # the aggregator starts on the first view after 1 ms


def test_table6_resnet18_split_at_fusion(r18_share):
    # fusion after the last conv block: 512 x 7^2 B at 12.5 MB/s = 2.00 ms; 1.81 G OPs / 125 G OP/s = 14.5 ms;
    # the aggregator only pools 12 views and runs fc (0.51 M OPs); Table 6: 16.5 ms overall, 12.8 MB peak (red)
    plan = mv.uniform_plan(r18_share, "layer4.1.add", None, "layer4.1.add")
    m = evaluate(r18_share, plan)
    v = m.views[0]
    assert v.sent_bytes == 512 * 7 * 7
    assert round(v.transfer_ms, 2) == 2.01  # 2.007 ms; the paper rounds down to 2.00
    assert v.transfer_ms == pytest.approx(2.00, abs=0.01)
    assert round(v.sensor_ms, 1) == 14.5
    assert round(m.makespan_ms, 1) == 16.5
    assert v.memory_bytes > 2e6 and not m.feasible
    assert v.weight_bytes == pytest.approx(11.17e6, rel=0.01)


def test_12_sensor_optimum_cpsat(r18_serial, r18_share):
    for inst in (r18_serial, r18_share):
        res = solve(inst, "cpsat", time_limit=60, threads=2)
        assert res.status is Status.OPTIMAL and res.metrics.feasible
        common = solve(inst, "common-split")
        assert res.objective <= common.objective + 1e-9
        assert not overlaps([t for t in res.metrics.schedule if t.resource in ("hmd_bus", "aggregator")])


def test_brute_force_refuses_big_instances(r18_share):
    with pytest.raises(NotApplicable, match="brute-force"):
        solve(r18_share, "multiview-brute-force")


@pytest.mark.parametrize("backend,limit", [("cpsat", 2.0), ("milp-cbc", 2.0)])
def test_time_limited_solve_returns_a_plan_with_a_bound(backend, limit):
    inst = load_instance(INSTANCES / "splitnets_mobilenetv2_multiview12_serial.json")
    res = solve(inst, backend, time_limit=limit)
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert res.metrics.feasible and res.bound is not None and res.bound <= res.objective + 1e-9
    assert res.objective <= solve(inst, "common-split").objective + 1e-9  # at worst the best common point


# ----- baselines, plans, bad input, infeasibility ----------------------------------------------------

def test_baselines_on_small_instance():
    inst = small(chain3(), V=2, mode="share")
    best = solve(inst, "multiview-brute-force").objective
    for name in ("all-on-aggregator", "all-on-sensor", "common-split"):
        res = solve(inst, name)
        assert res.status is Status.FEASIBLE and res.objective >= best - 1e-12
    plan = solve(inst, "all-on-aggregator").plan
    assert set(plan.cuts.values()) == {"x"} and plan.fusion == "c"
    plan = solve(inst, "common-split").plan
    assert all(c == plan.fusion for c in plan.cuts.values())


def test_plan_json_round_trip_and_bad_plans():
    inst = small(chain3(), V=2, widths=[5])
    plan = mv.MultiviewPlan("a", 5, {"s0": "mv.reduce", "s1": "x"}, ("s1", "s0"), ("s0", "s1"))
    data = json.loads(json.dumps(plan.to_dict(inst)))
    assert mv.plan_from_dict(inst, data).key() == plan.key()
    for change, match in ((dict(fusion="zz"), "fusion"), (dict(width=7), "width"),
                          (dict(cuts={"s0": "b", "s1": "x"}), r"cuts\.s0"),
                          (dict(bus_order=["s0"]), "bus_order"), (dict(aggregator_order=["s0", "s0"]), "aggregator_order")):
        with pytest.raises(InvalidPlan, match=match):
            mv.plan_from_dict(inst, {**data, **change})


BAD = [
    (dict(sensors=["s0", "nope"]), r"multiview\.sensors\[1\]: unknown sensor device 'nope'"),
    (dict(views=0), r"multiview\.views: must be an integer >= 1"),
    (dict(views=3), r"multiview\.views: 3 views but 2 sensors"),
    (dict(compression_widths=[500]), r"compression_widths\[0\]: d=500 is not smaller than the channels"),
    (dict(fusion_candidates=["b"]), r"fusion_candidates\[0\]: 'b' is not a valid single-tensor cut"),
    (dict(fusion_candidates=["q"]), r"fusion_candidates\[0\]: unknown tensor 'q'"),
    (dict(colour="red"), r"multiview\.colour: unknown option"),
    (dict(compression_widths=[4], accuracy=[{"width": 4, "accuracy": 1.2}]), r"accuracy\[0\]\.accuracy: must be a number in \[0, 1\]"),
    (dict(compression_widths=[4], accuracy=[{"width": 5, "accuracy": 0.9}]), r"accuracy\[0\]\.width: 5 is not one of"),
    (dict(compression_widths=[4], accuracy=[{"width": 4, "fusion": "b", "accuracy": 0.9}]), r"accuracy\[0\]\.fusion: 'b' is not a fusion candidate"),
    (dict(compression_widths=[4], accuracy=[{"width": 4, "accuracy": 0.9}, {"width": 4, "accuracy": 0.8}]), r"accuracy\[1\]: a second record for width 4"),
    (dict(accuracy=[{"d": 4, "accuracy": 0.9}]), r"accuracy\[0\]\.d: unknown key"),
    (dict(accuracy={"4": 0.9}), r"multiview\.accuracy: must be a list"),
    (dict(min_accuracy="high"), r"multiview\.min_accuracy: must be a number in \[0, 1\]"),
]


@pytest.mark.parametrize("change,match", BAD)
def test_bad_multiview_settings(change, match):
    layers = [{"name": "a", "inputs": ["x"], "macs": 1e3, "output_shape": [100]},
              {"name": "b", "inputs": ["a"], "macs": 1e3, "output_shape": [50]},
              {"name": "c", "op": "add", "inputs": ["a", "b"], "macs": 1e2, "output_shape": [100]}]
    base = small(layers, V=2)
    data = json.loads(json.dumps(__import__("splitopt.core.instance_io", fromlist=["to_dict"]).to_dict(base)))
    data["settings"]["multiview"].update(change)
    with pytest.raises(InvalidInstance, match=match) as err:
        parse_instance(data)
    assert "\n" not in str(err.value)


def test_bad_bus_and_links():
    from splitopt.core.instance_io import to_dict

    data = to_dict(small(chain3(), V=2))
    no_bus = json.loads(json.dumps(data))
    del no_bus["links"][1]["bus"]
    no_bus["links"][1]["bandwidth_bits_per_s"] = 1e6
    with pytest.raises(InvalidInstance, match=r"links\[1\]\.bus: link 's1' -> 'agg' is on no bus"):
        parse_instance(no_bus)
    no_link = json.loads(json.dumps(data))
    del no_link["links"][1]
    with pytest.raises(InvalidInstance, match="no link from sensor 's1' to aggregator 'agg'"):
        parse_instance(no_link)
    two = json.loads(json.dumps(data))
    two["buses"].append({"name": "bus2", "bandwidth_bits_per_s": 1e6, "mode": "serial"})
    two["links"][1]["bus"] = "bus2"
    with pytest.raises(InvalidInstance, match="needs one shared bus"):
        parse_instance(two)
    budget = json.loads(json.dumps(data))
    budget["settings"]["error_budget"] = 0.1
    with pytest.raises(InvalidInstance, match="error_budget"):
        parse_instance(budget)


@pytest.mark.parametrize("backend", EXACT + ("multiview-brute-force",))
def test_infeasible_when_no_cut_fits_sensor_memory(backend):
    # layer a must run on every sensor, but a's 500 B output alone exceeds the 300 B limit
    inst = small(chain3(), V=2, memory=300, required=["a"])
    res = solve(inst, backend)
    assert res.status is Status.INFEASIBLE
    assert "sensor memory limit 300 B" in res.message and "sensor 's0'" in res.message
    assert mv.start_plan(inst) is None


def test_min_accuracy_decides_the_compression_width():
    # a slow bus makes compression pay: 500 B at a take 5 ms, d=1 sends 1 B, d=50 sends 50 B
    layers = [{"name": "a", "inputs": ["x"], "macs": 1e4, "output_shape": [500, 1]},
              {"name": "b", "inputs": ["a"], "macs": 1e4, "output_shape": [10]}]
    records = [{"width": 1, "accuracy": 0.62}, {"width": 50, "accuracy": 0.90},
               {"fusion": "a", "width": 50, "accuracy": 0.93}, {"width": None, "accuracy": 0.95}]
    base = dict(V=1, mode="serial", widths=[1, 50], bus_bits=8e5, fusions=["a"], accuracy=records)
    free = small(layers, **base)
    assert solve(free, "cpsat").plan.width == 1  # no limit: the cheapest transfer
    for limit, width, acc in ((0.6, 1, 0.62), (0.9, 50, 0.93), (0.94, None, 0.95)):
        inst = small(layers, min_accuracy=limit, **base)
        ref = solve(inst, "multiview-brute-force")
        assert ref.plan.width == width and ref.metrics.accuracy == acc
        for name in EXACT:
            res = solve(inst, name)
            assert res.plan.width == width and abs(res.objective - ref.objective) < 1e-6, name
    # a plan below the limit is judged infeasible by the evaluator, naming the limit
    inst = small(layers, min_accuracy=0.9, **base)
    m = evaluate(inst, mv.uniform_plan(inst, "a", 1, "mv.reduce"))
    assert not m.feasible and m.accuracy == 0.62
    assert "accuracy 0.6200 of width d=1 at 'a' is below settings.multiview.min_accuracy 0.9" in m.violations[0]
    # a width without a record is not allowed under a limit; no compression without one is
    unmeasured = small(layers, V=1, widths=[1, 50], bus_bits=8e5, fusions=["a"], min_accuracy=0.5,
                       accuracy=[{"width": 1, "accuracy": 0.62}])
    assert mv.data(unmeasured).allowed_archs == (("a", None), ("a", 1))
    assert "has no measured accuracy" in evaluate(unmeasured, mv.uniform_plan(unmeasured, "a", 50, "x")).violations[0]


@pytest.mark.parametrize("backend", EXACT + ("multiview-brute-force",))
def test_infeasible_when_no_width_meets_min_accuracy(backend):
    inst = small(chain3(), V=2, widths=[5], fusions=["a"], min_accuracy=0.99,
                 accuracy=[{"width": 5, "accuracy": 0.8}, {"width": None, "accuracy": 0.9}])
    res = solve(inst, backend)
    assert res.status is Status.INFEASIBLE
    assert "min_accuracy 0.99 is met by no fusion point and width: the best measured is 0.9000" in res.message


def test_share_mode_rate_counts_every_link_on_the_bus():
    # one view, four links on an 8e6 bit/s share bus: 2e6 bit/s each, 1000 B = 4 ms (Table 4's 25 %)
    inst = small(chain3(), V=1, mode="share", extra_links=3)
    m = evaluate(inst, mv.uniform_plan(inst, "c", None, "x"))
    assert m.views[0].transfer_ms == pytest.approx(4.0)
