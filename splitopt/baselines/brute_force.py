"""Brute force: the reference optimum on small instances.

Enumerates every plan and evaluates each with the independent evaluator
(``splitopt.evaluate``), so its answer depends on no formulation's algebra:

* every edge set closed under predecessors (a down-set of the layer DAG: a layer is on
  the edge only if every layer it reads is), the empty set (cloud-only) included;
* for each edge layer, every (weight bits, activation bits) pair of candidate bit-widths
  (``split``: the reference precision only).

It keeps the plan of least total latency (ms) that meets every budget; among equal
latencies, the first one met. Nothing is pruned. The number of plans,
sum over down-sets S of pairs**|S|, grows fast: above ``max_combinations`` it raises
``NotApplicable`` instead of running for hours.
"""

from __future__ import annotations

import itertools
from typing import Iterator

from splitopt.errors import NotApplicable
from splitopt.evaluator import evaluate
from splitopt.instance import Instance
from splitopt.plan import Plan
from splitopt.result import BackendOutput, Status
from splitopt.solvers.base import Backend, SolveOptions

#: default limit on the number of plans to evaluate
MAX_COMBINATIONS = 200_000


def down_sets(inst: Instance) -> Iterator[tuple[str, ...]]:
    """Every edge set closed under predecessors, as layer names in execution order,
    each exactly once (the empty set first).

    Layers are decided in execution order: a layer may join the set only if every layer
    it reads is already in it. Since a layer's inputs come before it, this accepts
    exactly the sets closed under predecessors."""
    layers = inst.layers

    def extend(i: int, chosen: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        if i == len(layers):
            yield chosen
            return
        yield from extend(i + 1, chosen)  # layer i on the cloud
        layer = layers[i]
        if all(src in chosen for src in layer.inputs if src in inst.layer_by_name):
            yield from extend(i + 1, chosen + (layer.name,))  # layer i on the edge

    yield from extend(0, ())


def bit_pairs(inst: Instance) -> list[tuple[int, int]]:
    """Every (weight bits, activation bits) an edge layer may use."""
    bits = inst.candidate_bits()
    return [(w, a) for w in bits for a in bits]


def count_plans(inst: Instance, stop_above: int | None = None) -> int:
    """Number of plans brute force evaluates; counting stops as soon as it exceeds
    ``stop_above`` (then the returned value is only known to be larger)."""
    pairs = len(bit_pairs(inst))
    total = 0
    for edge_set in down_sets(inst):
        total += pairs ** len(edge_set)
        if stop_above is not None and total > stop_above:
            break
    return total


def all_plans(inst: Instance) -> Iterator[Plan]:
    """Every well-formed plan of the instance, cloud-only first."""
    pairs = bit_pairs(inst)
    for edge_set in down_sets(inst):
        for choice in itertools.product(pairs, repeat=len(edge_set)):
            yield Plan.edge_cloud(inst, dict(zip(edge_set, choice)))


class BruteForceBackend(Backend):
    """Evaluate every plan; ``max_combinations`` bounds the number of plans."""

    name = "brute-force"
    kind = "exact"
    problems = ("split", "split_bits")
    requires = ()
    description = "enumerate every down-set and bit-width choice, evaluated by the independent evaluator"

    def __init__(self, max_combinations: int = MAX_COMBINATIONS):
        self.max_combinations = max_combinations

    def solve(self, inst: Instance, options: SolveOptions | None = None) -> BackendOutput:
        """The least-latency plan meeting every budget, proven by enumeration.
        ``options`` are ignored (no time limit, single thread, no randomness)."""
        count = count_plans(inst, stop_above=self.max_combinations)
        if count > self.max_combinations:
            raise NotApplicable(
                f"brute-force: instance '{inst.name}' has more than {self.max_combinations:,} plans "
                f"({len(inst.layers)} layers, {len(bit_pairs(inst))} bit-width pairs per edge layer); "
                "use an exact solver or raise max_combinations"
            )
        best_plan, best_ms, evaluated = None, float("inf"), 0
        for plan in all_plans(inst):
            metrics = evaluate(inst, plan)
            evaluated += 1
            if metrics.feasible and metrics.total_ms < best_ms:
                best_plan, best_ms = plan, metrics.total_ms
        extra = {"plans_evaluated": evaluated}
        if best_plan is None:  # cannot happen for valid instances: cloud-only is feasible
            return BackendOutput(Status.INFEASIBLE, message="no plan meets the budgets", extra=extra)
        return BackendOutput(Status.OPTIMAL, plan=best_plan, objective=best_ms, bound=best_ms, extra=extra)
