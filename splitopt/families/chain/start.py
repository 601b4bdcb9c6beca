"""A chain plan to start from (and fall back on)."""

from __future__ import annotations

from splitopt.core.plan import Plan
from splitopt.families.chain.evaluate import evaluate
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.chain.settings import ChainInstance


def start_plan(inst: ChainInstance) -> Plan:
    """A plan for time-limited solves to fall back on and the exact backends to start
    from: the best of ``_simple_start``, the best contiguous split of the file order
    (``segments-dp``'s plan, memory left out) and the best plan of the Lagrangian cuts
    (``lagrange.py``) that meets every limit (on ties, in that order); ``_simple_start``'s
    when none does."""
    return inst.derived(("chain", "start_plan"), lambda: _start_plan(inst))


def _start_plan(inst: ChainInstance) -> Plan:
    from splitopt.families.chain.lagrange import lagrange
    from splitopt.families.chain.methods import contiguous_split_plan

    simple = _simple_start(inst)
    contiguous = contiguous_split_plan(inst)
    candidates = [(evaluate(inst, plan), rank, plan) for rank, plan in enumerate((simple, contiguous))]
    ranked = [(metrics.objective_ms, rank, plan) for metrics, rank, plan in candidates if metrics.feasible]
    priced = lagrange(inst)
    if priced is not None and priced.plan is not None:  # it meets every limit
        assert priced.plan_objective_ms is not None  # set with the plan (the evaluator's value of it)
        ranked.append((priced.plan_objective_ms, 2, priced.plan))
    return min(ranked, key=lambda c: c[:2])[2] if ranked else simple


def _simple_start(inst: ChainInstance) -> Plan:
    """The best single-device plan that meets the memory limits (the last device is
    JMSNAS's cloud computing baseline); failing that, layers packed backwards from the
    last device, each device filled while its memory allows; failing that (no plan found),
    all on the last device."""
    chain, N = inst.settings.chain, len(inst.layers)
    singles = [plan_from_indices(inst, {l.name: m for l in inst.layers}) for m in range(len(chain))]
    scored = [(evaluate(inst, p), p) for p in singles]
    feasible = [(m.objective_ms, i) for i, (m, _) in enumerate(scored) if m.feasible]
    if feasible:
        return scored[min(feasible)[1]][1]
    names = [l.name for l in inst.layers]
    index: dict[str, int] = {}
    end = N
    for m in range(len(chain) - 1, 0, -1):
        def fits(i: int) -> bool:  # positions [i, end) on m fit its memory (monotone in i)
            trial = dict(index, **{n: m - 1 for n in names[:i]}, **{n: m for n in names[i:end]})
            d = evaluate(inst, plan_from_indices(inst, trial)).devices[m]
            return d.memory_bytes <= d.memory_limit
        low, high = 0, end  # the smallest i that fits lies in [low, high]
        while low < high:
            mid = (low + high) // 2
            if fits(mid):
                high = mid
            else:
                low = mid + 1
        index.update({n: m for n in names[low:end]})
        end = low
    index.update({n: 0 for n in names[:end]})
    packed = plan_from_indices(inst, index)
    return packed if evaluate(inst, packed).feasible else singles[-1]
