"""Methods of the loading family besides the generic programs:

* ``partition-search`` (exact): the min-max contiguous partition by parametric search
  (:mod:`splitopt.families.loading.partition`) for every allowed child count; it solves the
  ``balance`` objective, and the ``latency`` objective when no allowed child count exceeds
  the threads (Case 1: each child on its own thread, so the schedule is fixed);
* ``count-search`` (exact): the ``latency`` objective over every allowed child count,
  Case 2 included (:mod:`splitopt.families.loading.counts`: Case 1 by the min-max
  partition, Case 2 by the staircase relaxation bound and an exact depth-first search);
  the ``balance`` objective as ``partition-search``;
* ``monolithic``: the whole model as one child (the paper's "Original");
* ``equal-count`` / ``equal-bytes``: for each allowed child count k, k children of (nearly)
  equal block count / equal bytes, loaded in the paper's order (Alg. 2); the best k by
  the evaluator;
* ``reference-plans``: the best of the published cut positions the instance carries
  (``settings.loading.reference_plans``, e.g. the paper's Tables 1-2), in the paper's order;
* ``paper-rlu``: the paper's tabular Q-learning unit (:mod:`splitopt.families.loading.rlu`).
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from splitopt.core.errors import NotApplicable
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.base import plan_output
from splitopt.families.loading.data import LoadingData, data
from splitopt.families.loading.diagnose import no_child_count_message
from splitopt.families.loading.evaluate import evaluate
from splitopt.families.loading.partition import best_partition, counts_to_solve
from splitopt.families.loading.plan import LoadingPlan, plan_from_starts
from splitopt.families.loading.settings import LoadingInstance


def partition_search(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """Exact: the best partition of each child count, the best of them (see the module
    docstring); OPTIMAL within ``partition.RTOL``, with the proven bound."""
    d = data(inst)
    objective = inst.objective
    counts = list(d.child_counts())
    if not counts:
        return BackendOutput(Status.INFEASIBLE, message=no_child_count_message(d))
    if objective == "latency" and max(counts) > d.threads:
        raise NotApplicable(f"partition-search solves the latency objective only when every child has its own "
                            f"thread (Case 1: children.max <= threads = {d.threads}); here up to {max(counts)} "
                            f"children are allowed: use cpsat")
    best, stopped = best_partition(d, counts_to_solve(d, objective == "latency"), objective == "latency",
                                   options.out_of_time)
    if best is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="partition-search: the time limit came first")
    status = Status.FEASIBLE if stopped else Status.OPTIMAL
    return BackendOutput(status, plan=plan_from_starts(d, best.starts), bound=best.bound)


def count_search(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """Exact over every allowed child count (see the module docstring): OPTIMAL when every
    count is closed (the bound within ``counts.RTOL`` of the plan), else FEASIBLE with the
    least bound of the counts left open when the time limit came."""
    from splitopt.families.loading.counts import solve_counts

    d = data(inst)
    if inst.objective != "latency":
        return partition_search(inst, options)
    if not list(d.child_counts()):
        return BackendOutput(Status.INFEASIBLE, message=no_child_count_message(d))
    t0 = time.perf_counter()
    result = solve_counts(d, options.out_of_time)
    extra = {"count_search_nodes": result.nodes, "solve_s": time.perf_counter() - t0,
             "counts": {str(k): v for k, v in result.counts.items()}}
    if result.plan is None:  # the time limit came before any plan: equal bytes, fewest children
        fallback = plan_from_starts(d, even_starts(d, min(d.child_counts()), np.asarray(d.block_bytes)))
        return BackendOutput(Status.FEASIBLE, plan=fallback, bound=result.bound, extra=extra)
    status = Status.OPTIMAL if result.closed else Status.FEASIBLE
    return BackendOutput(status, plan=result.plan, bound=result.bound, extra=extra)


def monolithic(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """The whole model as one child model."""
    return plan_output(plan_from_starts(data(inst), [0]))


def even_starts(d: LoadingData, k: int, weights: np.ndarray) -> list[int]:
    """Starts of ``k`` children cutting the cumulative ``weights`` (one per block) at
    ``j/k`` of the total, made strictly increasing, with the last child holding the
    trainable tail."""
    prefix = np.concatenate([[0.0], np.cumsum(weights)])
    total = prefix[-1]
    starts = [0]
    for j in range(1, k):
        x = int(np.searchsorted(prefix, total * j / k, side="left")) if total > 0 else round(d.n * j / k)
        starts.append(x)
    # strictly increasing, inside [1, N-1], the last child starting at or before N - m
    limit = d.last_start_max
    for j in range(1, k):
        starts[j] = max(starts[j], starts[j - 1] + 1)
    for j in range(k - 1, 0, -1):
        starts[j] = min(starts[j], limit - (k - 1 - j))
    return starts


def _best_of(inst: LoadingInstance, plans: Sequence[LoadingPlan]) -> BackendOutput:
    scored = []
    for plan in plans:
        m = evaluate(inst, plan)
        scored.append((not m.feasible, m.objective_ms, plan.key(), plan))
    return plan_output(min(scored, key=lambda t: t[:3])[3])


def _even(inst: LoadingInstance, weights: np.ndarray) -> BackendOutput:
    d = data(inst)
    counts = list(d.child_counts()) or [1]
    return _best_of(inst, [plan_from_starts(d, even_starts(d, k, weights)) for k in counts])


def equal_count(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """For each allowed k, k children of (nearly) equal block counts; the best k."""
    return _even(inst, np.ones(data(inst).n))


def equal_bytes(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """For each allowed k, k children of (nearly) equal bytes on disk; the best k."""
    return _even(inst, data(inst).block_bytes)


def reference_plans(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """The best of the published cut positions the instance carries."""
    d = data(inst)
    if not d.reference_plans:
        raise NotApplicable("reference-plans: the instance carries no settings.loading.reference_plans")
    index = {b: i for i, b in enumerate(d.blocks)}
    # checked with the instance: block 0 first, increasing
    plans = [plan_from_starts(d, [index[b] for b in firsts]) for firsts in d.reference_plans.values()]
    out = _best_of(inst, plans)
    chosen = out.plan
    assert chosen is not None  # _best_of returns one of the plans
    names = [name for name, p in zip(d.reference_plans, plans) if p.key() == chosen.key()]
    out.extra["reference"] = names[0]
    return out


def paper_rlu(inst: LoadingInstance, options: SolveOptions) -> BackendOutput:
    """The paper's tabular Q-learning unit (see :mod:`splitopt.families.loading.rlu`)."""
    from splitopt.families.loading.rlu import run_rlu

    t0 = time.perf_counter()
    result = run_rlu(data(inst), seed=options.seed, deadline=options.deadline)
    return plan_output(plan_from_starts(data(inst), result.starts), episodes=result.episodes,
                       hyperparameters=result.hyperparameters, rlu_s=time.perf_counter() - t0)

