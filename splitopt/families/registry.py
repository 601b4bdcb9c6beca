"""The family registry: family name -> its class, problem name -> family.

Entries are import paths, so that naming the families imports none of them. Adding a
family: its folder, and one line in ``FAMILIES`` (and its name in ``READERS`` if it imports
a format other than splitopt's).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator

from splitopt.core.errors import InvalidInstance
from splitopt.families.base import Family, imported

#: family name -> "module:Class"
FAMILIES: dict[str, str] = {
    "edge_cloud": "splitopt.families.edge_cloud.family:EdgeCloudFamily",
    "chain": "splitopt.families.chain.family:ChainFamily",
    "mesh": "splitopt.families.mesh.family:MeshFamily",
    "multiview": "splitopt.families.multiview.family:MultiviewFamily",
    "maxload": "splitopt.families.maxload.family:MaxloadFamily",
    "loading": "splitopt.families.loading.family:LoadingFamily",
    "separable": "splitopt.families.separable.family:SeparableFamily",
    "llm": "splitopt.families.llm.family:LlmFamily",
}

#: the families whose ``reads`` accepts a format other than splitopt's (the peer benchmark's
#: files): reading such a file asks these alone, so it imports no other family (a test checks
#: that every other family keeps the base ``reads``)
READERS: tuple[str, ...] = ("maxload",)


#: the families built so far in this process, by name
BUILT: dict[str, Family] = {}


def family(name: str) -> Family:
    """The family registered as ``name`` (one shared object per process)."""
    if name not in BUILT:
        if name not in FAMILIES:
            raise KeyError(f"unknown family '{name}' (families: {', '.join(FAMILIES)})")
        BUILT[name] = imported(FAMILIES[name])()
    return BUILT[name]


def families() -> list[Family]:
    """Every registered family, in registry order."""
    return [family(name) for name in FAMILIES]


def readers() -> list[Family]:
    """The families that import a format other than splitopt's (``READERS``)."""
    return [family(name) for name in READERS]


@lru_cache(maxsize=None)
def problem_families() -> dict[str, str]:
    """Problem name -> family name."""
    out: dict[str, str] = {}
    for fam in families():
        for problem in fam.problems:
            out[problem] = fam.name
    return out


def family_for_problem(problem: str) -> Family:
    """The family of ``problem``; InvalidInstance (one line) for an unknown problem. The
    families already built are asked first, so that naming the problem of an instance a
    family has just read imports no other family; then the others in registry order, each
    imported only until one has the problem (reading an edge/cloud instance imports the
    first family alone)."""
    for name in FAMILIES:
        if name in BUILT and problem in BUILT[name].problems:
            return BUILT[name]
    for name in FAMILIES:
        if problem in family(name).problems:
            return BUILT[name]
    names = problem_families()
    if problem not in names:
        raise InvalidInstance(f"instance.settings.problem: unknown problem {problem!r} (problems: {', '.join(names)})")
    return family(names[problem])


def family_of(inst: Any) -> Family:
    """The family of an instance (``inst.problem``); InvalidInstance where ``inst`` is not
    one (a path, a dict, None: read it with ``splitopt.load_instance`` or ``parse_instance``)."""
    problem = getattr(inst, "problem", None)
    if not isinstance(problem, str):
        raise InvalidInstance(f"instance: a splitopt instance is expected (splitopt.load_instance or "
                              f"parse_instance), got {type(inst).__name__}")
    return family_for_problem(problem)


@contextmanager
def registered(fam: Family) -> Iterator[Family]:
    """``fam`` (an object of a :class:`Family` subclass whose module is importable) in the
    registry, after the others, for the duration of the ``with`` block; the registry as it
    was afterwards. What a test of the registry itself uses (a throwaway family): a real
    family is its folder and one line in ``FAMILIES``."""
    if fam.name in FAMILIES:
        raise KeyError(f"family '{fam.name}' is registered already")
    FAMILIES[fam.name] = f"{type(fam).__module__}:{type(fam).__qualname__}"
    BUILT[fam.name] = fam
    problem_families.cache_clear()
    try:
        yield fam
    finally:
        FAMILIES.pop(fam.name, None)
        BUILT.pop(fam.name, None)
        problem_families.cache_clear()
