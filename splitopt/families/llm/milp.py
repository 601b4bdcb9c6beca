"""The llm program (``formulations/llm.md``, "Program"): one ``LinearProgram`` for the MILP
and CP-SAT backends, over device choice, order, contiguous ranges and per-device
bit-widths, with memory, links, pins and the error budget.

Variables (parts ``l``, usable devices ``d``, widths ``w`` device ``d`` runs):

* ``q[l,d,w]`` in {0,1}: part ``l`` runs on ``d`` at ``w`` bits; ``x[l,d] = sum_w q[l,d,w]``;
* ``g[d,w]`` in {0,1}: device ``d`` runs its parts at ``w`` bits (one per device);
* ``s[l,d]`` in [0,1]: a range of ``d`` starts at part ``l`` (at most one per device);
* ``e[b,d,d']`` in [0,1]: the boundary before part ``b`` runs from ``d`` to ``d'``
  (pairs with a link); ``r[d,d']``: a ring returns the token from ``d`` to ``d'``;
* ``A[d] >= 0``: the largest activations on ``d`` (bits); ``t[d,w]`` in {0,1}: ``d``
  runs both ends of a model with tied embeddings at ``w`` bits and holds the matrix once;
* ``B`` (ms): the throughput objective's time per token.

The order of the devices is the order of their ranges; nothing else encodes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from splitopt.core.instance import Instance
from splitopt.core.program import LinearProgram, Program
from splitopt.families.llm.data import LlmData, data
from splitopt.families.llm.evaluate import evaluate
from splitopt.families.llm.plan import LlmPlan, plan_of
from splitopt.families.llm.settings import LlmSettings

Form = dict  # variable index -> coefficient


def build_milp(inst: Instance[LlmSettings], start: LlmPlan | None) -> Program:
    """The program of the formulation's "Program", its rows in its order; ``start`` (a
    plan or None) is its hint."""
    lp = LinearProgram()
    v = placement_variables(inst, lp)
    assignment_rows(v)
    contiguity_rows(v)
    pin_rows(v)
    link_variables(inst, v)
    memory_rows(v)
    error_rows(inst, v)
    objective(inst, v)
    lp.meta["vars"] = v
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(v, values),
                   hint=None if start is None else encode_plan(inst, v, start),
                   encode=lambda plan: encode_plan(inst, v, plan),
                   stats={"variables": len(lp.variables), "rows": len(lp.rows)})


@dataclass
class LlmVariables:
    """The variables as the steps add them (module docstring), by their indices."""

    lp: LinearProgram
    d: LlmData
    q: dict[tuple[int, int, int], int] = field(default_factory=dict)
    g: dict[tuple[int, int], int] = field(default_factory=dict)
    s: dict[tuple[int, int], int] = field(default_factory=dict)
    e: dict[tuple[int, int, int], int] = field(default_factory=dict)
    r: dict[tuple[int, int], int] = field(default_factory=dict)
    A: dict[int, int] = field(default_factory=dict)
    t: dict[tuple[int, int], int] = field(default_factory=dict)
    B: int | None = None

    def x(self, l: int, dev: int) -> Form:
        """``x[l,d]``: part ``l`` runs on ``d``, as a form."""
        return {self.q[l, dev, w]: 1.0 for w in self.d.bits_of(dev)}


def placement_variables(inst: Instance[LlmSettings], lp: LinearProgram) -> LlmVariables:
    """Section "Variables": ``q[l,d,w]`` and, for a device with a choice of widths, ``g[d,w]``."""
    d = data(inst)
    v = LlmVariables(lp, d)
    for dev in range(d.D):
        name = d.devices[dev]
        for w in d.bits_of(dev):
            for l in range(d.n):
                v.q[l, dev, w] = lp.var(f"q[{d.parts[l]},{name},{d.widths[w]}]")
            if len(d.bits_of(dev)) > 1:
                v.g[dev, w] = lp.var(f"g[{name},{d.widths[w]}]")
    return v


def assignment_rows(v: LlmVariables) -> None:
    """Rows 1-2: every part on one device at one width; a device's parts at its one width."""
    d, lp = v.d, v.lp
    for l in range(d.n):
        lp.add({v.q[l, dev, w]: 1.0 for dev in range(d.D) for w in d.bits_of(dev)}, "==", 1.0,
               name=f"assign[{d.parts[l]}]")
    for dev in range(d.D):
        if len(d.bits_of(dev)) < 2:
            continue
        lp.add({v.g[dev, w]: 1.0 for w in d.bits_of(dev)}, "==", 1.0, name=f"width[{d.devices[dev]}]")
        for w in d.bits_of(dev):
            for l in range(d.n):
                lp.add({v.q[l, dev, w]: 1.0, v.g[dev, w]: -1.0}, "<=", 0.0, name=f"at[{d.parts[l]},{dev},{w}]")


def contiguity_rows(v: LlmVariables) -> None:
    """Row 3: ``s[l,d] >= x[l,d] - x[l-1,d]`` and ``sum_l s[l,d] <= 1``: each device runs
    one contiguous range."""
    d, lp = v.d, v.lp
    for dev in range(d.D):
        for l in range(d.n):
            v.s[l, dev] = lp.var(f"s[{d.parts[l]},{d.devices[dev]}]", binary=False)
            form = {v.s[l, dev]: 1.0}
            for k, c in v.x(l, dev).items():
                form[k] = form.get(k, 0.0) - c
            if l > 0:
                for k, c in v.x(l - 1, dev).items():
                    form[k] = form.get(k, 0.0) + c
            lp.add(form, ">=", 0.0, name=f"start[{d.parts[l]},{d.devices[dev]}]")
        lp.add({v.s[l, dev]: 1.0 for l in range(d.n)}, "<=", 1.0, name=f"one_range[{d.devices[dev]}]")


def pin_rows(v: LlmVariables) -> None:
    """Row 4: a pinned device runs every part of its pin."""
    d = v.d
    for dev, (p, q) in d.pins.items():
        for l in range(p, q + 1):
            v.lp.add(v.x(l, dev), ">=", 1.0, name=f"pin[{d.devices[dev]},{d.parts[l]}]")


def link_variables(inst: Instance[LlmSettings], v: LlmVariables) -> None:
    """Row 5: ``e[b,d,d'] >= x[b-1,d] + x[b,d'] - 1`` where a link joins the pair, and
    ``x[b-1,d] + x[b,d'] <= 1`` where none does; in a ring the same for the return from the
    device of the last part to the device of the first, ``r[d,d']``."""
    d, lp = v.d, v.lp
    for dev in range(d.D):
        for nxt in range(d.D):
            if dev == nxt:
                continue
            pair = f"{d.devices[dev]},{d.devices[nxt]}"
            joined = np.isfinite(d.link_decode_ms[1:d.n, dev, nxt]).all() if d.n > 1 else True
            for b in range(1, d.n):
                form = {**v.x(b - 1, dev), **v.x(b, nxt)}
                if joined:
                    v.e[b, dev, nxt] = lp.var(f"e[{d.parts[b]},{pair}]", binary=False)
                    lp.add({**form, v.e[b, dev, nxt]: -1.0}, "<=", 1.0, name=f"link[{d.parts[b]},{pair}]")
                else:
                    lp.add(form, "<=", 1.0, name=f"no_link[{d.parts[b]},{pair}]")
            if d.ring and d.n > 0:
                form = {**v.x(d.n - 1, dev), **v.x(0, nxt)}
                if np.isfinite(d.return_ms[dev, nxt]):
                    v.r[dev, nxt] = lp.var(f"r[{pair}]", binary=False)
                    lp.add({**form, v.r[dev, nxt]: -1.0}, "<=", 1.0, name=f"return[{pair}]")
                else:
                    lp.add(form, "<=", 1.0, name=f"no_return[{pair}]")


def memory_rows(v: LlmVariables) -> None:
    """Row 6 (bits): weights at the device's width + KV cache + ``A[d]`` (``A[d] >=
    activations of each part on d``), less a tied embedding held once, within the memory."""
    d, lp = v.d, v.lp
    for dev in range(d.D):
        name = d.devices[dev]
        largest = float(d.activation_bits.max())
        total = float(d.weight_bits.max(axis=1).sum() + d.kv_bits.sum()) + largest
        if total <= d.memory_bits[dev]:
            continue  # the whole model fits at its widest with the largest activations
        v.A[dev] = lp.var(f"A[{name}]", binary=False, ub=largest)
        for l in range(d.n):
            lp.add({v.A[dev]: 1.0, **{k: -float(d.activation_bits[l]) for k in v.x(l, dev)}}, ">=", 0.0,
                   kind="bits", name=f"activations[{d.parts[l]},{name}]")
        form = {v.A[dev]: 1.0}
        for w in d.bits_of(dev):
            for l in range(d.n):
                form[v.q[l, dev, w]] = float(d.weight_bits[l, w] + d.kv_bits[l])
            if d.tied_bits[w] > 0 and d.n > 1:
                v.t[dev, w] = lp.var(f"t[{name},{d.widths[w]}]")
                form[v.t[dev, w]] = -float(d.tied_bits[w])
                for end in (0, d.n - 1):
                    lp.add({v.t[dev, w]: 1.0, v.q[end, dev, w]: -1.0}, "<=", 0.0, name=f"tied[{name},{end},{w}]")
        lp.add(form, "<=", float(np.floor(d.memory_bits[dev])), kind="bits", name=f"memory[{name}]")


def error_rows(inst: Instance[LlmSettings], v: LlmVariables) -> None:
    """Row 7: the summed error within the budget (a zero budget forbids every choice with
    an error)."""
    budget, d = inst.settings.error_budget, v.d
    if budget is None:
        return
    terms = {k: float(d.error[l, w]) for (l, dev, w), k in v.q.items() if d.error[l, w] > 0}
    if not terms:
        return
    if budget <= 0:
        for k in terms:
            v.lp.add({k: 1.0}, "<=", 0.0, name=f"no_error[{k}]")
        return
    v.lp.add(terms, "<=", budget, kind="error", name="error_budget")


def _times(v: LlmVariables, part: np.ndarray, link: np.ndarray) -> Form:
    """A sum objective as a form: parts' times, the links' times and a ring's return."""
    d = v.d
    form: Form = {k: float(part[l, dev, w]) for (l, dev, w), k in v.q.items()}
    form.update({k: float(link[b, dev, nxt]) for (b, dev, nxt), k in v.e.items()})
    form.update({k: float(d.return_ms[dev, nxt]) for (dev, nxt), k in v.r.items()})
    return form


def round_trip_bound(d: LlmData) -> float:
    """No plan's round trip (ms) exceeds this: every part at its slowest, and the slowest
    link at each of the at most ``min(D, n) - 1`` boundaries, and the slowest return."""
    finite = np.where(np.isfinite(d.decode_ms), d.decode_ms, 0.0)
    links = d.link_decode_ms[np.isfinite(d.link_decode_ms)]
    back = d.return_ms[np.isfinite(d.return_ms)] if d.ring else np.zeros(1)
    hops = min(d.D, d.n) - 1
    return float(finite.max(axis=(1, 2)).sum() + hops * (links.max() if links.size else 0.0)
                 + (back.max() if back.size else 0.0))


def objective(inst: Instance[LlmSettings], v: LlmVariables) -> None:
    """Section "Objective": ``ttft`` and ``token_latency`` are sums; ``throughput`` is
    ``B`` with ``B >=`` each device's decode time, each link's busy time and the round trip
    over ``S`` (rows 8, ``"time"`` rows)."""
    d, lp = v.d, v.lp
    if inst.objective == "ttft":
        for k, c in _times(v, d.prefill_ms, d.link_prefill_ms).items():
            lp.add_objective(k, c)
        return
    trip = _times(v, d.decode_ms, d.link_decode_ms)
    if inst.objective == "token_latency":
        for k, c in trip.items():
            lp.add_objective(k, c)
        return
    upper = 1.01 * round_trip_bound(d) + 1e-9  # a margin for an integer emitter's rounded coefficients
    v.B = B = lp.var("B", binary=False, lb=0.0, ub=upper, implied_integer=False, unit="ms")
    for dev in range(d.D):
        lp.add({B: 1.0, **{v.q[l, dev, w]: -float(d.decode_ms[l, dev, w]) for l in range(d.n)
                           for w in d.bits_of(dev)}}, ">=", 0.0, kind="time", name=f"stage[{d.devices[dev]}]")
        for nxt in range(d.D):
            busy = {k: -float(d.link_busy_ms[b, a, c]) for (b, a, c), k in v.e.items() if (a, c) == (dev, nxt)}
            if busy:
                lp.add({B: 1.0, **busy}, ">=", 0.0, kind="time", name=f"busy[{d.devices[dev]},{d.devices[nxt]}]")
            if (dev, nxt) in v.r:
                lp.add({B: 1.0, v.r[dev, nxt]: -float(d.return_busy_ms[dev, nxt])}, ">=", 0.0, kind="time",
                       name=f"return_busy[{d.devices[dev]},{d.devices[nxt]}]")
    lp.add({B: float(inst.settings.streams), **{k: -c for k, c in trip.items()}}, ">=", 0.0, kind="time",
           name="round_trip")
    lp.add_objective(B, 1.0)


def decode_plan(v: LlmVariables, values) -> LlmPlan:
    """Part ``l`` runs where ``q[l,d,w] > 0.5``; consecutive parts on one device form its stage."""
    d = v.d
    chosen = {}
    for (l, dev, w), k in v.q.items():
        if values[k] > 0.5:
            chosen[l] = (dev, w)
    stages: list[list] = []
    for l in range(d.n):
        dev, w = chosen[l]
        if stages and stages[-1][0] == d.devices[dev] and stages[-1][3] == d.widths[w]:
            stages[-1][2] = l + 1
        else:
            stages.append([d.devices[dev], l, l + 1, d.widths[w]])
    return plan_of([tuple(s) for s in stages])


def encode_plan(inst: Instance[LlmSettings], v: LlmVariables, plan: LlmPlan) -> list[float]:
    """The program's values for ``plan``: the placement and widths it states, every other
    variable at the least value its rows allow (so the objective is the plan's)."""
    d = v.d
    values = [0.0] * len(v.lp.variables)
    where = {}
    for st in plan.stages:
        dev, w = d.devices.index(st.device), d.widths.index(st.bits)
        where[dev] = (st.start, st.end, w)
        for l in range(st.start, st.end):
            values[v.q[l, dev, w]] = 1.0
        values[v.s[st.start, dev]] = 1.0
    for (dev, w), k in v.g.items():
        values[k] = 1.0 if where.get(dev, (0, 0, d.lowest(dev)))[2] == w else 0.0
    for a, b in zip(plan.stages, plan.stages[1:]):
        key = (a.end, d.devices.index(a.device), d.devices.index(b.device))
        if key in v.e:
            values[v.e[key]] = 1.0
    if d.ring and len(plan.stages) > 1:
        key = (d.devices.index(plan.stages[-1].device), d.devices.index(plan.stages[0].device))
        if key in v.r:
            values[v.r[key]] = 1.0
    for dev, k in v.A.items():
        if dev in where:
            start, end, _ = where[dev]
            values[k] = float(d.activation_bits[start:end].max())
    for (dev, w), k in v.t.items():
        values[k] = 1.0 if where.get(dev) == (0, d.n, w) else 0.0
    if v.B is not None:
        values[v.B] = evaluate(inst, plan).ms_per_token
    return values
