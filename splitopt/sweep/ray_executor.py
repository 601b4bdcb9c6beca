"""The Ray executor: every job a Ray task (``num_cpus`` = its threads) that runs the same
child process as the local pool (:func:`splitopt.sweep.process.run_job`), so the hard kill
at the limit holds on any node. ``address=None`` starts a local Ray instance with this
machine's CPUs; for a cluster, pass its address (``ray.init(address="ray://HOST:10001")``
or ``"auto"`` on a cluster node, as ``--ray-address``): every node must have splitopt and
the instance files at the same paths."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from splitopt.core.errors import InvalidOption, MissingDependency
from splitopt.core.jsonfile import cut
from splitopt.sweep.jobs import Job
from splitopt.sweep.process import GRACE_S, run_job


def _ray():
    try:
        import ray
    except ImportError:
        raise MissingDependency("--executor ray needs the 'ray' extra: pip install 'splitopt[ray]'") from None
    return ray


def run_ray(jobs: Sequence[Job], on_record: Callable[[dict[str, Any]], None], address: str | None = None,
            num_cpus: int | None = None, grace_s: float = GRACE_S) -> None:
    """Run ``jobs`` as Ray tasks, calling ``on_record`` as each ends; Ctrl-C cancels the
    tasks (Ray kills their workers and so their children) and re-raises."""
    ray = _ray()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # else Ray writes a token under $HOME
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        except (ValueError, ConnectionError, RuntimeError, TimeoutError) as e:  # a bad or unreachable address
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise InvalidOption(f"--ray-address {address}: Ray cannot connect ({cut(first, 200)})") from None
        started = True
    try:
        task = ray.remote(lambda raw, grace: run_job(Job.from_dict(raw), None, grace))
        refs = {task.options(num_cpus=job.threads).remote(job.to_dict(), grace_s): job for job in jobs}
        try:
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                for ref in done:
                    refs.pop(ref)
                    on_record(ray.get(ref))
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()
