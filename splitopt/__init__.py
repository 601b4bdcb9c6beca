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

from splitopt.api import evaluate, load_instance, load_plan, parse_instance, plan_from_dict
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
from splitopt.core.result import SolveResult, Status
from splitopt.families.edge_cloud.evaluate import Metrics

__version__ = "0.1.0"

__all__ = [
    "Instance", "InvalidInstance", "InvalidOption", "InvalidPlan", "Metrics", "MissingDependency", "NotApplicable",
    "Plan", "SolveResult", "SolverFailure", "SolverUnavailable", "SplitoptError", "Status", "UnknownSolver",
    "evaluate", "load_instance", "load_plan", "parse_instance", "plan_from_dict", "save_instance",
]
