"""The library's generic entry points besides ``solve``: read instances (splitopt's format
or a format a family imports, such as the peer benchmark's files) and plans, evaluate a
plan, and the JSON forms, each dispatched to the instance's family.

Reading takes scenario overrides (``overrides=["links[edge->cloud].bandwidth_bits_per_s=5e6"]``,
``splitopt.core.overrides``), applied to the JSON data before any check. An
:class:`~splitopt.core.instance.Instance` built in Python runs the checks of
:func:`parse_instance` when it is constructed (:func:`check_built_instance`, installed by the package: ``splitopt/__init__.py``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from splitopt.core.errors import InvalidInstance, InvalidOption, InvalidPlan, NotApplicable
from splitopt.core.instance import Instance
from splitopt.core.instance_io import FORMAT, check_built, parse_instance_data
from splitopt.core.jsonfile import check_path_argument, json_type, read_json
from splitopt.core.result import SolveResult
from splitopt.families.base import instance_schema as families_schema
from splitopt.families.registry import FAMILIES, family_for_problem, family_of, families, problem_families, readers

if TYPE_CHECKING:
    from splitopt.core.overrides import Override

#: the schema built last, by the registry it was built from
_SCHEMA: dict[tuple, dict[str, Any]] = {}
#: each family's own schema (:func:`_family_schema`), by family name and registry entry
_FAMILY_SCHEMA: dict[tuple, dict[str, Any]] = {}


def instance_schema() -> dict[str, Any]:
    """The published JSON Schema of the instance format: the core schema with every
    registered family's problems, objectives and settings (``splitopt.families.base``)."""
    key = tuple(FAMILIES.items())
    if key not in _SCHEMA:
        _SCHEMA.clear()
        _SCHEMA[key] = families_schema(families())
    return copy.deepcopy(_SCHEMA[key])


def _family_schema(problem: Any) -> dict[str, Any] | None:
    """The instance schema of ``problem``'s family alone (the core schema with that family's
    problems, objectives and settings), which only instances that meet the whole schema
    (:func:`instance_schema`) meet: its problem and objective lists are parts of the whole
    schema's, and the other families' settings apply to other problems. What an instance
    is checked against first: it needs the problem's family alone (found as
    ``family_for_problem`` finds it), where the whole schema imports every family. None
    for a problem no family has, or a family with a format of its own."""
    if not isinstance(problem, str):
        return None
    try:
        fam = family_for_problem(problem)
    except InvalidInstance:
        return None
    if not fam.core_instance or fam.settings_class is None:
        return None
    key = (fam.name, FAMILIES.get(fam.name))
    if key not in _FAMILY_SCHEMA:
        _FAMILY_SCHEMA[key] = families_schema([fam])
    return _FAMILY_SCHEMA[key]


def _problem_of(data: Any) -> Any:
    """``data["settings"]["problem"]`` where there is one (unchecked), else None."""
    settings = data.get("settings") if isinstance(data, dict) else None
    return settings.get("problem") if isinstance(settings, dict) else None


def settings_class_of(problem: str) -> Any:
    """The settings class of the family of ``problem``."""
    return family_for_problem(problem).settings_class


#: what ``overrides`` may be: ``PATH=VALUE`` strings or parsed overrides (None: none)
Overrides = Iterable["str | Override"] | None


def with_overrides(data: Any, overrides: Overrides, label: str = "override") -> Any:
    """``data`` (an instance's parsed JSON) with ``overrides`` applied
    (``splitopt.core.overrides``): a new key may be added where the instance schema
    names it in splitopt's format, only existing keys changed in other formats.
    InvalidOption (one line, ``label`` and the override first) on a bad override."""
    if not overrides:
        return data
    from splitopt.core.overrides import apply_overrides

    splitopt_format = isinstance(data, dict) and "format" in data
    return apply_overrides(data, overrides, instance_schema() if splitopt_format else None, label)


def parse_instance(data: Any, overrides: Overrides = None) -> Any:
    """An instance from parsed JSON: splitopt's format, checked against the schema, for
    consistency and by its family; or a format a family imports. ``overrides``:
    ``PATH=VALUE`` edits applied to a copy of ``data`` first (``splitopt.core.overrides``;
    InvalidOption on a bad one). InvalidInstance (one line naming the field and value) on
    any defect."""
    data = with_overrides(data, overrides)
    if isinstance(data, dict) and "format" not in data:
        for fam in readers():
            if fam.reads(data):
                return fam.read(data, None)
    inst = parse_instance_data(data, instance_schema, settings_class_of, narrower=_family_schema(_problem_of(data)))
    _check_objective(inst)
    family_of(inst).prepare(inst)
    return inst


def _check_objective(inst: Any) -> None:
    fam = family_of(inst)
    if inst.objective not in fam.objectives:
        raise InvalidInstance(f"instance.settings.objective: '{inst.objective}' is not an objective of "
                              f"problem '{inst.problem}' (objectives: {', '.join(fam.objectives)})")


def check_built_instance(inst: Instance) -> None:
    """The checks of :func:`parse_instance` on an :class:`Instance` built in Python
    (``Instance(...)``, ``dataclasses.replace``): its JSON form against the schema,
    consistency (a layer reading a missing tensor, duplicate names, links between unknown
    devices, ...), ranges, the objective and the family's checks. Run by the constructor;
    InvalidInstance (one line naming the field and value) on any defect."""
    check_built(inst, instance_schema, settings_class_of, narrower=_family_schema(inst.problem))
    _check_objective(inst)
    family_of(inst).prepare(inst)


def default_backend_of(path: str | Path, overrides: Overrides = None) -> str | None:
    """The family's default exact backend for the instance file ``path`` (what solver
    options given without a solver go to), judged from its problem name or format alone,
    without the checks (None where it cannot tell): lets the CLI check solver options
    before the slow full load. Unreadable files are InvalidInstance as in
    :func:`load_instance`; ``overrides`` as there (``settings.problem`` may change)."""
    data = read_json(path, InvalidInstance)
    if not isinstance(data, dict):
        return None
    data = with_overrides(data, overrides)
    for fam in readers():
        if "format" not in data and fam.reads(data):
            return fam.default_backend
    settings = data.get("settings")
    problem = settings.get("problem") if isinstance(settings, dict) else None
    for fam in families():
        if isinstance(problem, str) and fam.core_instance and problem in fam.problems:
            return fam.default_backend
    return None


def load_instance(path: str | Path, overrides: Overrides = None) -> Any:
    """Read and check an instance file: splitopt's format (``splitopt-instance/1``) or a
    format a family imports (the peer dnn-partitioning files: problem ``maxload``).

    ``overrides``: scenario edits ``PATH=VALUE`` (e.g.
    ``["links[edge->cloud].bandwidth_bits_per_s=5e6", "settings.objective=throughput"]``,
    grammar in ``splitopt.core.overrides``) applied to the file's JSON data before any
    check, so an edited value is checked like the file's own; InvalidOption (one line) on
    an override that does not fit the data."""
    data = read_json(path, InvalidInstance)  # first: it refuses a path that is not one
    path = Path(path)
    if not isinstance(data, dict):
        raise InvalidInstance(f"{path}: the top level must be a JSON object (an instance), got {json_type(data)}")
    data = with_overrides(data, overrides)
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


def check_problem(problem: str, label: str = "problem") -> None:
    """InvalidOption (one line naming ``label`` and the value, listing the problems)
    unless a registered family handles ``problem``."""
    if problem not in problem_families():
        raise InvalidOption(f"{label} {problem}: unknown problem (problems: {', '.join(problem_families())})")


def check_option(name: str, value: str, label: str | None = None) -> None:
    """InvalidOption (one line naming ``label``, by default the option, and the value)
    unless ``value`` is one the families that take the instance option ``name``
    (``Family.instance_options``) accept."""
    label = name if label is None else label
    takes = [v for fam in families() for v in fam.instance_options.get(name, ())]
    if not takes:
        raise InvalidOption(f"{label} {value}: no problem takes this option")
    if value not in takes:
        raise InvalidOption(f"{label} {value}: must be one of {', '.join(dict.fromkeys(takes))}")


def adjust_instance(inst: Any, problem: str | None = None, objective: str | None = None,
                    options: dict[str, str] | None = None, prefix: str = "") -> Any:
    """A prepared copy of ``inst`` with another problem of its family (``problem``, e.g.
    split for a split_bits instance), another of its objectives and family options
    (``options``: name -> value, e.g. ``{"contiguity": "authors"}`` for a peer file:
    ``Family.instance_options``). Each change is refused in one line naming
    ``prefix + name`` and the value (the command line passes ``prefix="--"``):
    InvalidOption for an unknown problem or a value the option does not take,
    NotApplicable for a change that does not apply to the instance's family."""
    for name, value in (options or {}).items():
        check_option(name, value, f"{prefix}{name}")
        fam = family_of(inst)
        if name not in fam.instance_options:
            owners = [p for f in families() if name in f.instance_options for p in f.problems]
            raise NotApplicable(f"{prefix}{name} {value}: applies to problem {', '.join(owners)}, not to problem "
                                f"'{inst.problem}'")
        inst = fam.with_option(inst, name, value, f"{prefix}{name} {value}")
    fam = family_of(inst)
    if problem is not None and problem != inst.problem:
        check_problem(problem, f"{prefix}problem")
        owner = family_for_problem(problem)
        if owner is not fam:
            raise NotApplicable(f"{prefix}problem {problem}: applies to {owner.name} instances "
                                f"({', '.join(owner.problems)}), not to problem '{inst.problem}'")
        inst = inst.with_settings(problem=problem)
        fam.prepare(inst)
    if objective is not None:
        if objective not in fam.objectives:
            raise InvalidOption(f"{prefix}objective {objective}: problem '{inst.problem}' has objectives "
                                f"{', '.join(fam.objectives)}")
        inst = fam.with_objective(inst, objective)
    return inst


def plan_from_dict(inst: Any, data: Any, where: str = "plan") -> Any:
    """Parse and check a plan for ``inst`` (its family's JSON form); the whole output of
    ``splitopt solve --json`` is accepted too. InvalidPlan names the field."""
    if isinstance(data, dict) and "plan" in data and "layers" not in data:
        data, where = data["plan"], f"{where}.plan"
    return family_of(inst).plan_from_dict(inst, data, where)


def load_plan(inst: Any, path: str | Path) -> Any:
    """Read a plan file for ``inst`` (or the output of ``splitopt solve --json``)."""
    data = read_json(path, InvalidPlan)
    return plan_from_dict(inst, data, where=str(path))


def plan_to_dict(inst: Any, plan: Any) -> dict[str, Any]:
    """The JSON form of a plan (what :func:`plan_from_dict` reads back); InvalidPlan
    (one line) where the plan does not fit ``inst`` (another instance's plan, an unknown
    device): the evaluator's checks run first, so nothing is written that would not be
    read back."""
    family = family_of(inst)
    family.check_plan_type(plan)
    family.evaluate(inst, plan)
    return family.plan_to_dict(inst, plan)


def save_plan(inst: Any, plan: Any, path: str | Path) -> None:
    """Write a plan as JSON. InvalidOption (one line naming the path) where ``path`` is not
    a path or cannot be written (a directory, a missing folder, no permission)."""
    check_path_argument(path, InvalidOption, "save_plan: the path")
    text = json.dumps(plan_to_dict(inst, plan), indent=1) + "\n"
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise InvalidOption(f"save_plan {path}: cannot write the file ({e.strerror or type(e).__name__})") from None


def evaluate(inst: Any, plan: Any) -> Any:
    """Evaluate a plan with its family's evaluator; raises InvalidPlan if it is malformed,
    and lists broken limits in ``metrics.violations``."""
    family = family_of(inst)
    family.check_plan_type(plan)
    return family.evaluate(inst, plan)


def result_to_dict(inst: Any, result: SolveResult) -> dict[str, Any]:
    """JSON form of a solve; ``plan`` is in the format ``splitopt evaluate`` reads."""
    if not isinstance(result, SolveResult):
        raise InvalidOption(f"result_to_dict: a SolveResult (what splitopt.solve returns) is expected, got "
                            f"{type(result).__name__}")
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
