"""The llm CP-SAT model (``formulations/llm.md``, "CP-SAT model"): per device its range
``[start, end)`` of parts and one bit-width, the order of the used devices as one circuit
through a depot, each stage's time, memory and error read from prefix-sum tables by
element constraints. Compact where the linear program is not: ``O(D^2 + D W)`` Booleans
and ``O(D W)`` element constraints over tables of ``n + 1`` entries, however many parts.

Times are integers in units of ``unit`` ms (``TIME_UNITS`` over a bound on every plan's
objective); each prefix sum is rounded to the nearest unit once, so a stage's time (a
difference of two) is within one unit of the exact one, a link's and the return's within
half: a plan's scaled objective is within ``(2 D + 1)`` units of the evaluator's, the
program's stated tolerance. Errors are scaled by ``ERROR_UNITS / budget`` the same way,
the budget raised by ``D`` units (so no plan within it is cut off, and an accepted plan
exceeds it by at most ``2 D / ERROR_UNITS`` of it).

The limits on time (``settings.ttft_limit_ms``; ``settings.min_tokens_per_s``: at most
``L`` ms per token) are held the same way: a sum over the stages, links and the ring's
return (the time to first token; the round trip, within ``S L``) is read from tables in
units of ``limit / TIME_UNITS`` (each part and link capped at twice the limit, which
breaks it alone), the limit raised by ``2 D + 1`` units, so no plan within it is cut off
and an accepted plan exceeds it by at most ``2 (2 D + 1) / TIME_UNITS`` of it. A stage's
decode time within ``L`` is exact (the furthest end from each start, as the memory), a
link's busy time and the return's too (constants of the boundary and pair).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from splitopt.core.instance import Instance
from splitopt.core.program import Program
from splitopt.families.llm import dp
from splitopt.families.llm.data import LlmData, data, identical_pairs
from splitopt.families.llm.evaluate import RTOL
from splitopt.families.llm.plan import LlmPlan, plan_of
from splitopt.families.llm.settings import LlmSettings

#: a bound on every plan's objective is resolved into this many integer units
TIME_UNITS = 2**40
#: the error budget is resolved into this many integer units
ERROR_UNITS = 2**40


def build_cpsat(inst: Instance[LlmSettings], start: LlmPlan | None) -> Program:
    """The model of the formulation's "CP-SAT model", its parts in order: ranges and
    widths, the order (circuit), stage times, memory, the error budget, links, the
    objective; ``start`` (a plan or None) is the hint."""
    from ortools.sat.python import cp_model

    d = data(inst)
    model = cp_model.CpModel()
    v = range_variables(inst, d, model)
    order_circuit(d, model, v)
    identical_devices(inst, d, model, v)
    stage_times(inst, d, model, v)
    memory_limits(d, model, v)
    error_budget(inst, d, model, v)
    link_times(inst, d, model, v)
    ttft_limit(inst, d, model, v)
    tokens_per_s_limit(inst, d, model, v)
    objective(inst, d, model, v)
    if start is not None:
        hint(d, model, v, start)
    # presolve off: OR-Tools 9.15's presolve certified a wrong optimum on these models (a 5-part random
    # instance: 1.98 ms "OPTIMAL" where 0.129 ms is feasible; or-tools #5293, splitopt/backends/cpsat.py)
    return Program(kind="cpsat", model=model, decode=lambda values: decode_plan(d, v, values), unit_ms=v.unit,
                   tolerance_ms=(2 * d.D + 1) * v.unit, presolve=False,
                   stats={"time_unit_ms": v.unit, "devices": d.D, "parts": d.n})


@dataclass
class LlmModel:
    """The model's variables as the steps add them: per device ``start``, ``end``,
    ``used``, ``bit[(dev, w)]``, its stage ``time``; the circuit's arcs ``first``, ``last``,
    ``follows[(d, d')]``; the links' times ``link`` and busy times ``busy`` (per pair), the
    ring's ``back[(last, first)]``; ``B`` for the throughput."""

    unit: float
    start: list = field(default_factory=list)
    end: list = field(default_factory=list)
    used: list = field(default_factory=list)
    bit: dict = field(default_factory=dict)
    time: list = field(default_factory=list)
    first: list = field(default_factory=list)
    last: list = field(default_factory=list)
    follows: dict = field(default_factory=dict)
    link: dict = field(default_factory=dict)
    busy: dict = field(default_factory=dict)
    back: dict = field(default_factory=dict)
    B: Any = None


def objective_bound_ms(inst: Instance[LlmSettings], d: LlmData) -> float:
    """No plan's objective (ms) exceeds this: every part at its slowest, the slowest link at
    each of the at most ``min(D, n) - 1`` boundaries and the slowest return."""
    part, link = (d.prefill_ms, d.link_prefill_ms) if inst.objective == "ttft" else (d.decode_ms, d.link_decode_ms)

    def most(a: np.ndarray) -> float:
        finite = a[np.isfinite(a)]
        return float(finite.max()) if finite.size else 0.0

    parts = float(np.where(np.isfinite(part), part, 0.0).max(axis=(1, 2)).sum())
    return parts + (min(d.D, d.n) - 1) * most(link) + (most(d.return_ms) if d.ring else 0.0)


def range_variables(inst: Instance[LlmSettings], d: LlmData, model) -> LlmModel:
    """Per device: ``start <= end`` in ``[0, n]``, ``used`` iff it runs a part (else both 0),
    one bit-width (the lowest where unused); a pinned device holds its pin."""
    v = LlmModel(unit=max(objective_bound_ms(inst, d), 1e-12) / TIME_UNITS)
    for dev in range(d.D):
        name = d.devices[dev]
        start, end, used = model.NewIntVar(0, d.n, f"start[{name}]"), model.NewIntVar(0, d.n, f"end[{name}]"), \
            model.NewBoolVar(f"used[{name}]")
        model.Add(end >= start + 1).OnlyEnforceIf(used)
        model.Add(start == 0).OnlyEnforceIf(used.Not())
        model.Add(end == 0).OnlyEnforceIf(used.Not())
        widths = d.bits_of(dev)
        for w in widths:
            v.bit[dev, w] = model.NewBoolVar(f"bits[{name},{d.widths[w]}]")
        model.AddExactlyOne([v.bit[dev, w] for w in widths])
        model.AddImplication(used.Not(), v.bit[dev, widths[0]])
        if dev in d.pins:
            p, q = d.pins[dev]
            model.Add(used == 1)
            model.Add(start <= p)
            model.Add(end >= q + 1)
        v.start.append(start)
        v.end.append(end)
        v.used.append(used)
    return v


def order_circuit(d: LlmData, model, v: LlmModel) -> None:
    """The used devices in order as one circuit through a depot (node ``D``): ``first``
    starts at part 0, ``last`` ends at part ``n``, ``follows[d, d']`` (only where a link
    runs from ``d`` to ``d'``) makes ``d'`` start where ``d`` ends; an unused device loops
    on itself."""
    depot = d.D
    arcs = []
    for dev in range(d.D):
        first, last = model.NewBoolVar(f"first[{d.devices[dev]}]"), model.NewBoolVar(f"last[{d.devices[dev]}]")
        model.Add(v.start[dev] == 0).OnlyEnforceIf(first)
        model.Add(v.end[dev] == d.n).OnlyEnforceIf(last)
        arcs += [(depot, dev, first), (dev, depot, last), (dev, dev, v.used[dev].Not())]
        v.first.append(first)
        v.last.append(last)
    for a in range(d.D):
        for b in range(d.D):
            if a != b and d.n > 1 and np.isfinite(d.link_decode_ms[1, a, b]):
                arc = model.NewBoolVar(f"follows[{d.devices[a]},{d.devices[b]}]")
                model.Add(v.start[b] == v.end[a]).OnlyEnforceIf(arc)
                v.follows[a, b] = arc
                arcs.append((a, b, arc))
    model.AddCircuit(arcs)
    # redundant, for propagation: the ranges tile the parts without overlapping
    model.Add(sum(v.end) - sum(v.start) == d.n)
    spans = []
    for dev in range(d.D):
        size = model.NewIntVar(0, d.n, f"size[{d.devices[dev]}]")
        model.Add(size == v.end[dev] - v.start[dev])
        spans.append(model.NewOptionalIntervalVar(v.start[dev], size, v.end[dev], v.used[dev],
                                                  f"range[{d.devices[dev]}]"))
    model.AddNoOverlap(spans)


def identical_devices(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """Of two devices no plan can tell apart (``data.identical_pairs``), the later one in
    instance order runs only if the earlier one does, and after it: swapping them in a
    plan changes nothing, so one of each such pair of plans is kept."""
    for a, b in identical_pairs(inst, d):
        model.AddImplication(v.used[b], v.used[a])
        model.Add(v.start[a] < v.start[b]).OnlyEnforceIf(v.used[b])


def _prefix_units(values: np.ndarray, scale: float) -> list[int]:
    """The prefix sums of ``values`` (finite) times ``scale``, each rounded to the nearest integer."""
    return [int(round(x)) for x in np.concatenate([[0.0], np.cumsum(values)]) * scale]


def _read_range(model, table: list[int], start, end, name: str):
    """``table[end] - table[start]`` (a non-decreasing table) as a new integer variable
    (two element constraints), and its largest value."""
    low, high = min(table), max(table)
    at_end, at_start = model.NewIntVar(low, high, f"{name}@end"), model.NewIntVar(low, high, f"{name}@start")
    model.AddElement(end, table, at_end)
    model.AddElement(start, table, at_start)
    diff = model.NewIntVar(0, high - low, name)
    model.Add(diff == at_end - at_start)
    return diff, high - low


def stage_times(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """Each device's stage time (units): the prefix-sum table of its width's part times
    (prefill for ``ttft``, mean decode otherwise), read at ``end`` and ``start``."""
    part = d.prefill_ms if inst.objective == "ttft" else d.decode_ms
    for dev in range(d.D):
        widths = d.bits_of(dev)
        reads = {w: _read_range(model, _prefix_units(part[:, dev, w], 1.0 / v.unit), v.start[dev], v.end[dev],
                                f"time[{d.devices[dev]},{d.widths[w]}]") for w in widths}
        if len(widths) == 1:
            v.time.append(reads[widths[0]][0])
            continue
        time = model.NewIntVar(0, max(most for _, most in reads.values()), f"time[{d.devices[dev]}]")
        for w, (r, _) in reads.items():
            model.Add(time == r).OnlyEnforceIf(v.bit[dev, w])
        v.time.append(time)


def memory_limits(d: LlmData, model, v: LlmModel) -> None:
    """Each device's range fits its memory at its width: memory only grows with the range,
    so ``end <= reach[start]``, the furthest end that fits from ``start`` (the pins of the
    other devices are the circuit's to keep)."""
    for dev in range(d.D):
        for w in d.bits_of(dev):
            widths = [w] * d.D
            ok = dp.stage_mask(_unpinned(d), widths)[dev]
            reach = [max([b for b in range(a + 1, d.n + 1) if ok[a, b]], default=a) for a in range(d.n)] + [d.n]
            if reach[:d.n] == [d.n] * d.n:
                continue  # any range fits
            furthest = model.NewIntVar(0, d.n, f"reach[{d.devices[dev]},{d.widths[w]}]")
            model.AddElement(v.start[dev], reach, furthest)
            model.Add(v.end[dev] <= furthest).OnlyEnforceIf(v.bit[dev, w])


def _unpinned(d: LlmData) -> LlmData:
    """``d`` without pins (memory alone decides a stage's fit)."""
    from dataclasses import replace

    return replace(d, pins={})


def error_budget(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """The summed error of every device's range at its width within the budget (scaled;
    a zero budget forbids every range with an error)."""
    budget = inst.settings.error_budget
    if budget is None or not (d.error > 0).any():
        return
    terms = []
    for dev in range(d.D):
        for w in d.bits_of(dev):
            if not (d.error[:, w] > 0).any():
                continue
            name = f"error[{d.devices[dev]},{d.widths[w]}]"
            if budget <= 0:
                count, _ = _read_range(model, _prefix_units((d.error[:, w] > 0).astype(float), 1.0), v.start[dev],
                                       v.end[dev], name)
                model.Add(count == 0).OnlyEnforceIf(v.bit[dev, w])
                continue
            _forbid_parts(d, model, v, dev, w, d.error[:, w] > budget * (1 + RTOL) + 1e-12)
            capped = np.minimum(d.error[:, w], budget)  # a part above the budget is forbidden at w anyway
            read, most = _read_range(model, _prefix_units(capped, ERROR_UNITS / budget), v.start[dev], v.end[dev],
                                     name)
            used = model.NewIntVar(0, most, name + "_counted")
            model.Add(used == read).OnlyEnforceIf(v.bit[dev, w])
            model.Add(used == 0).OnlyEnforceIf(v.bit[dev, w].Not())
            terms.append(used)
    if terms:
        model.Add(sum(terms) <= ERROR_UNITS + d.D)


def _forbid_parts(d: LlmData, model, v: LlmModel, dev: int, w: int, bad: np.ndarray) -> None:
    """Device ``dev`` at width ``w`` runs no part where ``bad``: its range ends at or before
    the first bad part from its start."""
    if not bad.any():
        return
    nxt, upcoming = [0] * (d.n + 1), d.n
    for a in range(d.n, -1, -1):
        if a < d.n and bad[a]:
            upcoming = a
        nxt[a] = upcoming
    stop = model.NewIntVar(0, d.n, f"clear[{d.devices[dev]},{d.widths[w]}]")
    model.AddElement(v.start[dev], nxt, stop)
    model.Add(v.end[dev] <= stop).OnlyEnforceIf(v.bit[dev, w])


def link_times(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """Per pair ``d -> d'`` that follows: the link's time at the boundary where ``d`` ends
    (prefill or decode with its latency) and its busy time; a ring's return from the last
    device to the first (a pair without a link cannot close the ring)."""
    table = d.link_prefill_ms if inst.objective == "ttft" else d.link_decode_ms
    scale = 1.0 / v.unit
    for (a, b), arc in v.follows.items():
        for store, source in ((v.link, table), (v.busy, d.link_busy_ms)):
            if store is v.busy and inst.objective != "throughput":
                continue
            values = [0] + [int(round(source[k, a, b] * scale)) for k in range(1, d.n)] + [0]
            var = model.NewIntVar(0, max(values), f"{'busy' if store is v.busy else 'link'}[{a},{b}]")
            if len(set(values[1:d.n])) == 1:
                model.Add(var == values[1]).OnlyEnforceIf(arc)
            else:
                at = model.NewIntVar(0, max(values), f"link_at[{a},{b}]")
                model.AddElement(v.end[a], values, at)
                model.Add(var >= at).OnlyEnforceIf(arc)
            store[a, b] = var
    if not d.ring:
        return
    for a in range(d.D):
        for b in range(d.D):
            if a == b:
                continue
            if not np.isfinite(d.return_ms[a, b]):
                model.AddBoolOr([v.last[a].Not(), v.first[b].Not()])
                continue
            closes = model.NewBoolVar(f"back[{d.devices[a]},{d.devices[b]}]")
            model.AddBoolOr([v.last[a].Not(), v.first[b].Not(), closes])
            v.back[a, b] = closes


def limited_sum(d: LlmData, model, v: LlmModel, part: np.ndarray, link: np.ndarray, back: np.ndarray,
                limit: float, name: str) -> None:
    """``sum of the stages' part times + the links' times at their boundaries + the ring's
    return <= limit`` (ms; module docstring: units of ``limit / TIME_UNITS``, each value
    capped at twice the limit, the limit raised by ``2 D + 1`` units). ``part``: (n, D, W),
    ``link``: (n + 1, D, D), ``back``: (D, D)."""
    if limit <= 0:  # nothing that takes time: forbid it
        limit_units, scale = 0, 0.0
    else:
        limit_units, scale = TIME_UNITS, TIME_UNITS / limit
    cap = 2.0 * limit

    def units(x: float) -> int:
        return int(round(min(x, cap) * scale)) if limit > 0 else int(x > 0)

    terms = []
    for dev in range(d.D):
        for w in d.bits_of(dev):
            values = np.minimum(part[:, dev, w], cap)
            table = _prefix_units(values, scale) if limit > 0 else _prefix_units((part[:, dev, w] > 0).astype(float),
                                                                                 1.0)
            read, most = _read_range(model, table, v.start[dev], v.end[dev], f"{name}[{d.devices[dev]},{d.widths[w]}]")
            counted = model.NewIntVar(0, most, f"{name}_counted[{d.devices[dev]},{d.widths[w]}]")
            model.Add(counted == read).OnlyEnforceIf(v.bit[dev, w])
            model.Add(counted == 0).OnlyEnforceIf(v.bit[dev, w].Not())
            terms.append(counted)
    for (a, b), arc in v.follows.items():
        values = [0] + [units(float(link[k, a, b])) for k in range(1, d.n)] + [0]
        at = model.NewIntVar(0, max(values), f"{name}_link_at[{a},{b}]")
        model.AddElement(v.end[a], values, at)
        sent = model.NewIntVar(0, max(values), f"{name}_link[{a},{b}]")
        model.Add(sent == at).OnlyEnforceIf(arc)
        model.Add(sent == 0).OnlyEnforceIf(arc.Not())
        terms.append(sent)
    for (a, b), lit in v.back.items():
        terms.append(units(float(back[a, b])) * lit)
    model.Add(sum(terms) <= limit_units + (2 * d.D + 1 if limit > 0 else 0))


def ttft_limit(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """The time to first token within ``settings.ttft_limit_ms``: the prefill of every
    stage and hand-over and the ring's return."""
    limit = inst.settings.ttft_limit_ms
    if limit is not None:
        limited_sum(d, model, v, d.prefill_ms, d.link_prefill_ms, d.return_ms, limit, "ttft")


def tokens_per_s_limit(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """At most ``L = 1000 / settings.min_tokens_per_s`` ms per token: each stage's mean
    decode time within ``L`` (the furthest end from each start), each hand-over's and the
    return's busy time within ``L``, the round trip within ``S L``."""
    limit = inst.settings.ms_per_token_limit
    if limit is None:
        return
    allowed = limit * (1 + RTOL)
    for dev in range(d.D):
        for w in d.bits_of(dev):
            sums = np.concatenate([[0.0], np.cumsum(d.decode_ms[:, dev, w])])
            reach = [max([b for b in range(a + 1, d.n + 1) if sums[b] - sums[a] <= allowed], default=a)
                     for a in range(d.n)] + [d.n]
            if reach[:d.n] == [d.n] * d.n:
                continue
            furthest = model.NewIntVar(0, d.n, f"decode_reach[{d.devices[dev]},{d.widths[w]}]")
            model.AddElement(v.start[dev], reach, furthest)
            model.Add(v.end[dev] <= furthest).OnlyEnforceIf(v.bit[dev, w])
    for (a, b), arc in v.follows.items():
        fits = [1] + [int(d.link_busy_ms[k, a, b] <= allowed) for k in range(1, d.n)] + [1]
        if all(fits):
            continue
        ok = model.NewIntVar(0, 1, f"busy_fits[{a},{b}]")
        model.AddElement(v.end[a], fits, ok)
        model.Add(ok == 1).OnlyEnforceIf(arc)
    for (a, b), lit in v.back.items():
        if d.return_busy_ms[a, b] > allowed:
            model.Add(lit == 0)
    limited_sum(d, model, v, d.decode_ms, d.link_decode_ms, d.return_ms, inst.settings.streams * limit, "trip")


def objective(inst: Instance[LlmSettings], d: LlmData, model, v: LlmModel) -> None:
    """``ttft`` and ``token_latency``: the sum of the stage times, link times and the ring's
    return; ``throughput``: ``B`` at least every stage's time, every link's busy time, the
    return's busy time and the round trip over the streams."""
    scale = 1.0 / v.unit
    back = {k: int(round(d.return_ms[k] * scale)) for k in v.back}
    trip = sum(v.time) + sum(v.link.values()) + sum(back[k] * lit for k, lit in v.back.items())
    if inst.objective != "throughput":
        model.Minimize(trip)
        return
    v.B = B = model.NewIntVar(0, TIME_UNITS + 2 * d.D + 1, "B")
    for t in v.time:
        model.Add(B >= t)
    for var in v.busy.values():
        model.Add(B >= var)
    for k, lit in v.back.items():
        model.Add(B >= int(round(d.return_busy_ms[k] * scale)) * lit)
    model.Add(inst.settings.streams * B >= trip)
    model.Minimize(B)


def decode_plan(d: LlmData, v: LlmModel, values) -> LlmPlan:
    """The used devices' ranges and widths, in the order of their ranges."""
    stages = []
    for dev in range(d.D):
        if values[v.used[dev].Index()]:
            w = next(w for w in d.bits_of(dev) if values[v.bit[dev, w].Index()])
            stages.append((d.devices[dev], int(values[v.start[dev].Index()]), int(values[v.end[dev].Index()]),
                           d.widths[w]))
    return plan_of(sorted(stages, key=lambda s: s[1]))


def hint(d: LlmData, model, v: LlmModel, plan: LlmPlan) -> None:
    """The start plan as the solver's hint (ranges, widths and the circuit's arcs)."""
    where = {d.devices.index(st.device): st for st in plan.stages}
    for dev in range(d.D):
        st = where.get(dev)
        model.AddHint(v.used[dev], st is not None)
        model.AddHint(v.start[dev], 0 if st is None else st.start)
        model.AddHint(v.end[dev], 0 if st is None else st.end)
        width = d.lowest(dev) if st is None else d.widths.index(st.bits)
        for w in d.bits_of(dev):
            model.AddHint(v.bit[dev, w], w == width)
        model.AddHint(v.first[dev], st is not None and st.start == 0)
        model.AddHint(v.last[dev], st is not None and st.end == d.n)
    pairs = {(d.devices.index(a.device), d.devices.index(b.device)) for a, b in zip(plan.stages, plan.stages[1:])}
    for key, arc in v.follows.items():
        model.AddHint(arc, key in pairs)
