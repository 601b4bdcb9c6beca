"""CP-SAT emission of the max-load program (``formulations/maxload_throughput.md``): times are
scaled to integers (unit ``U / 2**40`` ms, ``U`` the largest possible load); the rounding
error of each load row is summed exactly and the largest sum, ``tol_ms``, is the
program's tolerance (subtracted from the reported bound, so the reported gap includes
it). Memory rows stay exact (multiplied by the power of two that makes every size an
integer). Logic rows become clauses. CP-SAT's presolve stays off: OR-Tools 9.15 can
certify a wrong optimum when a row's summed coefficients exceed 2**31 (or-tools #5293),
which the memory and time rows here do."""

from __future__ import annotations

import math
from typing import Any

from splitopt.core.errors import NotApplicable, SolverFailure
from splitopt.core.program import LinearProgram, Program
from splitopt.families.maxload.milp_throughput import build_milp_throughput, decode_plan

#: CP-SAT time scale: the largest possible load is 2**40 units
TIME_SCALE = 2**40
#: a CP-SAT row's largest activity must stay below this (64-bit integers)
MAX_ACTIVITY = 2**62


def _exact_scale(values: list[float]) -> int:
    """The smallest power of two making every value an integer (floats are dyadic)."""
    for s in range(0, 64):
        if all(float(v * 2**s).is_integer() for v in values):
            return 2**s
    raise NotApplicable("cpsat: sizes cannot be scaled to exact integers; use milp-highs or milp-cbc")


def to_cpsat(lp: LinearProgram):
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
            xs.append(model.new_int_var(lo, t_hi, "T"))
        else:
            xs.append(model.new_bool_var(v.name))  # x, z, t, w: integral at every integral point
            if v.ub <= 0:
                model.add(xs[-1] == 0)
    for r in lp.rows:
        if r.kind == "logic":
            coeffs = {i: int(c) for i, c in r.coeffs.items()}
            rhs = int(r.rhs)
            if any(c != r.coeffs[i] or abs(c) != 1 for i, c in coeffs.items()) or rhs != r.rhs:
                raise SolverFailure(f"cpsat: logic row '{r.name}' is not a +-1 row")
            if r.sense == "==" and rhs == 1 and all(c == 1 for c in coeffs.values()):
                model.add_exactly_one(xs[i] for i in coeffs)
                continue
            if r.sense in ("<=", ">="):
                sign = 1 if r.sense == ">=" else -1  # as sum(sign * c * v) >= sign * rhs
                lits = [xs[i] if sign * c > 0 else xs[i].negated() for i, c in coeffs.items()]
                need = sign * rhs + sum(1 for c in coeffs.values() if sign * c < 0)
                if need == 1:
                    model.add_bool_or(lits)  # at least one literal true: a clause
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
            model.add(expr <= rhs)
        elif r.sense == ">=":
            model.add(expr >= rhs)
        else:
            model.add(expr == rhs)
    model.minimize(xs[T])
    return model, xs, unit, tol


def build_cpsat_throughput(inst, start) -> Program:
    """The max-load program (:func:`milp_throughput.build_milp_throughput`) as a CP-SAT
    ``Program`` (``start`` is not used): objective in units of ``unit`` ms, tolerance
    ``tol`` ms, decoded to a placement; presolve off (or-tools #5293: the memory and time
    rows pass 2**31)."""
    linear = build_milp_throughput(inst, start)
    lp = linear.model
    model, xs, unit, tol = to_cpsat(lp)

    def decode(values):
        return decode_plan(inst, lp, [float(values[x.Index()]) for x in xs])

    return Program(kind="cpsat", model=model, decode=decode, unit_ms=unit, tolerance_ms=tol, presolve=False,
                   stats={**linear.stats, "time_unit_ms": unit})
