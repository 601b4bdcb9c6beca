"""The adapter that makes a family's own methods (``Family.methods()``: published
baselines, special exact algorithms) backends: the registry finds them by name in the
instance's family, and the generic layer judges their plans like any other."""

from __future__ import annotations

import time
from typing import Any

from splitopt.backends.base import Backend
from splitopt.core.errors import NotApplicable
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput


class MethodBackend(Backend):
    """A family method as a backend (one object per method and family)."""

    def __init__(self, family: Any, method: Any):
        self.family_name = family.name
        self.method = method
        self.name = method.name  # type: ignore[misc]
        self.kind = method.kind  # type: ignore[misc]
        self.description = method.description  # type: ignore[misc]
        rtol = method.optimal_rtol if method.optimal_rtol is not None else 1e-9
        self.optimal_rtol = rtol if method.kind == "exact" else 0.0  # type: ignore[misc]
        self.anytime = method.kind == "exact" and method.anytime  # type: ignore[misc]

    def problems(self, family: Any) -> tuple[str, ...]:
        return self.method.problems or family.problems

    def handles(self, family: Any, problem: str) -> bool:
        return family.name == self.family_name and (
            problem in self.problems(family) or self.method.fallback_problem is not None)

    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        self.check_options(options.solver_options)
        if inst.problem not in self.problems(family):
            raise NotApplicable(f"method '{self.name}' handles problems {list(self.problems(family))}, "
                                f"not '{inst.problem}'")
        t0 = time.perf_counter()
        out = self.method.run(inst, options)
        out.extra.setdefault("solve_s", time.perf_counter() - t0)
        return out
