"""One job in its own process: ``python -m splitopt.sweep.worker`` reads a job (JSON) on
stdin, solves it, and prints its record (JSON, one line) on stdout. The parent
(:mod:`splitopt.sweep.process`) pins it to its CPUs and kills it at its limit."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

from splitopt.sweep.jobs import Job

#: the CPUs (comma-separated) the parent pins a worker to
CPUS_ENV = "SPLITOPT_SWEEP_CPUS"


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its finished children (CBC, HiGHS)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def describe(inst: Any) -> dict[str, Any]:
    """The instance's family and size: ``size`` its layers (splitopt's instances) or nodes
    (peer files), ``size_unit`` which; None where it has neither."""
    from splitopt.families.registry import family_of

    size, unit = None, None
    for attr in ("layers", "nodes"):
        items = getattr(inst, attr, None)
        if items is not None:
            size, unit = len(items), attr
            break
    return {"family": family_of(inst).name, "size": size, "size_unit": unit}


def scalar_extras(extra: dict[str, Any]) -> dict[str, Any]:
    """The entries of a result's ``extra`` that are one string, number, bool or None
    (the backend's statistics, what it returned, a tolerance): the nested ones (a probe's
    or phase's summary) and the anytime curve are left out."""
    return {str(k): v for k, v in extra.items()
            if v is None or isinstance(v, (str, bool, int)) or (isinstance(v, float) and v == v and abs(v) != float("inf"))}


def solve_job(job: Job) -> dict[str, Any]:
    """The record of one solve: the result's JSON form (``splitopt solve --json``: status,
    objective, bound, gap, ``build_s`` and ``solve_s``) with the job, its key, the
    instance's family and size (:func:`describe`), ``read_s`` (reading the instance), the
    anytime curve of a search where the result has one (``anytime``: [seconds,
    evaluations, objective, feasible] per improvement), the result's other scalar extras
    (``extra``: e.g. a program's ``variables`` and ``rows``, ``returned``, a tolerance; see
    :func:`scalar_extras`), and wall and CPU seconds from
    reading the instance to the answer; an error of the input or the solver becomes
    ``status: "ERROR"`` with its message."""
    from splitopt.api import load_instance, result_to_dict
    from splitopt.core.errors import SplitoptError
    from splitopt.core.options import solve_time_left
    from splitopt.solve import solve

    t0, c0, started = time.perf_counter(), cpu_s(), time.monotonic()
    record: dict[str, Any] = {"key": job.key, **job.to_dict()}
    try:
        inst = load_instance(job.instance)
        record.update(describe(inst), read_s=time.perf_counter() - t0)
        result = solve(inst, job.solver, time_limit=solve_time_left(job.time_limit_s, started), threads=job.threads,
                       seed=job.seed)
        out = result_to_dict(inst, result)
        out.pop("solver", None)  # the job's solver (auto) stays; the result's backend is in the message
        out["instance_name"] = out.pop("instance")  # "instance" stays the job's file
        record.update(out)
        if result.extra.get("anytime"):
            record["anytime"] = [list(point) for point in result.extra["anytime"]]
        record["extra"] = scalar_extras(result.extra)
    except SplitoptError as e:
        record.update(status="ERROR", message=f"{type(e).__name__}: {e}")
    record.update(wall_s=time.perf_counter() - t0, cpu_s=cpu_s() - c0)
    return record


def main() -> None:
    cpus = os.environ.get(CPUS_ENV)
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    job = Job.from_dict(json.loads(sys.stdin.read()))
    sys.stdout.write(json.dumps(solve_job(job)) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
