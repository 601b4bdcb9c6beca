"""The max-load (throughput) program of the maxload family (``formulations/maxload_throughput.md``):
place every node on one of ``k`` identical accelerators or ``l`` identical CPU cores so
that the largest device load (ms per sample) is smallest, contiguous variant, written
once as a ``LinearProgram`` (times in ms, memory in bytes; row kinds ``logic``, ``time``,
``memory``). The MILP backends run it as it is; ``splitopt.families.maxload.cpsat_throughput``
emits it to CP-SAT with integer times and a stated tolerance.
"""

from __future__ import annotations

import math
from typing import Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.program import LinearProgram, Program
from splitopt.families.maxload.contiguity import contiguity_graph
from splitopt.families.maxload.data import Groups, groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement

#: symmetry breaking of identical devices: "first" (device i+1's first group comes after
#: device i's first group, in a fixed group order), "load" (loads non-increasing), "none"
SYMMETRY = ("first", "load", "none")
#: relative tolerance of the MILP backends' objective against the evaluator (their
#: feasibility / integrality tolerances are 1e-6 .. 1e-7)
MILP_REL_TOL = 1e-6


def placement_bounds(inst: MaxloadInstance, gr: Groups) -> tuple[float, float | None]:
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


def build_milp_throughput(inst: MaxloadInstance, start: MaxloadPlacement | None, *, symmetry: str = "first",
                          cuts: bool = True) -> Program:
    """The max-load program of ``formulations/maxload_throughput.md`` (times in ms, memory in
    bytes), its constraints in the formulation's order, as the MILP backends run it (no
    hint: ``start`` is not used). Row kinds: ``"logic"`` (0/1 logic, coefficients +-1),
    ``"time"`` (ms; ``lp.meta["T"]`` is the objective variable), ``"memory"`` (bytes).

    ``symmetry``: one of :data:`SYMMETRY`. ``cuts``: the lower and upper bounds of
    :func:`placement_bounds` on the objective variable (rule 6)."""
    if symmetry not in SYMMETRY:
        raise NotApplicable(f"symmetry '{symmetry}': choose one of {', '.join(SYMMETRY)}")
    lp = LinearProgram()
    gr = groups_of(inst)
    fpgas, cpus = list(inst.fpgas), list(inst.cpus)
    x = assignment_variables(inst, lp, gr)
    contiguity_rows(inst, lp, gr, x)
    t = transfer_variables(inst, lp, gr, x)
    T, loads, lower, upper = load_rows(inst, lp, gr, x, t, cuts)
    memory_rows(inst, lp, gr, x)
    for kind in (fpgas, cpus):  # the accelerators among themselves, the cores too
        if len(kind) < 2 or symmetry == "none":
            continue
        if symmetry == "load":
            load_order_rows(lp, kind, loads)
        else:
            first_symmetry_rows(lp, kind, x, len(gr.members))
    lp.meta.update(x=x, t=t, T=T, groups=gr, devices=fpgas + cpus, fpgas=fpgas, cpus=cpus, lower=lower, upper=upper)
    tol = MILP_REL_TOL * max(1.0, lp.variables[T].ub)
    return Program(kind="linear", model=lp, decode=lambda values: decode_plan(inst, lp, values),
                   tolerance_ms=tol,
                   stats={"variables": len(lp.variables), "rows": len(lp.rows), "groups": len(gr.members)})


def assignment_variables(inst: MaxloadInstance, lp: LinearProgram, gr: Groups) -> dict[tuple[int, str], int]:
    """Constraint 1: ``x[g, d]``, group g on device d (absent when not allowed), each group
    on one device."""
    fpgas, cpus = list(inst.fpgas), list(inst.cpus)
    x: dict[tuple[int, str], int] = {}
    for g in range(len(gr.members)):
        allowed = list(cpus)
        if gr.fpga_ok(inst, g) and gr.size(inst, g) <= inst.max_size_per_fpga:
            allowed = fpgas + allowed
        for d in allowed:
            x[g, d] = lp.var(f"x[{g},{d}]")
        lp.add({x[g, d]: 1.0 for d in allowed}, "==", 1.0, name=f"assign[{g}]")
    return x


def contiguity_rows(inst: MaxloadInstance, lp: LinearProgram, gr: Groups, x: dict[tuple[int, str], int]) -> None:
    """Constraint 2, contiguity of the forward nodes of every device (CPUs included):
    ``z[v, d] = 1`` on a predecessor-closed set containing d's forward nodes that no edge
    leaves d into; the forward DAG and its nodes are the contiguity graph's
    (``contiguity.py``: under "authors" with the artificial forward nodes, each on its
    host's group, and edges)."""
    cg = contiguity_graph(inst)
    host = cg.host
    fwd_edges = sorted({(u, v) for u in cg.nodes for v in cg.succ[u]})
    on_edge = sorted({v for e in fwd_edges for v in e})

    def xc(v: int, d: str) -> int | None:
        return x.get((gr.of[host[v]], d))

    for d in list(inst.fpgas) + list(inst.cpus):
        z = {v: lp.var(f"z[{v},{d}]", binary=False) for v in on_edge}
        for v in on_edge:
            xv = xc(v, d)
            if xv is not None:
                lp.add({z[v]: 1.0, xv: -1.0}, ">=", 0.0, name=f"zx[{v},{d}]")
        for u, v in fwd_edges:
            lp.add({z[u]: 1.0, z[v]: -1.0}, ">=", 0.0, name=f"zz[{u},{v},{d}]")
            xu_, xv_ = xc(u, d), xc(v, d)
            if xu_ is not None and gr.of[host[u]] != gr.of[host[v]]:
                coeffs = {z[v]: 1.0, xu_: 1.0}
                if xv_ is not None:
                    coeffs[xv_] = -1.0
                lp.add(coeffs, "<=", 1.0, name=f"zcut[{u},{v},{d}]")


def transfer_variables(inst: MaxloadInstance, lp: LinearProgram, gr: Groups,
                       x: dict[tuple[int, str], int]) -> dict[tuple[int, str], int]:
    """Constraint 3: ``t[u, a] = 1`` when u's output crosses the boundary of accelerator
    a (in or out)."""
    t: dict[tuple[int, str], int] = {}
    for u in inst.topo_order:
        cost = inst.out_cost[u]
        succ_groups = sorted({gr.of[v] for v in inst.successors[u]} - {gr.of[u]})
        if cost <= 0 or not succ_groups:
            continue
        for a in inst.fpgas:
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
    return t


def load_rows(inst: MaxloadInstance, lp: LinearProgram, gr: Groups, x: dict[tuple[int, str], int],
              t: dict[tuple[int, str], int], cuts: bool) -> tuple[int, dict[str, dict[int, float]], float, float | None]:
    """Constraints 4 (``T >= load(d)`` for every device) and 6 (the bounds on ``T``), and
    the objective; returns (``T``, each device's load as a form, lower, upper bound)."""
    fpgas = list(inst.fpgas)
    n_groups = len(gr.members)
    lower, upper = placement_bounds(inst, gr) if cuts else (0.0, None)
    total = max(
        math.fsum(gr.fpga_ms(inst, g) for g in range(n_groups)) + math.fsum(inst.out_cost.values()),
        math.fsum(gr.cpu_ms(inst, g) for g in range(n_groups)),
    )
    T = lp.var("T", binary=False, lb=lower, ub=upper if upper is not None else total, implied_integer=False)
    loads: dict[str, dict[int, float]] = {}
    for d in fpgas + list(inst.cpus):
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
    return T, loads, lower, upper


def memory_rows(inst: MaxloadInstance, lp: LinearProgram, gr: Groups, x: dict[tuple[int, str], int]) -> None:
    """Constraint 5, the memory of every accelerator (left out when all groups together
    fit)."""
    n_groups = len(gr.members)
    fits_all = math.fsum(gr.size(inst, g) for g in range(n_groups)) <= inst.max_size_per_fpga
    if not fits_all:
        for a in inst.fpgas:
            coeffs = {x[g, a]: gr.size(inst, g) for g in range(n_groups) if (g, a) in x and gr.size(inst, g) > 0}
            if coeffs:
                lp.add(coeffs, "<=", inst.max_size_per_fpga, kind="memory", name=f"memory[{a}]")


def load_order_rows(lp: LinearProgram, kind: list[str], loads: dict[str, dict[int, float]]) -> None:
    """Symmetry "load": the loads of identical devices non-increasing."""
    for a, b in zip(kind, kind[1:]):
        diff = dict(loads[a])
        for i, c in loads[b].items():
            diff[i] = diff.get(i, 0.0) - c
        lp.add(diff, ">=", 0.0, kind="time", name=f"order[{a},{b}]")


def first_symmetry_rows(lp: LinearProgram, kind: list[str], x: dict[tuple[int, str], int], n_groups: int) -> None:
    """Symmetry "first": ``w[g, i] = 1`` allowed only if some group <= g is on device i; a
    group may go on device i >= 1 only if an earlier group is on device i - 1."""
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


def decode_plan(inst: MaxloadInstance, lp: LinearProgram, values: Sequence[float]) -> MaxloadPlacement:
    """Each group on the device of its largest ``x`` (the first such in variable order)."""
    gr: Groups = lp.meta["groups"]
    chosen: dict[int, str] = {}
    for (g, d), i in lp.meta["x"].items():
        if g not in chosen or values[i] > values[lp.meta["x"][g, chosen[g]]]:
            chosen[g] = d
    return MaxloadPlacement({v: chosen[gr.of[v]] for v in inst.node_by_id})


def simple_infeasibility(inst: MaxloadInstance, gr: Groups) -> str | None:
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
