"""A sweep's jobs: one solve each (an instance file, a solver, a seed, a time limit and a
thread count), in a fixed order, each with a stable key that the store resumes by."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from splitopt.core.errors import InvalidOption


@dataclass(frozen=True)
class Job:
    """One solve: ``instance`` a file path, ``time_limit_s`` wall-clock seconds (None: no
    limit), ``threads`` the solver threads (and CPUs the job is pinned to)."""

    instance: str
    solver: str
    seed: int = 0
    time_limit_s: Optional[float] = None
    threads: int = 1

    def __post_init__(self) -> None:
        # a limit given as an int (60) is the same job as 60.0, which is how a worker reads
        # it back from JSON: the key must not tell them apart
        if isinstance(self.time_limit_s, int) and not isinstance(self.time_limit_s, bool):
            object.__setattr__(self, "time_limit_s", float(self.time_limit_s))

    @property
    def key(self) -> str:
        """A stable id of the job's inputs (the file's path and content, solver, seed,
        limit, threads): a resumed sweep skips the jobs whose key is in the store."""
        content = hashlib.sha256(Path(self.instance).read_bytes()).hexdigest()[:16]
        spec = json.dumps({**asdict(self), "content": content}, sort_keys=True)
        return hashlib.sha256(spec.encode()).hexdigest()[:20]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "Job":
        return Job(str(raw["instance"]), str(raw["solver"]), int(raw["seed"]),
                   None if raw.get("time_limit_s") is None else float(raw["time_limit_s"]), int(raw["threads"]))


def expand(instances: Iterable[str | Path], solvers: Iterable[str], seeds: Iterable[int],
           time_limit_s: float | None, threads: int) -> list[Job]:
    """Every (instance, solver, seed) in that nesting order, each instance by its absolute
    path (so that a store resumes however the paths are spelled) and once (a file named
    twice, or two solvers' same name, is one job); a missing file, an unknown solver or an
    empty list is one line (InvalidOption, UnknownSolver) before anything runs."""
    from splitopt.backends.registry import check_backend

    paths = list(dict.fromkeys(str(Path(p).absolute()) for p in instances))
    solvers, seeds = list(dict.fromkeys(solvers)), list(dict.fromkeys(seeds))
    for name in solvers:
        check_backend(name, {})
    for p in paths:
        if not Path(p).is_file():
            why = "is not a regular file (a directory, FIFO, device or socket)" if Path(p).exists() else "does not exist"
            raise InvalidOption(f"sweep: instance file {p!r} {why}")
    for name, values in (("instances", paths), ("solvers", solvers), ("seeds", seeds)):
        if not values:
            raise InvalidOption(f"sweep: no {name} given")
    if threads < 1:
        raise InvalidOption(f"--threads: must be at least 1, got {threads}")
    return [Job(p, s, int(seed), time_limit_s, threads) for p in paths for s in solvers for seed in seeds]
