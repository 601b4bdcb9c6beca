"""The library's generic entry points besides ``solve``: read instances (splitopt's format
or a format a family imports, such as the peer benchmark's files) and plans, evaluate a
plan, and the JSON forms, each dispatched to the instance's family."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from splitopt.core.errors import InvalidInstance, InvalidPlan
from splitopt.core.instance_io import FORMAT, core_schema, parse_instance_data
from splitopt.core.jsonfile import json_type, read_json
from splitopt.core.result import SolveResult
from splitopt.families.registry import family_of, families, readers

_SCHEMA: dict[str, Any] = {}


def instance_schema() -> dict[str, Any]:
    """The published JSON Schema of the instance format: the core schema with every
    registered family's problem names and settings object."""
    if not _SCHEMA:
        schema = core_schema()
        settings = schema["$defs"]["settings"]["properties"]
        settings["problem"]["enum"] = [p for fam in families() if fam.core_instance for p in fam.problems]
        settings["objective"]["enum"] = list(dict.fromkeys(o for fam in families() if fam.core_instance
                                                           for o in fam.objectives))
        for fam in families():
            if fam.settings_key is not None and fam.settings_schema is not None:
                settings[fam.settings_key] = dict(fam.settings_schema)
        _SCHEMA.update(schema)
    return copy.deepcopy(_SCHEMA)


def parse_instance(data: Any) -> Any:
    """An instance from parsed JSON: splitopt's format, checked against the schema, for
    consistency and by its family; or a format a family imports. InvalidInstance (one
    line naming the field and value) on any defect."""
    if isinstance(data, dict) and "format" not in data:
        for fam in readers():
            if fam.reads(data):
                return fam.read(data, None)
    inst = parse_instance_data(data, instance_schema())
    fam = family_of(inst)
    if inst.settings.objective not in fam.objectives:
        raise InvalidInstance(f"instance.settings.objective: '{inst.settings.objective}' is not an objective of "
                              f"problem '{inst.problem}' (objectives: {', '.join(fam.objectives)})")
    fam.prepare(inst)
    return inst


def default_backend_of(path: str | Path) -> str | None:
    """The family's default exact backend for the instance file ``path`` (what solver
    options given without a solver go to), judged from its problem name or format alone,
    without the checks (None where it cannot tell): lets the CLI check solver options
    before the slow full load. Unreadable files are InvalidInstance as in
    :func:`load_instance`."""
    data = read_json(path, InvalidInstance)
    if not isinstance(data, dict):
        return None
    for fam in readers():
        if "format" not in data and fam.reads(data):
            return fam.default_backend
    settings = data.get("settings")
    problem = settings.get("problem") if isinstance(settings, dict) else None
    for fam in families():
        if isinstance(problem, str) and fam.core_instance and problem in fam.problems:
            return fam.default_backend
    return None


def load_instance(path: str | Path) -> Any:
    """Read and check an instance file: splitopt's format (``splitopt-instance/1``) or a
    format a family imports (the peer dnn-partitioning files: problem ``maxload``)."""
    path = Path(path)
    data = read_json(path, InvalidInstance)
    if not isinstance(data, dict):
        raise InvalidInstance(f"{path}: the top level must be a JSON object (an instance), got {json_type(data)}")
    if "format" not in data:
        for fam in readers():
            if fam.reads(data):
                inst = fam.read(data, path)
                fam.prepare(inst)
                return inst
        if not {"graph", "settings"} & set(data):
            raise InvalidInstance(f"{path}: neither a splitopt instance (no 'format': '{FORMAT}') nor a format "
                                  "splitopt imports (a peer dnn-partitioning file has 'nodes', 'edges', 'maxFPGAs')")
    return parse_instance(data)


def plan_from_dict(inst: Any, data: Any, where: str = "plan") -> Any:
    """Parse and check a plan for ``inst`` (its family's JSON form); the whole output of
    ``splitopt solve --json`` is accepted too. InvalidPlan names the field."""
    if isinstance(data, dict) and "plan" in data and "layers" not in data:
        data, where = data["plan"], f"{where}.plan"
    return family_of(inst).plan_from_dict(inst, data, where)


def load_plan(inst: Any, path: str | Path) -> Any:
    """Read a plan file for ``inst`` (or the output of ``splitopt solve --json``)."""
    path = Path(path)
    return plan_from_dict(inst, read_json(path, InvalidPlan), where=str(path))


def plan_to_dict(inst: Any, plan: Any) -> dict[str, Any]:
    """The JSON form of a plan (what :func:`plan_from_dict` reads back)."""
    return family_of(inst).plan_to_dict(inst, plan)


def save_plan(inst: Any, plan: Any, path: str | Path) -> None:
    """Write a plan as JSON."""
    Path(path).write_text(json.dumps(plan_to_dict(inst, plan), indent=1) + "\n")


def evaluate(inst: Any, plan: Any) -> Any:
    """Evaluate a plan with its family's evaluator; raises InvalidPlan if it is malformed,
    and lists broken limits in ``metrics.violations``."""
    return family_of(inst).evaluate(inst, plan)


def result_to_dict(inst: Any, result: SolveResult) -> dict[str, Any]:
    """JSON form of a solve; ``plan`` is in the format ``splitopt evaluate`` reads."""
    return {
        "instance": inst.name,
        "problem": result.problem,
        "solver": result.backend,
        "status": result.status.value,
        "objective": result.objective,
        "bound": result.bound,
        "objective_unit": family_of(inst).objective_unit(inst),
        # the same values under their older names (ms for every time objective)
        "objective_ms": result.objective,
        "bound_ms": result.bound,
        "gap": result.gap,
        "build_s": result.build_s,
        "solve_s": result.solve_s,
        "message": result.message,
        "interrupted": bool(result.extra.get("interrupted")),
        "metrics": result.metrics.to_dict() if result.metrics is not None else None,
        "plan": plan_to_dict(inst, result.plan) if result.plan is not None else None,
    }
