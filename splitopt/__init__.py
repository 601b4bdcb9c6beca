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
from splitopt.core.instance import Instance, set_build_check

__version__ = "0.1.0"

#: the other public names: name -> (module, its name there), each imported on first use, so
#: that ``import splitopt`` (and with it the command line's start, ``splitopt --help``)
#: loads the errors and the instance model alone, not the reading, checking and schema
#: code of ``splitopt.api`` with the families' protocol (about 15 ms)
LAZY: dict[str, tuple[str, str]] = {
    **{name: ("splitopt.api", name) for name in (
        "evaluate", "load_instance", "load_plan", "parse_instance", "plan_from_dict", "plan_to_dict", "save_plan")},
    "save_instance": ("splitopt.core.instance_io", "save_instance"),
    "Plan": ("splitopt.core.plan", "Plan"),
    "Metrics": ("splitopt.core.result", "MetricsLike"),  # what every family's evaluator returns
    "SolveResult": ("splitopt.core.result", "SolveResult"),
    "Status": ("splitopt.core.result", "Status"),
}

__all__ = [
    "Instance", "InvalidInstance", "InvalidOption", "InvalidPlan", "Metrics", "MissingDependency", "NotApplicable",
    "Plan", "SolveResult", "SolverFailure", "SolverUnavailable", "SplitoptError", "Status", "UnknownSolver",
    "evaluate", "load_instance", "load_plan", "parse_instance", "plan_from_dict", "plan_to_dict", "save_instance",
    "save_plan", "solve",
]

if TYPE_CHECKING:  # for type checkers: the names of LAZY, and ``splitopt.solve`` is the function
    from splitopt.api import evaluate, load_instance, load_plan, parse_instance, plan_from_dict, plan_to_dict, save_plan
    from splitopt.core.instance_io import save_instance
    from splitopt.core.plan import Plan
    from splitopt.core.result import MetricsLike as Metrics
    from splitopt.core.result import SolveResult, Status
    from splitopt.solve import solve


def _check_built_instance(inst: Instance) -> None:
    """The checks an :class:`Instance` built in Python runs (``splitopt.api``'s, which know
    the families), imported when the first one is built."""
    from splitopt.api import check_built_instance

    check_built_instance(inst)


# installed here, where every import of a splitopt module passes first (so an Instance built
# after ``from splitopt.core.instance import Instance`` alone is checked too)
set_build_check(_check_built_instance)


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

    def __getattr__(self, name: str) -> Any:
        """A name of :data:`LAZY`, imported now and kept."""
        if name not in LAZY:
            raise AttributeError(f"module 'splitopt' has no attribute {name!r}")
        module, attr = LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(LAZY))


sys.modules[__name__].__class__ = _Package
