"""The latency program of the maxload family as a solver-neutral ``LinearProgram``
(``formulations/maxload_models.md``, "Latency program"): place every node on one of ``k``
identical accelerators or on the CPU so that the time the last node finishes, as
``splitopt.families.maxload.evaluate.latency`` computes it, is smallest, over placements
that keep every rule of ``check_placement`` and for which that latency is defined.

:func:`build_milp_latency` builds it (times in ms, big-M from a bound on any latency,
acyclicity potentials), one function per group of rows; :func:`decode_plan` /
:func:`encode_plan` map its variable values to and from placements;
:func:`milp_tolerance_ms` bounds how far a MILP solver's own latency may be from the
evaluator's, :func:`milp_bound_tolerance_ms` what its dual bound is lowered by. The
generic MILP backends run it
(``splitopt.backends.milp``); the CP-SAT backend runs the native model of
``splitopt.families.maxload.cpsat_latency`` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from splitopt.core.errors import InvalidPlan, SolverFailure
from splitopt.core.program import LinearProgram, Program
from splitopt.families.maxload.contiguity import splitopt_rule_only
from splitopt.families.maxload.cores import (CPU, canonical_where, core_values, cpu_labels, cpu_rule,
                                           forward_groups, may_use_accelerator, placement_of)
from splitopt.families.maxload.evaluate import evaluate, latency
from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.latency_model import (accelerator_work, block_schedule, crossing, entering_pairs,
                                                   longest_min_path, sum_bound_ms, transfer_sources,
                                                   where_from_values)
from splitopt.families.maxload.plan import MaxloadPlacement

#: the MILP solvers' integrality tolerance and the larger of their row feasibility
#: tolerances (HiGHS's mip_feasibility_tolerance 1e-6, absolute: seen here, a call
#: ending 1e-6 ms before it starts; CBC's primal tolerance is 1e-7)
MILP_INT_TOL = 1e-6
MILP_FEAS_TOL = 1e-6
#: their dual feasibility (optimality) tolerance, CBC and HiGHS defaults
MILP_DUAL_TOL = 1e-7


def first_symmetry(lp: LinearProgram, x: Mapping[tuple[int, int], int], n_groups: int, k: int,
                   device: str = "fpga") -> dict[tuple[int, int], int]:
    """Row 8, symmetry breaking of ``k`` identical devices ("first", as in the max-load program):
    group g may open device i >= 1 only if an earlier group is on device i - 1, so the
    devices are numbered by their first group. w[g, i] = 1 only if some group <= g is on
    device i. ``x[g, i]``: group g on device i (absent: not allowed). Returns the w
    indices."""
    w: dict[tuple[int, int], int] = {}
    if k < 2:
        return w
    for g in range(n_groups):
        for i in range(1, k):
            if (g, i) in x:
                if (g - 1, i - 1) in w:
                    lp.add({x[g, i]: 1.0, w[g - 1, i - 1]: -1.0}, "<=", 0.0, name=f"first[{g},{device}{i}]")
                else:
                    lp.variables[x[g, i]].ub = 0.0  # no earlier group at all
        if g == n_groups - 1:
            break
        for i in range(k - 1):
            w[g, i] = lp.var(f"w[{g},{device}{i}]", binary=False)
            coeffs = {w[g, i]: 1.0}
            if (g - 1, i) in w:
                coeffs[w[g - 1, i]] = -1.0
            if (g, i) in x:
                coeffs[x[g, i]] = -1.0
            lp.add(coeffs, "<=", 0.0, name=f"w[{g},{device}{i}]")
    return w


def _add(coeffs: dict[int, float], i: int | None, c: float) -> None:
    if i is not None:
        coeffs[i] = coeffs.get(i, 0.0) + c


def build_milp_latency(inst: MaxloadInstance, start: MaxloadPlacement | None, *, symmetry: bool = True) -> Program:
    """The latency MILP of formulations/maxload_models.md, "Latency program" (ms, bytes),
    one step per group of the section's rows (each step's docstring names their numbers).

    Row kinds: ``"logic"`` (+-1 on 0/1 variables), ``"memory"`` (bytes), ``"time"`` (ms,
    big-M ``lp.meta["big_m_ms"]`` on 0/1 variables), ``"order"`` (acyclicity potentials,
    integers <= k), ``"label"`` (CPU core labels, integers <= maxCPUs). Objective: the
    latency variable ``L`` (ms).

    ``start``: a placement; where it meets every rule with a defined latency UB (the
    family's start plan), ``L <= UB`` is the upper bound of ``L``, which every optimal
    placement meets, and it is the hint. Big-M is ``U`` of :func:`sum_bound_ms`, so the
    rows hold at the exact schedule of every placement whose latency is defined (the
    contract ``encode_plan`` keeps; a big-M of UB, valid for the placements of latency up
    to UB only, gave HiGHS the same bound and incumbent on bert24 in 60 s). ``symmetry``:
    the "first" ordering of the identical accelerators (and of the cores, rule "cores").
    NotApplicable under contiguity "authors" where it differs from "splitopt"
    (``contiguity.py``)."""
    splitopt_rule_only(inst, "latency program")
    if start is not None and not evaluate(inst, start).feasible:
        start = None
    lp = LinearProgram()
    v = placement_variables(inst, lp)
    memory_rows(inst, lp, v)
    transfer_variables(inst, lp, v)
    time_rows(inst, lp, v, None if start is None else latency(inst, start))
    order_rows(inst, lp, v)
    rule = cpu_rule(inst, v.gr)
    if rule == "labels":
        label_rows(inst, lp, v)
    elif rule == "cores":
        core_rows(inst, lp, v, symmetry)
    w = first_symmetry(lp, v.x, len(v.gr.members), len(inst.fpgas)) if symmetry else {}
    lp.meta.update(groups=v.gr, x=v.x, c=v.c, t=v.t, f=v.f, s=v.s, e=v.e, L=v.L, o=v.o, os=v.os, oe=v.oe,
                   cpu_rule=rule, y=v.y, kappa=v.kappa, zc=v.zc, wc=v.wc, w=w, big_m_ms=v.big_m, upper_ms=v.upper,
                   lower_ms=v.lower, symmetry=symmetry)
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(inst, lp, values),
                   tolerance_ms=milp_tolerance_ms(inst, lp), bound_tolerance_ms=milp_bound_tolerance_ms(inst),
                   encode=lambda plan: encode_plan(inst, lp, plan),
                   hint=None if start is None else encode_plan(inst, lp, start),
                   stats={"variables": len(lp.variables), "rows": len(lp.rows), "groups": len(v.gr.members),
                          "big_m_ms": v.big_m, "cpu_rule": rule})


@dataclass
class LatencyVariables:
    """The program's variables (section "Variables") as the steps add them: ``x[g, a]``
    (group g on accelerator a), ``c[g]`` (on a CPU core), transfers ``t[u, a]``, times
    ``f[v]``, ``s[a]``, ``e[a]``, ``L`` (ms), potentials ``o``, ``os``, ``oe``, and the CPU
    rule's labels ``y`` or cores ``kappa``, ``zc``, ``wc``. ``big_m`` (ms): ``U`` of
    :func:`sum_bound_ms`; ``upper``, ``lower``: the bounds of ``L``."""

    gr: Groups
    big_m: float
    x: dict[tuple[int, int], int]
    c: dict[int, int]
    t: dict[tuple[int, int], int] = field(default_factory=dict)
    transfer: list = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)
    f: dict[int, int] = field(default_factory=dict)
    s: dict[int, int] = field(default_factory=dict)
    e: dict[int, int] = field(default_factory=dict)
    L: int = -1
    upper: float | None = None
    lower: float = 0.0
    o: dict[int, int] = field(default_factory=dict)
    os: dict[int, int] = field(default_factory=dict)
    oe: dict[int, int] = field(default_factory=dict)
    y: dict[int, int] = field(default_factory=dict)
    kappa: dict[tuple[int, int], int] = field(default_factory=dict)
    zc: dict[tuple[int, int], int] = field(default_factory=dict)
    wc: dict[tuple[int, int], int] = field(default_factory=dict)

    def X(self, v: int, a: int) -> int | None:
        """Node v's group on accelerator a (None: not allowed there)."""
        return self.x.get((self.gr.of[v], a))

    def C(self, v: int) -> int | None:
        """Node v's group on a CPU core (None: no core)."""
        return self.c.get(self.gr.of[v])


def placement_variables(inst: MaxloadInstance, lp: LinearProgram) -> LatencyVariables:
    """Row 1, placement: ``x[g, a]`` on accelerator a, ``c[g]`` on a CPU core (which core: the CPU
    rule's rows), each group on one device."""
    gr = groups_of(inst)
    A, n_groups = range(len(inst.fpgas)), len(gr.members)
    x = {(g, a): lp.var(f"x[{g},fpga{a}]") for g in range(n_groups) if may_use_accelerator(inst, gr, g) for a in A}
    c = {g: lp.var(f"c[{g}]") for g in range(n_groups)} if len(inst.cpus) >= 1 else {}
    for g in range(n_groups):
        coeffs = {x[g, a]: 1.0 for a in A if (g, a) in x}
        _add(coeffs, c.get(g), 1.0)
        lp.add(coeffs, "==", 1.0, name=f"assign[{g}]")
    return LatencyVariables(gr, sum_bound_ms(inst), x, c)


def memory_rows(inst: MaxloadInstance, lp: LinearProgram, v: LatencyVariables) -> None:
    """Row 1, the memory of every accelerator (left out when all groups together fit)."""
    gr, x = v.gr, v.x
    n_groups = len(gr.members)
    if math.fsum(gr.size(inst, g) for g in range(n_groups)) > inst.max_size_per_fpga:
        for a in range(len(inst.fpgas)):
            coeffs = {x[g, a]: gr.size(inst, g) for g in range(n_groups) if (g, a) in x and gr.size(inst, g) > 0}
            if coeffs:
                lp.add(coeffs, "<=", inst.max_size_per_fpga, kind="memory", name=f"memory[{a}]")


def transfer_variables(inst: MaxloadInstance, lp: LinearProgram, v: LatencyVariables) -> None:
    """Row 2, transfers: ``t[u, a] >= 1`` when u's output crosses a's boundary (in or out)."""
    x, t = v.x, v.t
    v.transfer = transfer_sources(inst, v.gr)
    for u, hs in v.transfer:
        for a in range(len(inst.fpgas)):
            xu, xs = v.X(u, a), [x[h, a] for h in hs if (h, a) in x]
            if xu is None and not xs:
                continue
            t[u, a] = lp.var(f"t[{u},fpga{a}]", binary=False)
            if xu is not None and len(xs) < len(hs):
                lp.add({t[u, a]: 1.0, xu: -1.0}, ">=", 0.0, name=f"out[{u},{a}]")
            for xh in xs:
                coeffs = {t[u, a]: 1.0, xh: 1.0}
                _add(coeffs, xu, -1.0)
                lp.add(coeffs, ">=", 0.0, name=f"out[{u},{a}]")
                coeffs = {t[u, a]: 1.0, xh: -1.0}
                _add(coeffs, xu, 1.0)
                lp.add(coeffs, ">=", 0.0, name=f"in[{u},{a}]")


def time_rows(inst: MaxloadInstance, lp: LinearProgram, v: LatencyVariables, upper: float | None) -> None:
    """Rows 3-5 and 9, times (ms): ``f[v]`` when v's output is ready, ``s[a]`` / ``e[a]`` the call of
    accelerator a, ``L`` the latency (at most ``upper``, the start plan's: a bound); a CPU
    node after every predecessor, an accelerator call after every input, every node of a
    call ready at its end, ``L`` after every sink; the objective."""
    x, big_m, A = v.x, v.big_m, range(len(inst.fpgas))
    gr = v.gr
    cpu_ms = {n.id: n.cpu_ms for n in inst.nodes}
    acc_ms = {n.id: n.fpga_ms for n in inst.nodes}
    low = longest_min_path(inst, gr, cpu_ms, acc_ms)
    v.upper, v.lower = upper, max(low.values(), default=0.0)

    def tvar(name: str, lb: float = 0.0, ub: float = big_m) -> int:
        return lp.var(name, binary=False, lb=min(lb, ub), ub=ub, implied_integer=False, unit="ms")

    f = v.f = {w: tvar(f"f[{w}]", low[w]) for w in inst.topo_order}
    s = v.s = {a: tvar(f"s[fpga{a}]") for a in A}
    e = v.e = {a: tvar(f"e[fpga{a}]") for a in A}
    v.L = tvar("L", v.lower, ub=big_m if upper is None else min(big_m, upper * (1 + 1e-9) + 1e-9))  # the cut: a bound
    v.edges = sorted({(ed.source, ed.target) for ed in inst.edges})
    for u, w in v.edges:  # CPU node: after every predecessor, for cpuLatency; any node: not before a predecessor
        coeffs = {f[w]: 1.0, f[u]: -1.0}
        _add(coeffs, v.C(w), -cpu_ms[w])
        lp.add(coeffs, ">=", 0.0, kind="time", name=f"cpu[{u},{w}]")
    for w in inst.topo_order:
        cw = v.C(w)
        if not inst.predecessors[w] and cw is not None and cpu_ms[w] > 0:
            lp.add({f[w]: 1.0, cw: -cpu_ms[w]}, ">=", 0.0, kind="time", name=f"cpu[{w}]")
    entering = entering_pairs(inst, gr)
    for a in A:
        for u, h in entering:  # the call starts after every input: s[a] >= f[u] if u -> group h on a, u not on a
            if (h, a) in x:
                coeffs = {s[a]: 1.0, f[u]: -1.0, x[h, a]: -big_m}
                _add(coeffs, v.X(u, a), big_m)
                lp.add(coeffs, ">=", -big_m, kind="time", name=f"start[{u},{h},{a}]")
        coeffs = {e[a]: 1.0, s[a]: -1.0}  # the call: transfers in + compute + transfers out
        for g in range(len(gr.members)):
            if (g, a) in x:
                _add(coeffs, x[g, a], -gr.fpga_ms(inst, g))
        for u, _ in v.transfer:
            if (u, a) in v.t:
                _add(coeffs, v.t[u, a], -inst.out_cost[u])
        lp.add(coeffs, ">=", 0.0, kind="time", name=f"call[{a}]")
        for w in inst.topo_order:  # every node of the call is ready at its end
            xw = v.X(w, a)
            if xw is not None:
                lp.add({f[w]: 1.0, e[a]: -1.0, xw: -big_m}, ">=", -big_m, kind="time", name=f"end[{w},{a}]")
    for w in inst.topo_order:
        if not inst.successors[w]:
            lp.add({v.L: 1.0, f[w]: -1.0}, ">=", 0.0, kind="time", name=f"latency[{w}]")
    lp.add_objective(v.L, 1.0)


def order_rows(inst: MaxloadInstance, lp: LinearProgram, v: LatencyVariables) -> None:
    """Row 6, acyclicity of the accelerator calls: potentials that never decrease along an edge
    and rise by 1 inside each call (zero-duration calls make the time rows too weak)."""
    k, x = len(inst.fpgas), v.x
    A = range(k)
    o = v.o = {w: lp.var(f"o[{w}]", binary=False, ub=float(k)) for w in inst.topo_order} if k else {}
    os_ = v.os = {a: lp.var(f"os[fpga{a}]", binary=False, ub=float(k)) for a in A}
    oe = v.oe = {a: lp.var(f"oe[fpga{a}]", binary=False, ub=float(k)) for a in A}
    if not k:
        return
    for u, w in v.edges:
        lp.add({o[w]: 1.0, o[u]: -1.0}, ">=", 0.0, kind="order", name=f"order[{u},{w}]")
    entering = entering_pairs(inst, v.gr)
    for a in A:
        for u, h in entering:
            if (h, a) in x:
                coeffs = {os_[a]: 1.0, o[u]: -1.0, x[h, a]: -float(k)}
                _add(coeffs, v.X(u, a), float(k))
                lp.add(coeffs, ">=", -float(k), kind="order", name=f"ostart[{u},{h},{a}]")
        lp.add({oe[a]: 1.0, os_[a]: -1.0}, ">=", 1.0, kind="order", name=f"ocall[{a}]")
        for w in inst.topo_order:
            xw = v.X(w, a)
            if xw is not None:
                lp.add({o[w]: 1.0, oe[a]: -1.0, xw: -float(k)}, ">=", -float(k), kind="order",
                       name=f"oend[{w},{a}]")


def _forward_edges(inst: MaxloadInstance, v: LatencyVariables) -> list[tuple[int, int]]:
    fwd = inst.forward_ids
    return [(u, w) for u, w in v.edges if u in fwd and w in fwd]


def label_rows(inst: MaxloadInstance, lp: LinearProgram, v: LatencyVariables) -> None:
    """Row 7, rule 5 on the CPU cores, rule "labels" (no class has two forward nodes: labels are
    exact, ``cpu_labels``): least labels ``y``."""
    fwd = inst.forward_ids
    y = v.y = {w: lp.var(f"y[{w}]", binary=False, ub=float(len(inst.cpus))) for w in inst.topo_order if w in fwd}
    for u, w in _forward_edges(inst, v):
        lp.add({y[w]: 1.0, y[u]: -1.0}, ">=", 0.0, kind="label", name=f"label[{u},{w}]")
        coeffs = {y[w]: 1.0, y[u]: -1.0}
        _add(coeffs, v.C(w), -1.0)
        _add(coeffs, v.C(u), 1.0)
        lp.add(coeffs, ">=", 0.0, kind="label", name=f"run[{u},{w}]")
    for w, yw in y.items():
        cw = v.C(w)
        assert cw is not None, "the labels rule runs only with CPU cores, where every group has its c[g]"
        lp.add({yw: 1.0, cw: -1.0}, ">=", 0.0, kind="label", name=f"oncpu[{w}]")


def core_rows(inst: MaxloadInstance, lp: LinearProgram, v: LatencyVariables, symmetry: bool) -> None:
    """Row 7, rule 5 on the CPU cores, rule "cores": ``kappa[g, j]``, CPU class g on core j, and
    convexity rows per core; with ``symmetry`` the "first" ordering of the cores."""
    gr = v.gr
    fwd_edges = _forward_edges(inst, v)
    cpu_groups = forward_groups(inst, gr)
    cores = range(min(len(inst.cpus), len(cpu_groups)))
    kappa = v.kappa = {(g, j): lp.var(f"kappa[{g},cpu{j}]") for g in cpu_groups for j in cores}
    for g in cpu_groups:
        lp.add({**{kappa[g, j]: 1.0 for j in cores}, v.c[g]: -1.0}, "==", 0.0, name=f"core[{g}]")
    on_edge = sorted({w for edge in fwd_edges for w in edge})
    zc = v.zc
    for j in cores:
        for w in on_edge:
            zc[w, j] = lp.var(f"z[{w},cpu{j}]", binary=False)
            lp.add({zc[w, j]: 1.0, kappa[gr.of[w], j]: -1.0}, ">=", 0.0, name=f"zk[{w},{j}]")
        for u, w in fwd_edges:
            lp.add({zc[u, j]: 1.0, zc[w, j]: -1.0}, ">=", 0.0, name=f"zz[{u},{w},{j}]")
            if gr.of[u] != gr.of[w]:
                lp.add({zc[w, j]: 1.0, kappa[gr.of[u], j]: 1.0, kappa[gr.of[w], j]: -1.0}, "<=", 1.0,
                       name=f"zcut[{u},{w},{j}]")
    if symmetry:
        v.wc = first_symmetry(lp, kappa, len(gr.members), len(cores), device="cpu")


def decode_plan(inst: MaxloadInstance, lp: LinearProgram, values: Sequence[float]) -> MaxloadPlacement:
    """The placement of a solution (``values``: one float per variable of ``lp``): each
    group on its largest x / c value; CPU cores from the kappa variables (rule "cores"),
    else the least labels of ``cpu_labels``."""
    gr: Groups = lp.meta["groups"]
    where = where_from_values(lp.meta["x"], lp.meta["c"], lambda i: values[i])
    cores = None
    if lp.meta["kappa"]:
        cores = {g: j for (g, j), i in lp.meta["kappa"].items() if where[g] == CPU and values[i] > 0.5}
    placement = placement_of(inst, gr, where, cores)
    if placement is None:
        raise SolverFailure(f"decoded CPU nodes need more than maxCPUs={inst.max_cpus} cores ({inst.name})")
    return placement


def encode_plan(inst: MaxloadInstance, lp: LinearProgram, placement: MaxloadPlacement) -> list[float]:
    """Variable values of ``lp`` for ``placement`` (any placement that keeps its colour
    classes together): accelerators renumbered by their first group (the symmetry
    breaking's labelling), exact transfers, the latency model's schedule in ms, the
    smallest acyclicity potentials, and the CPU cores: the least labels capped at
    maxCPUs (rule "labels") or the placement's own cores renumbered by first group
    (rule "cores"). The objective at these values is the placement's latency.

    The values meet every row exactly when ``check_placement`` finds no broken rule and
    the latency is defined, for the placements whose CPU cores are the family's own
    choice (``cores.placement_of``: what the solvers, the latency enumeration and the
    latency search space produce; under the rules "none" and "labels" the program does
    not carry the cores). Otherwise a row is broken: a group on a device it may not use
    leaves its ``assign`` row unmet, a memory row overflows, labels capped at maxCPUs
    break a label row, and for an undefined latency (calls that wait on each other)
    every time and potential is 0, which breaks the ``ocall`` rows. ``L``'s upper bound
    (the start plan's latency) is a bound, not a row. InvalidPlan for a split colour
    class."""
    m = lp.meta
    gr: Groups = m["groups"]
    where = canonical_where(inst, gr, placement)
    values = [0.0] * len(lp.variables)
    for g, a in where.items():
        index = m["c"].get(g) if a == CPU else m["x"].get((g, a))
        if index is not None:
            values[index] = 1.0
    paid = crossing(inst, gr, where)
    for (u, a), i in m["t"].items():
        values[i] = 1.0 if u in paid.get(a, ()) else 0.0
    work = accelerator_work(inst, gr, where, {n.id: n.fpga_ms for n in inst.nodes}, inst.out_cost)
    used = set(work)
    try:
        f, s, e = block_schedule(inst, gr, where, {v: inst.node_by_id[v].cpu_ms for v in inst.node_by_id}, work)
        o, os_, oe = block_schedule(inst, gr, where, {v: 0 for v in inst.node_by_id}, {a: 1 for a in used}, zero=0)
    except InvalidPlan:  # no schedule: all times and potentials 0
        f = o = {v: 0 for v in inst.node_by_id}
        s = e = os_ = {}
        oe = {a: 0 for a in m["oe"]}
    for v, i in m["f"].items():
        values[i] = f[v]
    for a in m["s"]:
        values[m["s"][a]] = s.get(a, 0.0)
        values[m["e"][a]] = e.get(a, 0.0)
    values[m["L"]] = max(f.values(), default=0.0)
    for v, i in m["o"].items():
        values[i] = float(o[v])
    for a in m["os"]:
        values[m["os"][a]] = float(os_.get(a, 0))
        values[m["oe"][a]] = float(oe.get(a, 1))
    if m["y"]:
        labels = cpu_labels(inst, gr, where, limit=-1)
        assert labels is not None, "with no limit the labels always settle"
        for v, i in m["y"].items():
            values[i] = float(min(labels[v], inst.max_cpus))
    if m["kappa"]:
        for i, value in core_values(inst, gr, placement, m["kappa"], m["zc"], m["wc"]).items():
            values[i] = float(value)
    for (g, a), i in m["w"].items():
        values[i] = 1.0 if any(where[h] == a for h in range(g + 1)) else 0.0
    return values


def milp_bound_tolerance_ms(inst: MaxloadInstance) -> float:
    """What a MILP solver's dual bound is lowered by (ms): the integrality and feasibility
    tolerances only relax the program (they lower its bound), so the bound stays below
    the true optimum but for the inexact optimality of its LP solves, allowed for as
    their dual tolerance (1e-7) per row on one chain of blocks (at most 2 n + 3 k + 1)."""
    return MILP_DUAL_TOL * (2 * len(inst.nodes) + 3 * len(inst.fpgas) + 1)


def milp_tolerance_ms(inst: MaxloadInstance, lp: LinearProgram) -> float:
    """How far a MILP solver's own latency may be from the evaluator's for its placement
    (ms): its integrality tolerance (1e-6) times what a near-integral binary can relax on
    one chain of blocks (three big-M rows per accelerator, every duration once: 3 k M +
    U) plus its feasibility tolerance (1e-6) per row on the chain (at most 2 n + 3 k + 1)."""
    n, k = len(inst.nodes), len(inst.fpgas)
    return MILP_INT_TOL * (3 * k * lp.meta["big_m_ms"] + sum_bound_ms(inst)) + \
        MILP_FEAS_TOL * (2 * n + 3 * k + 1)
