"""The family protocol: what every problem family offers the rest of splitopt.

A family owns one kind of decision (an edge/cloud cut with bit-widths, a chain of
devices, a mesh schedule, multi-view sensors, the peer max-load placement): its settings,
checks, derived data, plans and their JSON form, the one evaluator, the programs it
builds for the exact backends, its own methods (published baselines, special exact
algorithms), the enumeration brute force
walks, the search space heuristics walk, the infeasibility diagnosis and the report.
Nothing outside a family's folder knows its internals: the generic layers (``solve``,
the backends, the CLI, the contract tests) go through this class only.

Adding a family: one folder under ``splitopt/families/`` with a subclass of
:class:`Family`, and one line in ``splitopt/families/registry.py``.
``tests/test_contracts.py`` checks that every registered family provides every
member, and the contract suites of ``splitopt.testing.contracts`` run on it.

Every family folder holds the same roles under the same names: ``family.py`` (the
:class:`Family` subclass, which hands the protocol's calls to the modules below),
``settings.py`` (its settings class; maxload, which reads the peer format, has none),
``checks.py`` (:meth:`Family.check`), ``data.py`` (data derived from an instance),
``plan.py``, ``evaluate.py`` (the one evaluator; its metrics derive from
``splitopt.core.metrics.FamilyMetrics``), the program modules, ``methods.py`` (the
family's own methods: baselines and exact special algorithms), ``start.py``,
``enumerate.py``, ``space.py``, ``report.py``, ``examples.py`` (``random_instance``), and
where the family has them ``bound.py``, ``diagnose.py``, ``pareto.py``.

Program modules are named by the kind of program they build. ``milp.py``:
``build_milp(inst, start) -> Program``, the solver-neutral ``LinearProgram`` (the MILP
backends run it, and CP-SAT integer-scaled where the family builds no model of its
own). ``cpsat.py``: ``build_cpsat(inst, start) -> Program``, a CP-SAT model of the
family's own. A family whose objectives need different programs suffixes module and
builder with the objective (maxload: ``milp_throughput.py`` with
``build_milp_throughput``, ``cpsat_latency.py`` with ``build_cpsat_latency``, ...).
``start``: the start plan or None; the builder returns the whole ``Program`` (decode,
encode, hint, tolerances, stats). A builder is its formulation's steps, one function
each (variables, each group of constraints, objective), whose docstring names the
section or row of ``formulations/*.md`` it implements; ``decode_plan`` and
``encode_plan`` map a solver's values to and from plans. :meth:`Family.build_program`
picks the builder by kind (and objective).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

from splitopt.core.errors import InvalidInstance, InvalidPlan, NotApplicable
from splitopt.core.program import Program
from splitopt.core.result import BackendOutput, Status
from splitopt.core.settings import FamilySettings
from splitopt.search.space import SearchSpace


@dataclass(frozen=True)
class Method:
    """A method a family offers as a backend (``splitopt solve --solver NAME``) besides
    the generic programs: a published baseline (``kind="baseline"``, proves nothing) or an
    exact special-purpose algorithm (``kind="exact"``, e.g. a dynamic program).

    ``run(inst, options) -> BackendOutput`` returns the method's plan; the generic layer
    evaluates it, so a method never judges itself. ``problems``: the problems it runs on
    (None: all of the family's); asked to run on another problem of the family it runs
    on the instance's ``fallback_problem`` when that is set (a float method on
    ``split_bits`` runs the float ``split`` problem). ``aliases``: older names kept so
    that existing commands still work. ``hint``: a cheap baseline (about linear in the
    instance) whose plan the exact program backends start from when it is the best
    feasible one they know (``splitopt.backends.base.feasible_start_plan``), so that
    they never return a plan worse than its. ``optimal_rtol``: an exact method's stated
    tolerance of OPTIMAL (None: 1e-9). ``anytime``: an exact method that keeps its best
    plan and a proven bound and improves both until the time limit (a branch and bound):
    ``auto`` runs it once for most of the budget instead of twice from scratch."""

    name: str
    description: str
    run: Callable[[Any, Any], BackendOutput]
    kind: str = "baseline"
    problems: tuple[str, ...] | None = None
    fallback_problem: str | None = None
    aliases: tuple[str, ...] = ()
    hint: bool = False
    optimal_rtol: float | None = None
    anytime: bool = False


def imported(target: str) -> Any:
    """The object ``target`` names, ``"module:name"`` (the module imported now): how the
    registry finds a family's class and a family a function it names without importing
    it first."""
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def deferred(target: str) -> Callable[..., Any]:
    """A function that calls the function ``target`` names (``"module:function"``),
    looked up (:func:`imported`) at each call and not before: the ``run`` of a
    :class:`Method` whose module needs a heavy dependency (numpy), so that listing the
    family's methods (``splitopt solvers``, ``splitopt schema``) imports none of it."""
    name = target.split(":")[1]

    def call(*args: Any, **kwargs: Any) -> Any:
        return imported(target)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{target}``, imported when it is called."
    return call


def plan_output(plan: Any, objective: float | None = None, **extra: Any) -> BackendOutput:
    """What a baseline returns: its plan, FEASIBLE until the evaluator says otherwise
    (``objective``: the method's own value in ms, only when it equals the evaluator's by
    construction)."""
    return BackendOutput(Status.FEASIBLE, plan=plan, objective=objective, extra=dict(extra))


class Family(ABC):
    """One problem family. Subclasses set the class attributes and implement every
    abstract method; ``prepare`` caches the family's derived data on the instance."""

    #: registry name, e.g. "edge_cloud"
    name: ClassVar[str] = ""
    #: the problem names (``settings.problem`` or the imported format's problem) it handles
    problems: ClassVar[tuple[str, ...]] = ()
    #: whether its instances are splitopt's layer-graph instances (``splitopt.core``);
    #: False for a family that imports its own format (``reads``/``read``)
    core_instance: ClassVar[bool] = True
    #: the values ``settings.objective`` may take
    objectives: ClassVar[tuple[str, ...]] = ("latency",)
    #: the class of its instances' settings (``Instance.settings``: its fields, JSON Schema
    #: and JSON form); None for a family whose instances are not splitopt's (``core_instance``)
    settings_class: ClassVar[type[FamilySettings] | None] = None
    #: the ``format`` of its plan files
    plan_format: ClassVar[str] = ""
    #: program kinds it builds for the exact backends (``splitopt.core.program.PROGRAM_KINDS``)
    program_kinds: ClassVar[tuple[str, ...]] = ("linear",)
    #: the family's default exact backend: what ``auto`` (the default of ``solve``) runs
    #: where CP-SAT does not apply, and what solver options given without a solver go to
    default_backend: ClassVar[str] = "cpsat"
    #: whether its plans have a schedule to draw (``--gantt``, ``--breakdown``)
    has_schedule: ClassVar[bool] = True
    #: one line for ``splitopt solvers`` and the documentation
    description: ClassVar[str] = ""

    # ----- foreign formats -----------------------------------------------------------------
    def reads(self, data: Any) -> bool:
        """Whether parsed JSON that is not a splitopt instance is in a format this family
        imports (e.g. the peer benchmark's files); False by default."""
        return False

    def read(self, data: Any, path: Any) -> Any:
        """Import such data (read from ``path``) as an instance of this family. A family
        that imports no foreign format (``reads`` is always False) refuses every such
        data: InvalidInstance, one line naming the file."""
        where = f"{path}: " if path is not None else ""
        raise InvalidInstance(f"{where}problem family '{self.name}' imports no foreign format; give a splitopt "
                              f"instance ('format': 'splitopt-instance/1')")

    # ----- data --------------------------------------------------------------------------
    @abstractmethod
    def check(self, inst: Any) -> None:
        """Raise InvalidInstance (one line naming the field and value) unless ``inst`` is
        a consistent instance of this family."""

    def build_data(self, inst: Any) -> Any:
        """The family's derived data of ``inst`` (tables, routes, ...); None if it needs
        none. Called once per instance through :meth:`prepare`."""
        return None

    def prepare(self, inst: Any) -> Any:
        """Check ``inst`` and return its derived data, both once per instance."""

        def build() -> Any:
            self.check(inst)
            return self.build_data(inst)

        return inst.derived(("family", self.name), build)

    # ----- plans ---------------------------------------------------------------------------
    @abstractmethod
    def plan_from_dict(self, inst: Any, data: Any, where: str = "plan") -> Any:
        """Parse and check a plan in this family's JSON form; InvalidPlan names the field."""

    def plan_to_dict(self, inst: Any, plan: Any) -> dict[str, Any]:
        """The JSON form of ``plan`` (what :meth:`plan_from_dict` reads back)."""
        return plan.to_dict(inst)

    def plan_type(self) -> type:
        """The class of this family's plans (imported when asked: checks of library calls)."""
        return object

    def check_plan_type(self, plan: Any, where: str = "plan") -> None:
        """InvalidPlan (one line) unless ``plan`` is one of this family's plans: a library
        caller passing a dict, None or another family's plan gets this, not an
        AttributeError from inside the evaluator."""
        kind = self.plan_type()
        if not isinstance(plan, kind):
            raise InvalidPlan(f"{where}: a {self.name} plan ({kind.__name__}) is expected, got "
                              f"{type(plan).__name__} (read one with splitopt.load_plan or plan_from_dict)")

    @abstractmethod
    def evaluate(self, inst: Any, plan: Any) -> Any:
        """The one independent evaluator: the plan's metrics (``objective_ms``,
        ``feasible``, ``violations``, ``to_dict()``); InvalidPlan if malformed."""

    @abstractmethod
    def start_plan(self, inst: Any) -> Any | None:
        """A cheap well-formed plan, meeting every limit where the family knows how (None
        when it has none): when the evaluator finds it feasible it is the warm start of
        the exact backends, their fallback when a time limit stops them before any plan,
        and the refutation of a wrong INFEASIBLE claim."""

    @abstractmethod
    def diagnose(self, inst: Any, resolve: Callable[[Any], bool]) -> str:
        """One line naming the limit no plan can meet (called on INFEASIBLE).
        ``resolve(changed_instance) -> bool`` re-solves a variant with some limit lifted
        (with the same backend and time limit) and says whether it has a plan."""

    def proven_infeasible(self, inst: Any) -> str | None:
        """One line naming the limit no plan can meet where the instance's data alone proves
        it (no search: every backend, heuristics included, then answers INFEASIBLE at once
        with it); None where nothing is proven so cheaply."""
        return None

    # ----- what the backends run -------------------------------------------------------------
    @abstractmethod
    def build_program(self, inst: Any, kind: str, start: Any | None) -> Program:
        """The exact program of ``kind`` (one of :attr:`program_kinds`) for ``inst``;
        ``start`` (a feasible plan or None) may set its horizon and hint."""

    @abstractmethod
    def methods(self) -> Sequence[Method]:
        """The family's own methods offered as backends: published baselines and exact
        special-purpose algorithms."""

    @abstractmethod
    def enumerate_plans(self, inst: Any, limit: int) -> Iterator[Any]:
        """Every plan of ``inst`` (up to symmetries the evaluator cannot tell apart), for
        the brute-force backend; raises NotApplicable before starting if there are more
        than ``limit``."""

    @abstractmethod
    def space(self, inst: Any) -> SearchSpace:
        """The genes heuristic search varies, with encode/decode/repair to plans."""

    def exact_method(self, inst: Any) -> str | None:
        """The name of one of the family's exact methods that solves ``inst`` outright and
        faster than the generic programs (e.g. a polynomial algorithm that applies to this
        instance), for ``auto`` to run instead of CP-SAT; None (the default) where there is
        none."""
        return None

    def lower_bound(self, inst: Any) -> float | None:
        """A proven lower bound (ms) on the objective of every plan of ``inst`` that meets
        its limits, cheap to compute (no program is built: about linear in the instance's
        size), from a relaxation the family's formulation states; None where the family
        states none. What a search's gap is measured against when no exact run bounds
        it."""
        return None

    # ----- examples -----------------------------------------------------------------------------
    @abstractmethod
    def random_instance(self, seed: int) -> Any:
        """A small random instance, small enough for brute force and deterministic for a
        seed: what the contract suites (``splitopt.testing.contracts``) run on."""

    def instance_from_data(self, data: Any) -> Any:
        """An instance of this family from splitopt JSON data: the core schema with this
        family's problems and settings, the core consistency checks, then :meth:`check`
        (InvalidInstance naming the field)."""
        from splitopt.core.instance_io import parse_instance_data

        def settings_class(problem: str) -> type[FamilySettings]:
            # asked after the schema check, which admits a family's problems only where it has one
            assert self.settings_class is not None
            return self.settings_class

        inst = parse_instance_data(data, instance_schema([self]), settings_class)
        self.prepare(inst)
        return inst

    # ----- output ------------------------------------------------------------------------------
    @abstractmethod
    def report(self, console: Any, inst: Any, plan: Any, metrics: Any, show_layers: bool = True) -> None:
        """Print the plan and its metrics for people (a ``rich`` console)."""

    def schedule(self, metrics: Any) -> tuple | None:
        """The plan's schedule (``splitopt.core.schedule.Task``s) for Gantt and breakdown
        plots, or None if the family's plans have none."""
        return getattr(metrics, "schedule", None)

    def breakdown(self, inst: Any, metrics: Any) -> list[tuple[str, float, float]] | None:
        """Per device (device, compute ms, communication ms) for the breakdown plot; by
        default from the schedule (None without one)."""
        from splitopt.core.schedule import breakdown

        tasks = self.schedule(metrics)
        return None if tasks is None else breakdown(tasks)

    def objective_unit(self, inst: Any) -> str:
        """The unit of the objective's value (and of bounds and gaps): ``ms`` for every
        time objective; a family with another objective (e.g. bytes sent) says so."""
        return "ms"

    def summary(self, inst: Any) -> str:
        """One line describing ``inst`` (for ``splitopt validate``)."""
        return inst.summary()

    # ===== what the generic layers ask instead of naming a family ==========================
    # The analysis (fronts, bandwidth, plots), the command line, the benchmark suites and
    # the tests ask these; each default fits a family without the feature.

    #: hypothesis examples per contract check (``tests/test_contracts.py``): fewer where
    #: brute force on the family's random instances costs more
    contract_examples: ClassVar[int] = 100
    #: options of the command line that change this family's instances (``solve`` and
    #: ``evaluate``: ``--NAME VALUE``): name -> the values it takes; :meth:`with_option`
    #: applies one
    instance_options: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: the objectives whose value is, for every plan, an affine function of 1/bandwidth
    #: of each link in :meth:`bandwidth_links` (``splitopt bandwidth --exact`` applies)
    affine_objectives: ClassVar[tuple[str, ...]] = ()
    #: what the family's Pareto front trades latency against (``splitopt pareto``), e.g.
    #: "error"; None where it has no front
    front_measure: ClassVar[str | None] = None
    #: the measures of the family's fronts where it has more than one (``splitopt pareto
    #: --against``), the first :attr:`front_measure`; empty: the one front only
    front_measures: ClassVar[tuple[str, ...]] = ()
    #: the backend of a front's solves where none is named; None: :attr:`default_backend`
    front_backend: ClassVar[str | None] = None

    def with_objective(self, inst: Any, objective: str) -> Any:
        """A prepared copy of ``inst`` with ``objective`` (one of :attr:`objectives`)."""
        changed = inst.with_settings(objective=objective)
        self.prepare(changed)
        return changed

    def with_option(self, inst: Any, name: str, value: str, where: str) -> Any:
        """A prepared copy of ``inst`` with the option ``name`` (one of
        :attr:`instance_options`) set to ``value`` (one of the values it takes). The base
        has no option: NotApplicable."""
        raise NotApplicable(f"{where}: does not apply to problem '{inst.problem}'")

    def pareto_front(self, inst: Any, solve: Callable[[Any], Any], points: int, mode: str) -> Any:
        """The family's Pareto front of latency against :attr:`front_measure`
        (a ``splitopt.core.front.Front``) with at most ``points`` points, swept as ``mode``
        says where the family sweeps more than one way (``splitopt.core.front.MODES``).
        ``solve(variant) -> SolveResult`` solves a variant of ``inst`` (another limit or
        objective) with the front's backend and time limit. A family with
        :attr:`front_measures` also takes ``against=`` one of them (given only where the
        caller chose one). NotApplicable (one line) where the instance has no front; the
        base has none."""
        raise NotApplicable(f"pareto: problem '{inst.problem}' has no Pareto front")

    def bandwidth_links(self, inst: Any) -> tuple:
        """The links whose bandwidth the objective depends on (``splitopt bandwidth``
        varies the one there is by default, and ``--exact`` varies these only); by
        default every link of a splitopt instance, none for other instances."""
        return tuple(getattr(inst, "links", ()) if self.core_instance else ())

    def not_affine_reason(self, inst: Any) -> str:
        """Why ``inst``'s objective is not in :attr:`affine_objectives` (part of the one
        line ``splitopt bandwidth --exact`` refuses it with)."""
        return "its objective is not an affine function of 1/bandwidth per plan"

    def describe_plan(self, inst: Any, plan: Any) -> str:
        """Which layers run where, in one line (the "split" column of ``splitopt
        bandwidth``): by default the layer count per device in instance order for a plan
        with a per-layer ``device`` mapping, else the plan's text."""
        device = getattr(plan, "device", None)
        if not isinstance(device, Mapping) or not self.core_instance:
            return str(plan)
        counts: dict[str, int] = {}
        for layer in inst.layers:
            counts[device[layer.name]] = counts.get(device[layer.name], 0) + 1
        return " | ".join(f"{d.name} {counts[d.name]}" for d in inst.devices if counts.get(d.name))

    def draws_plans(self, inst: Any) -> bool:
        """Whether ``--gantt`` can draw the plans of ``inst`` (asked before solving); by
        default where they have a schedule."""
        return self.has_schedule

    def plan_drawing(self, inst: Any, metrics: Any) -> Any:
        """What ``--gantt`` draws for a plan with ``metrics``
        (``splitopt.core.drawing``): by default its schedule, None without one."""
        from splitopt.core.drawing import Gantt

        tasks = self.schedule(metrics)
        return Gantt(tuple(tasks)) if tasks else None

    def default_solvers(self, problem: str, objective: str) -> tuple[str, ...]:
        """What a benchmark suite runs on an instance of ``problem`` with ``objective`` by
        default (``splitopt bench``; ``-s`` replaces it): the generic exact backends, the
        family's default first, then every baseline of the family that runs on
        ``problem``."""
        exact = tuple(dict.fromkeys((self.default_backend, "cpsat", "milp-highs")))
        return exact + tuple(m.name for m in self.methods()
                             if m.kind == "baseline" and (m.problems is None or problem in m.problems))

    def scale_cases(self) -> Sequence["ScaleCase"]:
        """The generated instances of growing size this family adds to the benchmark's
        scale suite; none by default."""
        return ()

    def foreign_report(self, inst: Any, metrics: Any) -> dict[str, Any]:
        """A plan's metrics as the imported format's own evaluator states them (what
        ``splitopt dnnp-eval`` prints); NotApplicable where the family imports none."""
        raise NotApplicable(f"problem '{inst.problem}' is not read from a foreign format")
    # ----- the torch bridge and hardware presets ------------------------------------------------
    # (splitopt.torch.side finds the family's torch side; splitopt.families.topologies builds
    # the instance hardware of ``splitopt profile --preset`` through these)

    #: ``"module:Class"`` of the family's torch side (a :class:`splitopt.torch.side.TorchSide`:
    #: what ``splitopt profile``, ``run`` and ``export`` do with its models); None: it has none.
    #: Naming it imports nothing; the side imports torch only when it works.
    torch_side: ClassVar[str | None] = None
    #: the topology built from device presets whose instances are this family's
    #: (``splitopt profile --preset A,B,... --topology NAME``); None: none
    topology: ClassVar[str | None] = None
    #: the fewest and most devices (None: no most) that topology takes
    topology_devices: ClassVar[tuple[int, int | None]] = (2, None)

    def topology_links(self, devices: Sequence[str]) -> list[tuple[str, str]]:
        """The links of the topology over ``devices`` (in the order given), as (source,
        target) pairs: by default each device to the next."""
        return list(zip(devices, devices[1:]))

    def topology_settings(self, names: Sequence[str], devices: Sequence[Mapping[str, Any]],
                          bit_widths: Sequence[int], quantized: bool, reference_bits: int | None) -> dict[str, Any]:
        """The settings (instance JSON) of an instance of the topology over devices
        ``names`` (``devices``: their JSON objects): the problem and the device roles;
        ``bit_widths``: the edge bit-widths the error tables offer, ``quantized``: whether
        they are measured, ``reference_bits``: the precision every device runs (None: not
        decided yet). InvalidOption (one line) where the devices cannot make one."""
        raise NotApplicable(f"problem family '{self.name}' builds no instance from device presets")

    def complete_profiled(self, inst: Any) -> Any:
        """An instance a profiler made (``splitopt profile``) with the settings the family
        derives from its measured tables (e.g. an error budget); by default ``inst`` as it is."""
        return inst

    def host_as_edge(self, links: list[dict[str, Any]], settings: dict[str, Any],
                     host: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The links and settings with the measured ``host`` device in the role of the
        topology's first device (``splitopt profile --measure --edge-host``), linked as it
        is; NotApplicable (one line) for a topology without such a role."""
        raise NotApplicable(f"--edge-host: applies to topologies with an edge device, not to a {settings['problem']}")


#: every member a family must provide (checked for each registered family by the tests)
PROTOCOL_MEMBERS: tuple[str, ...] = (
    "reads", "read", "name", "core_instance", "problems", "objectives", "settings_class", "plan_format", "program_kinds",
    "default_backend", "has_schedule", "description", "check", "build_data", "prepare", "plan_from_dict", "plan_to_dict",
    "evaluate", "start_plan", "diagnose", "build_program", "methods", "enumerate_plans", "space", "exact_method",
    "lower_bound", "report",
    "schedule", "breakdown", "objective_unit", "summary", "random_instance", "instance_from_data",
)


# ===== the hooks' members and types ===========================================================

@dataclass(frozen=True)
class ScaleCase:
    """A kind of generated instance of the benchmark's scale suite: ``make(n_layers,
    seed)`` returns the JSON data of an instance of ``problem`` with ``n_layers`` layers
    (deterministic for a seed), written to files named ``<stem>_n<layers>_s<seed>.json``;
    ``solvers``: what the suite runs on them by default."""

    stem: str
    problem: str
    make: Callable[[int, int], Any]
    solvers: tuple[str, ...]


#: the members of the block above, checked like the rest of the protocol
HOOK_MEMBERS = (
    "contract_examples", "instance_options", "affine_objectives", "front_measure", "front_measures", "front_backend",
    "with_objective", "with_option",
    "pareto_front", "bandwidth_links", "not_affine_reason", "describe_plan", "draws_plans", "plan_drawing",
    "default_solvers", "scale_cases", "foreign_report",
)
PROTOCOL_MEMBERS += HOOK_MEMBERS


def instance_schema(families: Sequence[Family]) -> dict[str, Any]:
    """The JSON Schema of splitopt instances of ``families``: the core schema, whose
    ``settings`` names their problems and objectives, with one branch per family (``if`` the
    problem is one of the family's, ``then`` the settings object holds its keys and no
    other: :meth:`FamilySettings.schema`)."""
    from splitopt.core.instance_io import core_schema

    schema = core_schema()
    settings = schema["$defs"]["settings"]
    own = [fam for fam in families if fam.core_instance and fam.settings_class is not None]
    settings["properties"]["problem"]["enum"] = [p for fam in own for p in fam.problems]
    settings["properties"]["objective"]["enum"] = list(dict.fromkeys(o for fam in own for o in fam.objectives))
    settings["allOf"] = [
        {"if": {"properties": {"problem": {"enum": list(fam.problems)}}, "required": ["problem"]},
         "then": {"$ref": f"#/$defs/settings_{fam.name}"}}
        for fam in own
    ]
    for fam in own:
        assert fam.settings_class is not None
        schema["$defs"][f"settings_{fam.name}"] = fam.settings_class.schema()
    return schema


#: the members of the torch bridge's and the hardware presets' block (every family has them,
#: the defaults saying "none")
PROTOCOL_MEMBERS = PROTOCOL_MEMBERS + (
    "torch_side", "topology", "topology_devices", "topology_links", "topology_settings", "complete_profiled",
    "host_as_edge",
)
