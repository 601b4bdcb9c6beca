"""A family's torch side: what the torch bridge's commands do with the family's models,
and how it is found.

A family names its side (:attr:`splitopt.families.base.Family.torch_side`, an import
path ``"module:Class"``, None where it has none); :func:`torch_side` imports it. The
commands (``splitopt profile``, ``run``, ``export``) and the shared torch code ask the
side of an instance's family (:func:`side_of`) and never name a family. A side's module
imports torch only inside its methods, so that the command line can ask a side which
options it takes and check them before torch is imported (seconds).

What a side offers (each piece optional; the class attributes say which):

* ``splitopt run INSTANCE PLAN``: :attr:`TorchSide.run_options` (the options it takes, a
  dataclass checked when built), :meth:`TorchSide.check_run` (checks that need no torch),
  :meth:`TorchSide.run` (a JSON-ready report with ``ok``) and
  :meth:`TorchSide.print_run`; ``--transport tcp``: :attr:`TorchSide.tcp_options` and the
  hooks of :class:`splitopt.torch.layer_graph.LayerGraphSide`;
* cutting plans into parts (:func:`splitopt.torch.partition.partition`, which finds the
  side by :func:`partition_side`) and ``splitopt export``: :attr:`TorchSide.cuts_plans`,
  :attr:`TorchSide.exports`, :attr:`TorchSide.staged` and the hooks :meth:`TorchSide.device_order`,
  :meth:`TorchSide.check_partition_plan`, :meth:`TorchSide.cut`,
  :meth:`TorchSide.evaluator_crossings`, :meth:`TorchSide.check_split`;
* ``splitopt profile MODEL``: :attr:`TorchSide.profile_models` (the models its own
  profiler builds; :meth:`TorchSide.builds_model` where names follow a pattern),
  :attr:`TorchSide.profile_options` and :meth:`TorchSide.profile`;
* :attr:`TorchSide.former_verbs`: the family's own former command names (hidden aliases
  of ``profile`` and ``run``), so that the command line finds the side of an alias by the
  name the user typed.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping

from splitopt.core.errors import InvalidOption, NotApplicable


@dataclass
class Profiled:
    """What a profiler made: the instance, one line describing it (printed after "wrote
    FILE: "), and other files to write beside it (``(option, path, text)``: e.g. the
    accuracy records of ``--records``)."""

    instance: Any
    summary: str
    outputs: list[tuple[str, Path, str]] = field(default_factory=list)


class TorchSide:
    """The torch side of one family. Subclasses set the class attributes of what they offer
    and implement the matching methods; the defaults say the family offers nothing."""

    #: the registry name of the family it serves
    family: ClassVar[str] = ""
    #: the family's former command names, hidden aliases of ``profile`` and ``run``
    former_verbs: ClassVar[tuple[str, ...]] = ()

    # ----- splitopt run ------------------------------------------------------------------------
    #: the options of ``splitopt run`` on this family's instances: a dataclass whose fields are
    #: the options (``--fine-tune`` is ``fine_tune``), with their defaults (a field without one
    #: is needed), checked when built (InvalidOption naming the option); None: none of its
    #: plans run
    run_options: ClassVar[type | None] = None
    #: the options of ``splitopt run --transport tcp`` (one process per device, tensors sent over
    #: TCP: :mod:`splitopt.netrun`); None: its plans do not run so
    tcp_options: ClassVar[type | None] = None

    def check_run(self, inst: Any, options: Any, where: str) -> None:
        """Checks of ``options`` against the instance that need no torch (e.g. the model it
        was profiled from), before torch is imported: one line (InvalidOption,
        NotApplicable; ``where``: the instance file, for the message). Default: none."""

    def check_run_plan(self, inst: Any, plan: Any, options: Any, where: str) -> None:
        """Checks of the plan that need no torch (e.g. a plan the run cannot execute): one
        line (``where``: the plan file). Default: none."""

    def run(self, inst: Any, plan: Any, options: Any, plan_path: str | None = None) -> dict[str, Any]:
        """Run ``plan`` of ``inst`` on this host as ``options`` say and compare it with the
        evaluator: a JSON-ready report with ``ok`` (the command's exit status 0 or 1).
        ``plan_path``: the file the plan was read from, where a report names it."""
        raise NotApplicable(f"run: problem '{inst.problem}' has no run of its plans")

    def print_run(self, console: Any, report: Mapping[str, Any]) -> None:
        """Print a report of :meth:`run` for people (a ``rich`` console)."""
        raise NotImplementedError

    # ----- cutting plans into parts, splitopt export ---------------------------------------------
    #: whether :func:`splitopt.torch.partition.partition` cuts its plans into parts (the
    #: layer-graph families' sides: :class:`splitopt.torch.layer_graph.LayerGraphSide`)
    cuts_plans: ClassVar[bool] = False
    #: whether ``splitopt export`` writes its plans' parts (one file per part)
    exports: ClassVar[bool] = False
    #: whether its parts are stages: any device may read any other's tensors (no device order
    #: to keep), a device may have several parts, and every layer runs in float (its plans
    #: have no bit-widths); False: one part per device, in device order
    staged: ClassVar[bool] = False

    def device_order(self, inst: Any) -> list[str]:
        """The instance's devices in execution order (a side that cuts plans)."""
        raise NotImplementedError

    def check_partition_plan(self, inst: Any, plan: Any) -> None:
        """Checks of the plan the family makes before its parts are cut (InvalidPlan, one
        line); default: none."""

    def cut(self, capture: Any, plan: Any, inst: Any, order: list[str], example_input: Any, reference_bits: int,
            wbits: dict[str, int], abits: dict[str, int], ranges: dict[str, tuple[float, float]],
            quantized: bool) -> Any:
        """The :class:`splitopt.torch.split_model.SplitModel` of a plan already checked
        against the capture (a side that cuts plans; the layer-graph sides' default:
        :meth:`splitopt.torch.layer_graph.LayerGraphSide.cut`)."""
        raise NotImplementedError

    def evaluator_crossings(self, inst: Any, plan: Any) -> list[tuple[str, str, float]]:
        """``(source device, target device, bytes per sample)`` of every crossing of the
        plan's split, as the family's evaluator counts them, in the split's crossing order
        (a side that cuts plans)."""
        raise NotImplementedError

    def check_split(self, split: Any, inst: Any) -> tuple[dict[str, Any], bool]:
        """Further checks of a split's bytes against the evaluator (e.g. per link): the
        report's entries and whether they agree; default: none."""
        return {}, True

    # ----- splitopt profile ----------------------------------------------------------------------
    #: the models its own profiler builds (``splitopt profile MODEL``); empty: none
    profile_models: ClassVar[tuple[str, ...]] = ()
    #: the options of that profiler (a dataclass, as :attr:`run_options`)
    profile_options: ClassVar[type | None] = None

    def builds_model(self, model: str) -> bool:
        """Whether this side's profiler builds ``model`` (default: one of
        :attr:`profile_models`; a side whose models are named by a pattern says so)."""
        return model in self.profile_models

    def check_profile_model(self, model: str, option: str = "MODEL") -> None:
        """InvalidOption (one line naming ``option``) unless ``model`` is one of
        :attr:`profile_models`."""
        if model not in self.profile_models:
            raise InvalidOption(f"{option}: unknown model '{model}' (choose from {', '.join(self.profile_models)})")

    def profile(self, model: str, options: Any) -> Profiled:
        """Profile ``model`` (one of :attr:`profile_models`) into an instance of the family
        (its options checked as :attr:`profile_options` was built)."""
        raise NotApplicable(f"profile: family '{self.family}' profiles no model itself")

    # ----- the former commands -------------------------------------------------------------------
    def check_family(self, inst: Any, where: str) -> None:
        """NotApplicable (one line) unless ``inst`` is an instance of this side's family: what
        the family's former ``run`` command said of another instance (``where``: its file)."""
        from splitopt.families.registry import family

        if inst.problem not in family(self.family).problems:
            maker = f" (made by `splitopt {self.former_verbs[0]}`)" if self.former_verbs else ""
            raise NotApplicable(f"{where}: problem '{inst.problem}' is not a {self.family} instance{maker}")


#: the sides built so far in this process, by import path
_BUILT: dict[str, TorchSide] = {}


def torch_side(family: Any) -> TorchSide | None:
    """The torch side ``family`` names (one shared object per process), None where it has
    none. Imports the side's module, not torch."""
    path = getattr(family, "torch_side", None)
    if path is None:
        return None
    if path not in _BUILT:
        module, cls = path.split(":")
        _BUILT[path] = getattr(importlib.import_module(module), cls)()
    return _BUILT[path]


def sides() -> list[TorchSide]:
    """The torch side of every registered family that has one, in registry order."""
    from splitopt.families.registry import families

    return [s for s in (torch_side(f) for f in families()) if s is not None]


def side_of(inst: Any, verb: str) -> TorchSide:
    """The torch side of ``inst``'s family; NotApplicable naming ``verb`` (e.g. ``run``)
    and the problems that have one where it has none."""
    from splitopt.families.registry import family_of

    side = torch_side(family_of(inst))
    if side is None:
        raise NotApplicable(f"{verb}: problem '{inst.problem}' has no torch side (problems with one: "
                            f"{', '.join(problems_with(lambda s: True))})")
    return side


def side_of_verb(verb: str) -> TorchSide:
    """The side whose :attr:`TorchSide.former_verbs` has ``verb`` (a hidden alias the user
    typed)."""
    for side in sides():
        if verb in side.former_verbs:
            return side
    raise KeyError(f"no torch side answers to the command '{verb}'")


def problems_with(offers: Any) -> list[str]:
    """The problems of the registered families whose side ``offers(side)`` is true, in
    registry order (what a message lists as the problems a command supports)."""
    from splitopt.families.registry import families

    out: list[str] = []
    for fam in families():
        side = torch_side(fam)
        if side is not None and offers(side):
            out.extend(fam.problems)
    return out


def option_name(field_name: str) -> str:
    """The command-line option of an options dataclass's field: ``fine_tune`` ->
    ``--fine-tune``."""
    return "--" + field_name.replace("_", "-")


def build_options(kind: type, values: Mapping[str, Any], what: str) -> Any:
    """An options dataclass ``kind`` from the options the user gave (``values``: field name
    -> value, the options not given left out): InvalidOption naming the first option
    ``kind`` does not take, or a needed one that is missing (``what``: the command and the
    instance's problem, for the message); the dataclass's own checks run as it is built."""
    fields = {f.name: f for f in dataclasses.fields(kind)}
    for name in values:
        if name not in fields:
            takes = ", ".join(option_name(f) for f in fields) or "none"
            raise InvalidOption(f"{option_name(name)}: not an option of {what} (its options: {takes})")
    for name, f in fields.items():
        needed = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if needed and name not in values:
            raise InvalidOption(f"{option_name(name)}: needed by {what}")
    return kind(**values)


def partition_side(plan: Any, inst: Any = None) -> TorchSide:
    """The torch side that cuts ``plan`` into parts (:func:`splitopt.torch.partition.partition`):
    that of ``inst``'s family, or without an instance that of the first registered family
    whose plans are of ``plan``'s type. NotApplicable (one line) where that side does not
    cut plans so (:attr:`TorchSide.cuts_plans`)."""
    from splitopt.families.registry import families, family_of

    if inst is not None:
        family = family_of(inst)
    else:
        found = next((f for f in families() if f.torch_side is not None and isinstance(plan, f.plan_type())), None)
        if found is None:
            raise NotApplicable(f"partition: a plan of type {type(plan).__name__} is not one a layer-graph family cuts")
        family = found
    side = torch_side(family)
    if side is None or not side.cuts_plans:
        problem = inst.problem if inst is not None else family.problems[0]
        where = f"; its own side cuts them: {type(side).__module__}" if side is not None else ""
        raise NotApplicable(f"partition: problem '{problem}' is not supported by partition (it cuts plans of "
                            f"problems {', '.join(problems_with(lambda s: s.cuts_plans))}{where})")
    return side
