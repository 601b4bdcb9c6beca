"""The edge/cloud program's reduction (``splitopt/families/edge_cloud/dominance.py``):
moving a dominated frontier layer to the cloud never makes a plan worse, and the program
with the dominance rows has the optimum of the program without them (and of brute
force) on random graphs and on the shipped instances."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from splitopt.api import load_instance
from splitopt.backends.brute_force import BruteForceBackend
from splitopt.backends.registry import get_backend
from splitopt.core.options import SolveOptions
from splitopt.core.program import row_violations
from splitopt.core.result import Status
from splitopt.families.edge_cloud.dominance import dominated_layers, without_dominated_frontier
from splitopt.families.edge_cloud.evaluate import evaluate
from splitopt.families.edge_cloud.examples import random_instance_data
from splitopt.families.edge_cloud.milp import build_milp, encode_plan
from splitopt.families.registry import family
from splitopt.families.edge_cloud.examples import random_instance
from splitopt.families.edge_cloud.strategies import split_bits_instances, split_instances
from splitopt.families.edge_cloud.plan import edge_cloud_plan

INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def varied_instance(seed: int, n_layers: int, problem: str, edge_required: bool = False):
    """A random instance whose cloud is, per layer, anywhere from 5x faster to 3x slower
    than the edge's fastest pair (the generator's cloud is always far faster, which would
    leave the latency condition untested), with ``transmit_bits`` below the candidate
    widths in every third seed (where the bits held and the bits sent differ), and widths
    (2, 8) in every second seed of split_bits (where they differ most)."""
    widths = (2, 8) if problem == "split_bits" and seed % 2 == 0 else None
    data = random_instance_data(seed, n_layers, problem=problem, bit_widths=widths, overrides=True,
                                edge_required=edge_required)
    rng = np.random.default_rng(seed)
    for layer in data["graph"]["layers"]:
        table = layer.get("latency_ms")
        if table is None:
            continue
        fastest = min(table["edge"].values())
        table["cloud"] = fastest * float(rng.choice([0.2, 0.9, 1.0, 1.5, 3.0]))
    if seed % 3 == 0:
        data["settings"]["transmit_bits"] = min(data["settings"]["bit_widths"])
    return family("edge_cloud").instance_from_data(data)


def working_sets(inst, plan) -> dict[str, float]:
    """Bits live on the edge at each edge step of ``plan`` (``splitopt.core.memory``'s
    definition, step by step): the reduction's claim is about every step, not only the
    peak."""
    edge = inst.settings.edge
    on_edge = {n for n, d in plan.device.items() if d == edge}

    def bits(t: str) -> int:
        return inst.input_by_name[t].bits if t in inst.input_by_name else plan.activation_bits[t]

    produced = [t.name for t in inst.inputs] + [l.name for l in inst.layers if l.name in on_edge]
    sent = {t for t in produced if any(r not in on_edge for r in inst.consumers[t])}
    last = {t: max([inst.position[r] for r in inst.consumers[t] if r in on_edge], default=-1) for t in produced}
    live = {t.name: inst.tensor_elements(t.name) * bits(t.name) for t in inst.inputs}
    out = {}
    for layer in inst.layers:
        if layer.name in on_edge:
            live[layer.name] = inst.tensor_elements(layer.name) * bits(layer.name)
            out[layer.name] = sum(live.values())
            live = {t: b for t, b in live.items() if t in sent or last[t] > inst.position[layer.name]}
    return out


def program_optimum(inst, reductions: bool) -> float | None:
    """HiGHS's optimum (ms) of the edge/cloud program with or without the dominance rows,
    its plan checked by the evaluator; None where it is infeasible."""
    program = build_milp(inst, None, reductions=reductions)
    raw = get_backend("milp-highs").run(program, SolveOptions())
    if raw.status is Status.INFEASIBLE:
        return None
    assert raw.status is Status.OPTIMAL, raw.message
    metrics = evaluate(inst, program.decode(raw.values))
    assert metrics.feasible and abs(metrics.total_ms - raw.objective) <= 1e-6 * max(1.0, raw.objective)
    return metrics.total_ms


def brute_optimum(inst) -> float | None:
    out = BruteForceBackend().solve(family("edge_cloud"), inst, SolveOptions())
    return None if out.plan is None else evaluate(inst, out.plan).total_ms


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-9


def test_moving_dominated_frontier_layers_never_worsens_a_plan():
    """On random plans of random graphs (both problems, with and without transmit_bits,
    budgets and memory limits): the moved plan is no slower, holds no more at any edge step,
    is no lossier where an error budget is set, is as feasible, and meets every dominance
    row."""
    moved = 0
    for seed in range(120):
        for problem in ("split", "split_bits"):
            inst = varied_instance(seed, 6 + seed % 9, problem, edge_required=seed % 4 == 0)
            space = family("edge_cloud").space(inst)
            rng = random.Random(seed)
            lp = build_milp(inst, None).model
            for _ in range(40):
                plan = space.decode(space.sample(rng))
                better = without_dominated_frontier(inst, plan)
                if better is plan:
                    continue
                moved += 1
                before, after = evaluate(inst, plan), evaluate(inst, better)
                assert after.total_ms <= before.total_ms * (1 + 1e-12) + 1e-12, (seed, problem)
                assert after.edge_weight_bytes <= before.edge_weight_bytes
                steps, steps_before = working_sets(inst, better), working_sets(inst, plan)
                assert all(bits <= steps_before[k] for k, bits in steps.items()), (seed, problem)
                if inst.settings.error_budget is not None:  # without one, error limits nothing
                    assert after.error <= before.error * (1 + 1e-12) + 1e-15, (seed, problem)
                assert after.feasible or not before.feasible, (seed, problem, after.violations)
                assert not row_violations(lp, encode_plan(inst, lp, better), reductions=True) or not after.feasible
    assert moved >= 100, moved  # the reduction acts on these graphs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(split_instances())
def test_reduced_split_program_keeps_the_optimum(inst):
    reduced = program_optimum(inst, True)
    assert same(reduced, program_optimum(inst, False)) and same(reduced, brute_optimum(inst))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(split_bits_instances())
def test_reduced_split_bits_program_keeps_the_optimum(inst):
    reduced = program_optimum(inst, True)
    assert same(reduced, program_optimum(inst, False)) and same(reduced, brute_optimum(inst))


@pytest.mark.parametrize("seed", range(12))
def test_reduced_program_keeps_the_optimum_on_larger_random_graphs(seed):
    """30-60 layers (beyond brute force): the program with and without the rows agree."""
    for inst in (random_instance(seed, 30 + 3 * seed, problem=("split", "split_bits")[seed % 2], edge_required=False),
                 varied_instance(seed, 30 + 3 * seed, ("split", "split_bits")[seed % 2])):
        assert same(program_optimum(inst, True), program_optimum(inst, False)), seed


@pytest.mark.parametrize("name", ["resnet50_eyeriss", "mobilenetv2_eyeriss", "googlenet_eyeriss"])
def test_shipped_instances_keep_their_optima_with_the_rows(name):
    inst = load_instance(INSTANCES / f"{name}.json")
    for problem in ("split", "split_bits"):
        here = inst.with_settings(problem=problem)
        rows = [r for r in build_milp(here, None).model.rows if r.kind == "dominance"]
        assert len(rows) == len(dominated_layers(here)) > 0
        assert same(program_optimum(here, True), program_optimum(here, False)), (name, problem)


def test_bits_held_for_sending_decide_where_bits_on_the_wire_would_not():
    """l1 reads l0 (100 elements) and writes 150; with transmit_bits 2 the wire would
    carry fewer bits after the move (200 <= 300), but the edge holds l0 at up to 8 bits
    (800) where it held l1 at 2 (300): at l3's step, a later edge step, the moved plan
    would hold more, so l1 is not dominated."""
    data = json.loads((Path(__file__).parent / "data" / "toy.json").read_text())

    def layer(name, inputs, shape):
        errors = {"2": 0.1, "4": 0.01, "6": 0.001, "8": 0.0001}
        return {"name": name, "op": "conv", "inputs": inputs, "macs": 1e6, "weights": 10, "output_shape": shape,
                "weight_error": errors, "activation_error": errors}

    data["graph"] = {"inputs": [{"name": "x", "shape": [1, 1, 10, 10], "bits": 8}], "layers": [
        layer("l0", ["x"], [1, 1, 10, 10]), layer("l1", ["l0"], [1, 1, 10, 15]), layer("l2", ["l1"], [1, 1, 10, 15]),
        layer("l3", ["x"], [1, 10, 10, 10]), layer("l4", ["l2", "l3"], [1, 1, 1, 10])]}
    data["settings"].update(transmit_bits=2, error_budget=None, edge_memory_bytes=1e9)
    inst = family("edge_cloud").instance_from_data(data)
    assert "l1" not in dominated_layers(inst)
    plan = edge_cloud_plan(inst, {"l0": (8, 8), "l1": (8, 2), "l3": (8, 8)})
    moved = edge_cloud_plan(inst, {"l0": (8, 8), "l3": (8, 8)})
    assert working_sets(inst, moved)["l3"] > working_sets(inst, plan)["l3"]
