"""splitopt: decide how to split a DNN across devices by solving mathematical programs."""

from splitopt.errors import (
    InvalidInstance,
    InvalidPlan,
    NotApplicable,
    SolverFailure,
    SolverUnavailable,
    SplitoptError,
    UnknownSolver,
)
from splitopt.evaluator import Metrics, evaluate
from splitopt.instance import Instance, load_instance, parse_instance, save_instance
from splitopt.plan import Plan, load_plan, plan_from_dict
from splitopt.result import SolveResult, Status

__version__ = "0.1.0"

__all__ = [
    "Instance", "InvalidInstance", "InvalidPlan", "Metrics", "NotApplicable", "Plan",
    "SolveResult", "SolverFailure", "SolverUnavailable", "SplitoptError", "Status",
    "UnknownSolver", "evaluate", "load_instance", "load_plan", "parse_instance",
    "plan_from_dict", "save_instance",
]
