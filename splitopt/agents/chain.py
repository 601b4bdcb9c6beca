"""A split model on agents: deploy the parts of an ONNX export (``splitopt export
--format onnx``) to the agents of their devices and run samples through them.

:func:`deploy_export` sends each device's part with the manifest and the address at which
that agent reaches the next device's agent (:meth:`splitopt.agents.addresses.Agents.peer_address`);
:func:`run_chain` starts the run on every agent (one sample at a time, or pipelined:
:mod:`splitopt.agents.agent_run`; the first device's agent gets the inputs), reads every agent's per-sample reports as they come (one thread per agent) and
gathers them into a :class:`ChainRun`. A sample counts once every agent has reported it.
When an agent drops or stays silent past its timeout, or reports a failure, the run ends:
``error`` is one line naming the agent and the sample, and the samples completed before
are kept (``samples``, ``outputs``). Every agent ends its side on its own once a
neighbour is gone (a closed connection or its timeout), so no work is left running.
Agents stay deployed after a run (run again, or :meth:`AgentClient.reset`).

The outputs are those of the last device, per sample, as the agents computed them with
every crossing tensor packed at its sent bits; :func:`splitopt.agents.runtime.reference_run`
gives the same chain in one process to check them.
"""

from __future__ import annotations

import queue
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from splitopt.agents.addresses import Agents
from splitopt.agents.client import AgentClient, AgentError
from splitopt.agents.protocol import PeerError, array_from
from splitopt.core.errors import InvalidModel, InvalidOption
from splitopt.netrun.frames import FrameError


def export_parts(directory: Path | str) -> tuple[dict[str, Any], dict[str, bytes | None]]:
    """``(manifest, part files)`` of an export directory: the checked ``manifest.json``
    object and, per device, its part's bytes (None: forwards only)."""
    from splitopt.torch.export_manifest import read_manifest

    manifest = read_manifest(directory)
    files = {p["device"]: (manifest.directory / p["file"]).read_bytes() if p["file"] is not None else None
             for p in manifest.parts}
    return manifest.data, files


def deploy_export(clients: Mapping[str, AgentClient], agents: Agents, manifest: Mapping[str, Any],
                  files: Mapping[str, bytes | None]) -> dict[str, dict[str, Any]]:
    """Deploy every device's part on the agent of the same name; per device the agent's
    summary. InvalidOption (one line) for a device without an agent."""
    missing = [d for d in manifest["devices"] if d not in clients]
    if missing:
        raise InvalidOption(f"--agents: no agent for device '{missing[0]}' of the plan (agents: "
                            f"{', '.join(clients) or 'none'})")
    summaries = {}
    for part in manifest["parts"]:
        device = part["device"]
        targets = sorted({s["to_device"] for s in part["sends"]})
        nxt = agents.peer_address(device, targets[0]) if targets else None
        summaries[device] = clients[device].deploy(manifest, device, files.get(device), nxt)
    return summaries


#: the fields of a device's SAMPLE_REPORT that :class:`ChainRun` keeps per sample
SAMPLE_FIELDS = ("compute_ms", "unpack_ms", "pack_ms", "sample_ms", "done_s", "waited_ms")


@dataclass
class ChainRun:
    """What a run on agents measured. ``samples``: per measured sample (warm-up left out)
    ``{"sample", "devices": {device: {compute_ms, unpack_ms, pack_ms, sample_ms, done_s, waited_ms}},
    "links": [{from, to, bytes, payload_bytes, header_bytes, send_ms, wait_ms, transfer_ms,
    receive_ms, rtt_ms}]}`` (:mod:`splitopt.agents.agent_run`; ``done_s`` on each agent's
    own clock);
    ``outputs``: the model outputs of those samples, each stacked on axis 0; ``error``:
    None, or the one line that ended the run early."""

    devices: list[str]
    warmup: int
    samples: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[np.ndarray] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_chain(clients: Mapping[str, AgentClient], manifest: Mapping[str, Any], inputs: np.ndarray,
              warmup: int = 0, on_report: Callable[[str, dict[str, Any]], None] | None = None,
              pipelined: bool = False) -> ChainRun:
    """Run ``inputs`` (n, *input shape[1:]) through the deployed parts, after ``warmup``
    samples of the first input (module docstring), one sample at a time or ``pipelined``
    (:mod:`splitopt.agents.agent_run`). ``on_report(device, report)``: called with each
    SAMPLE_REPORT's fields as it arrives (``sample`` counts the warm-up samples too),
    e.g. to show progress."""
    devices = [manifest["parts"][k]["device"] for k in manifest["run_order"]]
    first = manifest["input"]["device"]
    x = np.asarray(inputs)
    spec = manifest["input"]
    if x.ndim != len(spec["shape"]) or list(x.shape[1:]) != list(spec["shape"][1:]) or str(x.dtype) != spec["dtype"] \
            or x.shape[0] < 1:
        raise InvalidModel(f"inputs {x.dtype} {tuple(x.shape)} are not samples of the manifest's input "
                           f"{spec['dtype']} (n, {', '.join(map(str, spec['shape'][1:]))})")
    if warmup:
        x = np.concatenate([np.repeat(x[:1], warmup, axis=0), x], axis=0)
    total = int(x.shape[0])
    run = secrets.token_hex(8)
    events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def reader(device: str) -> None:
        client = clients[device]
        while True:
            try:
                msg = client.read_run()
            except PeerError as e:
                events.put((device, AgentError(f"agent '{device}' refused the run: {e}")))
                return
            except FrameError as e:
                events.put((device, FrameError(f"agent '{device}' at {client.address} dropped: {e}")))
                return
            events.put((device, msg))
            if msg.type == "RUN_END":
                return

    for d in sorted(devices, key=lambda d: d == first):  # the first device last: the others wait for it
        clients[d].start_run(run, total, x if d == first else None, pipelined)
    threads = [threading.Thread(target=reader, args=(d,), name=f"agent-run-{d}", daemon=True) for d in devices]
    for t in threads:
        t.start()
    reports: dict[str, dict[int, dict[str, Any]]] = {d: {} for d in devices}
    outputs: dict[int, list[np.ndarray]] = {}
    drops: list[str] = []
    failures: dict[str, str] = {}
    ended = 0
    while ended < len(devices):
        device, item = events.get()
        if isinstance(item, Exception):
            ended += 1
            if isinstance(item, FrameError):
                drops.append(str(item))
            else:
                failures.setdefault(device, str(item))
            continue
        if item.type == "RUN_END":
            ended += 1
            if item.get("error"):
                failures[device] = str(item.get("error"))
            continue
        k = int(item.get("sample"))
        reports[device][k] = dict(item.fields)
        if on_report is not None:
            on_report(device, reports[device][k])
        if item.get("outputs"):
            outputs[k] = [array_from(spec, raw, f"output of sample {k}")
                          for spec, raw in zip(item.get("outputs"), item.blobs)]
    for t in threads:
        t.join()
    done = 0
    while done < total and all(done in reports[d] for d in devices) and done in outputs:
        done += 1
    result = ChainRun(devices, warmup)
    for k in range(warmup, done):
        links = [dict(reports[d][k]["link"], **{"from": d}) for d in devices if reports[d][k].get("link")]
        result.samples.append({"sample": k - warmup,
                               "devices": {d: {key: reports[d][k].get(key) for key in SAMPLE_FIELDS}
                                           for d in devices},
                               "links": links})
    if done > warmup:
        result.outputs = [np.concatenate([outputs[k][j] for k in range(warmup, done)], axis=0)
                          for j in range(len(outputs[warmup]))]
    if drops or failures or done < total:
        reason = drops[0] if drops else next((failures[d] for d in devices if d in failures),
                                             "an agent ended the run early")
        stage = "warm-up sample" if done < warmup else "sample"
        index = done if done < warmup else done - warmup
        result.error = f"run stopped at {stage} {index} ({len(result.samples)} measured sample(s) kept): {reason}"
    return result
