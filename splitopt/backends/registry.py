"""The one name -> backend map.

Generic backends (the exact program runners and brute force) are listed here as import
paths, so that listing them (``splitopt solvers``) imports none of their solver
packages; a family's own methods (``Family.methods()``) are found by name in the
instance's family. Adding a backend: its module and one line in ``BACKENDS``.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from splitopt.backends.base import Backend
from splitopt.backends.methods import MethodBackend
from splitopt.core.errors import SolverUnavailable, UnknownSolver
from splitopt.core.jsonfile import cut
from splitopt.families.registry import families

#: name -> "module:Class" of the generic backends
BACKENDS: dict[str, str] = {
    "milp-cbc": "splitopt.backends.cbc:CbcBackend",
    "milp-highs": "splitopt.backends.highs:HighsBackend",
    "cpsat": "splitopt.backends.cpsat:CpSatBackend",
    "brute-force": "splitopt.backends.brute_force:BruteForceBackend",
    "evolutionary": "splitopt.backends.heuristic:EvolutionaryBackend",
    "q-learning": "splitopt.backends.heuristic:QLearningBackend",
    "reinforce": "splitopt.backends.heuristic:ReinforceBackend",
    "auto": "splitopt.backends.auto:AutoBackend",
}
#: older names kept so that existing commands still work
ALIASES: dict[str, str] = {
    "chain-brute-force": "brute-force",
    "mesh-brute-force": "brute-force",
    "multiview-brute-force": "brute-force",
}


def backend_class(name: str) -> type[Backend]:
    """The class of a generic backend (UnknownSolver for another name)."""
    name = ALIASES.get(name, name)
    if name not in BACKENDS:
        raise UnknownSolver(f"unknown solver '{name}' (generic solvers: {', '.join(BACKENDS)})")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(name: str, family: Any | None = None) -> Backend:
    """The backend called ``name``: a generic one, or one of ``family``'s methods;
    UnknownSolver (listing what there is) or SolverUnavailable (with the install hint)."""
    name = ALIASES.get(name, name)
    if name in BACKENDS:
        cls = backend_class(name)
        if not cls.is_installed():
            raise SolverUnavailable(
                f"solver '{name}' needs {', '.join(cls.requires)}, which is not installed ({cls.install_hint})")
        return cls()
    if family is not None:
        for method in family.methods():
            if name == method.name or name in method.aliases:
                return MethodBackend(family, method)
    available = list(BACKENDS) + ([m.name for m in family.methods()] if family is not None else [])
    owners = [f for f in families() if f is not family and any(name in (m.name, *m.aliases) for m in f.methods())]
    if owners and family is not None:
        raise UnknownSolver(f"solver '{name}' is a method of problems {', '.join(owners[0].problems)} and does not "
                            f"handle problem '{family.problems[0] if len(family.problems) == 1 else family.name}' "
                            f"(available: {', '.join(available)})")
    where = f" for problem family '{family.name}'" if family is not None else ""
    raise UnknownSolver(f"unknown solver '{name}'{where} (available: {', '.join(available)})")


def check_backend(name: str, options: Mapping[str, Any]) -> None:
    """Before any instance is read (so that a bad command line fails at once): UnknownSolver
    for a name that is neither a generic backend nor a method of any family,
    SolverUnavailable for a missing package, InvalidOption for solver options the
    backend (each family method of that name) does not accept."""
    name = ALIASES.get(name, name)
    if name in BACKENDS:
        get_backend(name).check_options(options)
        return
    found = [(fam, m) for fam in families() for m in fam.methods() if name == m.name or name in m.aliases]
    if not found:
        known = list(BACKENDS) + sorted({m.name for fam in families() for m in fam.methods()})
        raise UnknownSolver(f"unknown solver '{cut(name)}' (available: {', '.join(known)})")
    for fam, method in found:
        MethodBackend(fam, method).check_options(options)


def entries() -> list[dict[str, Any]]:
    """Every backend: the generic ones, then each family's methods (for ``splitopt solvers``);
    ``hint``: a baseline the exact program backends start from (``Method.hint``)."""
    out = []
    for name in BACKENDS:
        cls = backend_class(name)
        out.append({"name": name, "kind": cls.kind, "families": "all", "installed": cls.is_installed(),
                    "hint": False, "description": cls.description})
    for fam in families():
        for m in fam.methods():
            problems = ", ".join(m.problems or fam.problems)
            out.append({"name": m.name, "kind": m.kind, "families": f"{fam.name} ({problems})", "installed": True,
                        "hint": m.hint, "description": m.description})
    return out


def names(kind: str | None = None, family: Any | None = None) -> list[str]:
    """Backend names, optionally only those of a kind ("exact", "baseline", ...) and those
    that apply to a family (its methods included)."""
    out = [n for n in BACKENDS if kind is None or backend_class(n).kind == kind]
    if family is not None:
        out = [n for n in out if backend_class(n)().handles(family, family.problems[0])]
        out += [m.name for m in family.methods() if kind is None or m.kind == kind]
    return out
