"""Exact solver of the peer "dnn-partitioning" throughput model (max-load, contiguous
variant): place every node of a DNN graph on one of ``k`` identical accelerators or ``l``
identical CPU cores so that the largest device load (ms per sample) is smallest.

The program is written once, as a solver-neutral :class:`~splitopt.solvers.linear.
LinearProgram` (:func:`build_max_load_program`), and emitted to

* CP-SAT (OR-Tools, ``solver="cpsat"``, the primary backend): times are scaled to
  integers (unit ``U / 2**40`` ms, ``U`` the largest possible load); the rounding error
  of each load row is summed exactly and the largest sum, ``tol_ms``, is subtracted from
  the reported bound, so the reported gap includes it. Memory rows stay exact (bytes
  are integers in every shipped file; otherwise they are multiplied by the power of two
  that makes them exact). CP-SAT's presolve is OFF by default: OR-Tools 9.15 can
  certify a wrong optimum when a row's summed coefficients exceed 2**31 (or-tools
  #5293), which the memory and time rows here do;
* PuLP with HiGHS (``"milp-highs"``) or CBC (``"milp-cbc"``), in ms and bytes / M.

Model, symmetry breaking and scaling: ``formulations/dnnp_maxload.md``. Every returned
placement is re-checked with :func:`splitopt.dnnp.check_placement` and re-evaluated
with :func:`splitopt.dnnp.max_load`; the reported objective is the evaluator's, and a
solver whose own value disagrees beyond the stated tolerance raises SolverFailure.
Tests: ``tests/test_dnnp_solve.py``. Units: ms for times, bytes for sizes.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitopt.dnnp import DnnpInstance, DnnpPlacement, check_placement, max_load
from splitopt.errors import NotApplicable, SolverFailure, UnknownSolver
from splitopt.result import Status
from splitopt.solvers.linear import LinearProgram

__all__ = [
    "SOLVERS",
    "SYMMETRY",
    "DnnpSolveResult",
    "Groups",
    "groups_of",
    "build_max_load_program",
    "solve_max_load",
]

SOLVERS = ("cpsat", "milp-highs", "milp-cbc")
#: symmetry breaking of identical devices: "first" (device i+1's first group comes after
#: device i's first group, in a fixed group order), "load" (loads non-increasing), "none"
SYMMETRY = ("first", "load", "none")
#: CP-SAT time scale: the largest possible load is 2**40 units
TIME_SCALE = 2**40
#: a CP-SAT row's largest activity must stay below this (64-bit integers)
MAX_ACTIVITY = 2**62
#: relative tolerance of the MILP backends' own objective value against the evaluator
#: (their feasibility / integrality tolerances are 1e-6 .. 1e-7)
MILP_REL_TOL = 1e-6


@dataclass
class DnnpSolveResult:
    """One solve of the max-load model.

    ``objective_ms``: the placement's max-load (ms per sample) by the evaluator
    :func:`~splitopt.dnnp.max_load`; ``bound_ms``: a proven lower bound on the optimum
    (ms; for CP-SAT the scaling tolerance is already subtracted); ``gap`` =
    (objective - bound) / objective, None without a bound. ``build_s`` / ``solve_s``:
    seconds to build the program / run the solver. ``extra``: sizes of the program, the
    CP-SAT time unit and tolerance (ms), the solver's own objective (ms)."""

    status: Status
    placement: DnnpPlacement | None
    objective_ms: float | None
    bound_ms: float | None
    gap: float | None
    build_s: float
    solve_s: float
    message: str = ""
    solver: str = ""
    instance: str = ""
    loads_ms: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "solver": self.solver,
            "status": self.status.value,
            "objective_ms": self.objective_ms,
            "bound_ms": self.bound_ms,
            "gap": self.gap,
            "build_s": self.build_s,
            "solve_s": self.solve_s,
            "message": self.message,
            "loads_ms": self.loads_ms,
            "placement": None if self.placement is None else self.placement.to_expert_json(),
            "extra": self.extra,
        }


# ----- colour groups -----------------------------------------------------------------
@dataclass(frozen=True)
class Groups:
    """The nodes that must share a device: one group per colour class, one per node
    without a class. ``members[g]`` are node ids; groups are numbered by the topological
    position of their first node (the order the "first" symmetry breaking uses)."""

    members: tuple[tuple[int, ...], ...]
    of: dict[int, int]  # node id -> group

    def fpga_ok(self, inst: DnnpInstance, g: int) -> bool:
        return all(inst.node_by_id[v].on_fpga_ok for v in self.members[g])

    def size(self, inst: DnnpInstance, g: int) -> float:
        return math.fsum(inst.node_by_id[v].size_bytes for v in self.members[g])

    def fpga_ms(self, inst: DnnpInstance, g: int) -> float:
        return math.fsum(inst.node_by_id[v].fpga_ms for v in self.members[g])

    def cpu_ms(self, inst: DnnpInstance, g: int) -> float:
        return math.fsum(inst.node_by_id[v].cpu_ms for v in self.members[g])


def groups_of(inst: DnnpInstance) -> Groups:
    position = {v: i for i, v in enumerate(inst.topo_order)}
    key: dict[int, tuple[str, int]] = {}
    for n in inst.nodes:
        key[n.id] = ("c", n.color_class) if n.color_class is not None else ("n", n.id)
    buckets: dict[tuple[str, int], list[int]] = {}
    for v in inst.topo_order:
        buckets.setdefault(key[v], []).append(v)
    ordered = sorted(buckets.values(), key=lambda ids: position[ids[0]])
    members = tuple(tuple(ids) for ids in ordered)
    return Groups(members, {v: g for g, ids in enumerate(members) for v in ids})


# ----- the program -------------------------------------------------------------------
def _placement_bounds(inst: DnnpInstance, gr: Groups) -> tuple[float, float | None]:
    """(lower bound, upper bound or None) on the optimum, ms. Lower: every group costs at
    least its cheapest allowed compute time on the device it is on, so the optimum is at
    least the largest of those and at least their sum over k + l devices. Upper: all
    nodes on cpu0 is a valid placement when l >= 1."""
    cheapest = []
    for g in range(len(gr.members)):
        options = []
        if inst.max_cpus >= 1:
            options.append(gr.cpu_ms(inst, g))
        if inst.max_fpgas >= 1 and gr.fpga_ok(inst, g) and gr.size(inst, g) <= inst.max_size_per_fpga:
            options.append(gr.fpga_ms(inst, g))
        cheapest.append(min(options) if options else 0.0)
    devices = inst.max_fpgas + inst.max_cpus
    lower = max(max(cheapest, default=0.0), math.fsum(cheapest) / devices if devices else 0.0)
    upper = math.fsum(n.cpu_ms for n in inst.nodes) if inst.max_cpus >= 1 else None
    return lower, upper


def build_max_load_program(inst: DnnpInstance, symmetry: str = "first", cuts: bool = True) -> LinearProgram:
    """The max-load program of ``formulations/dnnp_maxload.md`` (times in ms, memory in
    bytes). Row kinds: ``"logic"`` (0/1 logic, coefficients +-1), ``"time"`` (ms;
    ``lp.meta["T"]`` is the objective variable), ``"memory"`` (bytes).

    ``symmetry``: one of :data:`SYMMETRY`. ``cuts``: the lower and upper bounds of
    :func:`_placement_bounds` on the objective variable."""
    if symmetry not in SYMMETRY:
        raise NotApplicable(f"symmetry '{symmetry}': choose one of {', '.join(SYMMETRY)}")
    lp = LinearProgram()
    gr = groups_of(inst)
    fpgas, cpus = list(inst.fpgas), list(inst.cpus)
    devices = fpgas + cpus
    n_groups = len(gr.members)

    # x[g, d]: group g on device d (absent when not allowed)
    x: dict[tuple[int, str], int] = {}
    for g in range(n_groups):
        allowed = list(cpus)
        if gr.fpga_ok(inst, g) and gr.size(inst, g) <= inst.max_size_per_fpga:
            allowed = fpgas + allowed
        for d in allowed:
            x[g, d] = lp.var(f"x[{g},{d}]")
        lp.add({x[g, d]: 1.0 for d in allowed}, "==", 1.0, name=f"assign[{g}]")

    def xv(v: int, d: str) -> int | None:
        return x.get((gr.of[v], d))

    # contiguity of the forward nodes of every device (CPUs included): z[v, d] = 1 on a
    # predecessor-closed set containing d's forward nodes that no edge leaves d into
    fwd = inst.forward_ids
    fwd_edges = sorted({(e.source, e.target) for e in inst.edges if e.source in fwd and e.target in fwd})
    on_edge = sorted({v for e in fwd_edges for v in e})
    for d in devices:
        z = {v: lp.var(f"z[{v},{d}]", binary=False) for v in on_edge}
        for v in on_edge:
            if xv(v, d) is not None:
                lp.add({z[v]: 1.0, xv(v, d): -1.0}, ">=", 0.0, name=f"zx[{v},{d}]")
        for u, v in fwd_edges:
            lp.add({z[u]: 1.0, z[v]: -1.0}, ">=", 0.0, name=f"zz[{u},{v},{d}]")
            xu_, xv_ = xv(u, d), xv(v, d)
            if xu_ is not None and gr.of[u] != gr.of[v]:
                coeffs = {z[v]: 1.0, xu_: 1.0}
                if xv_ is not None:
                    coeffs[xv_] = -1.0
                lp.add(coeffs, "<=", 1.0, name=f"zcut[{u},{v},{d}]")

    # transfers: t[u, a] = 1 when u's output crosses the boundary of accelerator a
    t: dict[tuple[int, str], int] = {}
    for u in inst.topo_order:
        cost = inst.out_cost[u]
        succ_groups = sorted({gr.of[v] for v in inst.successors[u]} - {gr.of[u]})
        if cost <= 0 or not succ_groups:
            continue
        for a in fpgas:
            xu_ = x.get((gr.of[u], a))
            xs = [x[h, a] for h in succ_groups if (h, a) in x]
            if xu_ is None and not xs:
                continue
            t[u, a] = lp.var(f"t[{u},{a}]", binary=False)
            if xu_ is not None and len(xs) < len(succ_groups):
                lp.add({t[u, a]: 1.0, xu_: -1.0}, ">=", 0.0, name=f"out[{u},{a}]")  # a successor cannot be on a
            for xh in xs:
                coeffs = {t[u, a]: 1.0, xh: 1.0}
                if xu_ is not None:
                    coeffs[xu_] = -1.0
                lp.add(coeffs, ">=", 0.0, name=f"out[{u},{a}]")
                coeffs = {t[u, a]: 1.0, xh: -1.0}
                if xu_ is not None:
                    coeffs[xu_] = 1.0
                lp.add(coeffs, ">=", 0.0, name=f"in[{u},{a}]")

    # loads and the objective: T >= load(d) for every device
    lower, upper = _placement_bounds(inst, gr) if cuts else (0.0, None)
    total = max(
        math.fsum(gr.fpga_ms(inst, g) for g in range(n_groups)) + math.fsum(inst.out_cost.values()),
        math.fsum(gr.cpu_ms(inst, g) for g in range(n_groups)),
    )
    T = lp.var("T", binary=False, lb=lower, ub=upper if upper is not None else total, implied_integer=False)
    loads: dict[str, dict[int, float]] = {}
    for d in devices:
        coeffs: dict[int, float] = {}
        for g in range(n_groups):
            if (g, d) in x:
                coeffs[x[g, d]] = gr.fpga_ms(inst, g) if d in fpgas else gr.cpu_ms(inst, g)
        if d in fpgas:
            for (u, a), i in t.items():
                if a == d:
                    coeffs[i] = inst.out_cost[u]
        loads[d] = coeffs
        lp.add({**coeffs, T: -1.0}, "<=", 0.0, kind="time", name=f"load[{d}]")
    lp.add_objective(T, 1.0)

    # memory of every accelerator (dropped when all groups together fit)
    fits_all = math.fsum(gr.size(inst, g) for g in range(n_groups)) <= inst.max_size_per_fpga
    if not fits_all:
        for a in fpgas:
            coeffs = {x[g, a]: gr.size(inst, g) for g in range(n_groups) if (g, a) in x and gr.size(inst, g) > 0}
            if coeffs:
                lp.add(coeffs, "<=", inst.max_size_per_fpga, kind="memory", name=f"memory[{a}]")

    # symmetry of identical devices (the accelerators among themselves, the cores too)
    for kind in (fpgas, cpus):
        if len(kind) < 2 or symmetry == "none":
            continue
        if symmetry == "load":
            for a, b in zip(kind, kind[1:]):
                diff = dict(loads[a])
                for i, c in loads[b].items():
                    diff[i] = diff.get(i, 0.0) - c
                lp.add(diff, ">=", 0.0, kind="time", name=f"order[{a},{b}]")
            continue
        # "first": w[g, i] = 1 allowed only if some group <= g is on device i; a group may
        # go on device i >= 1 only if an earlier group is on device i - 1
        w_prev: dict[int, int] = {}
        for g in range(n_groups):
            for i, d in enumerate(kind):
                if i >= 1 and (g, d) in x:
                    if i - 1 in w_prev:
                        lp.add({x[g, d]: 1.0, w_prev[i - 1]: -1.0}, "<=", 0.0, name=f"first[{g},{d}]")
                    else:
                        lp.variables[x[g, d]].ub = 0.0  # no earlier group at all
            if g == n_groups - 1:
                break
            w_now: dict[int, int] = {}
            for i, d in enumerate(kind[:-1]):
                w_now[i] = lp.var(f"w[{g},{d}]", binary=False)
                coeffs = {w_now[i]: 1.0}
                if i in w_prev:
                    coeffs[w_prev[i]] = -1.0
                if (g, d) in x:
                    coeffs[x[g, d]] = -1.0
                lp.add(coeffs, "<=", 0.0, name=f"w[{g},{d}]")
            w_prev = w_now

    lp.meta.update(x=x, t=t, T=T, groups=gr, devices=devices, fpgas=fpgas, cpus=cpus, lower=lower, upper=upper)
    return lp


def _decode(inst: DnnpInstance, lp: LinearProgram, values: list[float]) -> DnnpPlacement:
    gr: Groups = lp.meta["groups"]
    chosen: dict[int, str] = {}
    for (g, d), i in lp.meta["x"].items():
        if g not in chosen or values[i] > values[lp.meta["x"][g, chosen[g]]]:
            chosen[g] = d
    return DnnpPlacement({v: chosen[gr.of[v]] for v in inst.node_by_id})


# ----- infeasibility -----------------------------------------------------------------
def _infeasibility(inst: DnnpInstance, gr: Groups) -> str | None:
    """The binding limit when no placement can exist for a simple reason, else None.
    With a CPU every placement rule is met by all nodes on cpu0."""
    if not inst.nodes or inst.max_cpus >= 1:
        return None
    M = inst.max_size_per_fpga
    if inst.max_fpgas == 0:
        return "no device: maxFPGAs=0 and maxCPUs=0"
    for g, ids in enumerate(gr.members):
        what = f"node {ids[0]}" if len(ids) == 1 else f"colour class of node {ids[0]} ({len(ids)} nodes)"
        if not gr.fpga_ok(inst, g):
            bad = next(v for v in ids if not inst.node_by_id[v].on_fpga_ok)
            return f"supportedOnFpga: node {bad} cannot run on an accelerator and maxCPUs=0"
        if gr.size(inst, g) > M:
            return f"maxSizePerFPGA: {what} needs {gr.size(inst, g):.6g} bytes > {M:.6g} and maxCPUs=0"
    total = math.fsum(n.size_bytes for n in inst.nodes)
    if total > inst.max_fpgas * M:
        return (f"maxSizePerFPGA: all nodes need {total:.6g} bytes > maxFPGAs x maxSizePerFPGA = "
                f"{inst.max_fpgas} x {M:.6g} and maxCPUs=0")
    return None


# ----- CP-SAT ------------------------------------------------------------------------
def _exact_scale(values: list[float]) -> int:
    """The smallest power of two making every value an integer (floats are dyadic)."""
    for s in range(0, 64):
        if all(float(v * 2**s).is_integer() for v in values):
            return 2**s
    raise NotApplicable("cpsat: sizes cannot be scaled to exact integers; use milp-highs or milp-cbc")


def _to_cpsat(lp: LinearProgram):
    """Emit to CP-SAT; returns (model, variables, unit_ms, tol_ms). Time rows are scaled
    by 1/unit and rounded; tol_ms is the largest sum of absolute rounding errors over the
    load rows, so for every placement |unit * scaled load - load| <= tol_ms."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    T = lp.meta["T"]
    upper_ms = lp.variables[T].ub
    time_rows = [r for r in lp.rows if r.kind == "time"]
    U = max([math.fsum(abs(c) for i, c in r.coeffs.items() if i != T) for r in time_rows] + [upper_ms, 1e-12])
    unit = U / TIME_SCALE
    tol = 0.0
    for r in time_rows:
        if r.name.startswith("load"):
            tol = max(tol, math.fsum(abs(c - unit * round(c / unit)) for i, c in r.coeffs.items() if i != T))
    xs: list[Any] = []
    for i, v in enumerate(lp.variables):
        if i == T:
            lo = max(0, math.floor((v.lb - tol) / unit) - 1)
            t_hi = math.ceil((v.ub + tol) / unit) + 1
            xs.append(model.NewIntVar(lo, t_hi, "T"))
        else:
            xs.append(model.NewBoolVar(v.name))  # x, z, t, w: integral at every integral point
            if v.ub <= 0:
                model.Add(xs[-1] == 0)
    for r in lp.rows:
        if r.kind == "logic":
            coeffs = {i: int(c) for i, c in r.coeffs.items()}
            rhs = int(r.rhs)
            if any(c != r.coeffs[i] or abs(c) != 1 for i, c in coeffs.items()) or rhs != r.rhs:
                raise SolverFailure(f"cpsat: logic row '{r.name}' is not a +-1 row")
            if r.sense == "==" and rhs == 1 and all(c == 1 for c in coeffs.values()):
                model.AddExactlyOne(xs[i] for i in coeffs)
                continue
            if r.sense in ("<=", ">="):
                sign = 1 if r.sense == ">=" else -1  # as sum(sign * c * v) >= sign * rhs
                lits = [xs[i] if sign * c > 0 else xs[i].Not() for i, c in coeffs.items()]
                need = sign * rhs + sum(1 for c in coeffs.values() if sign * c < 0)
                if need == 1:
                    model.AddBoolOr(lits)  # at least one literal true: a clause
                    continue
            expr = sum(c * xs[i] for i, c in coeffs.items())
        elif r.kind == "time":
            coeffs = {i: (int(c) if i == T else int(round(c / unit))) for i, c in r.coeffs.items()}
            if r.rhs != 0:
                raise SolverFailure(f"cpsat: time row '{r.name}' has a non-zero right-hand side")
            rhs = 0
            expr = sum(c * xs[i] for i, c in coeffs.items() if c)
        elif r.kind == "memory":
            s = _exact_scale(list(r.coeffs.values()) + [r.rhs])
            coeffs = {i: int(c * s) for i, c in r.coeffs.items()}
            rhs = int(r.rhs * s)
            common = math.gcd(*coeffs.values(), rhs) if rhs else math.gcd(*coeffs.values())
            coeffs = {i: c // common for i, c in coeffs.items()}
            rhs //= common
            expr = sum(c * xs[i] for i, c in coeffs.items())
        else:
            raise SolverFailure(f"cpsat: unknown row kind '{r.kind}'")
        activity = sum(abs(c) * (t_hi if i == T else 1) for i, c in coeffs.items())
        if activity >= MAX_ACTIVITY:
            raise NotApplicable(f"cpsat: row '{r.name}' could reach {activity:.3g}, beyond 64-bit integers")
        if r.sense == "<=":
            model.Add(expr <= rhs)
        elif r.sense == ">=":
            model.Add(expr >= rhs)
        else:
            model.Add(expr == rhs)
    model.Minimize(xs[T])
    return model, xs, unit, tol


def _solve_cpsat(model, xs, unit, tol, time_limit, threads, seed, verbose, presolve):
    from ortools.sat.python import cp_model

    from splitopt.solvers.cpsat import cpsat_solver

    solver = cpsat_solver(time_limit, threads, seed, verbose, presolve=presolve)  # or-tools #5293: module docstring
    t0 = time.perf_counter()
    code = solver.Solve(model)
    solve_s = time.perf_counter() - t0
    name = solver.StatusName(code)
    extra = {"time_unit_ms": unit, "tolerance_ms": tol, "presolve": bool(presolve)}
    if code == cp_model.INFEASIBLE:
        return Status.INFEASIBLE, None, None, None, f"CP-SAT: {name}", solve_s, extra
    if code == cp_model.MODEL_INVALID:
        raise SolverFailure(f"CP-SAT: model invalid: {model.Validate()}")
    bound = max(0.0, solver.BestObjectiveBound() * unit - tol)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Status.NO_SOLUTION_FOUND, None, None, bound, f"CP-SAT: {name}", solve_s, extra
    values = [float(solver.Value(v)) for v in xs]
    status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
    return status, values, solver.ObjectiveValue() * unit, bound, f"CP-SAT: {name}", solve_s, extra


# ----- MILP through PuLP -------------------------------------------------------------
def _to_pulp(lp: LinearProgram):
    """Emit to PuLP: ms and 0/1 as they are, memory rows divided by their limit."""
    import pulp

    prob = pulp.LpProblem("dnnp_max_load", pulp.LpMinimize)
    xs = []
    for i, v in enumerate(lp.variables):
        cat = pulp.LpBinary if v.binary else pulp.LpContinuous
        name = f"v{i}_" + re.sub(r"[^A-Za-z0-9_]", "_", v.name)
        if hasattr(prob, "add_variable"):  # PuLP >= 3.3 attaches variables to the model
            xs.append(prob.add_variable(name, lowBound=v.lb, upBound=v.ub, cat=cat))
        else:
            xs.append(pulp.LpVariable(name, lowBound=v.lb, upBound=v.ub, cat=cat))
    prob += pulp.lpSum(c * xs[i] for i, c in lp.objective.items()), "max_load_ms"
    for j, r in enumerate(lp.rows):
        scale = 1.0 / r.rhs if r.kind == "memory" and r.rhs > 0 else 1.0
        expr = pulp.lpSum(c * scale * xs[i] for i, c in r.coeffs.items())
        rhs = r.rhs * scale
        cons = expr <= rhs if r.sense == "<=" else (expr >= rhs if r.sense == ">=" else expr == rhs)
        prob += cons, f"r{j}"
    return prob, xs


def _solve_cbc(prob, time_limit, threads, verbose):
    """CBC 2.10.3 via PuLP, no MIP start (a start plus a time limit crashes it). A run
    that reaches its time limit is never OPTIMAL, whatever CBC prints (it may print
    "Optimal" when stopped): the status comes from ``prob.sol_status``, the log's
    "Result -" line and the elapsed time."""
    import pulp

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PuLP 3.3: PULP_CBC_CMD leaves in 4.0
        log = os.path.join(tmp, "cbc.log")
        cmd = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, threads=threads, logPath=log, gapRel=0.0)
        t0 = time.perf_counter()
        try:
            prob.solve(cmd)
        except pulp.PulpSolverError as e:
            raise SolverFailure(f"CBC failed: {e}") from e
        elapsed = time.perf_counter() - t0
        text = Path(log).read_text() if os.path.exists(log) else ""
    if verbose:
        sys.stderr.write(text)
    m = re.search(r"Result - (.+)", text)
    result = m.group(1).strip() if m else ""
    m = re.search(r"Lower bound:\s+(\S+)", text)
    bound = float(m.group(1)) if m else None
    m = re.search(r"Objective value:\s+(\S+)", text)
    value = float(m.group(1)) if m else None
    limited = time_limit is not None and elapsed >= 0.98 * time_limit
    stopped = "time limit" in result.lower() or "stopped" in result.lower() or limited
    if "infeasible" in result.lower() or prob.sol_status == pulp.LpSolutionInfeasible:
        if limited:
            return Status.NO_SOLUTION_FOUND, None, None, "CBC: stopped by the time limit", elapsed
        return Status.INFEASIBLE, None, None, "CBC: infeasible", elapsed
    if prob.sol_status == pulp.LpSolutionOptimal and not stopped:
        return Status.OPTIMAL, value, value, "CBC: optimal", elapsed
    if prob.sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
        return Status.FEASIBLE, value, bound, f"CBC: {result or 'stopped'} after {elapsed:.1f} s", elapsed
    return Status.NO_SOLUTION_FOUND, None, bound, f"CBC: no plan found ({result or pulp.LpStatus[prob.status]})", elapsed


def _solve_highs(prob, time_limit, threads, verbose):
    """HiGHS via PuLP, restarts off. HiGHS fixes its thread count at the first solve in a
    process: a later solve with a different ``threads`` comes back "Not Solved"."""
    import pulp

    # mip_allow_restart=False: HiGHS 1.14 claimed a wrong optimum after a restart in this
    # repo (splitopt/solvers/milp.py)
    cmd = pulp.HiGHS(msg=verbose, timeLimit=time_limit, threads=threads, gapRel=0.0, mip_allow_restart=False)
    if not cmd.available():
        raise SolverFailure("HiGHS is not available to PuLP (see ../shared/NOTES.md on highspy and ortools)")
    t0 = time.perf_counter()
    try:
        prob.solve(cmd)
    except pulp.PulpSolverError as e:
        raise SolverFailure(f"HiGHS failed: {e}") from e
    elapsed = time.perf_counter() - t0
    import highspy

    model = prob.solverModel
    ms = model.getModelStatus()
    info = model.getInfo()
    value = info.objective_function_value
    bound = info.mip_dual_bound
    bound = bound if abs(bound) < 1e30 else None
    text = model.modelStatusToString(ms)
    if ms == highspy.HighsModelStatus.kInfeasible:
        return Status.INFEASIBLE, None, None, "HiGHS: infeasible", elapsed
    if ms == highspy.HighsModelStatus.kOptimal:
        return Status.OPTIMAL, value, value, "HiGHS: optimal", elapsed
    if prob.sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
        return Status.FEASIBLE, value, bound, f"HiGHS: {text} after {elapsed:.1f} s", elapsed
    hint = " (HiGHS keeps the thread count of its first solve in a process)" if ms == highspy.HighsModelStatus.kNotset else ""
    return Status.NO_SOLUTION_FOUND, None, bound, f"HiGHS: no plan found ({text}){hint}", elapsed


# ----- the entry point ---------------------------------------------------------------
def solve_max_load(
    inst: DnnpInstance,
    solver: str = "cpsat",
    time_limit: float | None = None,
    threads: int = 2,
    seed: int = 0,
    verbose: bool = False,
    *,
    symmetry: str = "first",
    cuts: bool = True,
    presolve: bool = False,
) -> DnnpSolveResult:
    """Minimise the max-load (ms per sample) of ``inst`` over contiguous placements.

    ``solver``: "cpsat", "milp-highs" or "milp-cbc"; ``time_limit`` in seconds (None: no
    limit); on reaching it the best placement is returned as FEASIBLE with its gap (if the
    solver has none yet and a CPU exists: all nodes on cpu0, which meets every rule).
    ``symmetry``/``cuts``: see :func:`build_max_load_program`; ``presolve``: CP-SAT's
    presolve (off by default, or-tools #5293). INFEASIBLE results name the binding limit.
    Raises SolverFailure when a placement breaks a rule or the solver's value disagrees
    with :func:`~splitopt.dnnp.max_load` beyond the stated tolerance."""
    if solver not in SOLVERS:
        raise UnknownSolver(f"unknown solver '{solver}' for dnnp-solve (available: {', '.join(SOLVERS)})")
    t0 = time.perf_counter()
    gr = groups_of(inst)
    base = dict(solver=solver, instance=inst.name)
    reason = _infeasibility(inst, gr)
    if reason is not None:
        return DnnpSolveResult(Status.INFEASIBLE, None, None, None, None, time.perf_counter() - t0, 0.0,
                               message=f"infeasible: {reason}", **base)
    if not inst.nodes:
        empty = DnnpPlacement({})
        return DnnpSolveResult(Status.OPTIMAL, empty, 0.0, 0.0, 0.0, time.perf_counter() - t0, 0.0,
                               message="empty graph", loads_ms=max_load(inst, empty)[1], **base)
    lp = build_max_load_program(inst, symmetry=symmetry, cuts=cuts)
    extra: dict[str, Any] = {"variables": len(lp.variables), "rows": len(lp.rows), "groups": len(gr.members),
                             "symmetry": symmetry, "cuts": cuts}
    if solver == "cpsat":
        model, cp_vars, unit, tol = _to_cpsat(lp)
        build_s = time.perf_counter() - t0
        status, values, solver_obj, bound, message, solve_s, more = _solve_cpsat(
            model, cp_vars, unit, tol, time_limit, threads, seed, verbose, presolve)
        extra.update(more)
    else:
        prob, xs = _to_pulp(lp)
        build_s = time.perf_counter() - t0
        run = _solve_highs if solver == "milp-highs" else _solve_cbc
        status, solver_obj, bound, message, solve_s = run(prob, time_limit, threads, verbose)
        values = None
        if status.has_plan:
            values = [v.value() if v.value() is not None else 0.0 for v in xs]
            solver_obj = values[lp.meta["T"]]  # the solver's own max-load, ms
        tol = MILP_REL_TOL * max(1.0, abs(solver_obj or 0.0), lp.variables[lp.meta["T"]].ub)
        extra["tolerance_ms"] = tol
    extra["solver_objective_ms"] = solver_obj
    if status is Status.INFEASIBLE:
        # with a CPU all nodes on cpu0 is a placement: only accelerator-only instances get here
        if inst.max_cpus >= 1:
            raise SolverFailure(f"{solver} claims no placement exists, but all nodes on cpu0 is one ({inst.name})")
        return DnnpSolveResult(
            Status.INFEASIBLE, None, None, None, None, build_s, solve_s,
            message=(f"infeasible: maxSizePerFPGA={inst.max_size_per_fpga:.6g} bytes on maxFPGAs="
                     f"{inst.max_fpgas} accelerators (maxCPUs=0): no contiguous, colour-consistent placement "
                     f"fits the accelerator memory ({message})"),
            extra=extra, **base)
    if not status.has_plan and inst.max_cpus >= 1:
        # stopped before any placement: all nodes on cpu0 meets every rule; return it with
        # the solver's bound (the existing backends return their start plan the same way)
        placement = DnnpPlacement({v: "cpu0" for v in inst.node_by_id})
        objective, loads = max_load(inst, placement)
        bound = None if bound is None else min(bound, objective)
        gap = None if bound is None else ((objective - bound) / objective if objective > 0 else 0.0)
        return DnnpSolveResult(Status.FEASIBLE, placement, objective, bound, gap, build_s, solve_s,
                               message=f"{message}; the solver found no placement in time: all nodes on cpu0",
                               loads_ms=loads, extra=extra, **base)
    if not status.has_plan:
        return DnnpSolveResult(status, None, None, bound, None, build_s, solve_s, message=message, extra=extra, **base)

    placement = _decode(inst, lp, values)
    violations = check_placement(inst, placement)
    if violations:
        raise SolverFailure(f"{solver} returned a placement that breaks {len(violations)} rule(s): {violations[0]}")
    objective, loads = max_load(inst, placement)
    slack = tol + 1e-9 * max(1.0, objective)
    if objective > solver_obj + slack:
        raise SolverFailure(f"{solver}: evaluator max-load {objective!r} ms exceeds the solver's {solver_obj!r} ms "
                            f"by more than the tolerance {tol:.3g} ms")
    if status is Status.OPTIMAL and objective < solver_obj - slack:
        raise SolverFailure(f"{solver}: 'optimal' value {solver_obj!r} ms, but its placement evaluates to "
                            f"{objective!r} ms (tolerance {tol:.3g} ms)")
    if status is Status.OPTIMAL and solver != "cpsat":
        bound = min(bound if bound is not None else objective, objective)
    if bound is not None:
        bound = min(bound, objective)
    gap = None if bound is None else ((objective - bound) / objective if objective > 0 else 0.0)
    return DnnpSolveResult(status, placement, objective, bound, gap, build_s, solve_s, message=message,
                           loads_ms=loads, extra=extra, **base)
