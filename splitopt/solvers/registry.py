"""The one name -> backend map. Entries are import paths so that listing the backends
(``splitopt solvers``) imports none of their solver packages."""

from __future__ import annotations

import importlib

from splitopt.errors import SolverUnavailable, UnknownSolver
from splitopt.solvers.base import Backend

#: name -> "module:Class"; the first exact entry is the default
BACKENDS: dict[str, str] = {
    "milp-cbc": "splitopt.solvers.milp:CbcBackend",
    "milp-highs": "splitopt.solvers.milp:HighsBackend",
    "cpsat": "splitopt.solvers.cpsat:CpSatBackend",
    "brute-force": "splitopt.baselines.brute_force:BruteForceBackend",
    "cloud-only": "splitopt.baselines.cloud_only:CloudOnlyBackend",
    "edge-only": "splitopt.baselines.edge_only:EdgeOnlyBackend",
    "u8": "splitopt.baselines.u8:U8Backend",
    "neurosurgeon": "splitopt.baselines.neurosurgeon:NeurosurgeonBackend",
    "qdmp": "splitopt.baselines.qdmp:QdmpBackend",
    "auto-split": "splitopt.baselines.auto_split:AutoSplitBackend",
    "chain-brute-force": "splitopt.baselines.chain:ChainBruteForceBackend",
    "chain-dp": "splitopt.baselines.chain:ChainDpBackend",
    "chain-scan": "splitopt.baselines.chain:ChainScanBackend",
    "best-single-device": "splitopt.baselines.chain:BestSingleDeviceBackend",
    "mesh-brute-force": "splitopt.baselines.mesh:MeshBruteForceBackend",
    "mesh-best-single-device": "splitopt.baselines.mesh:BestSingleDeviceBackend",
    "heft": "splitopt.baselines.mesh:HeftBackend",
    "multiview-brute-force": "splitopt.baselines.multiview:MultiviewBruteForceBackend",
    "all-on-aggregator": "splitopt.baselines.multiview:AllOnAggregatorBackend",
    "all-on-sensor": "splitopt.baselines.multiview:AllOnSensorBackend",
    "common-split": "splitopt.baselines.multiview:CommonSplitBackend",
}

DEFAULT_SOLVER = "milp-cbc"
#: problems whose default is another backend: the schedule and chain programs are far
#: faster in CP-SAT (benchmarks/results/{chain,mesh,multiview}.md)
DEFAULT_BY_PROBLEM = {"chain": "cpsat", "mesh": "cpsat", "multiview": "cpsat"}


def default_solver(problem: str) -> str:
    """The backend ``splitopt solve`` uses when none is named."""
    return DEFAULT_BY_PROBLEM.get(problem, DEFAULT_SOLVER)


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise UnknownSolver(f"unknown solver '{name}' (available: {', '.join(BACKENDS)})")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(name: str) -> Backend:
    cls = backend_class(name)
    if not cls.is_installed():
        raise SolverUnavailable(
            f"solver '{name}' needs {', '.join(cls.requires)}, which is not installed ({cls.install_hint})"
        )
    return cls()


def names(kind: str | None = None, problem: str | None = None) -> list[str]:
    """Backend names, optionally only those of a kind ("exact", "baseline", ...) and
    those that handle a problem."""
    return [n for n in BACKENDS
            if (kind is None or backend_class(n).kind == kind)
            and (problem is None or problem in backend_class(n).problems)]
