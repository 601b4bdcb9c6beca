"""Pareto fronts of latency against a second measure (``splitopt pareto``): each family
says what its front trades latency against and how it sweeps it
(``Family.pareto_front``: the quantization error of an edge/cloud cut, AUTO-SPLIT Fig. 5;
the measured accuracy of a multiview instance's compression widths; the bytes a
separable policy sends); here every solve of the sweep runs with one backend, time limit
and thread count, and the front comes back as a ``splitopt.core.front.Front``.
"""

from __future__ import annotations

from typing import Any

from splitopt.core import progress
from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.front import MODES, Front
from splitopt.core.result import SolveResult
from splitopt.families.registry import families, family_of
from splitopt.solve import solve


def no_front_message(inst: Any) -> str:
    """One line: ``inst``'s problem has no front, and which problems have one."""
    fronts = [f"{', '.join(f.problems)} (latency / {' or '.join(f.front_measures or (f.front_measure,))})"
              for f in families() if f.front_measure]
    return (f"pareto: problem '{inst.problem}' has no Pareto front; fronts are defined for "
            f"{'; '.join(fronts) or 'no problem'}")


def front_backend(fam: Any) -> str:
    """The backend of a front's solves where none is named: the family's ``front_backend``,
    else its default exact backend."""
    return fam.front_backend or fam.default_backend


@progress.clears_step
def pareto_front(inst: Any, solver: str | None = None, mode: str = "exact", points: int = 50,
                 time_limit: float | None = None, threads: int = 2, against: str | None = None) -> Front:
    """The front of ``inst`` with at most ``points`` points, every solve by ``solver``
    (None: :func:`front_backend`) within ``time_limit`` seconds; ``mode`` (``"exact"``:
    every corner, ``"grid"``: evenly spaced budgets) where the family sweeps more than one
    way; ``against``: which of the family's fronts (``Family.front_measures``; None: its
    first). A point whose solve stopped without proof keeps its FEASIBLE status; dominated
    points are dropped. NotApplicable (one line) where the instance has no front;
    progress (``splitopt.core.progress``) names each point being solved."""
    if mode not in MODES:
        raise InvalidOption(f"mode: must be one of {', '.join(MODES)}, got {mode!r}")
    fam = family_of(inst)
    if fam.front_measure is None:
        raise NotApplicable(no_front_message(inst))
    measures = fam.front_measures or (fam.front_measure,)
    if against is not None and against not in measures:
        raise InvalidOption(f"against: problem '{inst.problem}' has fronts against {', '.join(measures)}, got "
                            f"{against!r}")
    backend = solver or front_backend(fam)

    def solve_variant(variant: Any) -> SolveResult:
        return solve(variant, backend, time_limit, threads, diagnose=False)

    if against is None or not fam.front_measures:
        return fam.pareto_front(inst, solve_variant, points, mode)
    several: Any = fam.pareto_front  # a family with front_measures takes against= (Family.pareto_front)
    return several(inst, solve_variant, points, mode, against=against)
