"""A loading plan to start from (and fall back on): the best plan in which every child has
its own thread (Case 1, the exact ``partition-search`` over the allowed child counts up to
``T``), else equal-bytes children at the smallest allowed count."""

from __future__ import annotations

import numpy as np

from splitopt.families.loading.data import data
from splitopt.families.loading.methods import even_starts
from splitopt.families.loading.partition import best_partition, counts_to_solve
from splitopt.families.loading.plan import LoadingPlan, plan_from_starts
from splitopt.families.loading.settings import LoadingInstance


def start_plan(inst: LoadingInstance) -> LoadingPlan:
    d = data(inst)
    counts = list(d.child_counts())
    with_inference = inst.objective == "latency"
    best, _ = best_partition(d, counts_to_solve(d, with_inference), with_inference)
    if best is not None:
        return plan_from_starts(d, best.starts)
    k = min(counts) if counts else min(d.k_min, d.n)
    return plan_from_starts(d, even_starts(d, k, np.asarray(d.block_bytes)) if counts else range(k))
