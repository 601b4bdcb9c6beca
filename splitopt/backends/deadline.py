"""Keeping the user's wall-clock budget and Ctrl-C, for backends that run a solver.

The promise (docs/guide/backends.md, "What a result promises"): a solve with ``time_limit=L`` returns
within ``L * 1.1 + 1`` seconds, building included, with its incumbent; Ctrl-C stops the
solver, leaves no child process and returns the incumbent. Solvers' own limits are not
enough to keep it: CBC checks its ``-sec`` limit only between phases (a root LP of 50,000
rows ran on for minutes; its SIGINT handler, too, acts only once branch and bound has
begun), and HiGHS polls its limit only inside simplex, IPM and MIP loops. So:

* emitters call :func:`check_deadline` every few thousand rows and stop with
  :class:`DeadlinePassed` when the budget is spent (the backend then returns the
  family's start plan);
* a solver runs as a child process (CBC; HiGHS through ``python -m
  splitopt.backends.highs``) through :func:`run_child`: in its own
  session (a terminal's Ctrl-C reaches splitopt only, which forwards it), sent SIGINT at
  the deadline or on Ctrl-C (CBC then stops its search and writes its incumbent), and
  killed :func:`stop_grace_s` seconds later if it has not stopped; it never outlives the
  call (HiGHS's child cancels HiGHS through its interrupt callbacks on SIGINT).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Sequence

from splitopt.core.child_processes import killed_with_parent
from splitopt.core.options import SolveOptions

#: emitters check the deadline once per this many rows
CHECK_EVERY_ROWS = 2048


class DeadlinePassed(Exception):
    """The user's budget ran out while a program was being emitted (internal: a backend
    turns it into a run without a plan, which falls back on the start plan)."""


def check_deadline(options: SolveOptions) -> None:
    """Raise DeadlinePassed if the budget of ``options`` is spent."""
    if options.out_of_time():
        raise DeadlinePassed()


def stop_grace_s(options: SolveOptions, interrupted: bool = False) -> float:
    """Seconds a solver asked to stop is given to stop on its own and report its incumbent
    before it is killed: at the deadline 0.25 s plus 4 % of the limit, so that stopping,
    reading the answer and the evaluator's check fit in the promise's ``10 % + 1 s``; on
    Ctrl-C at least 1.5 s (the user waits for the incumbent, not for a deadline)."""
    grace = 0.25 + 0.04 * (options.time_limit_s or 0.0)
    return max(grace, 1.5) if interrupted else grace


@dataclass
class ChildRun:
    """How a child solver process ended: its exit ``returncode`` (negative: the signal that
    ended it), whether it was asked to stop early (``stopped``: at the deadline, or
    ``interrupted``: on Ctrl-C) and whether it had to be ``killed``."""

    returncode: int
    pid: int = 0
    stopped: bool = False
    interrupted: bool = False
    killed: bool = False
    elapsed_s: float = 0.0


def run_child(args: Sequence[str], log_path: str, options: SolveOptions, poll_s: float = 0.05) -> ChildRun:
    """Run ``args`` with stdout and stderr to ``log_path``, within the budget of
    ``options`` (see the module docstring). Ctrl-C (KeyboardInterrupt) while it runs asks
    the child to stop and is not raised again: the caller reads what the child wrote; a
    second Ctrl-C kills the child at once. The child never outlives this call."""
    t0 = time.monotonic()
    run = ChildRun(returncode=0)
    asked_at: float | None = None  # when SIGINT was sent
    with open(log_path, "w") as log:
        # its own session (a terminal's Ctrl-C reaches splitopt only); killed by the kernel
        # if splitopt itself is killed (SIGKILL, an out-of-memory kill), which no handler sees
        proc = subprocess.Popen(list(args), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=killed_with_parent())
    run.pid = proc.pid
    try:
        while True:
            try:
                code = proc.wait(timeout=poll_s)
                run.returncode = code
                break
            except subprocess.TimeoutExpired:
                pass
            except KeyboardInterrupt:
                if asked_at is not None:  # a second Ctrl-C: do not wait any longer
                    _kill(proc)
                    run.killed = True
                    run.returncode = proc.returncode
                    break
                run.interrupted = True
                asked_at = _ask_to_stop(proc)
                continue
            now = time.monotonic()
            left = options.remaining_s()
            if asked_at is None and left is not None and left <= 0:
                run.stopped = True
                asked_at = _ask_to_stop(proc)
            elif asked_at is not None and now - asked_at >= stop_grace_s(options, run.interrupted):
                _kill(proc)
                run.killed = True
                run.returncode = proc.returncode
                break
    finally:
        if proc.poll() is None:
            _kill(proc)
            run.killed = True
    run.elapsed_s = time.monotonic() - t0
    return run


def _ask_to_stop(proc: subprocess.Popen) -> float:
    """Send SIGINT to the child (its own session: only it); return the time it was sent."""
    try:
        os.kill(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    return time.monotonic()


def _kill(proc: subprocess.Popen) -> None:
    """Kill the child's whole session (a solver may have started threads or helpers) and
    reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is the child's
    except (ProcessLookupError, PermissionError, AttributeError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:  # already dying: reap it all the same
            continue
