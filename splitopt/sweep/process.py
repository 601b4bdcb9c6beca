"""Run one job in a child process (``splitopt.sweep.worker``), pinned to given CPUs, in its
own session so that a hard kill at its limit takes its solver children (CBC, HiGHS) too.
The local pool and the Ray executor both run jobs through :func:`run_job`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Sequence

from splitopt.sweep.jobs import Job
from splitopt.sweep.worker import CPUS_ENV

#: seconds a job may run past ``limit x 1.1`` (start-up, reading the instance) before the
#: hard kill; a job without a time limit is never killed
GRACE_S = 10.0

#: the live children, so that Ctrl-C in the parent can kill them all
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def kill_after_s(job: Job, grace_s: float = GRACE_S) -> float | None:
    """Seconds after its start at which a job is killed (None: never)."""
    return None if job.time_limit_s is None else job.time_limit_s * 1.1 + grace_s


def run_job(job: Job, cpus: Sequence[int] | None = None, grace_s: float = GRACE_S) -> dict[str, Any]:
    """Run ``job`` in a child process and return its record; a child still running at
    :func:`kill_after_s` is killed with its process group (``status: "KILLED"``), one that
    dies without a record gives ``status: "ERROR"`` with the end of its stderr."""
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    if cpus:
        env[CPUS_ENV] = ",".join(str(c) for c in cpus)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "splitopt.sweep.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    with _LIVE_LOCK:
        _LIVE.add(proc)
    try:
        out, err = proc.communicate(json.dumps(job.to_dict()), timeout=kill_after_s(job, grace_s))
    except subprocess.TimeoutExpired:
        kill(proc)
        proc.communicate()
        return {"key": job.key, **job.to_dict(), "status": "KILLED", "wall_s": time.perf_counter() - t0,
                "message": f"killed after {kill_after_s(job, grace_s):.1f} s (limit x 1.1 + {grace_s:g} s)"}
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    lines = out.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = " ".join(err.strip().splitlines()[-3:])[-300:]
        return {"key": job.key, **job.to_dict(), "status": "ERROR", "wall_s": time.perf_counter() - t0,
                "message": f"the worker exited with {proc.returncode} and no record: {tail}"}


def kill(proc: subprocess.Popen) -> None:
    """Kill a child's whole process group (the solver processes it started too)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every live child (Ctrl-C in the parent)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        kill(proc)
