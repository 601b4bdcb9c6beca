"""The llm program (``formulations/llm.md``, "Program"): one ``LinearProgram`` for the MILP
and CP-SAT backends over device choice, order, contiguous ranges and per-device
bit-widths, with memory, links, pins and the error budget.

It is a path through the stage boundaries: a variable per possible stage,

* ``z[d,a,b,w]`` in {0,1}: device ``d`` runs parts ``a .. b-1`` at width ``w``;
* ``e[b,d,d']`` in [0,1] (integral at integral ``z``): at boundary ``b`` device ``d``
  hands the hidden state to ``d'`` (pairs with a link);
* ``r[d,d']`` in [0,1]: a ring returns the sampled token from ``d`` (the last) to ``d'``;
* ``B`` (ms): the throughput objective's time per token.

One stage starts at part 0, and at every boundary the stage that ends there hands over
to the one that starts there, so the chosen stages cover the parts once, in order; each
device runs at most one stage. A stage that breaks its device's memory or a pin has an
upper bound of 0 (its rows say why: a plan built from it breaks them). Stage times,
memory and errors are exact sums over the stage's parts, so the rows are about the plan's
stages, not its parts: the relaxation is that of a shortest path with side constraints
(much tighter than per-part assignment variables).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from splitopt.core.instance import Instance
from splitopt.core.program import LinearProgram, Program
from splitopt.families.llm import dp
from splitopt.families.llm.data import LlmData, data, identical_pairs
from splitopt.families.llm.evaluate import evaluate
from splitopt.families.llm.plan import LlmPlan, plan_of
from splitopt.families.llm.settings import LlmSettings

Form = dict  # variable index -> coefficient


def build_milp(inst: Instance[LlmSettings], start: LlmPlan | None) -> Program:
    """The program of the formulation's "Program", its rows in its order; ``start`` (a
    plan or None) is its hint."""
    lp = LinearProgram()
    v = stage_variables(inst, lp)
    path_rows(v)
    device_rows(v)
    memory_rows(v)
    pin_rows(v)
    error_rows(inst, v)
    ring_rows(v)
    identical_device_rows(inst, v)
    ttft_limit_rows(inst, v)
    tokens_per_s_rows(inst, v)
    objective(inst, v)
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(v, values),
                   hint=None if start is None else encode_plan(inst, v, start),
                   encode=lambda plan: encode_plan(inst, v, plan),
                   stats={"variables": len(lp.variables), "rows": len(lp.rows), "stages": len(v.z)})


@dataclass
class StageVariables:
    """The variables as the steps add them (module docstring) and each stage's numbers:
    ``time`` (the objective's: prefill for ``ttft``, mean decode otherwise), ``decode``
    (mean decode, for the throughput rows), ``memory`` (bits) and ``error``."""

    lp: LinearProgram
    d: LlmData
    z: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    time: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    decode: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    memory: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    error: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    e: dict[tuple[int, int, int], int] = field(default_factory=dict)
    r: dict[tuple[int, int], int] = field(default_factory=dict)
    B: int | None = None

    def of(self, dev: int) -> list[tuple[tuple[int, int, int, int], int]]:
        """Device ``dev``'s stage variables."""
        return [(k, i) for k, i in self.z.items() if k[0] == dev]


def range_sums(values: np.ndarray) -> np.ndarray:
    """``S[a, b] = values[a] + ... + values[b-1]`` for ``a < b`` (summed from ``a``, as the
    evaluator sums a stage), 0 elsewhere."""
    n = len(values)
    out = np.zeros((n + 1, n + 1))
    for a in range(n):
        out[a, a + 1:] = np.cumsum(values[a:])
    return out


def stage_memory_bits(d: LlmData, w: int) -> np.ndarray:
    """``M[a, b]``: bits a device at width index ``w`` holds running parts ``[a, b)``:
    weights, KV cache, the largest activations (less a tied matrix held once)."""
    n = d.n
    held = np.concatenate([[0], np.cumsum(d.weight_bits[:, w] + d.kv_bits)])
    out = np.zeros((n + 1, n + 1))
    for a in range(n):
        out[a, a + 1:] = (held[a + 1:] - held[a]) + np.maximum.accumulate(d.activation_bits[a:])
    out[0, n] -= d.tied_bits[w]
    return out


def stage_variables(inst: Instance[LlmSettings], lp: LinearProgram) -> StageVariables:
    """Section "Variables": ``z[d,a,b,w]`` for every device, width and range, with its
    numbers; upper bound 0 where the stage breaks the memory or a pin."""
    d = data(inst)
    v = StageVariables(lp, d)
    part = d.prefill_ms if inst.objective == "ttft" else d.decode_ms
    for dev in range(d.D):
        for w in d.bits_of(dev):
            ok = dp.stage_mask(d, [w] * d.D)[dev]
            time, decode = range_sums(part[:, dev, w]), range_sums(d.decode_ms[:, dev, w])
            memory, error = stage_memory_bits(d, w), range_sums(d.error[:, w])
            for a in range(d.n):
                for b in range(a + 1, d.n + 1):
                    key = (dev, a, b, w)
                    v.z[key] = lp.var(f"z[{d.devices[dev]},{d.parts[a]}..{d.parts[b - 1]},{d.widths[w]}]",
                                      ub=1.0 if ok[a, b] else 0.0)
                    v.time[key], v.decode[key] = float(time[a, b]), float(decode[a, b])
                    v.memory[key], v.error[key] = float(memory[a, b]), float(error[a, b])
    return v


def path_rows(v: StageVariables) -> None:
    """Rows 1-2: one stage starts at part 0; at each boundary ``b`` the stage of ``d`` that
    ends there hands over (``e``) to the one that starts there, over a link."""
    d, lp = v.d, v.lp
    lp.add({i: 1.0 for (_, a, _, _), i in v.z.items() if a == 0}, "==", 1.0, name="first")
    for b in range(1, d.n):
        for dev in range(d.D):
            for nxt in range(d.D):
                if dev != nxt and np.isfinite(d.link_decode_ms[b, dev, nxt]):
                    v.e[b, dev, nxt] = lp.var(f"e[{d.parts[b]},{d.devices[dev]},{d.devices[nxt]}]", binary=False)
    ends: dict[tuple[int, int], Form] = {}
    starts: dict[tuple[int, int], Form] = {}
    for (dev, a, b, _), i in v.z.items():
        ends.setdefault((b, dev), {})[i] = 1.0
        starts.setdefault((a, dev), {})[i] = 1.0
    for b in range(1, d.n):
        for dev in range(d.D):
            out = dict(ends.get((b, dev), {}))
            into = dict(starts.get((b, dev), {}))
            for (k, a, c), i in v.e.items():
                if k == b and a == dev:
                    out[i] = -1.0
                if k == b and c == dev:
                    into[i] = -1.0
            lp.add(out, "==", 0.0, name=f"hand_over[{d.parts[b]},{d.devices[dev]}]")
            lp.add(into, "==", 0.0, name=f"take_over[{d.parts[b]},{d.devices[dev]}]")


def device_rows(v: StageVariables) -> None:
    """Row 3: each device runs at most one stage."""
    for dev in range(v.d.D):
        v.lp.add({i: 1.0 for _, i in v.of(dev)}, "<=", 1.0, name=f"once[{v.d.devices[dev]}]")


def memory_rows(v: StageVariables) -> None:
    """Row 4 (bits): the device's stage fits its memory (one row per device: it runs one
    stage), where some stage does not."""
    d = v.d
    for dev in range(d.D):
        limit = float(np.floor(d.memory_bits[dev]))
        terms = {i: v.memory[k] for k, i in v.of(dev)}
        if max(terms.values(), default=0.0) > limit:
            v.lp.add(terms, "<=", limit, kind="bits", name=f"memory[{d.devices[dev]}]")


def pin_rows(v: StageVariables) -> None:
    """Row 5: a pinned device runs a stage holding its pin."""
    d = v.d
    for dev, (p, q) in d.pins.items():
        v.lp.add({i: 1.0 for (_, a, b, _), i in v.of(dev) if a <= p and b > q}, ">=", 1.0,
                 name=f"pin[{d.devices[dev]}]")


def error_rows(inst: Instance[LlmSettings], v: StageVariables) -> None:
    """Row 6: the summed error within the budget (a zero budget forbids every stage with
    an error)."""
    budget = inst.settings.error_budget
    if budget is None:
        return
    terms = {i: v.error[k] for k, i in v.z.items() if v.error[k] > 0}
    if not terms:
        return
    if budget <= 0:
        for i in terms:
            v.lp.add({i: 1.0}, "<=", 0.0, name=f"no_error[{v.lp.variables[i].name}]")
        return
    v.lp.add(terms, "<=", budget, kind="error", name="error_budget")


def ring_rows(v: StageVariables) -> None:
    """Row 7 (a ring): ``r[d,d'] >= last[d] + first[d'] - 1`` where a link returns the
    token from ``d`` to ``d'``, ``last[d] + first[d'] <= 1`` where none does (``last``:
    ``d``'s stages that end at part ``n``, ``first``: ``d'``'s that start at 0)."""
    d, lp = v.d, v.lp
    if not d.ring:
        return
    for dev in range(d.D):
        for nxt in range(d.D):
            if dev == nxt:
                continue
            form = {i: 1.0 for (_, a, b, _), i in v.of(dev) if b == d.n}
            form.update({i: 1.0 for (_, a, b, _), i in v.of(nxt) if a == 0})
            pair = f"{d.devices[dev]},{d.devices[nxt]}"
            if np.isfinite(d.return_ms[dev, nxt]):
                v.r[dev, nxt] = lp.var(f"r[{pair}]", binary=False)
                lp.add({**form, v.r[dev, nxt]: -1.0}, "<=", 1.0, name=f"return[{pair}]")
            else:
                lp.add(form, "<=", 1.0, name=f"no_return[{pair}]")


def identical_device_rows(inst: Instance[LlmSettings], v: StageVariables) -> None:
    """Rows 8 (``"dominance"``: they cut off only mirror images): of two devices no plan can
    tell apart (``identical``), the later one in instance order runs only if the earlier
    one does, and after it."""
    d, n = v.d, v.d.n
    for a, b in identical_pairs(inst, d):
        used_a = {i: 1.0 for _, i in v.of(a)}
        used_b = {i: 1.0 for _, i in v.of(b)}
        v.lp.add({**used_b, **{i: -1.0 for i in used_a}}, "<=", 0.0, kind="dominance", name=f"mirror[{a},{b}]")
        form = {i: float(k[1]) for k, i in v.of(a)}
        form.update({i: float(n + 1 - k[1]) for k, i in v.of(b)})  # start_a - start_b + (n + 1) used_b <= n
        v.lp.add(form, "<=", float(n), kind="dominance", name=f"mirror_order[{a},{b}]")


def ttft_limit_rows(inst: Instance[LlmSettings], v: StageVariables) -> None:
    """Row 10 (``"time"``, ``settings.ttft_limit_ms``): the time to first token, the
    prefill of every stage, hand-over and the ring's return, within the limit."""
    limit, d = inst.settings.ttft_limit_ms, v.d
    if limit is None:
        return
    sums = {(dev, w): range_sums(d.prefill_ms[:, dev, w]) for dev in range(d.D) for w in d.bits_of(dev)}
    form: Form = {i: float(sums[dev, w][a, b]) for (dev, a, b, w), i in v.z.items()}
    form.update({i: float(d.link_prefill_ms[k]) for k, i in v.e.items()})
    form.update({i: float(d.return_ms[k]) for k, i in v.r.items()})
    v.lp.add(form, "<=", float(limit), kind="time", name="ttft_limit")


def tokens_per_s_rows(inst: Instance[LlmSettings], v: StageVariables) -> None:
    """Rows 11 (``"time"``, ``settings.min_tokens_per_s``): at most ``L = 1000 /
    min_tokens_per_s`` ms per token: each device's decode time, each pair's busy time and
    the return's within ``L`` (rows only where some choice exceeds it), the round trip
    within ``S L``."""
    limit, d, lp = inst.settings.ms_per_token_limit, v.d, v.lp
    if limit is None:
        return
    for dev in range(d.D):
        terms = {i: v.decode[k] for k, i in v.of(dev)}
        if max(terms.values(), default=0.0) > limit:
            lp.add(terms, "<=", limit, kind="time", name=f"stage_limit[{d.devices[dev]}]")
        for nxt in range(d.D):
            busy = {i: float(d.link_busy_ms[k]) for k, i in v.e.items() if k[1:] == (dev, nxt)}
            if max(busy.values(), default=0.0) > limit:
                lp.add(busy, "<=", limit, kind="time", name=f"busy_limit[{d.devices[dev]},{d.devices[nxt]}]")
            if (dev, nxt) in v.r and d.return_busy_ms[dev, nxt] > limit:
                lp.add({v.r[dev, nxt]: float(d.return_busy_ms[dev, nxt])}, "<=", limit, kind="time",
                       name=f"return_limit[{d.devices[dev]},{d.devices[nxt]}]")
    trip: Form = {i: v.decode[k] for k, i in v.z.items()}
    trip.update({i: float(d.link_decode_ms[k]) for k, i in v.e.items()})
    trip.update({i: float(d.return_ms[k]) for k, i in v.r.items()})
    lp.add(trip, "<=", inst.settings.streams * limit, kind="time", name="round_trip_limit")


def round_trip_bound(d: LlmData) -> float:
    """No plan's round trip (ms) exceeds this: every part at its slowest, the slowest link
    at each of the at most ``min(D, n) - 1`` boundaries, and the slowest return."""
    finite = np.where(np.isfinite(d.decode_ms), d.decode_ms, 0.0)
    links = d.link_decode_ms[np.isfinite(d.link_decode_ms)]
    back = d.return_ms[np.isfinite(d.return_ms)] if d.ring else np.zeros(1)
    hops = min(d.D, d.n) - 1
    return float(finite.max(axis=(1, 2)).sum() + hops * (links.max() if links.size else 0.0)
                 + (back.max() if back.size else 0.0))


def objective(inst: Instance[LlmSettings], v: StageVariables) -> None:
    """Section "Objective": ``ttft`` and ``token_latency`` are sums (stages, hand-overs, the
    ring's return); ``throughput`` is ``B`` with ``B >=`` each device's decode time, each
    link's busy time, the return's and the round trip over ``S`` (rows 9, ``"time"`` rows)."""
    d, lp = v.d, v.lp
    link = d.link_prefill_ms if inst.objective == "ttft" else d.link_decode_ms
    trip: Form = {i: v.time[k] for k, i in v.z.items()}
    trip.update({i: float(link[k]) for k, i in v.e.items()})
    trip.update({i: float(d.return_ms[k]) for k, i in v.r.items()})
    if inst.objective != "throughput":
        for i, c in trip.items():
            lp.add_objective(i, c)
        return
    upper = 1.01 * round_trip_bound(d) + 1e-9  # a margin for an integer emitter's rounded coefficients
    v.B = B = lp.var("B", binary=False, lb=0.0, ub=upper, implied_integer=False, unit="ms")
    for dev in range(d.D):
        lp.add({B: 1.0, **{i: -v.decode[k] for k, i in v.of(dev)}}, ">=", 0.0, kind="time",
               name=f"stage[{d.devices[dev]}]")
        for nxt in range(d.D):
            busy = {i: -float(d.link_busy_ms[k]) for k, i in v.e.items() if k[1:] == (dev, nxt)}
            if busy:
                lp.add({B: 1.0, **busy}, ">=", 0.0, kind="time", name=f"busy[{d.devices[dev]},{d.devices[nxt]}]")
            if (dev, nxt) in v.r:
                lp.add({B: 1.0, v.r[dev, nxt]: -float(d.return_busy_ms[dev, nxt])}, ">=", 0.0, kind="time",
                       name=f"return_busy[{d.devices[dev]},{d.devices[nxt]}]")
    lp.add({B: float(inst.settings.streams), **{i: -c for i, c in trip.items()}}, ">=", 0.0, kind="time",
           name="round_trip")
    lp.add_objective(B, 1.0)


def decode_plan(v: StageVariables, values) -> LlmPlan:
    """The stages whose ``z`` is above 0.5, in the order of their ranges."""
    d = v.d
    chosen = [(a, d.devices[dev], b, d.widths[w]) for (dev, a, b, w), i in v.z.items() if values[i] > 0.5]
    return plan_of([(name, a, b, bits) for a, name, b, bits in sorted(chosen)])


def encode_plan(inst: Instance[LlmSettings], v: StageVariables, plan: LlmPlan) -> list[float]:
    """The program's values for ``plan``: its stages, the hand-overs between them where a
    link joins them, the ring's return, ``B`` at the plan's time per token."""
    d = v.d
    values = [0.0] * len(v.lp.variables)
    index = [(d.devices.index(st.device), st) for st in plan.stages]
    for dev, st in index:
        values[v.z[dev, st.start, st.end, d.widths.index(st.bits)]] = 1.0
    for (dev, a), (nxt, _) in zip(index, index[1:]):
        key = (a.end, dev, nxt)
        if key in v.e:
            values[v.e[key]] = 1.0
    if d.ring and len(index) > 1 and (index[-1][0], index[0][0]) in v.r:
        values[v.r[index[-1][0], index[0][0]]] = 1.0
    if v.B is not None:
        values[v.B] = evaluate(inst, plan).ms_per_token
    return values
