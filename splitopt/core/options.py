"""What the user asks of a solve beyond the instance: time limit, threads, seed, solver
options. Checked once, here, so that every backend receives sane values and a bad one
is one line naming it (CLI exit 2) before any work starts."""

from __future__ import annotations

import contextvars
import dataclasses
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from splitopt.core.errors import InvalidOption

#: the most worker threads a backend is given (CP-SAT and HiGHS take an int32)
MAX_THREADS = 1024
#: seeds are passed to solvers as 32-bit signed integers
MAX_SEED = 2**31 - 1
#: a time limit beyond this (about 31 years) is refused rather than passed to solvers
#: that store seconds in 32-bit or float fields
MAX_TIME_LIMIT_S = 1e9


def check_time_limit(value: Any, name: str = "time_limit") -> float | None:
    """``value`` as a time limit in seconds (None: no limit); InvalidOption unless a finite
    number > 0 and <= MAX_TIME_LIMIT_S."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOption(f"{name}: must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0 or value > MAX_TIME_LIMIT_S:
        raise InvalidOption(f"{name}: must be a finite number of seconds in (0, {MAX_TIME_LIMIT_S:g}], got {value!r}")
    return float(value)


#: seconds a solve still gets when reading the instance used up its time limit: the
#: backends then return their start plan at once
MIN_SOLVE_S = 1e-3


def solve_time_left(time_limit_s: float | None, started: float) -> float | None:
    """What a time limit counted from ``started`` (``time.monotonic()``, before reading the
    instance) leaves to the solve, at least ``MIN_SOLVE_S``; None without a limit."""
    if time_limit_s is None:
        return None
    return max(MIN_SOLVE_S, time_limit_s - (time.monotonic() - started))


def check_int(value: Any, name: str, low: int, high: int) -> int:
    """``value`` as an integer in [low, high]; InvalidOption naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidOption(f"{name}: must be an integer in [{low}, {high}], got {value!r}")
    return value


def check_count(value: Any, option: str, low: int = 1, high: int = 10**6) -> int:
    """``value`` as an integer in [low, high] (a count the user gives: samples, repeats,
    epochs); InvalidOption naming ``option`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidOption(f"{option}: must be an integer in [{low}, {high}], got {value}")
    return value


#: seeds of the torch bridge (torch, numpy and the solvers all take 32-bit seeds)
MAX_TORCH_SEED = 2**32 - 1
#: the most samples a run of a split model runs (one at a time)
MAX_SAMPLES = 100_000


def check_seed(seed: Any, option: str = "--seed") -> int:
    """``seed`` as a seed of the torch bridge, in [0, 2**32 - 1]; InvalidOption otherwise."""
    return check_count(seed, option, low=0, high=MAX_TORCH_SEED)


def check_number(value: float | None, option: str, low: float, high: float, low_open: bool = False) -> None:
    """InvalidOption unless ``value`` (None: not given) is a finite number in [low, high]
    (``(low, high]`` when ``low_open``)."""
    if value is None:
        return
    bracket = "(" if low_open else "["
    if not (math.isfinite(value) and (low < value if low_open else low <= value) and value <= high):
        raise InvalidOption(f"{option}: must be a finite number in {bracket}{low:g}, {high:g}], got {value}")


#: solver options every exact program backend (CBC, HiGHS, CP-SAT) accepts, with what
#: they mean; a solver that stops at such a gap reports FEASIBLE with its true gap
PORTABLE_OPTIONS = {
    "mip_gap": "relative gap in [0, 1] at which the solver may stop",
    "mip_gap_abs": "absolute gap in ms (a finite number >= 0) at which the solver may stop",
}


def check_portable_option(key: str, value: Any) -> float:
    """The value of a portable solver option (:data:`PORTABLE_OPTIONS`); InvalidOption
    naming it otherwise."""
    high = 1.0 if key == "mip_gap" else math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= high:
        raise InvalidOption(f"option '{key}': must be a {PORTABLE_OPTIONS[key].split(' at ')[0]}, "
                            f"got {str(value)[:60]!r}")
    return float(value)


@dataclass(frozen=True)
class SolveOptions:
    """Options every backend receives.

    ``time_limit_s``: the user's wall-clock budget in seconds for the whole solve,
    building the program included (None: none); ``deadline`` is the same budget as a
    ``time.monotonic()`` instant, set when the solve starts: a backend reads what is
    left with :meth:`remaining_s`. ``threads``: worker threads; ``seed``: fixes
    randomness (same seed, same plan); ``verbose``: stream the solver's own log to
    stderr; ``export_path``: write the built program there (.lp/.mps for MILP,
    .txt/.pb for CP-SAT); ``solver_options``: passed through to the backend, which
    refuses names it does not know (InvalidOption)."""

    time_limit_s: float | None = None
    threads: int = 1
    seed: int = 0
    verbose: bool = False
    export_path: Path | None = None
    solver_options: Mapping[str, Any] = field(default_factory=dict)
    deadline: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_limit_s", check_time_limit(self.time_limit_s))
        check_int(self.threads, "threads", 1, MAX_THREADS)
        check_int(self.seed, "seed", 0, MAX_SEED)
        if self.deadline is None and self.time_limit_s is not None:
            object.__setattr__(self, "deadline", time.monotonic() + self.time_limit_s)

    def remaining_s(self) -> float | None:
        """Seconds left of the time limit (None: no limit; may be <= 0: time is up)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def out_of_time(self) -> bool:
        """Whether the time limit is spent (never, without one)."""
        left = self.remaining_s()
        return left is not None and left <= 0

    def with_budget(self, seconds: float, **changes: Any) -> SolveOptions:
        """These options with a budget of ``seconds`` from now (<= 0: already spent) as
        their time limit and deadline, and ``changes`` to other fields: a slice of the
        budget for one phase of a solve (the caller keeps it within its own deadline)."""
        return dataclasses.replace(self, time_limit_s=max(seconds, 1e-9), deadline=time.monotonic() + seconds,
                                   **changes)


# ----- the budget while a family builds its program ---------------------------------------------

#: the deadline (``time.monotonic()``) of the program being built; set by the backend
_BUILD_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("splitopt_build_deadline",
                                                                               default=None)


class BuildDeadlinePassed(Exception):
    """The user's budget ran out while a family was building its program (a backend turns
    it into a run without a plan, which falls back on the start plan)."""


@contextmanager
def building_until(deadline: float | None) -> Iterator[None]:
    """Within the block, :func:`check_build_deadline` raises once ``deadline`` passes."""
    token = _BUILD_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _BUILD_DEADLINE.reset(token)


def check_build_deadline() -> None:
    """Raise BuildDeadlinePassed if the program being built has run out of time: builders
    whose work grows with the instance call it every so often, so that a time limit is the
    user's wall-clock budget, building included."""
    deadline = _BUILD_DEADLINE.get()
    if deadline is not None and time.monotonic() >= deadline:
        raise BuildDeadlinePassed()
