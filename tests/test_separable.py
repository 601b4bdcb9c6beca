"""The separable family (problem ``separable``): the paper's Table 3 numbering and Table 5
percentages, a hand-computed latency, mixing, the exact backends on the paper's instance,
symmetry, bad input and infeasibility on the command line."""

from __future__ import annotations

import copy
import itertools
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitopt.cli.app import app
from splitopt.core.errors import InvalidInstance, InvalidPlan
from splitopt.core.program import row_violations
from splitopt.core.result import Status
from splitopt.families.registry import family
from splitopt.families.separable.data import data
from splitopt.families.separable.evaluate import mixes
from splitopt.families.separable.examples import PAPER_TABLE5_PERCENT, resnext_cifar_data
from splitopt.families.separable.plan import (SeparablePlan, Step, choice_of_permutation, make_step,
                                              permutation_of_choice, step_from_dict)
from splitopt.families.separable.milp import canonical_labels, interchangeable
from splitopt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
FAM = family("separable")


def instance(raw: dict):
    return FAM.instance_from_data(raw)


def two_devices(**separable) -> dict:
    """Two devices a (1e9 MAC/s) and b (5e8 MAC/s), a stem of 1e6 MACs, blocks of 2e6 MACs
    with an [8, 2, 2] output (4 channels of 4 elements per device), a head of 1e6 MACs;
    links a->b 1 Mbit/s + 1 ms, b->a 2 Mbit/s + 0.5 ms."""
    layers = [{"name": "stem", "op": "conv", "inputs": ["x"], "macs": 1e6, "weights": 1, "output_shape": [8, 2, 2]}]
    for b in range(4):
        layers.append({"name": f"b{b}", "op": "sep_block", "inputs": [layers[-1]["name"]], "macs": 2e6,
                       "weights": 1, "output_shape": [8, 2, 2]})
    layers.append({"name": "head", "op": "linear", "inputs": ["b3"], "macs": 1e6, "weights": 1, "output_shape": [10]})
    def dev(n, r):
        return {"name": n, "mac_per_s": r, "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": 1e9,
                "bit_widths": [32]}

    opts = {"alpha": 2, "levels": {"min_percent": 50, "count": 2}, "dtypes": ["float32", "float16"]}
    opts.update(separable)
    return {"format": "splitopt-instance/1", "name": "two", "graph": {
        "inputs": [{"name": "x", "shape": [1, 2, 2], "bits": 8}], "layers": layers},
        "devices": [dev("a", 1e9), dev("b", 5e8)],
        "links": [{"source": "a", "target": "b", "bandwidth_bits_per_s": 1e6, "latency_ms": 1.0},
                  {"source": "b", "target": "a", "bandwidth_bits_per_s": 2e6, "latency_ms": 0.5}],
        "settings": {"problem": "separable", "objective": "latency", "edge": "a", "cloud": "b", "separable": opts}}


def test_table3_numbering():
    assert permutation_of_choice(0, 4) == (0, 1, 2, 3)
    assert permutation_of_choice(7, 4) == (1, 0, 3, 2)  # the paper's example: 0<->1, 2<->3
    assert permutation_of_choice(12, 4) == (2, 0, 1, 3)
    assert permutation_of_choice(23, 4) == (3, 2, 1, 0)
    for g in (1, 2, 3, 4, 5):
        perms = list(itertools.permutations(range(g)))
        assert [permutation_of_choice(c, g) for c in range(len(perms))] == perms
        assert [choice_of_permutation(p) for p in perms] == list(range(len(perms)))


@pytest.mark.parametrize("equal_maps, expected", [
    (True, {"Table 6: Sep-ResNeXt-56": 34 / 108, "Table 6: + sparsification": 30 / 108,
            "Table 6: + sparsification + float16": 31.1875 / 216}),
    (False, {"Table 6: Sep-ResNeXt-56": 76 / 252, "Table 6: + sparsification": 61.5 / 252,
             "Table 6: + sparsification + float16": 35.78125 / 252}),
])
def test_table5_from_table6(equal_maps, expected):
    """The paper's percentages from its own decisions: exact for rows 1 and 3 when every
    feature map counts the same (formulations/separable_policies.md), not for row 2."""
    inst = instance(resnext_cifar_data(equal_maps=equal_maps))
    d = data(inst)
    for name, steps in d.reference_policies.items():
        plan = SeparablePlan(tuple(step_from_dict(d, s, name) for s in steps))
        ratio = FAM.evaluate(inst, plan).ratio_to_ring
        assert ratio == pytest.approx(expected[name], rel=1e-12), name
        if equal_maps and name != "Table 6: + sparsification":
            assert math.floor(ratio * 10000) / 100 == PAPER_TABLE5_PERCENT[name]  # the paper truncates
    ring = FAM.evaluate(inst, SeparablePlan((), ring=True))
    assert ring.ratio_to_ring == 1.0 and ring.intensive_steps == d.steps


def test_hand_computed_latency():
    """Stem: a 1 ms, b 2 ms. Block share (2e6 / 2 MACs): a 1 ms, b 2 ms. Step 0 (b0, b1): a
    sends b its 4 channels at level 1 (100 %) in float32: 4 * 4 * 4 = 64 B over 1 Mbit/s =
    0.512 ms + 1 ms; b sends a 64 B over 2 Mbit/s: 0.256 + 0.5 ms.
    a: snap 2, send 2 -> 3.512; rest done 3; b's message arrives 4 + 0.756 = 4.756 -> ready 4.756.
    b: snap 4, rest done 6; a's arrives 3.512 -> ready 6.
    Step 1 silent: a 4.756 + 2 = 6.756; b 6 + 4 = 10. Head on a: 1 ms -> 7.756 ms."""
    inst = instance(two_devices())
    d = data(inst)
    swap = make_step(d, (1, 0), 1, "float32")
    plan = SeparablePlan((swap, make_step(d, (0, 1))))
    m = FAM.evaluate(inst, plan)
    assert m.latency_ms == pytest.approx(7.756, abs=1e-9)
    assert m.total_bytes == 128 and m.steps[0].ready_ms == pytest.approx((4.756, 6.0))
    # float16 at level 0 (50 %): 2 channels * 4 elements * 2 B = 16 B per message
    half = SeparablePlan((make_step(d, (1, 0), 0, "float16"), make_step(d, (0, 1))))
    assert FAM.evaluate(inst, half).total_bytes == 32
    # the head on b: b's ready time 10 + 2 ms
    other = instance(two_devices(head_device="b"))
    assert FAM.evaluate(other, plan).latency_ms == pytest.approx(12.0)
    # alpha = 1: nothing overlaps the transfer (4 steps)
    sync = instance(two_devices(alpha=1))
    ds = data(sync)
    steps = (make_step(ds, (1, 0), 1, "float32"),) + tuple(make_step(ds, (0, 1)) for _ in range(3))
    m1 = FAM.evaluate(sync, SeparablePlan(steps))
    assert m1.steps[0].ready_ms == pytest.approx((4.756, 4.0 + 0.0))  # b: max(4, 3.512)


def test_mixing_semantics():
    raw = resnext_cifar_data(g=4)
    inst = instance(raw)
    d = data(inst)
    silent = make_step(d, (0, 1, 2, 3))
    pairs, cross = make_step(d, (1, 0, 3, 2)), make_step(d, (2, 3, 0, 1))
    assert not mixes(d, SeparablePlan((pairs,) * 9))
    assert mixes(d, SeparablePlan((pairs, cross) + (silent,) * 7))
    assert not mixes(d, SeparablePlan((silent,) * 8 + (pairs,)))
    # order matters: what a device sends is what it held before the step
    shift = make_step(d, (1, 2, 3, 0))
    assert not mixes(d, SeparablePlan((shift, shift) + (silent,) * 7))
    assert mixes(d, SeparablePlan((shift, shift, shift) + (silent,) * 6))


def test_exact_backends_on_the_paper_instance():
    raw = resnext_cifar_data()
    raw["settings"]["objective"] = "bytes"
    raw["settings"]["separable"]["mixing"] = True
    inst = instance(raw)
    results = {b: solve(inst, b, time_limit=120) for b in ("cpsat", "milp-highs")}
    for b, r in results.items():
        assert r.status is Status.OPTIMAL, (b, r.message)
        assert r.metrics.mixing and r.metrics.feasible
    # 4 exchanges at the smallest message (stage 3, 50 %, float16: 256 * 8 * 8 / 2 * 2 B)
    assert results["cpsat"].objective == pytest.approx(8 * 16384)
    assert results["milp-highs"].objective == pytest.approx(8 * 16384)
    # every baseline sends at least as much
    for method in ("all-intensive", "reference-policies", "random-sampling", "ring-allreduce"):
        r = solve(inst, method)
        assert r.objective >= 8 * 16384


def test_latency_with_a_byte_budget_and_intensity():
    raw = resnext_cifar_data()
    raw["settings"]["separable"].update(mixing=True, min_intensive_steps=3, byte_budget_bytes=800_000)
    inst = instance(raw)
    r = solve(inst, "cpsat", time_limit=120)
    assert r.status is Status.OPTIMAL and r.metrics.feasible
    assert r.metrics.intensive_steps >= 3 and r.metrics.total_bytes <= 800_000
    lower = FAM.lower_bound(inst)
    assert r.objective >= lower - 1e-9


def test_program_rows_agree_with_evaluator_on_paper_policies():
    raw = resnext_cifar_data()
    raw["settings"]["separable"].update(mixing=True, min_intensive_steps=8, byte_budget_bytes=3e6,
                                        latency_budget_ms=2000.0, min_accuracy=0.78,
                                        accuracy=[{"accuracy": 0.79, "min_intensive_steps": 7, "min_level": 3},
                                                  {"accuracy": 0.785, "min_intensive_steps": 6, "max_level": 7},
                                                  {"accuracy": 0.77}])
    inst = instance(raw)
    d = data(inst)
    program = FAM.build_program(inst, "linear", None)
    for name, steps in d.reference_policies.items():
        plan = SeparablePlan(tuple(step_from_dict(d, s, name) for s in steps))
        m = FAM.evaluate(inst, plan)
        values = program.encode(plan)
        assert program.to_ms(program.model.evaluate_objective(values)) == pytest.approx(m.latency_ms, rel=1e-9)
        assert (not row_violations(program.model, values)) == m.feasible, (name, m.violations)


def test_interchangeable_devices_and_canonical_labels():
    inst = instance(resnext_cifar_data())
    d = data(inst)
    assert interchangeable(d, with_time=True) == [[1, 2, 3]]  # the head (device 0) is special
    assert interchangeable(d, with_time=False) == [[0, 1, 2, 3]]
    two = data(instance(two_devices()))
    assert interchangeable(two, with_time=True) == []  # speeds and links differ
    assert interchangeable(two, with_time=False) == [[0, 1]]  # for bytes only the links' existence matters
    raw = two_devices()
    raw["links"] = raw["links"][:1]
    assert interchangeable(data(instance(raw)), with_time=False) == []
    plan = SeparablePlan(tuple(make_step(d, permutation_of_choice(c, 4), 2, "float16")
                               for c in (0, 0, 5, 23, 7, 0, 9, 0, 12)))
    canon = canonical_labels(d, plan, interchangeable(d, with_time=True))
    a, b = FAM.evaluate(inst, plan), FAM.evaluate(inst, canon)
    assert (a.latency_ms, a.total_bytes, a.mixing, a.intensive_steps) == pytest.approx(
        (b.latency_ms, b.total_bytes, b.mixing, b.intensive_steps))
    first = [next(j for j, s in enumerate(canon.steps) if s.send_to[g] != g) for g in (1, 2, 3)]
    assert first == sorted(first)


def test_bad_plans_are_one_line_errors():
    inst = instance(resnext_cifar_data())
    d = data(inst)
    with pytest.raises(InvalidPlan, match=r"send_to: must list the receiver of each of the 4 devices"):
        step_from_dict(d, {"send_to": [1, 0, 2]}, "plan.steps[0]")
    with pytest.raises(InvalidPlan, match=r"level: must be a sparsity level in \[0, 8\], got 9"):
        step_from_dict(d, {"choice": 3, "level": 9}, "plan.steps[0]")
    with pytest.raises(InvalidPlan, match=r"not a permutation"):
        step_from_dict(d, {"send_to": [1, 1, 2, 3]}, "plan.steps[0]")
    with pytest.raises(InvalidPlan, match=r"choice: must be an integer in \[0, 23\]"):
        step_from_dict(d, 24, "plan.steps[0]")
    with pytest.raises(InvalidPlan, match=r"dtype: must be one of float32, float16"):
        step_from_dict(d, [3, 2, "int8"], "plan.steps[0]")
    with pytest.raises(InvalidPlan, match=r"8 steps; the instance has 9"):
        FAM.plan_from_dict(inst, {"steps": [0] * 8}, "plan")
    raw = two_devices()
    raw["links"] = raw["links"][:1]  # no link b -> a
    two = instance(raw)
    with pytest.raises(InvalidPlan, match=r"no link b -> a"):
        FAM.plan_from_dict(two, {"steps": [{"send_to": [1, 0]}, {"send_to": [0, 1]}]})


@pytest.mark.parametrize("change, match", [
    (lambda r: [l.update(output_shape=[7, 2, 2]) for l in r["graph"]["layers"][1:5]],
     r"7 output channels, not divisible by G = 2"),
    (lambda r: r["graph"]["layers"][3].update(output_shape=[8, 1, 1]), r"alpha: 2: the step over blocks"),
    (lambda r: r["settings"]["separable"].update(devices=["a", "zz"]), r"devices: unknown device 'zz'"),
    (lambda r: r["settings"]["separable"].update(levels={"min_percent": 0, "count": 3}), r"min_percent"),
    (lambda r: r["settings"]["separable"].update(stem_layers=3, head_layers=3), r"leave no separable block"),
    (lambda r: r["settings"]["separable"].update(accuracy=[{"accuracy": 0.5, "min_level": 7}]), r"min_level"),
    (lambda r: r["settings"]["separable"].update(head_device="c"), r"head_device"),
])
def test_bad_instances_are_one_line_errors(change, match):
    raw = two_devices()
    change(raw)
    with pytest.raises(InvalidInstance, match=match):
        instance(raw)


def test_cli_bad_input_exit_2(tmp_path):
    raw = two_devices()
    for layer in raw["graph"]["layers"][1:5]:
        layer["output_shape"] = [7, 2, 2]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    out = CliRunner().invoke(app, ["solve", str(path)])
    assert out.exit_code == 2 and "not divisible by G = 2" in out.output and "Traceback" not in out.output
    good = tmp_path / "good.json"
    good.write_text(json.dumps(two_devices()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "splitopt-separable-plan/1", "steps": [{"send_to": [1, 0], "level": 5},
                                                                                 {"send_to": [0, 1]}]}))
    out = CliRunner().invoke(app, ["evaluate", str(good), str(plan)])
    assert out.exit_code == 2 and "level: must be a sparsity level in [0, 1], got 5" in out.output


def test_cli_solve_evaluate_round_trip(tmp_path):
    path = ROOT / "instances" / "separable_resnext56_pi4.json"
    out = CliRunner().invoke(app, ["solve", str(path), "--objective", "bytes", "--json", "-o",
                                   str(tmp_path / "plan.json")])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["status"] == "OPTIMAL" and result["objective"] == pytest.approx(131072)
    assert result["objective_unit"] == "bytes"
    again = CliRunner().invoke(app, ["evaluate", str(path), str(tmp_path / "plan.json"), "--objective", "bytes",
                                     "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["metrics"]["total_bytes"] == pytest.approx(131072)


def test_infeasible_names_the_limit(tmp_path):
    raw = two_devices(min_accuracy=0.9, accuracy=[{"accuracy": 0.8}])
    r = solve(instance(raw), "cpsat")
    assert r.status is Status.INFEASIBLE and "min_accuracy" in r.message
    raw = resnext_cifar_data(g=4, blocks_per_stage=1, alpha=3, equal_maps=True)  # one step: nobody learns 3 others
    raw["links"] = [l for l in raw["links"] if not (l["source"] == "pi0" and l["target"] == "pi1")]
    raw["settings"]["separable"]["mixing"] = True
    r = solve(instance(raw), "cpsat")
    assert r.status is Status.INFEASIBLE and "mixing" in r.message
    raw = two_devices(min_accuracy=0.9, accuracy=[{"accuracy": 0.8}], ring_accuracy=0.95)  # the ring plan meets it
    r = solve(instance(raw), "cpsat")
    assert r.status is Status.OPTIMAL and r.plan.ring and r.metrics.accuracy == 0.95
    raw = copy.deepcopy(two_devices(byte_budget_bytes=10.0, mixing=True))
    r = solve(instance(raw), "milp-highs")
    assert r.status is Status.INFEASIBLE and "byte_budget_bytes" in r.message


# --- lower bounds that mixing and intensive steps force (gossip.py) --------------------------------

def test_mixing_message_bound_against_knowledge_search():
    """``min_mixing_messages`` never exceeds the exact fewest messages of a mixing policy
    (Dijkstra over the devices' knowledge, any number of permutation steps), and equals
    it for G = 2, 3, 4 (so one message more would be wrong)."""
    from splitopt.families.separable.gossip import fewest_mixing_messages, min_mixing_messages

    for g, exact in ((1, 0), (2, 2), (3, 6), (4, 8)):
        assert fewest_mixing_messages(g) == exact
        assert min_mixing_messages(g) == exact


@pytest.mark.parametrize("g", range(6, 20))
def test_a_three_cycle_mixes_in_one_message_fewer_than_two_way_gossip(g):
    """Permutation steps beat the telephone bound 4G - 8 from G = 6 on: the policy of
    ``cycle_gossip_rounds`` mixes in 4G - 9 messages (each round a permutation)."""
    from splitopt.families.separable.evaluate import steps_mix
    from splitopt.families.separable.gossip import cycle_gossip_rounds

    steps = []
    for arcs in cycle_gossip_rounds(g):
        send_to = list(range(g))
        for a, b in arcs:
            send_to[a] = b
        assert sorted(send_to) == list(range(g))  # a permutation: every sender also receives
        steps.append(Step(tuple(send_to), 0, "float16"))
    assert steps_mix(g, steps) and not steps_mix(g, steps[:-1])
    assert sum(step.senders for step in steps) == 4 * g - 9


def test_the_g8_bytes_start_plan_mixes_in_23_messages():
    from splitopt.api import load_instance

    inst = load_instance(ROOT / "instances" / "separable_resnext110_pi8.json").with_settings(objective="bytes")
    fam = family("separable")
    plan = fam.start_plan(inst)
    metrics = fam.evaluate(inst, plan)
    assert metrics.feasible and sum(step.senders for step in plan.steps) == 23
    assert metrics.objective_ms == 23 * 16384  # 23 messages at the cheapest option (was 24)


def brute_force_best(inst):
    """The best feasible objective over every plan (None: none is feasible)."""
    from splitopt.families.separable.enumerate import enumerate_plans

    best = None
    for plan in enumerate_plans(inst, 50_000):
        m = FAM.evaluate(inst, plan)
        if m.feasible and (best is None or m.objective_ms < best):
            best = m.objective_ms
    return best


#: (devices, blocks = steps, levels, dtypes): small enough for brute force
BOUND_CASES = [(3, 2, 2, ("float32", "float16")), (3, 3, 1, ("float16",)), (4, 2, 1, ("float16",)),
               (2, 3, 2, ("float32", "float16"))]


def bound_instance(seed: int, objective: str, intensive: int):
    from splitopt.families.separable.examples import random_separable_data

    g, blocks, levels, dtypes = BOUND_CASES[seed % len(BOUND_CASES)]
    raw = random_separable_data(seed, g, blocks, alpha=1, levels=levels, dtypes=dtypes, objective=objective,
                                limits=seed % 3 == 0)
    opts = raw["settings"]["separable"]
    opts["mixing"] = True
    if intensive:
        opts["min_intensive_steps"] = intensive
    return instance(raw)


@pytest.mark.parametrize("objective, intensive", [("bytes", 0), ("latency", 0), ("latency", 1), ("bytes", 1)])
def test_family_lower_bound_against_brute_force(objective, intensive):
    """The family's bound (mixing: the fewest messages at their cheapest, the head's
    earliest reception; intensive steps: every device's) never exceeds the brute-force
    optimum on small random instances with random links, limits and records, and meets it
    on some (so any uniform strengthening would fail here); the start plan is never below
    it either."""
    tight = checked = 0
    for seed in range(12):
        inst = bound_instance(seed, objective, intensive)
        bound, best = FAM.lower_bound(inst), brute_force_best(inst)
        start = FAM.evaluate(inst, FAM.start_plan(inst))
        if start.feasible:
            assert bound <= start.objective_ms * (1 + 1e-9) + 1e-9, (seed, bound, start.objective_ms)
        if best is None:
            continue
        checked += 1
        assert bound <= best * (1 + 1e-9) + 1e-9, (seed, bound, best)
        tight += bound >= best * (1 - 1e-9) - 1e-9
    assert checked >= 6 and tight >= 2, (checked, tight)


def test_program_rows_hold_for_the_optimum():
    """The bound rows of the program (messages, bytes, latency) admit the brute-force
    optimum: it encodes into the program without a violated row."""
    for objective in ("bytes", "latency"):
        for seed in range(4):
            inst = bound_instance(seed, objective, seed % 2)
            best = None
            from splitopt.families.separable.enumerate import enumerate_plans

            for plan in enumerate_plans(inst, 50_000):
                m = FAM.evaluate(inst, plan)
                if m.feasible and (best is None or m.objective_ms < best[0]):
                    best = (m.objective_ms, plan)
            if best is None:
                continue
            program = FAM.build_program(inst, "linear", best[1])
            assert not row_violations(program.model, program.encode(best[1])), (objective, seed)


def test_g8_latency_mixing_is_proven_at_one_transfer():
    """The G = 8 ResNeXt-110 instance (36 steps), latency with mixing: the head swaps with
    each device in turn and the last one spreads what it knows; the head is delayed by one
    cheapest transfer, which is the family's bound: OPTIMAL without a program."""
    raw = json.loads((ROOT / "instances" / "separable_resnext110_pi8.json").read_text())
    raw["settings"]["objective"] = "latency"
    raw["settings"]["separable"]["mixing"] = True
    inst = instance(raw)
    silent = FAM.evaluate(inst, SeparablePlan(tuple(make_step(data(inst), tuple(range(8)))
                                                    for _ in range(data(inst).steps)))).latency_ms
    r = solve(inst, "cpsat", time_limit=60)
    assert r.status is Status.OPTIMAL and r.metrics.feasible and r.metrics.mixing
    # the cheapest transfer: 1 ms + 16,384 B at 300 Mbit/s
    assert r.objective == pytest.approx(silent + 1.0 + 16384 * 8 / 300e6 * 1000)


# --- hostile input found by a sweep (2026-11-27) -----------------------------------------------------

def sixteen_devices() -> dict:
    """A random separable instance on 16 devices (the most allowed), every link present:
    16! permutations per step."""
    from splitopt.families.separable.examples import random_separable_data

    return random_separable_data(3, 16, 4, limits=False, objective="latency")


def test_sixteen_devices_never_list_every_permutation():
    """G = 16 (the most allowed): brute force refuses at once, the search space encodes a
    step's permutation as an order of the devices (not an index into 16! of them), and the
    heuristics keep the time limit."""
    import time

    from splitopt.families.separable.plan import TooManyPermutations, permutations
    from splitopt.families.separable.space import separable_space
    from splitopt.search.space import PermutationGene

    inst = instance(sixteen_devices())
    d = data(inst)
    with pytest.raises(TooManyPermutations):
        permutations(d, cap=1000)
    t = time.perf_counter()
    with pytest.raises(Exception, match="too many"):
        solve(inst, "brute-force")
    assert time.perf_counter() - t < 5
    space = separable_space(inst)
    assert any(isinstance(g, PermutationGene) for g in space.genes)
    for solver in ("evolutionary", "random-sampling"):
        t = time.perf_counter()
        r = solve(inst, solver, time_limit=2.0)
        assert r.status.has_plan and time.perf_counter() - t < 6, solver


def test_orders_become_permutations_over_the_links():
    """over_links keeps every cycle whose links exist and silences the others; a plan's own
    permutation comes back unchanged, so the space still represents every plan."""
    import random

    from splitopt.families.separable.examples import random_separable_data
    from splitopt.families.separable.space import over_links

    d = data(instance(random_separable_data(5, 6, 2, limits=False, link_density=0.5)))
    rng = random.Random(0)
    for _ in range(200):
        order = list(range(d.g))
        rng.shuffle(order)
        p = over_links(d, tuple(order))
        assert sorted(p) == list(range(d.g))
        assert all(g == h or d.has_link(g, h) for g, h in enumerate(p))
        assert all(p[g] in (g, order[g]) for g in range(d.g))
        assert over_links(d, p) == p


def test_permutations_are_listed_in_lexicographic_order():
    from splitopt.families.separable.examples import random_separable_data
    from splitopt.families.separable.plan import permutations

    d = data(instance(random_separable_data(7, 5, 2, limits=False, link_density=0.6)))
    want = [p for p in itertools.permutations(range(d.g)) if all(g == h or d.has_link(g, h) for g, h in enumerate(p))]
    assert permutations(d) == want and permutations(d, cap=len(want)) == want


@pytest.mark.parametrize("key", ["latency_budget_ms", "byte_budget_bytes"])
def test_a_budget_of_zero_is_named_when_infeasible(key):
    raw = two_devices(mixing=True, **{key: 0})
    r = solve(instance(raw), "cpsat")
    assert r.status is Status.INFEASIBLE and f"(limit: {key})" in r.message


@pytest.mark.parametrize("change, match", [
    (lambda s: s.update(levels={"min_percent": 10, "count": 3}), r"levels.min_percent: 10: the lowest level sends "
                                                                  r"floor\(4 x 10 / 100\) = 0"),
    (lambda s: s.update(accuracy=[{"accuracy": 0.9, "min_level": 1, "max_level": 0}]), r"max_level: 0 is below"),
    (lambda s: s.update(reference_policies={"x": [1]}), r"reference_policies.x: 1 steps; the instance has 2"),
    (lambda s: s.update(reference_policies={"x": [0, 99]}), r"reference_policies.x\[1\]"),
])
def test_more_bad_instances_are_one_line_errors(change, match):
    raw = two_devices()
    change(raw["settings"]["separable"])
    with pytest.raises(InvalidInstance, match=match):
        instance(raw)


def test_settings_changed_in_python_are_checked_too():
    """``with_settings`` skips the schema: the family's own checks still name the field."""
    inst = instance(two_devices())
    opts = dict(inst.settings.separable)
    with pytest.raises(InvalidInstance, match="dtypes: must list distinct dtypes"):
        solve(inst.with_settings(separable={**opts, "dtypes": [["float16"]]}), "auto")


def test_a_reference_policy_over_a_missing_link_names_the_policy():
    raw = two_devices(reference_policies={"swap": [{"send_to": [1, 0]}, {"send_to": [0, 1]}]})
    raw["links"] = raw["links"][:1]  # b -> a gone
    with pytest.raises(InvalidInstance, match=r"reference_policies.swap.steps\[0\].send_to\[1\]: no link b -> a"):
        instance(raw)


def test_library_calls_with_the_wrong_kind_of_argument_are_splitopt_errors():
    from splitopt import api
    from splitopt.core.errors import InvalidOption, UnknownSolver

    inst = instance(two_devices())
    for bad in (None, {"steps": []}, "plan.json"):
        with pytest.raises(InvalidPlan, match="a separable plan"):
            api.evaluate(inst, bad)
    for bad in (None, "x.json", {"format": "splitopt-instance/1"}):
        with pytest.raises(InvalidInstance, match="a splitopt instance is expected"):
            solve(bad)
    with pytest.raises(InvalidOption, match="a mapping of solver option names"):
        solve(inst, "cpsat", options=[1, 2])
    with pytest.raises(UnknownSolver, match="unknown solver ''"):
        solve(inst, "")
    with pytest.raises(InvalidOption, match="builds no program"):
        solve(inst, "ring-allreduce", export_path="m.lp")


def test_pareto_of_an_infeasible_instance_exits_4_naming_the_limit(tmp_path):
    path = tmp_path / "inf.json"
    path.write_text(json.dumps(two_devices(min_intensive_steps=50)))
    out = CliRunner().invoke(app, ["pareto", str(path), "-q", "-t", "5"])
    assert out.exit_code == 4, out.output
    assert "no point on the front: INFEASIBLE" in out.output and "min_intensive_steps" in out.output


def test_a_group_of_one_device_has_no_ring_plan():
    """The ring all-reduce needs G > 1 devices: on a one-device group the ring plan is refused
    (one line naming the field), as ``ring-allreduce`` refuses to run there; the programs,
    the bounds and brute force know no ring on such a group either (the evaluator accepted
    the plan, and the MILP's encoding of it failed with a TypeError)."""
    one = instance(two_devices(devices=["a"]))
    with pytest.raises(InvalidPlan, match=r"^plan.ring_allreduce: the ring all-reduce needs G > 1 devices") as e:
        FAM.plan_from_dict(one, {"ring_allreduce": True}, "plan")
    assert "\n" not in str(e.value)
    with pytest.raises(InvalidPlan, match=r"needs G > 1 devices"):
        FAM.evaluate(one, SeparablePlan((), ring=True))
    program = FAM.build_program(one, "linear", None)
    plans = list(FAM.enumerate_plans(one, 1000))
    assert plans and not any(p.ring for p in plans)
    for plan in plans:
        assert row_violations(program.model, program.encode(plan)) == []
