"""Progress of long work, for a caller that wants to show it; the library itself stays
silent.

A caller installs one callback for a block of work (:func:`reporting`); within it,
solvers and loops report what they are doing (:func:`report`, :func:`phase`,
:func:`solving`), and the callback receives a :class:`Progress` snapshot each time
something changes: the phase (e.g. ``auto / probe / cpsat / solving``), seconds since
the block began, the best incumbent objective (ms) and the best lower bound (ms) of the
solve running now, and how many solves have begun in the block (a Pareto front or a
bandwidth sweep runs one per point). Outside such a block every call here is a no-op
that costs one context-variable lookup.

Incumbents and bounds are shown values, not results: they are the solver's own numbers
in ms (a bound before the program's rounding tolerance is taken off), and the result of
the solve remains what :func:`splitopt.solve.solve` returns.

Solver threads (CP-SAT's callbacks, a log reader) do not see the caller's context:
they take the :class:`Reporter` with :func:`current` in the solving thread and call it
directly. The callback may be called from such threads.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Progress:
    """One snapshot: ``phase`` (labels from outer to inner, joined by ``" / "``),
    ``elapsed_s`` since :func:`reporting` began, the best ``incumbent_ms`` and
    ``bound_ms`` of the current solve (None: none yet), ``solves`` begun so far and
    ``step``, a loop's position (e.g. ``"point 3 of 12"``; empty outside loops)."""

    phase: str
    elapsed_s: float
    incumbent_ms: float | None = None
    bound_ms: float | None = None
    solves: int = 0
    step: str = ""


#: what :func:`reporting` is given
ProgressCallback = Callable[[Progress], None]


class Reporter:
    """The state behind one :func:`reporting` block; calling it reports (thread-safe)."""

    def __init__(self, callback: ProgressCallback):
        self.callback = callback
        self.t0 = time.monotonic()
        self.phases: list[str] = []
        self.step = ""
        self.solves = 0
        self.incumbent_ms: float | None = None
        self.bound_ms: float | None = None
        self._lock = threading.Lock()

    def __call__(self, incumbent_ms: float | None = None, bound_ms: float | None = None) -> None:
        """Report a new incumbent and/or bound (ms); only improvements change the snapshot
        (a lower incumbent, a higher bound)."""
        with self._lock:
            changed = False
            if incumbent_ms is not None and (self.incumbent_ms is None or incumbent_ms < self.incumbent_ms):
                self.incumbent_ms, changed = incumbent_ms, True
            if bound_ms is not None and (self.bound_ms is None or bound_ms > self.bound_ms):
                self.bound_ms, changed = bound_ms, True
        if changed:
            self.emit()

    def snapshot(self) -> Progress:
        return Progress(" / ".join(self.phases), time.monotonic() - self.t0, self.incumbent_ms, self.bound_ms,
                        self.solves, self.step)

    def emit(self) -> None:
        self.callback(self.snapshot())


_CURRENT: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("splitopt_progress", default=None)


@contextmanager
def reporting(callback: ProgressCallback | None) -> Iterator[Reporter | None]:
    """Within the block, progress goes to ``callback`` (None: nowhere)."""
    if callback is None:
        yield None
        return
    reporter = Reporter(callback)
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)


def current() -> Reporter | None:
    """The reporter of the enclosing :func:`reporting` block (None: nobody listens)."""
    return _CURRENT.get()


def report(incumbent_ms: float | None = None, bound_ms: float | None = None) -> None:
    """Report an incumbent and/or a bound (ms) of the solve running now."""
    reporter = _CURRENT.get()
    if reporter is not None:
        reporter(incumbent_ms, bound_ms)


@contextmanager
def phase(label: str) -> Iterator[None]:
    """Within the block, the phase has ``label`` as its innermost part."""
    reporter = _CURRENT.get()
    if reporter is None:
        yield
        return
    reporter.phases.append(label)
    reporter.emit()
    try:
        yield
    finally:
        reporter.phases.pop()


@contextmanager
def solving(label: str) -> Iterator[None]:
    """One solve: counts it, forgets the previous solve's incumbent and bound, and labels
    the phase (``splitopt.solve.solve`` uses it; backends report within)."""
    reporter = _CURRENT.get()
    if reporter is None:
        yield
        return
    with reporter._lock:
        reporter.solves += 1
        reporter.incumbent_ms = reporter.bound_ms = None
    with phase(label):
        yield


def clears_step(func: Callable[..., T]) -> Callable[..., T]:
    """Decorate a loop that reports its :func:`step`: the step is cleared when it returns
    or raises."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return func(*args, **kwargs)
        finally:
            step("")

    return wrapper


def step(label: str) -> None:
    """Say where a loop is (e.g. ``"point 3 of 12"``); "" when it is done."""
    reporter = _CURRENT.get()
    if reporter is not None:
        reporter.step = label
        reporter.emit()
