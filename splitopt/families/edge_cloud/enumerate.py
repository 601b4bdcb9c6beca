"""Every edge/cloud plan, for the brute-force backend (the reference optimum on small
instances). Brute force evaluates each with the family's evaluator, so its answer
depends on no formulation's algebra. The plans:

* every edge set closed under predecessors (a down-set of the layer DAG: a layer is on
  the edge only if every layer it reads is), the empty set (cloud-only) included;
* for each edge layer, every (weight bits, activation bits) pair of candidate bit-widths
  (``split``: the reference precision only).

Nothing is pruned. The number of plans, sum over down-sets S of pairs**|S|, grows fast:
above the backend's limit ``enumerate_plans`` raises NotApplicable instead of running
for hours.
"""

from __future__ import annotations

import itertools
from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.data import candidate_bits
from splitopt.families.edge_cloud.plan import edge_cloud_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def down_sets(inst: EdgeCloudInstance) -> Iterator[tuple[str, ...]]:
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


def bit_pairs(inst: EdgeCloudInstance) -> list[tuple[int, int]]:
    """Every (weight bits, activation bits) an edge layer may use."""
    bits = candidate_bits(inst)
    return [(w, a) for w in bits for a in bits]


def count_plans(inst: EdgeCloudInstance, stop_above: int | None = None) -> int:
    """Number of plans brute force evaluates; counting stops as soon as it exceeds
    ``stop_above`` (then the returned value is only known to be larger)."""
    pairs = len(bit_pairs(inst))
    total = 0
    for edge_set in down_sets(inst):
        total += pairs ** len(edge_set)
        if stop_above is not None and total > stop_above:
            break
    return total


def all_plans(inst: EdgeCloudInstance) -> Iterator[Plan]:
    """Every well-formed plan of the instance, cloud-only first."""
    pairs = bit_pairs(inst)
    for edge_set in down_sets(inst):
        for choice in itertools.product(pairs, repeat=len(edge_set)):
            yield edge_cloud_plan(inst, dict(zip(edge_set, choice)))


def enumerate_plans(inst: EdgeCloudInstance, limit: int) -> Iterator[Plan]:
    """Every well-formed plan (``all_plans``), after checking there are at most ``limit``;
    NotApplicable otherwise."""
    count = count_plans(inst, stop_above=limit)
    if count > limit:
        raise NotApplicable(
            f"brute-force: instance '{inst.name}' has more than {limit:,} plans "
            f"({len(inst.layers)} layers, {len(bit_pairs(inst))} bit-width pairs per edge layer); "
            "use an exact solver"
        )
    return all_plans(inst)
