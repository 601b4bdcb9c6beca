"""Methods of the llm family besides the generic programs:

* ``llm-dp`` (exact): the dynamic program of ``dp.py`` over device choice, order and
  ranges, every device at its lowest candidate bit-width, which is optimal wherever the
  error budget cannot bind (fewer bits never cost time or memory in this model); where it
  binds, the Lagrangian bound and gap-closing search of ``budget.py`` over the same
  states with each device's width a decision;
* baselines, the rules the field's tools use, each evaluated by the one evaluator:

  - ``memory-proportional-ring`` (exo): the fewest devices whose memory together holds
    the weights (the most memory among those), in instance order, the parts in proportion
    to each device's memory (largest remainder); no compute, bandwidth or KV cache input;
  - ``equal-layers`` (distributed-llama, vLLM's default): every usable device in instance
    order, equal part counts;
  - ``greedy-blocks`` (Petals): devices by memory bandwidth, fastest first, each taking
    as many of the next parts as fit its memory with their KV cache, at its lowest
    bit-width;
  - ``layer-dp`` (PipeEdge / EdgeShard style): the same dynamic program on a model without
    a KV cache or attention over the context, every device at its highest bit-width;
  - ``best-single-device``: the whole model on the one device where it is best.

Baselines other than ``greedy-blocks`` and ``best-single-device`` hold one precision for
the model: the highest candidate bit-width the devices share (each its own highest where
they share none).
"""

from __future__ import annotations

import dataclasses
import math
import time
from itertools import combinations
from typing import Sequence

import numpy as np

from splitopt.core.errors import NotApplicable
from splitopt.core.instance import Instance
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.base import plan_output
from splitopt.families.llm import budget, dp
from splitopt.families.llm.data import LlmData, data, twins
from splitopt.families.llm.evaluate import RTOL, evaluate
from splitopt.families.llm.plan import LlmPlan, plan_of
from splitopt.families.llm.settings import OWN_LIMIT, TIME_LIMITS, LlmSettings

Inst = Instance[LlmSettings]


# ----- the dynamic program ------------------------------------------------------------------------

def lowest_widths(d: LlmData) -> list[int]:
    return [d.lowest(e) for e in range(d.D)]


def highest_widths(d: LlmData) -> list[int]:
    return [d.bits_of(e)[-1] for e in range(d.D)]


def budget_binds(inst: Inst) -> bool:
    """Whether the error budget can bind at the lowest bit-widths: some plan of the
    dynamic program (every part at its device's lowest width) could exceed it."""
    s, d = inst.settings, data(inst)
    if s.error_budget is None:
        return False
    low = lowest_widths(d)
    worst = math.fsum(max(d.error[i, low[e]] for e in range(d.D)) for i in range(d.n))
    return worst > s.error_budget


def dp_refusal(inst: Inst) -> str | None:
    """None where ``llm-dp`` is exact on ``inst``, else why not."""
    return dp.applies(data(inst))


def dp_plan(inst: Inst, widths: Sequence[int], objective: str | None = None, stop=None) -> LlmPlan | None:
    """The dynamic program's plan with device ``e`` at width index ``widths[e]`` for
    ``objective`` (default the instance's); None where no pipeline exists or ``stop()``
    said to stop."""
    d, objective = data(inst), objective or inst.objective
    after = twins(inst, d, widths)
    if objective == "throughput":
        found = dp.throughput_pipeline(d, widths, inst.settings.streams, stop, after)
    elif objective == "ttft":
        found = dp.sum_pipeline(d, d.prefill_ms, d.link_prefill_ms, widths, stop, after)
    else:
        found = dp.sum_pipeline(d, d.decode_ms, d.link_decode_ms, widths, stop, after)
    if found is None:
        return None
    return plan_of([(d.devices[e], a, b, d.widths[widths[e]]) for e, a, b in found.stages])


def llm_dp(inst: Inst, options: SolveOptions) -> BackendOutput:
    """exact dynamic program over device choice, order and ranges (bits at each device's lowest)."""
    reason = dp_refusal(inst)
    if reason is not None:
        raise NotApplicable(f"llm-dp: {reason}; use cpsat or milp-highs")
    if budget_binds(inst) or second_limits(inst):
        return llm_dp_within_budget(inst, options)
    t0 = time.perf_counter()
    plan = dp_plan(inst, lowest_widths(data(inst)), stop=options.out_of_time)
    extra = {"solve_s": time.perf_counter() - t0}
    if plan is None:
        if options.out_of_time():
            return BackendOutput(Status.NO_SOLUTION_FOUND, message="llm-dp: the time limit stopped the program",
                                 extra=dict(extra, stopped_by="time limit"))
        return BackendOutput(Status.INFEASIBLE, message="llm-dp: no choice of devices, order and ranges meets every "
                                                        "memory limit, link and pin", extra=extra)
    value = evaluate(inst, plan).objective_ms
    return BackendOutput(Status.OPTIMAL, plan=plan, objective=value, bound=value, extra=extra)


def second_limits(inst: Inst) -> list[str]:
    """The limits on time ``inst`` sets on a measure other than its objective's
    (``ttft_limit_ms`` unless the objective is ``ttft``, ``min_tokens_per_s`` unless it is
    ``throughput``)."""
    own = OWN_LIMIT.get(inst.objective)
    return [k for k in TIME_LIMITS if getattr(inst.settings, k) is not None and k != own]


#: how each limited measure is named in a message, and the setting that holds it
RESOURCE_TEXT = {"error": ("error", "the error budget"),
                 "time to first token": ("time to first token", "settings.ttft_limit_ms"),
                 "round trip": ("round trip per token", "settings.min_tokens_per_s")}


def limited_tables(inst: Inst, binds: bool) -> tuple[budget.BudgetTables, budget.BusyTables]:
    """The objective's tables with every limit as a resource (the error budget first where
    it binds; the time to first token; the pipeline's tokens/s as the busy time of every
    stage and link removed above ``1000 / min_tokens_per_s`` ms and the round trip held
    within ``streams`` times it), and the decode step's busy tables. Where the error budget
    cannot bind, every device runs only its lowest width (fewer bits never cost time)."""
    d, s = data(inst), inst.settings
    if inst.objective == "ttft":
        part_ms, link = d.prefill_ms, d.link_prefill_ms
    else:
        part_ms, link = d.decode_ms, d.link_decode_ms
    back = d.return_ms if d.ring else None
    decode = budget.stage_times(d, d.decode_ms)
    busy = budget.BusyTables(decode, d.link_busy_ms, d.return_busy_ms if d.ring else None)
    resources = []
    limits = second_limits(inst)
    if "ttft_limit_ms" in limits:
        assert s.ttft_limit_ms is not None
        resources.append(budget.Resource("time to first token", budget.stage_times(d, d.prefill_ms), s.ttft_limit_ms,
                                         d.link_prefill_ms, back))
    if "min_tokens_per_s" in limits:
        assert s.ms_per_token_limit is not None
        resources.append(budget.Resource("round trip", decode, s.streams * s.ms_per_token_limit, d.link_decode_ms, back))
    tables = budget.budget_tables(d, part_ms, link, s.error_budget if binds else None, twins(inst, d), resources)
    if not binds:
        lowest = np.array([[w == d.lowest(e) for e in range(d.D)] for w in range(len(d.widths))])
        tables = dataclasses.replace(tables, time=np.where(lowest[:, :, None, None], tables.time, np.inf))
    if "min_tokens_per_s" in limits:
        assert s.ms_per_token_limit is not None
        tables = budget.held_to(tables, busy, s.ms_per_token_limit * (1 + RTOL) + 1e-12)
    return tables, busy


def llm_dp_within_budget(inst: Inst, options: SolveOptions) -> BackendOutput:
    """``llm-dp`` where the error budget binds or a limit on a second measure is set: the
    Lagrangian bound and the search of ``budget.py`` over device choice, order, ranges and
    each device's bit-width."""
    d, s, stop = data(inst), inst.settings, options.out_of_time
    t0 = time.perf_counter()
    tables, busy = limited_tables(inst, budget_binds(inst))
    answer: budget.BudgetAnswer | None
    if inst.objective == "throughput":
        answer = budget.throughput_within_budget(tables, busy, s.streams, stop)
    else:
        answer = budget.pipeline_within_budget(tables, stop)
    extra = {"solve_s": time.perf_counter() - t0}
    if answer is not None and answer.best is not None:
        plan = plan_of([(d.devices[e], a, b, d.widths[w]) for e, a, b, w in answer.best.stages])
        value = evaluate(inst, plan).objective_ms
        if answer.optimal:
            return BackendOutput(Status.OPTIMAL, plan=plan, objective=value, bound=value, extra=extra)
        return BackendOutput(Status.FEASIBLE, plan=plan, objective=value, bound=min(answer.bound, value),
                             message="llm-dp: the time limit stopped the search", extra=dict(extra, stopped_by="time limit"))
    if options.out_of_time() or (answer is not None and not answer.optimal):
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="llm-dp: the time limit stopped the program",
                             extra=dict(extra, stopped_by="time limit"))
    if answer is None:
        if "min_tokens_per_s" in second_limits(inst) and dp_plan(inst, lowest_widths(d)) is not None:
            return BackendOutput(Status.INFEASIBLE, message=f"llm-dp: settings.min_tokens_per_s {s.min_tokens_per_s:.6g}: "
                                                            f"no pipeline that meets the memory limits, links and pins "
                                                            f"keeps every stage and link within {s.ms_per_token_limit:.6g} "
                                                            f"ms per token", extra=extra)
        return BackendOutput(Status.INFEASIBLE, message="llm-dp: no choice of devices, order and ranges meets every "
                                                        "memory limit, link and pin", extra=extra)
    return BackendOutput(Status.INFEASIBLE, message=f"llm-dp: {infeasible_text(inst, tables, answer)}", extra=extra)


def infeasible_text(inst: Inst, tables: budget.BudgetTables, answer: budget.BudgetAnswer) -> str:
    """Which limit no plan meets: the first resource's, naming the least amount any pipeline
    reaches, or (where each can be met alone) the limits together."""
    first = tables.resources[0]
    name, where = RESOURCE_TEXT[first.name]
    if math.isinf(answer.bound):
        least = budget.lagrangian_plan(tables, math.inf, None)
        amount = f"{least.plan.amounts[0]:.6g}" if least is not None else "unknown"
        if first.name == "error":
            return (f"error budget {first.limit:.6g}: the least error of any pipeline that meets the memory limits, "
                    f"links and pins is {amount}")
        limit = first.limit / inst.settings.streams if first.name == "round trip" else first.limit
        unit = " ms per token" if first.name == "round trip" else " ms"
        return (f"{where} {limit:.6g}{unit}: the least {name} of any pipeline that meets the memory limits, links, "
                f"pins{' and the tokens/s' if 'min_tokens_per_s' in second_limits(inst) else ''} is {amount} ms")
    names = [RESOURCE_TEXT[r.name][1] for r in tables.resources]
    if "min_tokens_per_s" in second_limits(inst) and "settings.min_tokens_per_s" not in names:
        names.append("settings.min_tokens_per_s")
    return f"no pipeline meets {' and '.join(names)} together"


# ----- baselines --------------------------------------------------------------------------------

def shared_width(d: LlmData, devices: Sequence[int]) -> list[int]:
    """One precision for the model: the highest candidate width every device runs (each
    device its own highest where they share none), as width indices."""
    common = set.intersection(*(set(d.bits_of(e)) for e in devices)) if devices else set()
    return [max(common) if common else d.bits_of(e)[-1] for e in devices]


def proportional_counts(weights: Sequence[float], n: int) -> list[int]:
    """``n`` parts split in proportion to ``weights`` by largest remainder (ties: the earlier),
    then each count of zero raised to one at the expense of the largest (``len(weights) <=
    n``)."""
    k = len(weights)
    total = sum(weights) or 1.0
    share = [n * w / total if sum(weights) else n / k for w in weights]
    counts = [math.floor(x) for x in share]
    order = sorted(range(k), key=lambda i: (-(share[i] - math.floor(share[i])), i))
    for i in order[:n - sum(counts)]:
        counts[i] += 1
    for i in range(k):
        if counts[i] == 0:
            counts[max(range(k), key=lambda j: (counts[j], -j))] -= 1
            counts[i] = 1
    return counts


def stages_from_counts(d: LlmData, devices: Sequence[int], counts: Sequence[int], widths: Sequence[int]) -> LlmPlan:
    """A plan: ``devices`` in order running ``counts`` parts each at width indices ``widths``."""
    stages, at = [], 0
    for e, c, w in zip(devices, counts, widths):
        if c > 0:
            stages.append((d.devices[e], at, at + c, d.widths[w]))
            at += c
    return plan_of(stages)


def linked(inst: Inst, d: LlmData, devices: Sequence[int]) -> bool:
    """Whether ``devices`` in this order have a link between consecutive ones (and from the
    last back to the first, in a ring)."""
    names = [d.devices[e] for e in devices]
    pairs = list(zip(names, names[1:])) + ([(names[-1], names[0])] if d.ring and len(names) > 1 else [])
    return all(p in inst.link_between for p in pairs)


def memory_proportional_ring(inst: Inst, options: SolveOptions) -> BackendOutput:
    """exo's rule: the fewest devices whose memory holds the weights, parts in proportion to memory."""
    d = data(inst)
    memory = [d.memory_bits[e] / 8.0 for e in range(d.D)]
    chosen: tuple[int, ...] = tuple(range(min(d.D, d.n)))
    for k in range(1, min(d.D, d.n) + 1):
        fits = []
        for group in combinations(range(d.D), k):
            weights = max(float(d.weight_bits[:, w].sum()) / 8.0 for w in shared_width(d, group))
            if linked(inst, d, group) and sum(memory[e] for e in group) >= weights:
                fits.append((-sum(memory[e] for e in group), group))
        if fits:
            chosen = min(fits)[1]
            break
    counts = proportional_counts([memory[e] for e in chosen], d.n)
    return plan_output(stages_from_counts(d, chosen, counts, shared_width(d, chosen)))


def equal_layers(inst: Inst, options: SolveOptions) -> BackendOutput:
    """every usable device in instance order, equal part counts."""
    d = data(inst)
    chosen = list(range(min(d.D, d.n)))
    counts = proportional_counts([1.0] * len(chosen), d.n)
    return plan_output(stages_from_counts(d, chosen, counts, shared_width(d, chosen)))


def greedy_blocks(inst: Inst, options: SolveOptions) -> BackendOutput:
    """Petals-like: fastest memory first, each device takes as many next parts as fit."""
    d = data(inst)
    bandwidth = {e: inst.device_by_name[d.devices[e]].offchip_bytes_per_s or 0.0 for e in range(d.D)}
    order = sorted(range(d.D), key=lambda e: (-bandwidth[e], e))
    ok = dp.stage_mask(d, lowest_widths(d))
    stages, at = [], 0
    for k, e in enumerate(order):
        if at == d.n:
            break
        last = k == len(order) - 1
        end = at + 1
        while end < d.n and ok[e, at, end + 1]:
            end += 1
        end = d.n if last else end
        stages.append((d.devices[e], at, end, d.widths[d.lowest(e)]))
        at = end
    return plan_output(plan_of(stages))


def layer_dp(inst: Inst, options: SolveOptions) -> BackendOutput:
    """the dynamic program blind to the KV cache and to bits (every device at its highest)."""
    reason = dp.applies(data(inst))
    if reason is not None:
        raise NotApplicable(f"layer-dp: {reason}")
    blind_model = dataclasses.replace(inst.settings.model, kv_heads=0, attention_heads=0)
    blind = inst.with_settings(model=blind_model)
    plan = dp_plan(blind, highest_widths(data(blind)), inst.objective, options.out_of_time)
    if plan is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="layer-dp: no pipeline meets the memory limits even "
                                                               "without a KV cache")
    return plan_output(plan)


def single_device_plans(inst: Inst) -> list[LlmPlan]:
    """The whole model on each usable device, at each width it runs."""
    d = data(inst)
    return [plan_of([(d.devices[e], 0, d.n, d.widths[w])]) for e in range(d.D) for w in d.bits_of(e)]


def best_single_device(inst: Inst, options: SolveOptions) -> BackendOutput:
    """the whole model on the one device (and bit-width) where it is best."""
    scored = []
    for k, plan in enumerate(single_device_plans(inst)):
        m = evaluate(inst, plan)
        scored.append((not m.feasible, m.objective_ms, k, plan))
    return plan_output(min(scored, key=lambda s: s[:3])[3])
