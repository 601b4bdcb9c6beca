"""Progress of long commands on stderr: one transient status line (rich) with the time
spent, the phase, and the incumbent and bound of the solve running now, fed by the
library's reporter (``splitopt.core.progress``).

It appears only once the work has run ``DELAY_S`` seconds, only when stderr is a
terminal (so stdout, ``--json`` output and captured output stay as they are;
``SPLITOPT_PROGRESS=1`` asks for it elsewhere, ``SPLITOPT_PROGRESS=0`` never shows it),
never with ``--quiet`` (nor ``solve --verbose``, whose solver log is the progress), and
it is erased when the work ends. rich's live display is imported only when it is shown.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import typer
from rich.console import Console
from rich.text import Text

from splitopt.core import progress
from splitopt.core.progress import Progress

#: seconds of work before the line appears
DELAY_S = 2.0
#: environment variable: 1 shows progress on stderr even when it is not a terminal, 0 never
ENV = "SPLITOPT_PROGRESS"
#: redraws per second
REFRESH_PER_S = 4


def quiet_option() -> Any:
    """The ``--quiet/-q`` option every long command takes."""
    return typer.Option(False, "--quiet", "-q", help="Show no progress on stderr (the results are printed as usual).")


class ProgressLine:
    """The latest :class:`Progress` as one line; redrawn by rich's live display, so that
    the time runs on between reports."""

    def __init__(self, total: Optional[int] = None) -> None:
        self.t0 = time.monotonic()
        self.total = total
        self.latest: Optional[Progress] = None

    def __call__(self, snapshot: Progress) -> None:
        self.latest = snapshot

    def __rich__(self) -> Text:
        return progress_text(self.latest, time.monotonic() - self.t0, self.total)


def progress_text(p: Optional[Progress], elapsed_s: float, total: Optional[int] = None) -> Text:
    """``12.3 s  solve 3 of 12  auto / probe (cpsat) / solving  incumbent 65.5 ms  bound 60.1 ms  gap 8.2 %``
    (``total``: the solves the work will run, where known)."""
    line = Text(end="", no_wrap=True, overflow="ellipsis")
    line.append(f"{elapsed_s:.1f} s", style="bold")
    if p is None:
        return line
    where = p.step or (f"solve {p.solves} of {total}" if total else f"solve {p.solves}" if p.solves > 1 else "")
    for part in (where, p.phase):
        if part:
            line.append(f"  {part}")
    if p.incumbent_ms is not None:
        line.append(f"  incumbent {p.incumbent_ms:.6g} ms", style="green")
    if p.bound_ms is not None:
        line.append(f"  bound {p.bound_ms:.6g} ms", style="cyan")
    if p.incumbent_ms is not None and p.bound_ms is not None and p.incumbent_ms > 0:
        gap = max(0.0, (p.incumbent_ms - p.bound_ms) / p.incumbent_ms)
        line.append(f"  gap {100 * gap:.3g} %")
    return line


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


@contextmanager
def showing_progress(quiet: bool = False, console: Optional[Console] = None, delay_s: Optional[float] = None,
                     total: Optional[int] = None) -> Iterator[Optional[ProgressLine]]:
    """Within the block, the library's progress is shown on ``console`` (default: stderr)
    after ``delay_s`` seconds (default ``DELAY_S``), as described in the module
    docstring (``total``: the solves it will run, where known); yields the line (None
    when nothing is shown). Print results after the block: the line is erased when it
    ends."""
    delay_s = DELAY_S if delay_s is None else delay_s
    if console is None:
        asked = os.environ.get(ENV, "")
        if quiet or asked == "0" or not (asked == "1" or _stderr_is_terminal()):
            yield None
            return
        console = Console(stderr=True, force_terminal=True)
    if quiet or not console.is_terminal:
        yield None
        return
    from rich.live import Live

    line = ProgressLine(total)
    live = Live(line, console=console, transient=True, refresh_per_second=REFRESH_PER_S,
                redirect_stdout=False, redirect_stderr=False)
    lock = threading.Lock()
    state = {"started": False, "ended": False}

    def start() -> None:  # after delay_s, unless the work has ended
        with lock:
            if not state["ended"]:
                live.start()
                state["started"] = True

    timer = threading.Timer(delay_s, start)
    timer.daemon = True
    with progress.reporting(line):
        timer.start()
        try:
            yield line
        finally:
            timer.cancel()
            with lock:
                state["ended"] = True
                if state["started"]:
                    live.stop()
