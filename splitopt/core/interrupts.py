"""Ctrl-C during an OR-Tools CP-SAT solve, which runs in this process.

CP-SAT (9.15) by default catches SIGINT itself while it searches: Ctrl-C then stops it,
but nothing tells the caller that the user (not the time limit) stopped it, and on
return it leaves SIGINT at its default disposition, so a later Ctrl-C killed the process
(exit -2, no incumbent, no message; found by the Ctrl-C test of ``auto``, whose search
runs after a CP-SAT probe). :func:`solve_cpsat` instead turns CP-SAT's handler off and
runs the search in a worker thread; the main thread waits on an event, takes Ctrl-C as a
KeyboardInterrupt and stops the search with ``StopSearch`` (thread-safe), so the
incumbent comes back and the stop is known to be the user's.

We wait on an ``Event`` rather than ``Thread.join``: a KeyboardInterrupt inside ``join``
can leave ``is_alive()`` False while the thread still runs (CPython issue 90882).
"""

from __future__ import annotations

import threading
from typing import Any

#: seconds between checks for Ctrl-C while CP-SAT searches
POLL_S = 0.05


def solve_cpsat(solver: Any, model: Any, callback: Any = None) -> tuple[int, bool]:
    """``solver.Solve(model, callback)`` with Ctrl-C stopping the search: (CP-SAT status
    code, whether Ctrl-C stopped it). From a thread other than the main one (which gets
    no signals) it simply solves."""
    solver.parameters.catch_sigint_signal = False
    if threading.current_thread() is not threading.main_thread():
        return solver.Solve(model, callback), False
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["code"] = solver.Solve(model, callback)
        except BaseException as e:  # re-raised in the caller's thread
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=work, name="cpsat-search", daemon=True).start()
    stopped = False
    while not done.is_set():
        try:
            done.wait(POLL_S)
        except KeyboardInterrupt:
            stopped = True
            solver.StopSearch()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["code"], stopped
