"""Problem families: each problem name maps to the one module that knows its plans,
metrics, evaluator and programs. Adding a family touches this map and its own module.

A family module defines:

* ``PROBLEMS``: the problem names it handles;
* ``check_instance(inst)``: family-specific consistency checks (raise InvalidInstance
  with a one-line message naming the field);
* ``evaluate(inst, plan)``: the independent evaluator; its metrics have
  ``objective_ms`` (what solvers minimise), ``feasible``, ``violations`` and
  ``to_dict()``;
* ``check_plan(inst, plan, where)`` and ``plan_from_dict(inst, data, where)`` (plans
  have ``to_dict(inst)`` and ``key()``);
* ``start_plan(inst)``: a plan a time-limited exact solve returns when it finds nothing
  better (or None);
* ``print_metrics(console, inst, plan, metrics, show_layers)``: the human report;
* for the generic exact backends (``milp-cbc``, ``milp-highs``, ``cpsat``) either
  ``build_program(inst) -> LinearProgram``, ``encode_plan(inst, lp, plan)`` and
  ``decode_plan(inst, lp, values)``, or ``solve_exact(backend_name, inst, options)``
  returning a ``BackendOutput``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILY_MODULES: dict[str, str] = {
    "split": "splitopt.twotier",
    "split_bits": "splitopt.twotier",
    "chain": "splitopt.chain",
    "mesh": "splitopt.mesh",
    "multiview": "splitopt.multiview",
}


def family(problem: str) -> ModuleType:
    """The module of ``problem``'s family."""
    return importlib.import_module(FAMILY_MODULES[problem])


def feasible_start_plan(inst):
    """The family's start plan of ``inst`` if the evaluator finds it meets every limit,
    else None: the only plan a backend may fall back on, and the one that refutes an
    INFEASIBLE claim."""
    from splitopt.evaluator import evaluate

    start = family(inst.settings.problem).start_plan(inst)
    return start if start is not None and evaluate(inst, start).feasible else None
