"""Baselines of the multiview family (problem ``multiview``, SplitNets Table 6). Every
plan is judged by the family's evaluator.

* ``all-on-aggregator``: every view sends its raw input; fusion at the last fusion
  candidate (late fusion after the last convolution, as the prior methods of Table 6), no
  compression (SplitNets "All-on-agg.");
* ``all-on-sensor``: every sensor runs the whole pre-fusion part of the last fusion
  candidate (the whole network when that is the output), no compression ("All-on-sen.");
* ``common-split``: one common cut at the fusion point for every view, no compression,
  the best fusion candidate ("Split at fusion", what SplitNets' Neurosurgeon-style
  baseline picks): least makespan among those meeting the memory limits, else the least
  memory overrun (which the generic layer reports NO_SOLUTION_FOUND).

Orders of the baselines: transfers by sensor finish time, aggregator tasks by arrival
(``splitopt.families.multiview.start.best_orders``).
"""

from __future__ import annotations

from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.multiview.data import data
from splitopt.families.multiview.evaluate import evaluate
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance
from splitopt.families.multiview.start import best_orders


def uniform_with_orders(inst: MultiviewInstance, fusion: str, cut: str) -> MultiviewPlan:
    """Every view at ``cut`` under ``fusion``, no compression, the simple orders."""
    d = data(inst)
    cuts = {s: cut for s in d.sensors}
    bus, agg = best_orders(inst, cuts, fusion, None)
    return MultiviewPlan(fusion, None, cuts, bus, agg)


def all_on_aggregator(inst: MultiviewInstance, options: SolveOptions) -> BackendOutput:
    """Raw views sent, fusion at the last candidate, all compute on the aggregator."""
    d = data(inst)
    return BackendOutput(Status.FEASIBLE, plan=uniform_with_orders(inst, d.fusions[-1], d.input))


def all_on_sensor(inst: MultiviewInstance, options: SolveOptions) -> BackendOutput:
    """Each sensor runs everything before the last fusion candidate."""
    d = data(inst)
    return BackendOutput(Status.FEASIBLE, plan=uniform_with_orders(inst, d.fusions[-1], d.fusions[-1]))


def common_split(inst: MultiviewInstance, options: SolveOptions) -> BackendOutput:
    """The best common cut at the fusion point, no compression."""
    d = data(inst)
    rows = []
    for f in d.fusions:
        plan = uniform_with_orders(inst, f, f)
        m = evaluate(inst, plan)
        over = max(c.memory_bytes - c.memory_limit for c in m.views)
        rows.append((m.feasible, m.makespan_ms, over, plan))
    feasible = [r for r in rows if r[0]]
    if feasible:
        plan = min(feasible, key=lambda r: r[1])[3]
    else:
        plan = min(rows, key=lambda r: (r[2], r[1]))[3]
    return BackendOutput(Status.FEASIBLE, plan=plan)
