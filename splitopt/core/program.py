"""Programs as families build them and backends run them.

* :class:`LinearProgram`: a solver-neutral mixed-integer linear program (variables, rows,
  objective). A family builds one; the backends translate it (``splitopt.backends``: PuLP
  for CBC, HiGHS; an integer-scaled emission for CP-SAT). Writing each program once
  keeps the MILP and CP-SAT backends identical by construction.
* :class:`Program`: what a family hands to a backend: the model (a ``LinearProgram``, or
  a native CP-SAT model for families with interval scheduling), how solver values map
  back to a plan, the objective's unit in ms, and the stated rounding tolerance.

Rows carry a ``kind`` that tells an integer emitter how to scale them:

* ``"logic"``: small integer coefficients (0/1 logic), emitted exactly;
* ``"bits"``: coefficients and right-hand side in bits (integers for integral sizes);
* ``"error"``: real-valued quantization error; an integer emitter must scale it with a
  stated tolerance (see ``cpsat.py``);
* ``"time"``: coefficients in ms, on variables in ms (``unit="ms"``, e.g. a bottleneck
  time) and on 0/1 variables; an integer emitter scales them like the objective;
* ``"dominance"``: 0/1 logic of a reduction (e.g. ``families/edge_cloud/dominance.py``):
  it cuts off feasible plans, none better than a plan it keeps, so the optimum stays;
  the program/evaluator feasibility check (:func:`row_violations`) leaves it out.

A row marked ``optional`` is a valid inequality that only tightens the relaxation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from splitopt.core.options import check_build_deadline

#: every this many rows added, a program checks the build deadline (``core.options``), so a
#: time limit stops every linear builder, however large its instance
DEADLINE_EVERY_ROWS = 2048


@dataclass(slots=True)
class Variable:
    name: str
    binary: bool
    lb: float = 0.0
    ub: float = 1.0
    #: for a continuous variable: True if every feasible point of the program with
    #: integral binaries has it integral too (so an integer emitter may declare it integer)
    implied_integer: bool = True
    #: "ms" for a continuous time variable (an integer emitter scales it like the
    #: objective), "" otherwise
    unit: str = ""


@dataclass(slots=True)
class Row:
    coeffs: dict[int, float]
    sense: str  # "<=", ">=", "=="
    rhs: float
    kind: str = "logic"  # "logic" | "bits" | "error" | "time" | "dominance" (a reduction)
    name: str = ""
    #: a valid inequality that only strengthens the relaxation: an emitter that cannot
    #: represent it exactly may drop it without changing the set of feasible plans
    optional: bool = False


@dataclass
class LinearProgram:
    """min objective . x + objective_constant  s.t. rows, variable bounds.

    The objective is in ms. ``meta`` holds what the decoder needs (index maps)."""

    variables: list[Variable] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)
    objective_constant: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def var(self, name: str, binary: bool = True, lb: float = 0.0, ub: float = 1.0, implied_integer: bool = True,
            unit: str = "") -> int:
        self.variables.append(Variable(name, binary, lb, ub, implied_integer, unit))
        return len(self.variables) - 1

    def add(self, coeffs: dict[int, float], sense: str, rhs: float, kind: str = "logic", name: str = "",
            optional: bool = False) -> None:
        # a copy (the caller may reuse its dict) without zero coefficients: dict() is a C
        # copy, and all() tests the values' truth in C (comparing each with 0 cost 0.15 s of
        # a 10,000-layer build); NaN is kept either way
        coeffs = dict(coeffs) if all(coeffs.values()) else {i: c for i, c in coeffs.items() if c}
        rows = self.rows
        rows.append(Row(coeffs, sense, rhs, kind, name, optional))
        if not len(rows) % DEADLINE_EVERY_ROWS:
            check_build_deadline()

    def add_objective(self, index: int, coeff: float) -> None:
        if coeff:
            self.objective[index] = self.objective.get(index, 0.0) + coeff

    def evaluate_objective(self, values: list[float]) -> float:
        """Objective (ms) at the given variable values."""
        return self.objective_constant + sum(c * values[i] for i, c in self.objective.items())


def row_violations(lp: LinearProgram, values: Sequence[float], tol: float = 1e-6,
                   reductions: bool = False) -> list[str]:
    """Names of the rows that ``values`` break (relative tolerance ``tol``): the check that
    a program and its family's evaluator agree on a plan's feasibility. Rows of kind
    ``"dominance"`` (a reduction: they cut off feasible plans no better than one they
    keep) are checked only with ``reductions``."""
    out = []
    for row in lp.rows:
        if row.kind == "dominance" and not reductions:
            continue
        lhs = sum(c * values[i] for i, c in row.coeffs.items())
        slack = tol * max(1.0, abs(row.rhs), max((abs(c) for c in row.coeffs.values()), default=0.0))
        if (row.sense == "<=" and lhs > row.rhs + slack) or (row.sense == ">=" and lhs < row.rhs - slack) or (
            row.sense == "==" and abs(lhs - row.rhs) > slack
        ):
            out.append(row.name)
    return out


#: program kinds: "linear" is a LinearProgram every MILP backend runs (and CP-SAT after
#: integer scaling); "cpsat" is a native OR-Tools ``CpModel`` (interval variables, ...)
PROGRAM_KINDS = ("linear", "cpsat")


@dataclass
class Program:
    """A built program and what is needed to read its solution.

    ``decode(values)`` maps solver values to a plan: for a ``LinearProgram`` one float per
    variable in ``model.variables`` order; for a CP-SAT model the solution vector indexed
    by ``var.Index()``. The model's objective (value and bound) times ``unit_ms`` plus
    ``offset_ms`` is in ms; ``tolerance_ms`` bounds, for any decoded plan, the difference
    between that and the family evaluator's objective (integer scaling, rounded
    durations, solver tolerances stated by the family): a bound is reported minus it
    (or minus ``bound_tolerance_ms`` where the family states that one).
    ``hint``: variable values of the start plan (a warm start), same indexing as
    ``decode``. ``presolve``: CP-SAT's presolve is safe on this model (or-tools #5293).
    ``stats``: sizes for the result's ``extra``."""

    kind: str
    model: Any
    decode: Callable[[Sequence[float]], Any]
    unit_ms: float = 1.0
    offset_ms: float = 0.0
    tolerance_ms: float = 0.0
    hint: Sequence[float] | None = None
    presolve: bool = True
    #: what the reported bound is lowered by (ms); None: ``tolerance_ms``. Lower where
    #: ``tolerance_ms`` covers only how far a decoded plan's value may be from the
    #: solver's (e.g. a MILP's integrality tolerance on big-M rows) and not the solver's
    #: own bound, which such tolerances only relax
    bound_tolerance_ms: float | None = None
    #: for a ``LinearProgram``, ``encode(plan)`` gives the variable values of any plan (the
    #: contract suites check that objective and rows agree with the evaluator on random
    #: plans); None where the family offers no encoding
    encode: Callable[[Any], Sequence[float]] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def to_ms(self, value: float) -> float:
        """A model objective value (or bound) in ms."""
        return value * self.unit_ms + self.offset_ms
