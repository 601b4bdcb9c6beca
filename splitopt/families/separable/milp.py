"""The separable policy program (``formulations/separable_policies.md``, "Program") as one
``LinearProgram`` that every exact backend runs: CBC and HiGHS through PuLP, CP-SAT through
the integer emission of ``splitopt.backends.cpsat`` (its 0/1 assignment rows are the
AllDifferent of the step's receivers; the reachability rows are the mixing layers).

Only the parts a limit or the objective reads are built: the time rows for ``latency``
(objective or budget), the byte rows for ``bytes`` (objective or budget), the
reachability rows for mixing, the intensity and float16 counts for the limits and
accuracy records that name them. Times are in ms; the ``bytes`` objective is divided by
``bytes_unit`` (so that its magnitude matches the time horizon's and the CP-SAT
emission keeps fine time units) and multiplied back through ``Program.unit_ms``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Sequence

from splitopt.core.options import check_build_deadline
from splitopt.core.program import LinearProgram, Program
from splitopt.families.separable.data import SeparableData, data, worst_case_ms
from splitopt.families.separable.evaluate import evaluate, meets_record
from splitopt.families.separable.gossip import latency_lower_bound, min_mixing_messages, policy_bytes_bound
from splitopt.families.separable.plan import SeparablePlan, identity, make_step, silent_plan
from splitopt.families.separable.settings import SeparableInstance

#: MILP: integrality / feasibility tolerance assumed for the objective tolerance
MILP_EPS = 1e-6
#: MILP: the dual (optimality) tolerance of the LP solves, for the bound
MILP_DUAL_TOL = 1e-7


def most_bytes(d: SeparableData) -> float:
    """No plan sends more (bytes): every device its whole stream at every step in the
    widest dtype, or the ring reference."""
    return max(d.ring_bytes, float(sum(d.g * d.message_bytes(j, d.levels - 1, "float32") for j in range(d.steps))), 1.0)


def options_of(d: SeparableData) -> list[tuple[int, str]]:
    """The (level, dtype) options of a step."""
    return [(level, dtype) for level in range(d.levels) for dtype in d.dtypes]


def build_milp(inst: SeparableInstance, start: SeparablePlan | None) -> Program:
    """The program of ``formulations/separable_policies.md``, "Program", its parts in the
    section's order; ``start`` (a plan or None) is its hint."""
    lp = LinearProgram()
    v = policy_variables(inst, lp)
    sender_rows(lp, v)
    byte_rows(lp, v)
    symmetry_rows(lp, v)
    time_rows(inst, lp, v)
    mixing_rows(lp, v)
    intensity_rows(lp, v)
    float16_rows(lp, v)
    record_rows(lp, v)
    bytes_unit = objective(inst, lp, v)
    hint = None
    if start is not None:
        try:
            hint = encode_plan(inst, lp, v, start)
        except (KeyError, ValueError):  # a start plan outside the program (cannot happen for checked plans)
            hint = None
    J, H = v.d.steps, v.horizon
    # the critical chain crosses at most 3 J + 2 rows in ms, each with big-M terms whose
    # binaries the MILP meets to MILP_EPS
    if inst.objective == "latency":
        tol = MILP_EPS * (3 * J + 2) * (v.big + H)
        bound_tol = MILP_DUAL_TOL * 2 * H
    else:
        top_bytes = most_bytes(v.d)
        tol = MILP_EPS * top_bytes
        bound_tol = MILP_DUAL_TOL * top_bytes
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(v, values), unit_ms=bytes_unit,
                   tolerance_ms=tol, hint=hint, encode=lambda plan: encode_plan(inst, lp, v, plan),
                   bound_tolerance_ms=bound_tol,
                   stats={"variables": len(lp.variables), "rows": len(lp.rows), "steps": J, "devices": v.d.g})


@dataclass
class PolicyVariables:
    """The program's variables as the steps add them (section "Program"), and what decides
    which parts are built: ``need_time`` (the latency objective or budget), ``need_bytes``
    (the bytes objective or budget), ``need_mix``, ``need_intensive``, ``need_f16`` (the
    limits and the accuracy ``records`` that reach ``min_accuracy``). ``arcs``: the
    (sender, receiver) pairs with a link; ``opts``: the (level, dtype) options of a step;
    ``senders``: the devices with an outgoing link; ``horizon`` (``H``) and ``big``
    (``M``): the slowest conceivable policy's latency (ms)."""

    d: SeparableData
    arcs: list[tuple[int, int]]
    opts: list[tuple[int, str]]
    records: list
    need_time: bool
    need_bytes: bool
    need_mix: bool
    need_intensive: bool
    need_f16: bool
    ring: int | None
    x: list[dict[tuple[int, int], int]]
    z: list[list[int]]
    sends: list[int] = field(default_factory=list)
    senders: list[int] = field(default_factory=list)
    sendopt: list[dict[int, list[int]]] = field(default_factory=list)
    total_bytes_terms: dict[int, float] = field(default_factory=dict)
    classes: list[list[int]] = field(default_factory=list)
    sent_by: dict[tuple[int, int], int] = field(default_factory=dict)
    horizon: float = 0.0
    big: float = 0.0
    resp: int | None = None
    ready: list[list[int]] = field(default_factory=list)
    nic: list[list[int]] = field(default_factory=list)
    info: list[dict[tuple[int, int], int]] = field(default_factory=list)
    y: list[dict[tuple[int, int, int], int]] = field(default_factory=list)
    intensive: list[int] = field(default_factory=list)
    f16: list[int] = field(default_factory=list)
    rec_vars: list[int] = field(default_factory=list)


def policy_variables(inst: SeparableInstance, lp: LinearProgram) -> PolicyVariables:
    """``x[j,g,h]``, ``z[j,o]`` and ``ring``, with their rows: one option per step, each
    device sends at most once, sends iff it receives (a permutation), and the ring plan
    replaces every step."""
    d = data(inst)
    G, J = d.g, d.steps
    arcs = [(g, h) for g in range(G) for h in range(G) if g != h and d.has_link(g, h)]
    opts = options_of(d)
    records = [r for r in d.records if d.min_accuracy is not None and r.accuracy >= d.min_accuracy - 1e-12]
    ring = lp.var("ring") if d.ring_available else None
    x = [{(g, h): lp.var(f"x[{j},{g},{h}]") for g, h in arcs} for j in range(J)]
    z = [[lp.var(f"z[{j},{o}]") for o in range(len(opts))] for j in range(J)]
    for j in range(J):
        check_build_deadline()
        lp.add({i: 1.0 for i in z[j]}, "==", 1.0, name=f"one_option[{j}]")
        for g in range(G):
            out = {x[j][a]: 1.0 for a in arcs if a[0] == g}
            inc = {x[j][a]: 1.0 for a in arcs if a[1] == g}
            if out:
                lp.add(out, "<=", 1.0, name=f"sends_once[{j},{g}]")
            row = dict(out)
            for i, c in inc.items():
                row[i] = row.get(i, 0.0) - c
            if row:  # a permutation: g sends iff it receives (fixed points do neither)
                lp.add(row, "==", 0.0, name=f"permutation[{j},{g}]")
        if ring is not None:  # the ring plan replaces every step: no policy sends
            for a in arcs:
                lp.add({x[j][a]: 1.0, ring: 1.0}, "<=", 1.0, name=f"ring_excludes[{j},{a[0]},{a[1]}]")
    return PolicyVariables(
        d, arcs, opts, records,
        need_time=inst.objective == "latency" or d.latency_budget is not None,
        need_bytes=inst.objective == "bytes" or d.byte_budget is not None,
        need_mix=d.mixing or any(r.mixing for r in records),
        need_intensive=d.min_intensive_steps > 0 or any(r.min_intensive_steps > 0 for r in records),
        need_f16="float16" in d.dtypes and any(r.max_float16_steps is not None for r in records),
        ring=ring, x=x, z=z)


def sender_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """``sends[j]`` (someone sends at step j, for the level and float16 requirements) and
    ``v[j,g,o]`` = (g sends at step j) * ``z[j,o]``: ``sum_o v = sum_h x``, ``v <= z``; the
    bytes are linear in ``v`` without big-M, and so are the transfer times where all of a
    device's links are alike."""
    d, arcs, x, z, opts = v.d, v.arcs, v.x, v.z, v.opts
    G, J = d.g, d.steps
    v.sends = [lp.var(f"sends[{j}]") for j in range(J)]
    for j in range(J):
        for a in arcs:
            lp.add({v.sends[j]: 1.0, x[j][a]: -1.0}, ">=", 0.0, name=f"sends_if[{j},{a[0]},{a[1]}]")
        lp.add({v.sends[j]: 1.0, **{x[j][a]: -1.0 for a in arcs}}, "<=", 0.0, name=f"sends_only_if[{j}]")
    v.senders = [g for g in range(G) if any(a[0] == g for a in arcs)]
    v.sendopt = [{g: [lp.var(f"v[{j},{g},{o}]") for o in range(len(opts))] for g in v.senders} for j in range(J)]
    for j in range(J):
        check_build_deadline()
        for g in v.senders:
            lp.add({**{i: 1.0 for i in v.sendopt[j][g]}, **{x[j][a]: -1.0 for a in arcs if a[0] == g}}, "==", 0.0,
                   name=f"sender_option[{j},{g}]")
            for o, i in enumerate(v.sendopt[j][g]):
                lp.add({i: 1.0, z[j][o]: -1.0}, "<=", 0.0, name=f"sender_option_le[{j},{g},{o}]")


def byte_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """The bytes sent (``sum m_j(o) v[j,g,o] + R ring``) where the objective or a budget
    reads them: the byte budget, and the bound row ``bytes >= B(mixing,
    min_intensive_steps)`` (the cheapest messages that the limits' mixing and intensity
    force, ``gossip.py``; the records' alternatives are left to their own rows: measured
    slower on CP-SAT)."""
    d = v.d
    if not v.need_bytes:
        return
    terms = v.total_bytes_terms
    for j in range(d.steps):
        for o, (level, dtype) in enumerate(v.opts):
            size = d.message_bytes(j, level, dtype)
            if size:
                for g in v.senders:
                    terms[v.sendopt[j][g][o]] = float(size)
    if v.ring is not None:
        terms[v.ring] = d.ring_bytes
    if d.byte_budget is not None:
        lp.add(dict(terms), "<=", math.floor(d.byte_budget * (1 + 1e-9)), kind="bits", name="byte_budget")
    low_bytes = policy_bytes_bound(d, d.mixing, d.min_intensive_steps)
    if v.ring is not None:
        low_bytes = min(low_bytes, d.ring_bytes)
    if 0 < low_bytes < math.inf:
        lp.add(dict(terms), ">=", math.floor(low_bytes), kind="bits", name="bytes_lower_bound")


def symmetry_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """Symmetry: interchangeable devices (:func:`interchangeable`) first send in index
    order, ``sent_by[j,a] >= sent_by[j,b]`` for consecutive ``a < b`` of a class."""
    arcs, x, J = v.arcs, v.x, v.d.steps
    v.classes = interchangeable(v.d, v.need_time)
    sent_by = v.sent_by
    for cls in v.classes:
        for g in cls:
            for j in range(J):
                s_var = lp.var(f"sent_by[{j},{g}]")
                sent_by[(j, g)] = s_var
                out = {x[j][a]: 1.0 for a in arcs if a[0] == g}
                lp.add({s_var: 1.0, **{i: -c for i, c in out.items()}, **({sent_by[(j - 1, g)]: -1.0} if j else {})},
                       "<=", 0.0, name=f"sent_by_le[{j},{g}]")
                if j:
                    lp.add({s_var: 1.0, sent_by[(j - 1, g)]: -1.0}, ">=", 0.0, name=f"sent_by_keeps[{j},{g}]")
                for i in out:
                    lp.add({s_var: 1.0, i: -1.0}, ">=", 0.0, name=f"sent_by_ge[{j},{g}]")
        for a, b in zip(cls, cls[1:]):
            for j in range(J):
                lp.add({sent_by[(j, a)]: 1.0, sent_by[(j, b)]: -1.0}, ">=", 0.0, name=f"symmetry[{j},{a},{b}]")


def time_rows(inst: SeparableInstance, lp: LinearProgram, v: PolicyVariables) -> None:
    """The horizon ``H`` (= ``M``: the slowest conceivable policy, or the ring's latency)
    and, where the latency objective or budget reads them, the times ``ready[j,g]``,
    ``nic[j,g]`` and ``L`` with their rows: each step's compute, sends and merges
    (:func:`step_time_rows`), the head, the latency bound, the ring's latency and the
    latency budget."""
    d = v.d
    G, J = d.g, d.steps
    H = worst_case_ms(d)
    ring_ms = evaluate(inst, SeparablePlan((), ring=True)).latency_ms if v.ring is not None else 0.0
    v.horizon = v.big = H = max(H, ring_ms)
    if not v.need_time:
        return
    time_var = partial(lp.var, binary=False, lb=0.0, ub=H, implied_integer=False, unit="ms")
    v.ready = [[time_var(f"ready[{j},{g}]") for g in range(G)] for j in range(J)]
    v.nic = [[time_var(f"nic[{j},{g}]") for g in range(G)] for j in range(J)]
    resp = v.resp = time_var("latency")
    for j in range(J):
        check_build_deadline()
        step_time_rows(lp, v, j)
    row = {resp: 1.0, v.ready[J - 1][d.head]: -1.0}
    lp.add(row, ">=", d.head_ms, kind="time", name="head")
    # the delays mixing and intensive steps force (gossip.py), valid for every feasible plan
    silent_ms = evaluate(inst, silent_plan(d)).latency_ms
    lp.add({resp: 1.0}, ">=", min(latency_lower_bound(d, inst, silent_ms), H), kind="time",
           name="latency_lower_bound")
    if v.ring is not None:
        lp.add({resp: 1.0, v.ring: -ring_ms}, ">=", 0.0, kind="time", name="ring_latency")
    if d.latency_budget is not None:
        lp.add({resp: 1.0}, "<=", d.latency_budget * (1 + 1e-9), kind="time", name="latency_budget")


def step_time_rows(lp: LinearProgram, v: PolicyVariables, j: int) -> None:
    """The time rows of step j: every device's compute (``ready``), its send after the
    snapshot and its previous send (``nic``; per arc with big-M where its links differ),
    and each receiver's merge of a message before its next step."""
    d, x, ready, nic, big = v.d, v.x, v.ready, v.nic, v.big
    G = d.g
    for g in range(G):
        c1, c_rest = d.step_compute_ms(g, j)
        prev, const = ({ready[j - 1][g]: 1.0}, 0.0) if j else ({}, float(d.stem_ms[g]))  # g's ready time before j
        row = {ready[j][g]: 1.0, **{i: -c for i, c in prev.items()}}
        lp.add(row, ">=", const + c1 + c_rest, kind="time", name=f"compute[{j},{g}]")
        if j:
            lp.add({nic[j][g]: 1.0, nic[j - 1][g]: -1.0}, ">=", 0.0, kind="time", name=f"nic_keeps[{j},{g}]")
        if g not in v.senders:
            continue
        # the send (if any) starts after the snapshot and after the device's previous send
        links = {(d.rate[g][h], d.link_ms[g][h]) for h in range(G) if (g, h) in x[j]}
        targets = [None] if len(links) == 1 else [h for h in range(G) if (g, h) in x[j]]
        for h in targets:
            hh = h if h is not None else next(h2 for h2 in range(G) if (g, h2) in x[j])
            send = {i: d.transfer_ms(g, hh, d.message_bytes(j, level, dtype))
                    for i, (level, dtype) in zip(v.sendopt[j][g], v.opts)}
            off = {} if h is None else {x[j][(g, h)]: -big}
            slack = 0.0 if h is None else -big
            row = {nic[j][g]: 1.0, **{i: -c for i, c in prev.items()}, **{i: -c for i, c in send.items()}, **off}
            lp.add(row, ">=", const + c1 + slack, kind="time", name=f"send[{j},{g},{h}]")
            if j:
                row = {nic[j][g]: 1.0, nic[j - 1][g]: -1.0, **{i: -c for i, c in send.items()}, **off}
                lp.add(row, ">=", slack, kind="time", name=f"send_queue[{j},{g},{h}]")
    for g, h in v.arcs:
        # x = 1: the receiver merges the message before its next step
        lp.add({ready[j][h]: 1.0, nic[j][g]: -1.0, x[j][(g, h)]: -big}, ">=", -big, kind="time",
               name=f"merge[{j},{g},{h}]")


def mixing_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """Mixing: ``info[j,a,h]`` (device h holds device a's features after step j) and
    ``y[j,a,g,h]`` with the reachability rows, where a limit or record needs mixing;
    required mixing, ``info[J-1,a,h] + ring >= 1``, with the valid rows of
    :func:`gossip_cuts`."""
    d, arcs, x = v.d, v.arcs, v.x
    G, J = d.g, d.steps
    if not v.need_mix:
        return
    info, y = v.info, v.y
    for j in range(J):
        check_build_deadline()
        info.append({(a, h): lp.var(f"info[{j},{a},{h}]") for a in range(G) for h in range(G) if a != h})
        y.append({})
        for a in range(G):
            for g, h in arcs:
                if h == a:
                    continue
                if j == 0 and g != a:  # before the first step g holds only itself
                    continue
                var = lp.var(f"y[{j},{a},{g},{h}]")
                y[j][(a, g, h)] = var
                lp.add({var: 1.0, x[j][(g, h)]: -1.0}, "<=", 0.0, name=f"y_le_x[{j},{a},{g},{h}]")
                if g != a:
                    lp.add({var: 1.0, info[j - 1][(a, g)]: -1.0}, "<=", 0.0, name=f"y_le_info[{j},{a},{g},{h}]")
        for (a, h), var in info[j].items():
            row = {var: 1.0}
            if j:
                row[info[j - 1][(a, h)]] = -1.0
            for (a2, _, h2), yv in y[j].items():
                if a2 == a and h2 == h:
                    row[yv] = -1.0
            lp.add(row, "<=", 0.0, name=f"reach[{j},{a},{h}]")
    if d.mixing:
        for (a, h), var in info[J - 1].items():
            row = {var: 1.0} if v.ring is None else {var: 1.0, v.ring: 1.0}
            lp.add(row, ">=", 1.0, name=f"mixing[{a},{h}]")
        gossip_cuts(lp, d, x, arcs, v.ring, None)


def intensity_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """Intensity: ``s[j] <= sum_h x[j,g,h]`` for every g; ``sum_j s[j] + J ring >=
    min_intensive_steps``."""
    d, arcs, x = v.d, v.arcs, v.x
    if not v.need_intensive:
        return
    for j in range(d.steps):
        s = lp.var(f"intensive[{j}]")
        v.intensive.append(s)
        for g in range(d.g):
            lp.add({s: 1.0, **{x[j][a]: -1.0 for a in arcs if a[0] == g}}, "<=", 0.0, name=f"intensive[{j},{g}]")
    if d.min_intensive_steps:
        row = {s: 1.0 for s in v.intensive}
        if v.ring is not None:
            row[v.ring] = float(d.steps)
        lp.add(row, ">=", float(d.min_intensive_steps), name="min_intensive_steps")


def float16_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """The float16 count ``f[j] >= z[j,o16] + sends[j] - 1``, where a record limits it."""
    if not v.need_f16:
        return
    for j in range(v.d.steps):
        var = lp.var(f"float16[{j}]")
        v.f16.append(var)
        for o, (_, dtype) in enumerate(v.opts):
            if dtype == "float16":
                lp.add({var: 1.0, v.z[j][o]: -1.0, v.sends[j]: -1.0}, ">=", -1.0, name=f"float16[{j},{o}]")


def record_rows(lp: LinearProgram, v: PolicyVariables) -> None:
    """Records: ``rec[r]`` in {0,1}, ``sum_r rec[r] + ring >= 1`` over the records of
    accuracy ``>= min_accuracy`` (an infeasible row where there is none); ``rec[r]``
    implies its mixing, intensity, float16 and level rows."""
    d, J = v.d, v.d.steps
    if d.min_accuracy is None:
        return
    ring = v.ring
    v.rec_vars = [lp.var(f"record[{i}]") for i in range(len(v.records))]
    row = {var: 1.0 for var in v.rec_vars}
    if ring is not None and d.ring_accuracy is not None and d.ring_accuracy >= d.min_accuracy - 1e-12:
        row[ring] = 1.0  # the unseparated model's own measured accuracy is enough
    if not row:  # no record reaches min_accuracy: an infeasible row says so
        row = {lp.var("no_accuracy_record", binary=False, lb=0.0, ub=0.0): 1.0}
    lp.add(row, ">=", 1.0, name="min_accuracy")
    for r, var in zip(v.records, v.rec_vars):
        if r.mixing:
            for (a, h), iv in v.info[J - 1].items():
                lp.add({iv: 1.0, var: -1.0}, ">=", 0.0, name=f"record_mixing[{r.name},{a},{h}]")
            gossip_cuts(lp, d, v.x, v.arcs, None, var)
        if r.min_intensive_steps:
            lp.add({**{s: 1.0 for s in v.intensive}, var: -float(r.min_intensive_steps)}, ">=", 0.0,
                   name=f"record_intensive[{r.name}]")
        if r.max_float16_steps is not None and v.f16:
            lp.add({**{f: 1.0 for f in v.f16}, var: float(J)}, "<=", float(r.max_float16_steps + J),
                   name=f"record_float16[{r.name}]")
        for j in range(J):
            for o, (level, _) in enumerate(v.opts):
                if level < r.min_level or (r.max_level is not None and level > r.max_level):
                    lp.add({var: 1.0, v.z[j][o]: 1.0, v.sends[j]: 1.0}, "<=", 2.0,
                           name=f"record_level[{r.name},{j},{o}]")


def objective(inst: SeparableInstance, lp: LinearProgram, v: PolicyVariables) -> float:
    """The objective: ``L``, or the bytes divided by ``bytes_unit`` (so that its magnitude
    is the horizon's, see the module docstring); returns ``bytes_unit``."""
    if inst.objective == "latency":
        assert v.resp is not None
        lp.add_objective(v.resp, 1.0)
        return 1.0
    bytes_unit = max(most_bytes(v.d) / max(v.horizon, 1.0), 1e-12)
    for i, c in v.total_bytes_terms.items():
        lp.add_objective(i, c / bytes_unit)
    return bytes_unit


def decode_plan(v: PolicyVariables, values: Sequence[float]) -> SeparablePlan:
    """The plan of solver values (binaries rounded at 0.5)."""
    d, opts, z = v.d, v.opts, v.z
    if v.ring is not None and values[v.ring] > 0.5:
        return SeparablePlan((), ring=True)
    steps = []
    for j in range(d.steps):
        send_to = list(identity(d.g))
        for (g, h), i in v.x[j].items():
            if values[i] > 0.5:
                send_to[g] = h
        level, dtype = opts[max(range(len(opts)), key=lambda o: values[z[j][o]])]
        steps.append(make_step(d, send_to, level, dtype))
    return SeparablePlan(tuple(steps))


def encode_plan(inst: SeparableInstance, lp: LinearProgram, v: PolicyVariables, plan: SeparablePlan) -> list[float]:
    """The program's variable values for ``plan`` (its interchangeable devices relabeled to
    the symmetry rows' form): the decisions, then the times and the mixing as the rows
    read them."""
    d, opts, J = v.d, v.opts, v.d.steps
    plan = canonical_labels(d, plan, v.classes)
    values = [0.0] * len(lp.variables)
    for (j, g), i in v.sent_by.items():
        values[i] = 1.0 if any(s.send_to[g] != g for s in plan.steps[:j + 1]) else 0.0
    m = evaluate(inst, plan)
    if plan.ring:
        assert v.ring is not None  # the evaluator's check_plan accepts a ring plan only where the ring exists
        values[v.ring] = 1.0
        for j in range(J):
            values[v.z[j][len(opts) - 1]] = 1.0
    for j, s in enumerate(plan.steps):
        for g, h in enumerate(s.send_to):
            if g != h:
                values[v.x[j][(g, h)]] = 1.0
        values[v.z[j][opts.index((s.level, s.dtype))]] = 1.0
        values[v.sends[j]] = 1.0 if s.senders else 0.0
        for g in v.senders:
            if s.send_to[g] != g:
                values[v.sendopt[j][g][opts.index((s.level, s.dtype))]] = 1.0
        if v.intensive:
            values[v.intensive[j]] = 1.0 if s.intensive else 0.0
        if v.f16:
            values[v.f16[j]] = 1.0 if s.senders and s.dtype == "float16" else 0.0
    if v.need_time:
        _encode_times(inst, v, plan, m, values)
    if v.need_mix and not plan.ring:
        _encode_mixing(v, plan, values)
    for r, var in zip(v.records, v.rec_vars):
        if not plan.ring:
            values[var] = 1.0 if meets_record(plan.steps, r, m.mixing, m.intensive_steps, m.float16_steps) else 0.0
    return values


def _encode_times(inst: SeparableInstance, v: PolicyVariables, plan: SeparablePlan, m, values: list[float]) -> None:
    """``L``, ``ready`` and ``nic`` of ``plan`` (evaluated: ``m``) as the time rows read
    them; the ring plan's policy part is silent, at its own earliest times."""
    d, ready, nic, G = v.d, v.ready, v.nic, v.d.g
    assert v.resp is not None  # time_rows adds it wherever the times are encoded (need_time)
    values[v.resp] = m.latency_ms
    if not plan.ring:
        nic_at = [0.0] * G  # as the send rows read it: at least the last snapshot
        prev = [float(t) for t in d.stem_ms]
        for j, (s, sc) in enumerate(zip(plan.steps, m.steps)):
            for g in range(G):
                snap = prev[g] + d.step_compute_ms(g, j)[0]
                h = s.send_to[g]
                tau = d.transfer_ms(g, h, sc.message_bytes) if h != g else 0.0
                nic_at[g] = max(snap, nic_at[g]) + tau
                values[nic[j][g]] = nic_at[g]
                values[ready[j][g]] = sc.ready_ms[g]
            prev = list(sc.ready_ms)
    else:  # the policy part is silent: its own earliest times
        prev = [float(t) for t in d.stem_ms]
        for j, sc in enumerate(evaluate(inst, silent_plan(d)).steps):
            for g in range(G):
                values[ready[j][g]] = sc.ready_ms[g]
                values[nic[j][g]] = max(values[nic[j - 1][g]] if j else 0.0, prev[g] + d.step_compute_ms(g, j)[0])
            prev = list(sc.ready_ms)


def _encode_mixing(v: PolicyVariables, plan: SeparablePlan, values: list[float]) -> None:
    """``y`` and ``info`` of ``plan``: who holds whose features after each step."""
    holds = [{g} for g in range(v.d.g)]
    for j, s in enumerate(plan.steps):
        for (a, g, h), var in v.y[j].items():
            values[var] = 1.0 if s.send_to[g] == h and a in holds[g] else 0.0
        new = [set(hs) for hs in holds]
        for g, h in enumerate(s.send_to):
            if g != h:
                new[h] |= holds[g]
        holds = new
        for (a, h), var in v.info[j].items():
            values[var] = 1.0 if a in holds[h] else 0.0


def interchangeable(d: SeparableData, with_time: bool) -> list[list[int]]:
    """Classes (of two or more) of devices that any relabeling within a class maps plans
    to plans of equal objective and limits: when time matters (``with_time``), equal
    compute, the swap of any two of them preserves every link's rate and latency, and
    the head is in none; otherwise the swap need only preserve which links exist."""
    G = d.g
    parent = list(range(G))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def link(a: int, b: int) -> tuple[float | None, float] | bool:  # without time, only whether it exists
        return (d.rate[a][b], d.link_ms[a][b]) if with_time else d.has_link(a, b)

    for a in range(G):
        for b in range(a + 1, G):
            if with_time and d.head in (a, b):
                continue
            if with_time and (d.stem_ms[a] != d.stem_ms[b] or not (d.compute_ms[a] == d.compute_ms[b]).all()):
                continue
            others = [c for c in range(G) if c not in (a, b)]
            if link(a, b) == link(b, a) and all(link(a, c) == link(b, c) and link(c, a) == link(c, b)
                                                for c in others):
                parent[find(b)] = find(a)
    groups: dict[int, list[int]] = {}
    for g in range(G):
        groups.setdefault(find(g), []).append(g)
    return [sorted(cls) for cls in groups.values() if len(cls) > 1]


def canonical_labels(d: SeparableData, plan: SeparablePlan, classes: list[list[int]]) -> SeparablePlan:
    """``plan`` with the devices of each interchangeable class relabeled so that they
    first send in index order (the symmetry rows' form; same objective and limits)."""
    if plan.ring or not classes:
        return plan
    first = {g: next((j for j, s in enumerate(plan.steps) if s.send_to[g] != g), len(plan.steps)) for g in range(d.g)}
    label = list(range(d.g))
    for cls in classes:
        for old, new in zip(sorted(cls, key=lambda g: (first[g], g)), cls):
            label[old] = new
    steps = []
    for s in plan.steps:
        send_to = [0] * d.g
        for g, h in enumerate(s.send_to):
            send_to[label[g]] = label[h]
        steps.append(make_step(d, send_to, s.level, s.dtype))
    return SeparablePlan(tuple(steps))


def gossip_cuts(lp: LinearProgram, d: SeparableData, x, arcs, ring: int | None, when: int | None) -> None:
    """Valid rows for full mixing (required, or when the 0/1 variable ``when`` is 1): every
    device sends at least once, and at least ``min_mixing_messages(G)`` messages are sent
    in all (``2 G`` for ``G >= 3``: see ``gossip.min_mixing_messages`` and the
    formulation's "Lower bounds")."""
    G, J = d.g, d.steps
    if G < 2:
        return
    lift = {ring: 1.0} if ring is not None else {}

    def need(row: dict[int, float], count: float, name: str) -> None:
        row = dict(row)
        if when is None:
            row.update({i: count * c for i, c in lift.items()})
            lp.add(row, ">=", count, name=name)
        else:
            row[when] = -count
            lp.add(row, ">=", 0.0, name=name)

    tag = "" if when is None else f"@{when}"
    for g in range(G):
        need({x[j][a]: 1.0 for j in range(J) for a in arcs if a[0] == g}, 1.0, f"mixing_sends[{g}]{tag}")
    need({x[j][a]: 1.0 for j in range(J) for a in arcs}, float(min_mixing_messages(G)), f"mixing_messages{tag}")
