"""Run a separable policy split across G worker processes on this host: one process per
device (``torch.multiprocessing`` with the spawn start method, ``torch.distributed``
with the gloo backend on 127.0.0.1), each holding only its device's part
(:func:`~splitopt.torch.separable.model.device_state`: its stem copy, its blocks' parts
and, on the head device, the head). The only tensors that cross processes during
inference are the policy's messages: at step ``j`` a sender posts the first ``N_send``
channels of its stream in the step's dtype (``dist.isend``) right after block
``first_j`` and goes on computing; its receiver posts the matching ``dist.irecv``,
computes blocks ``first_j + 1 .. last_j`` and then waits for and adds the message.

:func:`run_policy` checks the head device's logits against the single-process forward
(``allclose``), counts the payload bytes each process sent (per sample) and measures the
wall time of one inference (from a barrier to the head's logits, median over
``repeats``). :func:`measure_link` measures one gloo point-to-point link on this host
(fixed ms per transfer, bits/s) for the instance the prediction uses.

Processes: the parent waits with a deadline (``timeout_s``); on a worker's error, a
timeout, Ctrl-C or SIGTERM it terminates every worker (then kills the ones still alive)
and joins them, so no worker outlives the call; and every worker watches its parent and
exits as soon as the parent is gone (even killed with SIGKILL). Units: ms, bytes, bits/s, seconds for timeouts.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import time
import traceback
from datetime import timedelta
from typing import Any, Mapping, Sequence

import torch

from splitopt.core.child_processes import (ChildFailure, collect_reports, exit_with_parent, sigterm_interrupts,
                                          stop_processes)
from splitopt.torch.separable.model import (DTYPES, DeviceModule, PolicyStep, SepConfig, SepResNeXt, device_state,
                                            forward_streams, merge, normalize_policy, wire)


class RunError(RuntimeError):
    """A worker failed, or the run timed out (one line)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init(rank: int, world: int, port: int, timeout_s: float) -> None:
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=max(5.0, timeout_s)))


def device_forward(module: DeviceModule, x: torch.Tensor, steps: Sequence[PolicyStep], rank: int,
                   sent: list[int] | None = None) -> torch.Tensor | None:
    """Device ``rank``'s share of one inference under ``steps`` (the process group must
    be up): returns the logits on the head device, None elsewhere. Appends the payload
    bytes it sends at each step to ``sent``."""
    import torch.distributed as dist

    c = module.config
    s = module.stem(x)
    for j, (first, last) in enumerate(c.windows):
        step = steps[j]
        s = module.blocks[first](s)
        h = step.send_to[rank]
        src = step.send_to.index(rank)
        n_send = c.sent_channels(j, step.level)
        send_req = recv_req = None
        buf = None
        nbytes = 0
        if h != rank:
            payload = wire(s, n_send, step.dtype)
            nbytes = payload.numel() * payload.element_size()
            send_req = dist.isend(payload, dst=h, tag=j)
        if src != rank:
            buf = torch.empty((s.shape[0], n_send) + tuple(s.shape[2:]), dtype=DTYPES[step.dtype])
            recv_req = dist.irecv(buf, src=src, tag=j)
        for b in range(first + 1, last + 1):
            s = module.blocks[b](s)
        if recv_req is not None:
            recv_req.wait()
            assert buf is not None  # allocated where recv_req was posted
            s = merge(s, buf)
        if send_req is not None:
            send_req.wait()
        if sent is not None:
            sent.append(nbytes)
    if module.head is not None:
        return module.head(s)
    return None


def _worker(rank: int, world: int, port: int, config: Mapping[str, Any], state: Mapping[str, torch.Tensor],
            policies: list[list[tuple]], x: torch.Tensor, repeats: int, warmup: int, timeout_s: float,
            results: Any) -> None:
    """One device's process: build its part, then per policy run ``warmup + repeats``
    timed inferences; put ``(rank, report)`` (or ``(rank, {"error": ...})``) on ``results``."""
    exit_with_parent("separable-parent-watch")
    try:
        import torch.distributed as dist

        torch.set_num_threads(1)
        c = SepConfig.from_dict(config)
        module = DeviceModule(c, rank, state)
        _init(rank, world, port, timeout_s)
        runs = []
        with torch.no_grad():
            for steps in policies:
                pol = [PolicyStep(tuple(p), int(l), str(d)) for p, l, d in steps]
                times: list[float] = []
                logits = None
                sent: list[int] = []
                for r in range(warmup + repeats):
                    sent = []
                    dist.barrier()
                    t0 = time.perf_counter()
                    out = device_forward(module, x, pol, rank, sent)
                    t1 = time.perf_counter()
                    if r >= warmup:
                        times.append(1000.0 * (t1 - t0))
                    if out is not None:
                        logits = out.numpy().copy()  # plain pickling: no tensor outlives this process
                runs.append({"times_ms": times, "sent_bytes": sent, "logits": logits})
        dist.barrier()
        results.put((rank, {"runs": runs, "params": sum(v.numel() for v in module.state_dict().values())}))
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which ends the run
        results.put((rank, {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                            "trace": traceback.format_exc()}))


def launch_workers(target: Any, world: int, args_of: Any, timeout_s: float) -> dict[int, dict[str, Any]]:
    """Start ``world`` spawn processes running ``target(*args_of(rank, results))``,
    collect one report per rank within ``timeout_s``; clean up whatever happens."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = []
    previous = sigterm_interrupts()
    try:
        for rank in range(world):
            p = ctx.Process(target=target, args=args_of(rank, results), daemon=True)
            p.start()
            procs.append(p)
        try:
            return collect_reports(procs, results, timeout_s, died=lambda p: not p.is_alive()
                                   and p.exitcode not in (0, None))
        except ChildFailure as f:
            if f.kind == "timeout":
                raise RunError(f"timed out after {timeout_s:g} s with {f.done} of {world} workers done") from None
            if f.kind == "died":
                raise RunError(f"worker {f.rank} died (exit code {f.exitcode})") from None
            raise RunError(f"worker {f.rank}: {f.error}") from None
    finally:
        stop_processes(procs)
        results.close()
        results.cancel_join_thread()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run_policies(model: SepResNeXt, policies: Sequence[Any], x: torch.Tensor, *, repeats: int = 5,
                 warmup: int = 1, timeout_s: float = 120.0, rtol: float = 1e-4, atol: float = 1e-5,
                 port: int | None = None) -> list[dict[str, Any]]:
    """Run each policy on input ``x`` (``[N, C, H, W]``) over G worker processes (started
    once for all the policies) and compare with the single-process forward. Per policy:
    ``logits`` (the head's), ``reference`` (single process), ``max_abs_diff``, ``ok``
    (allclose), ``sent_bytes`` per device and step (whole batch), ``total_bytes`` and
    ``bytes_per_sample``, ``times_ms`` (the head device's inference, from a barrier, each
    repetition), ``median_ms``, ``parts_params`` (elements each process holds). RunError
    (one line) on a worker's failure or the timeout; bad policies are ValueError before
    any process starts."""
    c = model.config
    all_steps = [normalize_policy(p, c) for p in policies]
    model.eval()
    with torch.no_grad():
        references = [forward_streams(model, x, steps) for steps in all_steps]
    states = [device_state(model, g) for g in range(c.groups)]
    plain = [[(list(s.send_to), s.level, s.dtype) for s in steps] for steps in all_steps]
    port = port or free_port()
    reports = launch_workers(_worker, c.groups, lambda rank, results: (rank, c.groups, port, c.to_dict(), states[rank], plain,
                                                                x, repeats, warmup, timeout_s, results), timeout_s)
    out = []
    for i, reference in enumerate(references):
        head = reports[c.head_device]["runs"][i]
        logits = torch.from_numpy(head["logits"])
        sent = [reports[g]["runs"][i]["sent_bytes"] for g in range(c.groups)]
        total = sum(sum(s) for s in sent)
        times = head["times_ms"]
        out.append({"logits": logits, "reference": reference,
                    "max_abs_diff": float((logits - reference).abs().max()),
                    "ok": bool(torch.allclose(logits, reference, rtol=rtol, atol=atol)),
                    "sent_bytes": sent, "total_bytes": total, "bytes_per_sample": total / x.shape[0],
                    "times_ms": times, "median_ms": statistics.median(times), "batch": int(x.shape[0]),
                    "parts_params": [reports[g]["params"] for g in range(c.groups)], "repeats": repeats})
    return out


def run_policy(model: SepResNeXt, policy: Any, x: torch.Tensor, **kwargs: Any) -> dict[str, Any]:
    """:func:`run_policies` for one policy."""
    return run_policies(model, [policy], x, **kwargs)[0]


# --------------------------------------------------------------------------- link measurement


def _ping_worker(rank: int, port: int, sizes: list[int], repeats: int, timeout_s: float, results: Any) -> None:
    exit_with_parent("separable-parent-watch")
    try:
        import torch.distributed as dist

        torch.set_num_threads(1)
        _init(rank, 2, port, timeout_s)
        out = {}
        for n in sizes:
            buf = torch.zeros(max(1, n // 4), dtype=torch.float32)
            ts = []
            other = 1 - rank
            rbuf = torch.empty_like(buf)
            for r in range(repeats + 2):
                dist.barrier()
                t0 = time.perf_counter()
                send = dist.isend(buf, other, tag=r)
                recv = dist.irecv(rbuf, other, tag=r)
                assert send is not None and recv is not None  # None only for a rank outside the group
                recv.wait()
                send.wait()
                if r >= 2:
                    ts.append(1000.0 * (time.perf_counter() - t0))
            out[n] = statistics.median(ts)
        dist.barrier()
        results.put((rank, {"one_way_ms": out}))
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001
        results.put((rank, {"error": f"{type(e).__name__}: {e}"}))


def measure_link(sizes: Sequence[int] = (64, 1024, 4096, 16384, 65536), repeats: int = 20,
                 timeout_s: float = 60.0) -> dict[str, Any]:
    """One gloo point-to-point link between two processes on this host, measured the way
    :func:`device_forward` uses it: both processes ``isend`` a message of ``size`` bytes to
    the other and ``irecv`` the other's at once, then wait for both. Returns the median
    time of such an exchange per size (``one_way_ms``: each direction's message takes
    that long) and the least-squares fit ``latency_ms + 8 * bytes / bits_per_s``."""
    import numpy as np

    sizes = [int(s) for s in sizes]
    port = free_port()
    reports = launch_workers(_ping_worker, 2, lambda rank, results: (rank, port, sizes, repeats, timeout_s, results),
                      timeout_s)
    one_way = reports[0]["one_way_ms"]
    xs = np.array(sizes, dtype=float)
    ys = np.array([one_way[s] for s in sizes])
    slope, intercept = np.polyfit(xs, ys, 1)
    slope = max(float(slope), 1e-12)
    return {"one_way_ms": {str(k): v for k, v in one_way.items()}, "latency_ms": max(0.0, float(intercept)),
            "bits_per_s": min(1e21, max(1.0, 8.0 * 1000.0 / slope))}


def predicted_latency_ms(inst: Any, policy: Any) -> float:
    """The family evaluator's latency (ms) of ``policy`` on ``inst``."""
    from splitopt.torch.separable.model import evaluate_plan

    return float(evaluate_plan(inst, policy).latency_ms)
