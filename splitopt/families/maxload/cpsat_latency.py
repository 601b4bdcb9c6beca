"""The native CP-SAT model of the maxload family's latency objective
(``formulations/maxload_models.md``, "Latency program", "CP-SAT model and its tolerance"):
the placement, transfer, memory, core and symmetry rows of the latency program
(``splitopt.families.maxload.milp_latency``) with integer times, durations rounded UP to
a power-of-two unit, and enforcement literals instead of big-M. :func:`cpsat_model` builds
a :class:`LatencyCpSat` (model, decoder, unit, stated tolerance, whether presolve is safe),
one function per group of rows; :func:`build_cpsat_latency` hands it to the generic CP-SAT
backend as a ``Program`` (``splitopt.backends.cpsat``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

from splitopt.core.errors import InvalidPlan, NotApplicable, SolverFailure
from splitopt.core.program import Program
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

#: CP-SAT time unit: the largest time row's activity is at most about 2**30 units
CPSAT_TIME_BITS = 29
#: CP-SAT presolve is safe when every linear row's sum of |coeff| * max|bound| is below
#: this (or-tools #5293: a 32-bit activity accumulator in 9.15's presolve)
PRESOLVE_LIMIT = 2**31


def ceil_units(value: float, unit: float, at_least: int = 0) -> int:
    """The smallest integer q >= at_least with q * unit >= value, exactly."""
    q = max(at_least, math.ceil(value / unit))
    while Fraction(q) * Fraction(unit) < Fraction(value):
        q += 1
    return q


def integer_sizes(values: list[float]) -> tuple[list[int], int]:
    """Values times the smallest power of two that makes them integers (floats are
    dyadic), divided by their gcd; returns (the integers, the gcd)."""
    for p in range(0, 64):
        if all(float(v * 2**p).is_integer() for v in values):
            ints = [int(v * 2**p) for v in values]
            common = math.gcd(*ints) or 1
            return [q // common for q in ints], common
    raise NotApplicable("cpsat: sizes cannot be scaled to exact integers; use milp-highs or milp-cbc")


@dataclass
class LatencyCpSat:
    """A native CP-SAT model of the latency objective (see :func:`cpsat_model`).

    ``unit_ms``: one integer time unit (ms); ``tolerance_ms``: for every placement P the
    model accepts, ``latency(P) <= unit * obj`` for any of its CP-SAT schedules, and its
    tightest schedule has ``unit * obj <= latency(P) + tolerance_ms`` (so at a proven
    optimum ``|unit * objective - latency| <= tolerance_ms`` and ``unit * bound -
    tolerance_ms`` is a lower bound on the true optimum). ``presolve_safe``: every linear
    row's sum of |coeff| * max|bound| is below 2**31 (or-tools #5293).
    ``horizon``: the time domain's upper end (units). ``start``: the start placement
    (hinted by :meth:`hint`) or None."""

    model: Any
    objective: Any
    unit_ms: float
    tolerance_ms: float
    presolve_safe: bool
    max_activity: int
    horizon: int
    inst: MaxloadInstance
    groups: Groups
    start: MaxloadPlacement | None
    variables: dict[str, Any] = field(repr=False)
    units: dict[str, Any] = field(repr=False)

    def decode(self, values: Any) -> MaxloadPlacement:
        """The placement of a CP-SAT solution (``values[var.Index()]``, e.g. the
        response's ``solution``)."""
        gr, V = self.groups, self.variables
        where = where_from_values(V["x"], V["c"], lambda var: values[var.Index()])
        cores = None
        if V["kappa"]:
            cores = {g: j for (g, j), var in V["kappa"].items() if where[g] == CPU and values[var.Index()]}
        placement = placement_of(self.inst, gr, where, cores)
        if placement is None:
            raise SolverFailure(f"cpsat: CPU nodes need more than maxCPUs={self.inst.max_cpus} cores")
        return placement

    def values_of(self, placement: MaxloadPlacement) -> dict[Any, int]:
        """Variable -> value of a valid placement with its tightest integer schedule
        (rounded durations), for hints and tests. InvalidPlan if the model cannot hold it."""
        inst, gr, V = self.inst, self.groups, self.variables
        where = canonical_where(inst, gr, placement)
        out: dict[Any, int] = {}
        for g, a in where.items():
            if (a == CPU and g not in V["c"]) or (a != CPU and (g, a) not in V["x"]):
                where_name = "the CPU" if a == CPU else "an accelerator"
                raise InvalidPlan(f"group of node {gr.members[g][0]} cannot be on {where_name}")
        for (g, a), var in V["x"].items():
            out[var] = int(where[g] == a)
        for g, var in V["c"].items():
            out[var] = int(where[g] == CPU)
        paid = crossing(inst, gr, where)
        for (u, a), var in V["t"].items():
            out[var] = int(u in paid.get(a, ()))
        f, s, e = unit_schedule(inst, gr, where, self.units)
        for v, var in V["f"].items():
            out[var] = f[v]
        for a in V["s"]:
            out[V["s"][a]] = s.get(a, 0)
            out[V["e"][a]] = e.get(a, 0)
        out[self.objective] = max(f.values(), default=0)
        if V["y"]:
            labels = cpu_labels(inst, gr, where)
            if labels is None:
                raise InvalidPlan(f"the CPU nodes need more than maxCPUs={inst.max_cpus} cores")
            for v, var in V["y"].items():
                out[var] = labels[v]
        if V["kappa"]:
            out.update(core_values(inst, gr, placement, V["kappa"], V["zc"], V["wc"]))
        for (g, a), var in V["w"].items():
            out[var] = int(any(where[h] == a for h in range(g + 1)))
        return out

    def hint(self, placement: MaxloadPlacement) -> None:
        """Hint ``placement`` (valid, latency within the horizon) to the solver."""
        self.model.ClearHints()
        for var, value in self.values_of(placement).items():
            self.model.AddHint(var, value)


def unit_schedule(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int], units: Mapping[str, Any]):
    """``block_schedule`` in integer units: CPU node v takes ``units["cpu"][v]``, a call
    the sum of its nodes' ``units["acc"]`` and of its crossing nodes' ``units["cost"]``."""
    work = accelerator_work(inst, gr, where, units["acc"], units["cost"], add=sum)
    return block_schedule(inst, gr, where, units["cpu"], work, zero=0)


def max_activity(model) -> int:
    """The largest sum of |coeff| * max(|lb|, |ub|) over the model's linear rows and
    objective (what or-tools #5293 overflows when it passes 2**31)."""
    proto = model.Proto()
    bound = []
    for var in proto.variables:
        domain = list(var.domain)  # the proto's repeated field does not index from the end
        bound.append(max(abs(domain[0]), abs(domain[-1])))

    def activity(refs, coeffs) -> int:
        return sum(abs(q) * bound[r if r >= 0 else -r - 1] for r, q in zip(refs, coeffs))

    top = activity(proto.objective.vars, proto.objective.coeffs)
    for ct in proto.constraints:
        if ct.has_linear():
            top = max(top, activity(ct.linear.vars, ct.linear.coeffs))
    return top


def first_symmetry_clauses(model, x: Mapping[tuple[int, int], Any], n_groups: int, k: int,
                           device: str) -> dict[tuple[int, int], Any]:
    """Row 8, ``milp_latency.first_symmetry`` as clauses: x[g, i] -> w[g-1, i-1]; w[g, i] ->
    w[g-1, i] or x[g, i]; no earlier group: x[g, i] = 0. Returns the w literals."""
    w: dict[tuple[int, int], Any] = {}
    if k < 2:
        return w
    for g in range(n_groups):
        for i in range(1, k):
            if (g, i) in x:
                if (g - 1, i - 1) in w:
                    model.AddImplication(x[g, i], w[g - 1, i - 1])
                else:
                    model.Add(x[g, i] == 0)
        if g == n_groups - 1:
            break
        for i in range(k - 1):
            w[g, i] = model.NewBoolVar(f"w[{g},{device}{i}]")
            lits = ([w[g - 1, i]] if (g - 1, i) in w else []) + ([x[g, i]] if (g, i) in x else [])
            model.AddBoolOr(lits + [w[g, i].Not()])
    return w


def build_cpsat_latency(inst: MaxloadInstance, start: MaxloadPlacement | None) -> Program:
    """The latency objective's CP-SAT program (:func:`cpsat_model`); ``start``, where it
    meets every rule with a defined latency, sets the horizon and is the hint. Presolve
    only where no row can reach 2**31 (or-tools #5293)."""
    if start is not None and not evaluate(inst, start).feasible:
        start = None
    cp = cpsat_model(inst, start)
    if start is not None:
        cp.hint(start)
    return Program(kind="cpsat", model=cp.model, decode=cp.decode, unit_ms=cp.unit_ms,
                   tolerance_ms=cp.tolerance_ms, presolve=cp.presolve_safe,
                   stats={"time_unit_ms": cp.unit_ms, "horizon_units": cp.horizon,
                          "max_activity": cp.max_activity, "groups": len(cp.groups.members)})


@dataclass
class CpSatVariables:
    """The model's variables as the steps add them (as in the latency program: ``x``, ``c``,
    ``t``, ``f``, ``s``, ``e``, ``L``, the CPU rule's ``y`` or ``kappa``, ``zc``, ``wc``), the
    rounded durations ``units`` (``"cpu"``, ``"acc"``, ``"cost"``) of ``unit`` ms, and the
    horizon ``H`` (units)."""

    gr: Groups
    unit: float
    units: dict[str, Any]
    transfer: list
    x: dict[tuple[int, int], Any]
    c: dict[int, Any]
    t: dict[tuple[int, int], Any] = field(default_factory=dict)
    H: int = 0
    edges: list[tuple[int, int]] = field(default_factory=list)
    f: dict[int, Any] = field(default_factory=dict)
    s: dict[int, Any] = field(default_factory=dict)
    e: dict[int, Any] = field(default_factory=dict)
    L: Any = None
    y: dict[int, Any] = field(default_factory=dict)
    kappa: dict[tuple[int, int], Any] = field(default_factory=dict)
    zc: dict[tuple[int, int], Any] = field(default_factory=dict)
    wc: dict[tuple[int, int], Any] = field(default_factory=dict)

    def X(self, v: int, a: int):
        """Node v's group on accelerator a (None: not allowed there)."""
        return self.x.get((self.gr.of[v], a))

    def C(self, v: int):
        """Node v's group on a CPU core (None: no core)."""
        return self.c.get(self.gr.of[v])


def cpsat_model(inst: MaxloadInstance, start: MaxloadPlacement | None = None, *, symmetry: bool = True,
                time_bits: int = CPSAT_TIME_BITS) -> LatencyCpSat:
    """A native CP-SAT model of the latency objective, one step per group of the latency
    program's rows (each step's docstring names their numbers).

    The same placement variables, transfer clauses, memory rows (exact integers), rule-5
    rows on the CPU cores (``cpu_rule``) and symmetry breaking as the latency program,
    but no acyclicity potentials; the times are integers of ``unit`` ms and the big-M
    rows become enforced rows (``s[a] >= f[u]`` only if u feeds a and is not on a,
    ``f[v] >= e[a]`` only if v is on a, ``f[v] >= f[u] + p`` only if v is on the CPU).

    Rounding: ``unit = 2**(ceil(log2 R) - time_bits)`` ms, R the largest time row's
    activity in ms (2 x horizon + all accelerator compute + all transfers), so the time
    rows stay below about 2**30 (presolve-safe). Every duration is rounded UP: CPU time
    ``P_cpu(v) = ceil(cpuLatency(v) / unit)``, accelerator time ``P_acc(v) = max(1,
    ceil(fpgaLatency(v) / unit))`` and transfer ``Q(u) = ceil(c(u) / unit)``. So for a
    placement P and any CP-SAT schedule of it, every time is at least the true one
    (induction over the blocks in the latency model's order): ``unit * obj >=
    latency(P)``. The time domain ends at the horizon: the rounded latency of ``start``
    (a valid placement with a defined latency, e.g. the family's start plan; else the
    rounded sum bound of every duration), so every placement of rounded latency up to it,
    hence every optimal one, keeps its schedule. The ``max(1, .)`` makes every
    accelerator call last >= 1 unit, so a cycle of calls (or a non-convex accelerator
    set) would need a time larger than itself: every CP-SAT-feasible schedule is a valid
    schedule of a valid placement, with no extra rows.

    Tolerance: P's tightest rounded schedule is a longest chain of blocks in which each
    node's compute and each transfer variable t[u, a] appears at most once, so
    ``unit * obj(P) - latency(P) <= tolerance_ms = sum_v max(err_cpu(v), err_acc(v)) +
    sum_{t[u, a]} err(c(u))``, with ``err(d) = unit * rounded(d) - d`` in [0, unit]
    (computed exactly with fractions, rounded up). For the optimum P*:
    ``unit * opt_cp <= unit * obj(P*) <= latency(P*) + tolerance_ms``, hence
    ``unit * bound - tolerance_ms <= latency(P*)``.

    NotApplicable under contiguity "authors" where it differs from "splitopt"
    (``contiguity.py``)."""
    from ortools.sat.python import cp_model

    splitopt_rule_only(inst, "latency cpsat model")
    model = cp_model.CpModel()
    v = placement_variables(inst, model, start, time_bits)
    memory_rows(inst, model, v)
    transfer_clauses(inst, model, v)
    tolerance_ms = _tolerance_ms(inst, v)
    time_rows(inst, model, v, start)
    rule = cpu_rule(inst, v.gr)
    if rule == "labels":
        label_rows(inst, model, v)
    elif rule == "cores":
        core_rows(inst, model, v, symmetry)
    n_groups, k = len(v.gr.members), len(inst.fpgas)
    w = first_symmetry_clauses(model, v.x, n_groups, k, "fpga") if symmetry else {}
    activity = max_activity(model)
    return LatencyCpSat(model=model, objective=v.L, unit_ms=v.unit, tolerance_ms=tolerance_ms,
                        presolve_safe=activity < PRESOLVE_LIMIT, max_activity=activity, horizon=v.H, inst=inst,
                        groups=v.gr, start=start,
                        variables={"x": v.x, "c": v.c, "t": v.t, "f": v.f, "s": v.s, "e": v.e, "y": v.y,
                                   "kappa": v.kappa, "zc": v.zc, "wc": v.wc, "w": w},
                        units=v.units)


def placement_variables(inst: MaxloadInstance, model: Any, start: MaxloadPlacement | None,
                        time_bits: int) -> CpSatVariables:
    """The rounding (``unit`` and every duration rounded up, see :func:`cpsat_model`), and
    the placement (row 1): ``x[g, a]``, ``c[g]``, each group on exactly one device."""
    gr = groups_of(inst)
    k, l = len(inst.fpgas), len(inst.cpus)
    n_groups = len(gr.members)
    A = range(k)
    upper = None if start is None else latency(inst, start)
    transfer = transfer_sources(inst, gr)
    horizon_ms = upper if upper is not None else sum_bound_ms(inst)
    R = 2 * horizon_ms + math.fsum(gr.fpga_ms(inst, g) for g in range(n_groups) if may_use_accelerator(inst, gr, g)) \
        + math.fsum(inst.out_cost[u] for u, _ in transfer)
    unit = 2.0 ** (math.ceil(math.log2(max(R, 1e-3))) - time_bits)
    P_cpu = {n.id: ceil_units(n.cpu_ms, unit) for n in inst.nodes}
    P_acc = {n.id: ceil_units(n.fpga_ms, unit, at_least=1) for n in inst.nodes}
    Q = {u: ceil_units(inst.out_cost[u], unit) for u in inst.node_by_id}
    x = {(g, a): model.NewBoolVar(f"x[{g},fpga{a}]") for g in range(n_groups) if may_use_accelerator(inst, gr, g)
         for a in A}
    c = {g: model.NewBoolVar(f"c[{g}]") for g in range(n_groups)} if l >= 1 else {}
    for g in range(n_groups):
        lits = [x[g, a] for a in A if (g, a) in x] + ([c[g]] if g in c else [])
        model.AddExactlyOne(lits)
    return CpSatVariables(gr, unit, {"cpu": P_cpu, "acc": P_acc, "cost": Q}, transfer, x, c)


def memory_rows(inst: MaxloadInstance, model: Any, v: CpSatVariables) -> None:
    """Row 1, the memory of every accelerator, in exact integers (left out when all groups
    together fit)."""
    gr, x = v.gr, v.x
    n_groups = len(gr.members)
    if math.fsum(gr.size(inst, g) for g in range(n_groups)) > inst.max_size_per_fpga:
        for a in range(len(inst.fpgas)):
            ids = [g for g in range(n_groups) if (g, a) in x and gr.size(inst, g) > 0]
            if ids:
                ints, _ = integer_sizes([gr.size(inst, g) for g in ids] + [inst.max_size_per_fpga])
                model.Add(sum(q * x[g, a] for q, g in zip(ints, ids)) <= ints[-1])


def transfer_clauses(inst: MaxloadInstance, model: Any, v: CpSatVariables) -> None:
    """Row 2, transfers: ``t[u, a]`` when u's output crosses a's boundary, as clauses."""
    x, t = v.x, v.t
    for u, hs in v.transfer:
        for a in range(len(inst.fpgas)):
            xu, xs = v.X(u, a), [x[h, a] for h in hs if (h, a) in x]
            if xu is None and not xs:
                continue
            t[u, a] = model.NewBoolVar(f"t[{u},fpga{a}]")
            if xu is not None and len(xs) < len(hs):
                model.AddImplication(xu, t[u, a])
            for xh in xs:  # t >= x_u - x_h and t >= x_h - x_u as clauses (x_u absent: 0)
                if xu is not None:
                    model.AddBoolOr([t[u, a], xu.Not(), xh])
                model.AddBoolOr([t[u, a], xh.Not()] + ([xu] if xu is not None else []))


def _tolerance_ms(inst: MaxloadInstance, v: CpSatVariables) -> float:
    """The stated tolerance (see :func:`cpsat_model`), exact in fractions, rounded up."""
    unit, P_cpu, P_acc, Q = v.unit, v.units["cpu"], v.units["acc"], v.units["cost"]

    def err(d: float, q: int) -> Fraction:
        return Fraction(q) * Fraction(unit) - Fraction(d)

    tol = sum((max(err(n.cpu_ms, P_cpu[n.id]), err(n.fpga_ms, P_acc[n.id])) for n in inst.nodes), Fraction(0))
    tol += sum((err(inst.out_cost[u], Q[u]) for (u, _) in v.t), Fraction(0))
    return math.nextafter(float(tol), math.inf) if tol > 0 else 0.0


def time_rows(inst: MaxloadInstance, model: Any, v: CpSatVariables, start: MaxloadPlacement | None) -> None:
    """The horizon ``H`` (the start's rounded latency, else the rounded sum bound) and rows
    3-5 and 9, the times in units with enforced rows in place of big-M: a CPU node after every
    predecessor, a call after every input (``s[a] >= f[u]`` only if u feeds a and is not
    on a), every node of a call ready at its end; ``L`` after every sink; the objective."""
    gr, x, k = v.gr, v.x, len(inst.fpgas)
    P_cpu, P_acc, Q = v.units["cpu"], v.units["acc"], v.units["cost"]
    A = range(k)
    low = longest_min_path(inst, gr, P_cpu, P_acc, zero=0)
    if start is not None:  # the start placement's rounded latency
        H = max(unit_schedule(inst, gr, canonical_where(inst, gr, start), v.units)[0].values(), default=0)
    else:  # the rounded sum bound: every node once, each transfer once per accelerator
        H = sum(max(P_cpu[w], P_acc[w]) for w in inst.node_by_id) + \
            sum(Q[u] * min(k, len(inst.successors[u]) + 1) for u in inst.node_by_id)
    v.H = H
    f = v.f = {w: model.NewIntVar(min(low[w], H), H, f"f[{w}]") for w in inst.topo_order}
    s = v.s = {a: model.NewIntVar(0, H, f"s[fpga{a}]") for a in A}
    e = v.e = {a: model.NewIntVar(0, H, f"e[fpga{a}]") for a in A}
    L = v.L = model.NewIntVar(min(max(low.values(), default=0), H), H, "L")
    v.edges = sorted({(ed.source, ed.target) for ed in inst.edges})
    for u, w in v.edges:
        model.Add(f[w] >= f[u])
        if v.C(w) is not None and P_cpu[w] > 0:
            model.Add(f[w] >= f[u] + P_cpu[w]).OnlyEnforceIf(v.C(w))
    for w in inst.topo_order:
        if not inst.predecessors[w] and v.C(w) is not None and P_cpu[w] > 0:
            model.Add(f[w] >= P_cpu[w]).OnlyEnforceIf(v.C(w))
    entering = entering_pairs(inst, gr)
    for a in A:
        for u, h in entering:
            if (h, a) in x:
                model.Add(s[a] >= f[u]).OnlyEnforceIf([x[h, a]] + ([v.X(u, a).Not()] if v.X(u, a) is not None else []))
        call = sum(sum(P_acc[w] for w in gr.members[g]) * x[g, a] for g in range(len(gr.members)) if (g, a) in x)
        call += sum(Q[u] * v.t[u, a] for u, _ in v.transfer if (u, a) in v.t)
        model.Add(e[a] >= s[a] + call)
        for w in inst.topo_order:
            if v.X(w, a) is not None:
                model.Add(f[w] >= e[a]).OnlyEnforceIf(v.X(w, a))
    for w in inst.topo_order:
        if not inst.successors[w]:
            model.Add(L >= f[w])
    model.Minimize(L)


def _forward_edges(inst: MaxloadInstance, v: CpSatVariables) -> list[tuple[int, int]]:
    fwd = inst.forward_ids
    return [(u, w) for u, w in v.edges if u in fwd and w in fwd]


def label_rows(inst: MaxloadInstance, model: Any, v: CpSatVariables) -> None:
    """Row 7, rule 5 on the CPU cores, rule "labels", as in the latency program."""
    fwd = inst.forward_ids
    y = v.y = {w: model.NewIntVar(0, len(inst.cpus), f"y[{w}]") for w in inst.topo_order if w in fwd}
    for u, w in _forward_edges(inst, v):
        model.Add(y[w] >= y[u])
        model.Add(y[w] >= y[u] + 1).OnlyEnforceIf([v.C(w), v.C(u).Not()])
    for w, yw in y.items():
        model.Add(yw >= 1).OnlyEnforceIf(v.C(w))


def core_rows(inst: MaxloadInstance, model: Any, v: CpSatVariables, symmetry: bool) -> None:
    """Row 7, rule 5 on the CPU cores, rule "cores", as in the latency program; with ``symmetry``
    the "first" ordering of the cores."""
    gr = v.gr
    fwd_edges = _forward_edges(inst, v)
    cpu_groups = forward_groups(inst, gr)
    cores = range(min(len(inst.cpus), len(cpu_groups)))
    kappa = v.kappa = {(g, j): model.NewBoolVar(f"kappa[{g},cpu{j}]") for g in cpu_groups for j in cores}
    for g in cpu_groups:
        model.Add(sum(kappa[g, j] for j in cores) == v.c[g])
    on_edge = sorted({w for edge in fwd_edges for w in edge})
    zc = v.zc
    for j in cores:
        for w in on_edge:
            zc[w, j] = model.NewBoolVar(f"z[{w},cpu{j}]")
            model.AddImplication(kappa[gr.of[w], j], zc[w, j])
        for u, w in fwd_edges:
            model.AddImplication(zc[w, j], zc[u, j])
            if gr.of[u] != gr.of[w]:
                model.AddBoolOr([zc[w, j].Not(), kappa[gr.of[u], j].Not(), kappa[gr.of[w], j]])
    if symmetry:
        v.wc = first_symmetry_clauses(model, kappa, len(gr.members), len(cores), "cpu")
