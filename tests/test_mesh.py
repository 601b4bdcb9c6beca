"""The mesh family (problem ``mesh``): evaluator hand cases (JMSNAS Eq. 2 among them),
bad input, infeasibility, time limits, and every exact backend against brute force on
random small DAG x topology instances (formulations/mesh_schedule.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitopt.core.errors import InvalidInstance, InvalidPlan, NotApplicable
from splitopt.api import load_instance, parse_instance
from splitopt.families.mesh.data import MeshData
from splitopt.families.mesh.evaluate import evaluate
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.plan import plan_from_dict, single_device_plan
from splitopt.core.result import Status
from splitopt.core.schedule import overlaps
from splitopt.solve import solve
from splitopt.families.mesh.examples import random_mesh_instance

DEVICES = ["UE", "SBS", "MBS1", "MBS2", "MBS3", "cloud"]


# ----- instance builders ----------------------------------------------------------------------


def _device(name: str, memory: float = 1e9) -> dict:
    return {"name": name, "mac_per_s": 1e9, "offchip_bytes_per_s": None, "onchip_bytes": 0,
            "memory_bytes": memory, "bit_widths": [16]}


def _layer(name: str, inputs: list[str], latency: dict, elements: int, weights: float = 100.0) -> dict:
    return {"name": name, "op": "conv", "inputs": inputs, "macs": 1e6, "weights": weights,
            "output_shape": [elements], "latency_ms": latency}


def _instance(layers, devices, links, source, sink, buses=(), input_elements=3000, **mesh) -> dict:
    return {"format": "splitopt-instance/1", "name": "mesh-test",
            "graph": {"inputs": [{"name": "input", "shape": [input_elements], "bits": 8}], "layers": layers},
            "devices": devices, "links": links, "buses": list(buses),
            "settings": {"problem": "mesh", "edge": source, "cloud": sink, "cloud_bits": 16, "mesh": mesh}}


def fig2b_links() -> list[dict]:
    """JMSNAS Fig. 2(b) with Table I capacities (bits/s)."""
    return ([{"source": "UE", "target": "SBS", "bandwidth_bits_per_s": 25e6}]
            + [{"source": "SBS", "target": m, "bandwidth_bits_per_s": 50e6} for m in ("MBS1", "MBS2", "MBS3")]
            + [{"source": m, "target": "cloud", "bandwidth_bits_per_s": 200e6} for m in ("MBS1", "MBS2", "MBS3")])


#: tau[layer][device] in ms; every other device takes 1000 ms (so Eq. 2's plan is optimal)
EQ2_TAU = {"l1": ("UE", 4.0), "l2": ("SBS", 2.0), "b1": ("MBS1", 3.0), "b2": ("MBS2", 5.0),
           "b3": ("MBS3", 1.0), "agg": ("cloud", 0.5)}
#: output elements (16 bits each on the wire)
EQ2_OUT = {"l1": 1000, "l2": 2000, "b1": 500, "b2": 1000, "b3": 250, "agg": 10}


def eq2_instance(**mesh):
    """JMSNAS Fig. 2(b): UE block l1, root SBS block l2 broadcast to three MBS blocks
    b1..b3, aggregated by agg on the cloud."""
    inputs = {"l1": ["input"], "l2": ["l1"], "b1": ["l2"], "b2": ["l2"], "b3": ["l2"], "agg": ["b1", "b2", "b3"]}
    layers = []
    for name, (dev, tau) in EQ2_TAU.items():
        latency = {d: 1000.0 for d in DEVICES}
        latency[dev] = tau
        layers.append(_layer(name, inputs[name], latency, EQ2_OUT[name]))
    return parse_instance(_instance(layers, [_device(d) for d in DEVICES], fig2b_links(), "UE", "cloud", **mesh))


# ----- JMSNAS Eq. 2 by hand -------------------------------------------------------------------


def eps(elements: int, rate_bits_per_s: float) -> float:
    """Transfer ms of a 16-bit tensor."""
    return 1000.0 * elements * 16 / rate_bits_per_s


def test_eq2_by_hand():
    """Eq. 2: T = sum_C (tau + eps) + max_{m in T minus r} (tau_r + eps_r + tau_m + eps_m),
    C = {UE, cloud} (eps of the cloud = 0), r = SBS."""
    inst = eq2_instance()
    plan = MeshPlan({n: dev for n, (dev, _) in EQ2_TAU.items()})
    m = evaluate(inst, plan)
    chain = (4.0 + eps(1000, 25e6)) + (0.5 + 0.0)
    tau_r, eps_r = 2.0, eps(2000, 50e6)
    branch = max(tau_r + eps_r + tau + eps(EQ2_OUT[b], 200e6) for b, tau in (("b1", 3.0), ("b2", 5.0), ("b3", 1.0)))
    expected = chain + branch
    # with numbers: 4 + 0.64 + 0.5 + max(2 + 0.64 + 3 + 0.04, 2 + 0.64 + 5 + 0.08, 2 + 0.64 + 1 + 0.02)
    assert expected == pytest.approx(12.86, abs=1e-12)
    assert m.makespan_ms == pytest.approx(expected, rel=1e-12)
    assert m.feasible
    # the root broadcasts once per link, the three transfers run at the same time
    sends = [t for t in m.schedule if t.kind == "transfer" and t.label.startswith("l2 ")]
    assert len(sends) == 3 and len({(t.start_ms, t.end_ms) for t in sends}) == 1
    assert not overlaps(m.schedule)
    assert m.transfer_bytes["UE->SBS"] == 2000 and m.transfer_bytes["SBS->MBS2"] == 4000
    # the exact backends find that plan (all other devices are 1000 ms slower)
    result = solve(inst, "cpsat", threads=1)
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(expected, rel=1e-6)


def test_eq2_is_a_schedule_not_a_sum():
    """The same plan summed over devices (JMSNAS Eq. 1 style) would be much longer."""
    inst = eq2_instance()
    m = evaluate(inst, MeshPlan({n: dev for n, (dev, _) in EQ2_TAU.items()}))
    summed = sum(d.compute_ms for d in m.devices) + sum(l.transfer_ms for l in m.links)
    assert summed == pytest.approx(4 + 2 + 3 + 5 + 1 + 0.5 + 0.64 + 3 * 0.64 + 0.04 + 0.08 + 0.02)
    assert m.makespan_ms < summed - 5


def test_multihop_store_and_forward_and_multicast():
    """A UE tensor read on MBS1 and MBS2 crosses UE->SBS once, then both SBS->MBS links;
    each hop starts when the previous one ended (store-and-forward)."""
    latency = {d: 1.0 for d in DEVICES}
    layers = [_layer("a", ["input"], dict(latency, UE=2.0), 1000),
              _layer("b", ["a"], latency, 10), _layer("c", ["a"], latency, 10),
              _layer("d", ["b", "c"], latency, 10)]
    inst = parse_instance(_instance(layers, [_device(d) for d in DEVICES], fig2b_links(), "UE", "cloud"))
    plan = MeshPlan({"a": "UE", "b": "MBS1", "c": "MBS2", "d": "cloud"})
    m = evaluate(inst, plan)
    hops = {t.resource: t for t in m.schedule if t.kind == "transfer" and t.label.startswith("a ")}
    assert set(hops) == {"UE->SBS", "SBS->MBS1", "SBS->MBS2"}
    assert hops["UE->SBS"].start_ms == pytest.approx(2.0)
    assert hops["UE->SBS"].end_ms == pytest.approx(2.0 + eps(1000, 25e6))
    assert hops["SBS->MBS1"].start_ms == pytest.approx(hops["UE->SBS"].end_ms)
    end_b = hops["SBS->MBS1"].end_ms + 1.0
    assert m.makespan_ms == pytest.approx(end_b + eps(10, 200e6) + 1.0)
    # all on the UE: the final output travels UE -> SBS -> MBS1 -> cloud (fewest hops, ties by device order)
    m = evaluate(inst, single_device_plan(inst, "UE"))
    assert [t.resource for t in m.schedule if t.kind == "transfer"] == ["UE->SBS", "SBS->MBS1", "MBS1->cloud"]
    assert m.makespan_ms == pytest.approx(2 + 3 + eps(10, 25e6) + eps(10, 50e6) + eps(10, 200e6))


def _bus_instance():
    """Source s computes a (1 ms) and b (1 ms); both outputs go over one serial bus to t
    (a: 1 ms, b: 3 ms at 1e6 bits/s); t computes c reading both (0.5 ms)."""
    def lat(s, t):
        return {"s": s, "t": t}

    layers = [_layer("a", ["input"], lat(1.0, 9.0), 1000 // 16 * 1),  # 62 elements = 992 bits
              _layer("b", ["input"], lat(1.0, 9.0), 3000 // 16),
              _layer("c", ["a", "b"], lat(9.0, 0.5), 1)]
    links = [{"source": "s", "target": "t", "bus": "bus0"}, {"source": "t", "target": "s", "bus": "bus0"}]
    buses = [{"name": "bus0", "bandwidth_bits_per_s": 1e6, "mode": "serial"}]
    return parse_instance(_instance(layers, [_device("s"), _device("t")], links, "s", "t", buses))


def test_serial_bus_contention_and_orders():
    inst = _bus_instance()
    ta, tb = 62 * 16 / 1e3, 187 * 16 / 1e3  # ms at 1e6 bits/s
    plan = MeshPlan({"a": "s", "b": "s", "c": "t"})
    m = evaluate(inst, plan)  # default order: a, b on s; a then b on the bus
    assert m.makespan_ms == pytest.approx(max(1 + ta, 2) + tb + 0.5)
    # b first on the device and on the bus: b ends at 1, sent 1..1+tb, a computed 1..2, sent after
    order = {"s": ["b", "a"], "bus0": ["b@s->t", "a@s->t"]}
    m2 = evaluate(inst, MeshPlan(plan.device, order))
    assert m2.makespan_ms == pytest.approx(1 + tb + ta + 0.5)
    assert not overlaps(m2.schedule)
    # a share bus instead: link s->t owns half the rate (its own resource, still one
    # transfer at a time on it)
    data = json.loads(json.dumps(_instance_dict(inst)))
    data["buses"][0]["mode"] = "share"
    m3 = evaluate(parse_instance(data), plan)
    assert m3.makespan_ms == pytest.approx(max(1 + 2 * ta, 2) + 2 * tb + 0.5)
    assert {t.resource for t in m3.schedule if t.kind == "transfer"} == {"s->t"}
    # an order that contradicts the data flow deadlocks
    # (the message names the cycle of waits: c first on s reads a, which comes after c)
    with pytest.raises(InvalidPlan, match="deadlock.*layer 'c' on 's' waits for layer 'a' on 's' waits for layer 'c'"):
        evaluate(inst, MeshPlan({"a": "s", "b": "s", "c": "s"}, {"s": ["c", "a", "b"]}))


def _instance_dict(inst):
    from splitopt.core.instance_io import to_dict

    return to_dict(inst)


def test_plan_json_round_trip_and_cli(tmp_path):
    from typer.testing import CliRunner

    from splitopt.cli import app
    from splitopt.core.instance_io import save_instance

    inst = eq2_instance()
    result = solve(inst, "cpsat", threads=1)
    data = json.loads(json.dumps(result.plan.to_dict(inst)))
    again = plan_from_dict(inst, data)
    assert again.key() == result.plan.key()
    assert evaluate(inst, again).makespan_ms == result.objective
    ipath, ppath = tmp_path / "inst.json", tmp_path / "plan.json"
    save_instance(inst, ipath)
    ppath.write_text(json.dumps(data))
    out = CliRunner().invoke(app, ["evaluate", str(ipath), str(ppath), "--json"])
    assert out.exit_code == 0, out.output
    metrics = json.loads(out.output)["metrics"]
    assert metrics["makespan_ms"] == pytest.approx(12.86)
    assert len(metrics["schedule"]) == 13


# ----- bad input --------------------------------------------------------------------------------


def test_disconnected_topology_names_the_device():
    layers = [_layer("a", ["input"], {"s": 1.0, "t": 1.0, "x": 1.0}, 10)]
    links = [{"source": "s", "target": "t", "bandwidth_bits_per_s": 1e6}]
    data = _instance(layers, [_device("s"), _device("t"), _device("x")], links, "s", "t")
    with pytest.raises(InvalidInstance, match=r"device 'x' cannot be reached from source 's'"):
        parse_instance(data)
    data["links"].append({"source": "s", "target": "x", "bandwidth_bits_per_s": 1e6})
    with pytest.raises(InvalidInstance, match=r"device 'x' has no path to sink 't'"):
        parse_instance(data)


def test_layer_that_fits_nowhere_and_bad_options():
    layers = [_layer("big", ["input"], {"s": 1.0, "t": 1.0}, 10, weights=1e6)]
    links = [{"source": "s", "target": "t", "bandwidth_bits_per_s": 1e6}]
    data = _instance(layers, [_device("s", 1e5), _device("t", 1e5)], links, "s", "t")
    with pytest.raises(InvalidInstance, match=r"layer 'big' has 2,000,000 B of weights"):
        parse_instance(data)
    ok = _instance([_layer("a", ["input"], {"s": 1.0, "t": 1.0}, 10)], [_device("s"), _device("t")], links, "s", "t")
    for mesh, field in (({"routing": "fastest"}, "routing"), ({"hops": 2}, "hops"), ({"deliver_outputs": 1}, "deliver_outputs")):
        bad = json.loads(json.dumps(ok))
        bad["settings"]["mesh"] = mesh
        with pytest.raises(InvalidInstance, match=rf"settings\.mesh\.{field}"):
            parse_instance(bad)
    bad = json.loads(json.dumps(ok))
    bad["links"].append({"source": "s", "target": "nowhere", "bandwidth_bits_per_s": 1e6})
    with pytest.raises(InvalidInstance, match=r"links\[1\]\.target: unknown device 'nowhere'"):
        parse_instance(bad)


def test_plans_over_missing_links_are_rejected():
    inst = eq2_instance(routing="direct")
    with pytest.raises(InvalidPlan, match=r"no link from 'UE' to 'MBS1'"):
        evaluate(inst, MeshPlan({"l1": "UE", "l2": "MBS1", "b1": "MBS1", "b2": "MBS1", "b3": "MBS1", "agg": "cloud"}))
    with pytest.raises(InvalidPlan, match=r"final output 'agg' on 'SBS' cannot reach sink 'cloud'"):
        evaluate(inst, MeshPlan({"l1": "UE", "l2": "SBS", "b1": "SBS", "b2": "SBS", "b3": "SBS", "agg": "SBS"}))
    with pytest.raises(InvalidPlan, match=r"no route from 'cloud' to 'SBS'"):
        evaluate(eq2_instance(),
                 MeshPlan({"l1": "cloud", "l2": "cloud", "b1": "cloud", "b2": "cloud", "b3": "cloud", "agg": "SBS"}))
    # direct links only and one layer: no placement can deliver the output
    one = _instance([_layer("a", ["input"], {d: 1.0 for d in DEVICES}, 10)], [_device(d) for d in DEVICES],
                    fig2b_links(), "UE", "cloud", routing="direct")
    result = solve(parse_instance(one), "cpsat", threads=1)
    assert result.status is Status.INFEASIBLE
    assert "no placement lets every tensor reach its readers and the final outputs reach sink 'cloud'" in result.message
    with pytest.raises(InvalidPlan, match=r"unknown device 'GPU'"):
        evaluate(eq2_instance(), MeshPlan({n: "GPU" for n in EQ2_TAU}))
    with pytest.raises(InvalidPlan, match=r"order.UE: task 'l2' runs on 'SBS'"):
        evaluate(eq2_instance(), MeshPlan({n: d for n, (d, _) in EQ2_TAU.items()}, {"UE": ("l2",)}))


# ----- infeasibility --------------------------------------------------------------------------------


def test_infeasible_working_set_names_the_layer():
    # weights fit, weights + working set (input 3000 B + output 40,000 B) fit no device
    layers = [_layer("a", ["input"], {"s": 1.0, "t": 1.0}, 20000, weights=10)]
    links = [{"source": "s", "target": "t", "bandwidth_bits_per_s": 1e6}]
    inst = parse_instance(_instance(layers, [_device("s", 30000), _device("t", 30000)], links, "s", "t"))
    for backend in ("cpsat", "milp-highs"):
        result = solve(inst, backend, threads=1)
        assert result.status is Status.INFEASIBLE
        assert "layer 'a' needs 43,020 B" in result.message


def test_infeasible_joint_memory_names_the_device():
    # two layers of 6,000 B weights each; a needs 9,020 B with its working set (the 3,000 B
    # input), b 6,040 B: s holds a but not both, t holds neither; lifting either limit helps
    lat = {"s": 1.0, "t": 1.0}
    layers = [_layer("a", ["input"], lat, 10, weights=3000), _layer("b", ["a"], lat, 10, weights=3000)]
    links = [{"source": "s", "target": "t", "bandwidth_bits_per_s": 1e6}]
    inst = parse_instance(_instance(layers, [_device("s", 10000), _device("t", 4000)], links, "s", "t"))
    result = solve(inst, "cpsat", threads=1)
    assert result.status is Status.INFEASIBLE
    assert "lifting any one of these alone would allow a plan: 's' (10,000 B), 't' (4,000 B)" in result.message
    assert solve(inst, "brute-force").status is Status.INFEASIBLE


# ----- time limits, baselines, shipped instances -------------------------------------------------


def test_time_limit_returns_a_plan_with_a_bound():
    inst = load_instance("instances/jmsnas_mesh_threebranch_tight.json")
    for backend in ("cpsat", "milp-cbc"):
        result = solve(inst, backend, time_limit=0.5, threads=1)
        assert result.status in (Status.FEASIBLE, Status.OPTIMAL)
        assert result.metrics.feasible
        assert result.bound is None or result.bound <= result.objective + 1e-9
        assert result.solve_s < 20


def test_baselines_and_shipped_instances():
    inst = load_instance("instances/jmsnas_mesh_threebranch_tight.json")
    opt = solve(inst, "cpsat", threads=2, time_limit=60)
    assert opt.status is Status.OPTIMAL
    # memory binds: each of SBS, MBS*, cloud holds at most one branch
    branch_devices = {opt.plan.device[f"branch{b}.conv2"] for b in (1, 2, 3)}
    assert len(branch_devices) == 3
    for name in ("best-single-device", "mesh-best-single-device", "heft"):
        out = solve(inst, name)
        m = evaluate(inst, out.plan)
        assert m.makespan_ms >= opt.objective - 1e-6
        assert out.status is (Status.FEASIBLE if m.feasible else Status.NO_SOLUTION_FOUND)
    with pytest.raises(NotApplicable):
        solve(inst, "mesh-brute-force")
    from splitopt.families.mesh.structure import identical_device_classes

    # MBS1 carries the SBS -> cloud route (tie broken by device order): only MBS2, MBS3 swap
    assert identical_device_classes(MeshData(inst)) == [["MBS2", "MBS3"]]


# ----- schedules of optimal plans (optima against brute force: tests/test_contracts.py) ------------

SMALL = st.tuples(st.integers(0, 2**31 - 1), st.integers(2, 5), st.integers(2, 3))


@settings(max_examples=15, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(SMALL)
def test_optimal_schedules_never_overlap_on_a_resource(args):
    seed, n_layers, n_devices = args
    inst = random_mesh_instance(seed, n_layers, n_devices)
    for backend in ("cpsat", "milp-highs"):
        result = solve(inst, backend, threads=1, diagnose=False)
        if result.plan is not None:
            assert result.metrics.feasible
            assert not overlaps(result.metrics.schedule), backend


def test_the_mesh_milp_is_the_same_program_whatever_the_hash_seed(tmp_path):
    """Its rows had followed a frozenset's order (the devices below a tree link), which
    Python's string hashing changes from run to run: HiGHS then returned one of several
    optimal plans for the same seed."""
    import subprocess
    import sys

    instance = Path(__file__).parent.parent / "instances" / "jmsnas_mesh_threebranch_tight.json"
    texts = []
    for seed in ("1", "2"):
        out = tmp_path / f"m{seed}.lp"
        proc = subprocess.run([sys.executable, "-m", "splitopt", "solve", str(instance), "--solver", "milp-highs",
                               "-t", "30", "-q", "--export-model", str(out)],
                              env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        texts.append(out.read_text())
    assert texts[0] == texts[1]
