"""The backend interface. A backend (exact program, baseline, heuristic) is one small
class registered by name in ``splitopt.solvers.registry``; adding one touches only its
module and one line of the registry."""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from splitopt.instance import Instance
from splitopt.result import BackendOutput


@dataclass(frozen=True)
class SolveOptions:
    """Options every backend receives. ``time_limit_s`` None means no limit; ``threads``
    is the number of worker threads; ``seed`` fixes randomness; ``verbose`` streams the
    solver's own log to stdout; ``export_path`` asks the backend to write the built
    program there (.lp/.mps for MILP, .txt/.pb.txt for CP-SAT)."""

    time_limit_s: float | None = None
    threads: int = 1
    seed: int = 0
    verbose: bool = False
    export_path: Path | None = None


class Backend(ABC):
    #: registry name, e.g. "milp-cbc"
    name: str = ""
    #: "exact" (proves optimality), "baseline" (a published method) or "heuristic"
    kind: str = "exact"
    #: problems it handles
    problems: tuple[str, ...] = ("split", "split_bits")
    #: importable modules it needs; checked without importing them
    requires: tuple[str, ...] = ()
    #: the pip extra that installs them
    install_hint: str = "pip install -e ."
    description: str = ""

    @classmethod
    def is_installed(cls) -> bool:
        return all(importlib.util.find_spec(mod) is not None for mod in cls.requires)

    @abstractmethod
    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        """Solve ``inst`` and return the plan (or the reason there is none)."""
