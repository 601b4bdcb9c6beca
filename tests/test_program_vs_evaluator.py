"""The program and the evaluator agree on every plan, not only on optima: for random
plans on random instances, the program's objective at the plan's encoding equals the
evaluator's latency, and the encoding meets every row exactly when the evaluator finds
the plan feasible. (The optimum's agreement is checked in test_exact_vs_bruteforce.)"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitopt import Plan, evaluate
from splitopt.solvers.split_program import build_split_program, encode_plan, row_violations
from splitopt.synthetic import random_instance


def random_closed_plan(inst, rng: random.Random) -> Plan:
    """A random edge set closed under predecessors (sometimes holding the pinned layers),
    with random bit-widths."""
    edge: set[str] = set()
    for layer in inst.layers:  # execution order: inputs are decided before their readers
        ready = all(src in edge or src in inst.input_by_name for src in layer.inputs)
        if ready and rng.random() < 0.65:
            edge.add(layer.name)
    if rng.random() < 0.5:
        edge |= inst.required_on_edge  # closed: required layers come with their ancestors
    bits = inst.candidate_bits()
    return Plan.edge_cloud(inst, {n: (rng.choice(bits), rng.choice(bits)) for n in edge})


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_layers=st.integers(2, 14),
       problem=st.sampled_from(["split", "split_bits"]), plan_seed=st.integers(0, 2**31 - 1))
def test_program_objective_and_rows_match_the_evaluator(seed, n_layers, problem, plan_seed):
    inst = random_instance(seed, n_layers, problem=problem)
    lp = build_split_program(inst)
    plan = random_closed_plan(inst, random.Random(plan_seed))
    metrics = evaluate(inst, plan)
    values = encode_plan(inst, lp, plan)
    assert lp.evaluate_objective(values) == pytest.approx(metrics.total_ms, rel=1e-9, abs=1e-12)
    broken = row_violations(lp, values)
    assert (not broken) == metrics.feasible, (broken, metrics.violations)
