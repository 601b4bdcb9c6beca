"""Run an edge/cloud or chain plan as one process per device, the crossing tensors sent
over TCP on this host through a paced link, and measure it against the evaluator.

Processes. :func:`run_tcp` starts one process per device of the plan (``multiprocessing``
with the spawn start method; the devices in the order the family's torch side gives,
:meth:`splitopt.torch.layer_graph.LayerGraphSide.tcp_devices`: edge/cloud: edge, cloud;
chain: ``settings.chain`` in order). Each rebuilds the model by name with the seed
(:func:`splitopt.torch.models.build_model`, deterministic: every process holds the same
weights and calibrated ranges), captures it
once and cuts it by every plan it may run (:func:`splitopt.torch.partition.partition`;
with a breakpoint table, every interval's plan is built at start), and keeps its own
part of each. Device ``m > 0`` is a :class:`splitopt.netrun.service.FrameService` on
``host`` (127.0.0.1 by default), port 0 (the system's choice), and sends the port to
device ``m - 1`` through a queue of the parent; device ``m - 1`` connects to it. The parent
waits with a deadline (``run_timeout_s``); on a device's error, the deadline, Ctrl-C or
SIGTERM it terminates every device process (then kills those still alive) and joins
them, and every device process watches the parent and exits when it is gone, so no
child outlives the call. What goes back to the parent (timings, outputs as numpy arrays)
travels on multiprocessing's own pipe between the parent and its children; the TCP
links carry only frames (:mod:`splitopt.netrun.frames`).

One sample, closed loop (one sample in flight, as the evaluators' latency assumes):
device 0 runs its part on the input; every device then packs the tensors of its
crossing (:func:`wire_pack`: quantized at the plan's sent bits with the calibrated
range, bit-packed by :mod:`splitopt.torch.packing`), sends a SAMPLE frame and one TENSOR
frame per tensor through its :class:`~splitopt.netrun.pacing.Pacer` (the link's latency
and bandwidth), and the next device unpacks them, runs its part, and so on; the last
device ACKs, each device passes the ACK upstream, and device 0 starts the next sample
only then. The raw input, when it crosses, is quantized at its own bits over its own
range (the 8-bit sensor data the evaluator counts); float plans send layer outputs at
their sent bits too (16: float16). The single-process reference runs the same parts
with the same packing (:func:`wire_transmit`), so the outputs must agree within
:data:`splitopt.torch.partition.FLOAT_ATOL` (they are identical when the thread counts
agree).

Measured per sample (monotonic clock, CLOCK_MONOTONIC, shared by the processes of one
host; ms): each part's compute (the part's module call), each link's transfer (from the
sender's transfer start, after packing, to the last byte read by the receiver, before
unpacking: the pacer's latency and rate plus loopback TCP), packing and unpacking
(serialisation, not in the evaluators' model, reported apart), and the end-to-end
latency (device 0 starts the part until the last device's part is done). Warm-up:
``warmup`` samples before the measured ones, and every plan runs once in every process
at build time (the dtype probe). Bytes: per tensor the packed payload is
``ceil(elements * bits / 8)`` and the evaluator's ``elements * bits / 8`` (so less than
one byte apart); frame and packing headers are counted apart.

Run-time re-partitioning: with a breakpoint table (``splitopt bandwidth --exact -o``)
and a bandwidth schedule ``[(sample index, bits/s), ...]`` (indices of the measured
samples), device 0 looks up the interval of each new bandwidth before that sample; when
its plan differs, it sends a PLAN frame (plan index, bandwidth), every device switches to
its prebuilt part of that plan and forwards the frame; the pacer of the table's link
takes the new bandwidth either way. Warm-up samples run at the first bandwidth.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from splitopt.core.child_processes import ChildFailure, run_spawned
from splitopt.core.errors import SplitoptError
from splitopt.netrun.frames import DEFAULT_MAX_FRAME_BYTES
from splitopt.netrun.pacing import DEFAULT_CHUNK_BYTES
from splitopt.netrun.service import DEFAULT_TIMEOUT_S
from splitopt.netrun.setup import DEFAULT_RUN_TIMEOUT_S, RunSetup, TcpOptions, prepare, tcp_side
from splitopt.netrun.wire import wire_transmit
from splitopt.netrun.device import build_splits, device_main

log = logging.getLogger("splitopt.netrun")


class NetRunError(SplitoptError):
    """A device process failed, or the run passed its deadline (one line). ``pids``: the
    device processes started (all ended when this is raised)."""

    def __init__(self, message: str, pids: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.pids = list(pids)


def launch(spec: Mapping[str, Any], timeout_s: float) -> dict[int, dict[str, Any]]:
    """Start one spawn process per device running :func:`splitopt.netrun.device.device_main`, collect one report per
    device within ``timeout_s``; every process is ended whatever happens (NetRunError
    on a device's failure or the deadline)."""
    world = len(spec["devices"])
    names = [f"splitopt-netrun-{device}" for device in spec["devices"]]
    try:
        return run_spawned(device_main, spec, names, world - 1, timeout_s)
    except ChildFailure as f:
        if f.kind == "timeout":
            raise NetRunError(f"run-tcp: timed out after {timeout_s:g} s with {f.done} of {world} device "
                              "processes done", f.pids) from None
        if f.kind == "died":
            raise NetRunError(f"run-tcp: device '{spec['devices'][f.rank]}' process died (exit code "
                              f"{f.exitcode})", f.pids) from None
        log.debug(f.trace)
        raise NetRunError(f"run-tcp: device '{spec['devices'][f.rank]}': {f.error}", f.pids) from None


def _predicted(setup: RunSetup, plan: int, bandwidth: float | None) -> dict[str, Any]:
    """The evaluator's parts (compute ms per device), links (ms per link) and total (ms)
    of plan ``plan`` with the table's link at ``bandwidth``."""
    from splitopt.api import evaluate

    inst = setup.inst
    if setup.table_link is not None and bandwidth is not None:
        from splitopt.analysis.breakpoints import with_bandwidth

        inst = with_bandwidth(inst, setup.links[setup.table_link], bandwidth)
    return tcp_side(inst).tcp_predicted(inst, evaluate(inst, setup.plans[plan]))


def _evaluator_tensors(setup: RunSetup, plan: int) -> list[dict[str, float]]:
    """Per link: tensor -> the evaluator's bytes (``elements * bits / 8``)."""
    from splitopt.api import evaluate

    inst, p = setup.inst, setup.plans[plan]
    return tcp_side(inst).tcp_sent_bytes(inst, p, evaluate(inst, p))


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def run_tcp(instance: str | Path, plan: dict | None = None, *, table: dict | None = None, model: str,
            samples: int = 5, warmup: int = 1, seed: int = 0, schedule: Sequence[tuple[int, float]] = (),
            host: str = "127.0.0.1", timeout_s: float = DEFAULT_TIMEOUT_S,
            max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S,
            chunk_bytes: int = DEFAULT_CHUNK_BYTES, threads: int | None = None, check: bool = True,
            input_shape: str | None = None, input_dtype: str | None = None,
            input_high: int | None = None) -> dict[str, Any]:
    """Run ``plan`` (a plan dict), or the plans of a breakpoint ``table`` (its JSON) with
    ``schedule``, of the instance file ``instance`` as one process per device over TCP
    (see the module docstring); ``samples`` measured samples after ``warmup``.
    ``check``: also run the single-process reference in this process and compare
    outputs (``max_abs_diff``, ``outputs_equal``) and bytes (``bytes_match``).

    Returns a JSON-ready report: ``devices``, ``links`` (latency ms, bandwidth bits/s),
    ``plans`` (per plan its parts and, per link, tensors with payload / evaluator / header
    bytes), ``per_sample`` (measured ms per part and link, ``sender_links_ms`` the
    sender's side of each link: transfer start to its last write, serialisation ms,
    total ms and the evaluator's prediction), ``segments`` (medians over the measured samples of one
    plan and bandwidth, with ``ratio`` = measured / predicted total), ``switches``,
    ``ok``. NetRunError (one line) when a device process fails or the deadline passes;
    InvalidOption / InvalidPlan / NotApplicable for bad input before any process starts."""
    from splitopt.api import load_instance

    inst = load_instance(instance)
    setup = prepare(inst, plan, table, schedule, samples)
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    spec = {"instance": str(instance), "plans": setup.plan_dicts, "model": model, "seed": seed,
            "input_shape": input_shape, "input_dtype": input_dtype, "input_high": input_high,
            "devices": setup.devices,
            "links": [(l.bandwidth_bits_per_s, l.latency_ms) for l in setup.links],
            "table_link": setup.table_link, "initial_plan": setup.initial_plan,
            "initial_bandwidth": setup.initial_bandwidth, "schedule": setup.schedule,
            "samples": samples, "warmup": warmup, "host": host, "timeout_s": timeout_s,
            "max_frame_bytes": max_frame_bytes, "run_timeout_s": run_timeout_s, "chunk_bytes": chunk_bytes,
            "threads": threads}
    t0 = time.perf_counter()
    reports = launch(spec, run_timeout_s)
    wall = time.perf_counter() - t0
    return _report(setup, spec, reports, wall, check)


def run_tcp_options(instance: str | Path, plan: dict | None, table: dict | None, options: TcpOptions,
                    schedule: Sequence[tuple[int, float]] = ()) -> dict[str, Any]:
    """:func:`run_tcp` with the options of ``splitopt run --transport tcp``
    (``schedule``: ``options.schedule()``, parsed)."""
    return run_tcp(instance, plan, table=table, model=options.model, samples=options.samples,
                   warmup=options.warmup, seed=options.seed, schedule=schedule, host=options.host,
                   timeout_s=options.timeout, max_frame_bytes=options.max_frame_bytes,
                   run_timeout_s=options.run_timeout, chunk_bytes=options.chunk_bytes, threads=options.threads,
                   check=options.check, input_shape=options.input_shape, input_dtype=options.input_dtype,
                   input_high=options.input_high)


def _report(setup: RunSetup, spec: Mapping[str, Any], reports: Mapping[int, dict], wall_s: float,
            check: bool) -> dict[str, Any]:
    inst, world = setup.inst, len(setup.devices)
    warmup = int(spec["warmup"])
    recs = [{r["sample"]: r for r in reports[m]["records"]} for m in range(world)]
    bandwidth_at: dict[int, float | None] = {}
    bw = setup.initial_bandwidth
    changes = {i + warmup: b for i, _, b in setup.schedule}
    n = warmup + int(spec["samples"])
    for i in range(n):
        bw = changes.get(i, bw)
        bandwidth_at[i] = bw
    evaluator = {k: _evaluator_tensors(setup, k) for k in range(len(setup.plans))}
    bytes_ok = True
    per_sample = []
    plan_links: dict[int, list[dict[str, Any]]] = {}
    for i in range(n):
        plan = recs[0][i]["plan"]
        parts = [recs[m][i]["compute_ms"] for m in range(world)]
        links, sender, pack, unpack = [], [], 0.0, 0.0
        for m in range(world - 1):
            send, got = recs[m][i]["send"], recs[m + 1][i]
            links.append((got["received_ns"] - send["start_ns"]) / 1e6)
            sender.append((send["end_ns"] - send["start_ns"]) / 1e6)
            pack += recs[m][i]["pack_ms"]
            unpack += got["unpack_ms"]
            ev = evaluator[plan][m]
            crossing = []
            for name, payload in send["payload_bytes"].items():
                e = ev.get(name)
                ok = e is not None and payload == math.ceil(e - 1e-9) and 0 <= payload - e < 1
                bytes_ok &= ok
                crossing.append({"tensor": name, "payload_bytes": payload, "evaluator_bytes": e})
            bytes_ok &= set(send["payload_bytes"]) == set(ev)
            if plan not in plan_links or len(plan_links[plan]) < world - 1:
                plan_links.setdefault(plan, []).append({
                    "source": setup.devices[m], "target": setup.devices[m + 1], "tensors": crossing,
                    "payload_bytes": sum(send["payload_bytes"].values()),
                    "evaluator_bytes": sum(ev.values()), "packing_header_bytes": send["packing_header_bytes"],
                    "frame_header_bytes": send["frame_header_bytes"], "wire_bytes": send["bytes"]})
        total = (recs[world - 1][i]["done_ns"] - recs[0][i]["start_ns"]) / 1e6
        per_sample.append({"sample": i - warmup, "warmup": i < warmup, "plan": plan, "bandwidth": bandwidth_at[i],
                           "parts_ms": parts, "links_ms": links, "sender_links_ms": sender, "pack_ms": pack, "unpack_ms": unpack,
                           "total_ms": total, "predicted": _predicted(setup, plan, bandwidth_at[i])})
    measured = [s for s in per_sample if not s["warmup"]]
    segments: list[dict[str, Any]] = []
    for s in measured:
        if not segments or (segments[-1]["plan"], segments[-1]["bandwidth"]) != (s["plan"], s["bandwidth"]):
            segments.append({"plan": s["plan"], "bandwidth": s["bandwidth"], "first_sample": s["sample"],
                             "samples": [], "predicted": s["predicted"]})
        segments[-1]["samples"].append(s)
    for seg in segments:
        rows = seg.pop("samples")
        seg["last_sample"] = rows[-1]["sample"]
        seg["count"] = len(rows)
        seg["measured"] = {"parts_ms": [_median([r["parts_ms"][m] for r in rows]) for m in range(world)],
                           "links_ms": [_median([r["links_ms"][m] for r in rows]) for m in range(world - 1)],
                           "sender_links_ms": [_median([r["sender_links_ms"][m] for r in rows])
                                               for m in range(world - 1)],
                           "pack_ms": _median([r["pack_ms"] for r in rows]),
                           "unpack_ms": _median([r["unpack_ms"] for r in rows]),
                           "total_ms": _median([r["total_ms"] for r in rows])}
        pred = seg["predicted"]["total_ms"]
        seg["ratio"] = seg["measured"]["total_ms"] / pred if pred > 0 else None
    outputs: dict[int, dict[str, Any]] = {}
    for m in range(world):  # a later device's copy of an output wins
        for i, held in reports[m]["outputs"].items():
            outputs.setdefault(i, {}).update(held)
    report: dict[str, Any] = {
        "instance": inst.name, "problem": inst.problem, "model": spec["model"], "seed": spec["seed"],
        "devices": setup.devices, "host": spec["host"], "threads": spec["threads"],
        "links": [{"source": l.source, "target": l.target, "latency_ms": l.latency_ms,
                   "bandwidth_bits_per_s": l.bandwidth_bits_per_s} for l in setup.links],
        "table_link": setup.table_link, "intervals": setup.intervals,
        "plans": [{"index": k, "parts": _plan_parts(setup, k), "links": plan_links.get(k, [])}
                  for k in range(len(setup.plans))],
        "samples": int(spec["samples"]), "warmup": warmup, "per_sample": per_sample, "segments": segments,
        "switches": [dict(w, sample=w["sample"] - warmup) for w in reports[0]["switches"]], "rejected": [r for m in range(world) for r in reports[m].get("rejected", [])],
        "bytes_match": bool(bytes_ok), "wall_s": wall_s,
        "chunk_bytes": spec["chunk_bytes"],
    }
    if check:
        report.update(_check_outputs(spec, setup, per_sample, outputs))
    report["ok"] = bool(report["bytes_match"] and report.get("outputs_equal", True))
    return report


def _plan_parts(setup: RunSetup, k: int) -> list[dict[str, Any]]:
    """Per device of plan ``k``: the device and its layer count (from the plan, no torch)."""
    plan = setup.plans[k]
    return [{"device": d, "layers": sum(plan.device[l.name] == d for l in setup.inst.layers)}
            for d in setup.devices]


def _check_outputs(spec: Mapping[str, Any], setup: RunSetup, per_sample: list[dict], outputs) -> dict[str, Any]:
    """The single-process reference (same parts, same packing, same plan per sample) and
    the unsplit model, against the outputs of the run."""
    import torch

    from splitopt.torch.partition import FLOAT_ATOL
    from splitopt.torch.quant_error import relative_mse

    before = torch.get_num_threads()
    torch.set_num_threads(int(spec["threads"]))
    try:
        _, splits, inputs, module = build_splits(spec)
        x = inputs(len(per_sample))
        diff, mse = 0.0, []
        with torch.no_grad():
            for i, s in enumerate(per_sample):
                split = splits[s["plan"]]
                ref = split.run(x[i:i + 1], wire_transmit(split))
                ref = (ref,) if isinstance(ref, torch.Tensor) else tuple(ref)
                got = outputs.get(i, {})
                for name, r in zip(split.output_names, ref):
                    if name not in got:
                        raise NetRunError(f"run-tcp: output '{name}' of sample {i} was not produced")
                    g = torch.from_numpy(got[name])
                    diff = max(diff, float((g.double() - r.double()).abs().max()) if r.numel() else 0.0)
                unsplit = module(x[i:i + 1])
                unsplit = unsplit if isinstance(unsplit, torch.Tensor) else unsplit[0]
                first = torch.from_numpy(got[split.output_names[0]])
                mse.append(relative_mse(first, unsplit))
    finally:
        torch.set_num_threads(before)
    return {"max_abs_diff": diff, "float_atol": FLOAT_ATOL, "outputs_equal": bool(diff <= FLOAT_ATOL),
            "relative_mse_vs_unsplit": max(mse) if mse else 0.0}
