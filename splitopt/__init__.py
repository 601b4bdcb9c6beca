"""splitopt: decide how to split a DNN across devices by solving mathematical programs.

Layout (data flows one way, each layer imports only those above it in this list):
``core`` (instance model, JSON and schema, latency and memory models, schedule,
program IR, options, results, errors) -> ``search.space`` (genes) -> ``families`` (one
folder per problem family behind ``families.base.Family``, and the registry) ->
``backends`` (CBC, HiGHS, CP-SAT, brute force, family methods) -> ``api``, ``solve`` ->
``analysis`` (Pareto fronts, plots), ``testing`` (generators, contract suites) ->
``cli``. ``torch`` (the torch bridge) produces instances and consumes plans; nothing in
the core imports it.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from splitopt.api import evaluate, load_instance, load_plan, parse_instance, plan_from_dict, plan_to_dict, save_plan
from splitopt.core.errors import (
    InvalidInstance,
    InvalidOption,
    InvalidPlan,
    MissingDependency,
    NotApplicable,
    SolverFailure,
    SolverUnavailable,
    SplitoptError,
    UnknownSolver,
)
from splitopt.core.instance import Instance
from splitopt.core.instance_io import save_instance
from splitopt.core.plan import Plan
from splitopt.core.result import MetricsLike as Metrics  # what every family's evaluator returns
from splitopt.core.result import SolveResult, Status

__version__ = "0.1.0"

__all__ = [
    "Instance", "InvalidInstance", "InvalidOption", "InvalidPlan", "Metrics", "MissingDependency", "NotApplicable",
    "Plan", "SolveResult", "SolverFailure", "SolverUnavailable", "SplitoptError", "Status", "UnknownSolver",
    "evaluate", "load_instance", "load_plan", "parse_instance", "plan_from_dict", "plan_to_dict", "save_instance",
    "save_plan", "solve",
]

if TYPE_CHECKING:  # for type checkers: ``splitopt.solve`` is the function
    from splitopt.solve import solve


class _CallableModule(types.ModuleType):
    """The module ``splitopt.solve``, callable as its function ``solve``: ``splitopt.solve(inst)``
    runs ``splitopt.solve.solve(inst)`` (looked up at each call, so a patched one runs)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.solve(*args, **kwargs)


class _Package(types.ModuleType):
    """The package ``splitopt``: its attribute ``solve`` is the module ``splitopt.solve``
    made callable, imported on first use (it loads the backends: about 60 ms, kept off
    ``import splitopt`` and the command line's start-up). One object for both meanings,
    whichever import comes first: ``splitopt.solve(inst, ...)`` solves, and
    ``splitopt.solve.solve``, ``from splitopt.solve import solve`` and patching
    ``splitopt.solve.solve`` work as for any module."""

    @property
    def solve(self) -> Any:
        replaced = self.__dict__.get("_solve_replaced")
        if replaced is not None:
            return replaced
        module = importlib.import_module("splitopt.solve")
        if not isinstance(module, _CallableModule):
            module.__class__ = _CallableModule
        return module

    @solve.setter
    def solve(self, value: Any) -> None:
        # the import system binds the submodule here once it is imported (the getter then
        # finds it in sys.modules); anything else assigned (a test's stand-in) replaces
        # the attribute until the module is assigned back
        if isinstance(value, types.ModuleType) and value.__name__ == "splitopt.solve":
            self.__dict__.pop("_solve_replaced", None)
        else:
            self.__dict__["_solve_replaced"] = value


sys.modules[__name__].__class__ = _Package
