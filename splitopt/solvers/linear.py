"""A solver-neutral mixed-integer linear program: variables, rows and an objective.

A formulation module builds one ``LinearProgram``; the emitters in ``milp.py`` (PuLP:
CBC, HiGHS) and ``cpsat.py`` (OR-Tools CP-SAT) translate it. Writing each program once
keeps the MILP and CP-SAT backends identical by construction.

Rows carry a ``kind`` that tells an integer emitter how to scale them:

* ``"logic"``: small integer coefficients (0/1 logic), emitted exactly;
* ``"bits"``: coefficients and right-hand side in bits (integers for integral sizes);
* ``"error"``: real-valued quantization error; an integer emitter must scale it with a
  stated tolerance (see ``cpsat.py``);
* ``"time"``: coefficients in ms, on variables in ms (``unit="ms"``, e.g. a bottleneck
  time) and on 0/1 variables; an integer emitter scales them like the objective.

A row marked ``optional`` is a valid inequality that only tightens the relaxation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
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


@dataclass
class Row:
    coeffs: dict[int, float]
    sense: str  # "<=", ">=", "=="
    rhs: float
    kind: str = "logic"  # "logic" | "bits" | "error" | "time"
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
        coeffs = {i: c for i, c in coeffs.items() if c != 0}
        self.rows.append(Row(coeffs, sense, rhs, kind, name, optional))

    def add_objective(self, index: int, coeff: float) -> None:
        if coeff:
            self.objective[index] = self.objective.get(index, 0.0) + coeff

    def evaluate_objective(self, values: list[float]) -> float:
        """Objective (ms) at the given variable values."""
        return self.objective_constant + sum(c * values[i] for i, c in self.objective.items())
