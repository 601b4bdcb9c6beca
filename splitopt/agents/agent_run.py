"""One agent's side of a RUN: its deployed part on every sample, the tensors in from the
previous device and out to the next one, and a report per sample to the controller.

Links. The agent whose part sends (all but the last) connects to the next device's agent
(the address DEPLOY gave), authenticates as a peer, measures the round trip
(:func:`splitopt.agents.probe.round_trip_ms`) and sends STREAM with the run's id; the
next agent's server hands that connection to its own RUN (:class:`Upstreams`).

One sample at a time (closed loop, the latency): the first agent takes sample ``k`` from
the controller's inputs; an agent nothing is sent to (the plan puts no layer on its
device and it forwards nothing, e.g. the cloud of an edge-only plan) is idle and reports
every sample at once with nothing computed; any other agent reads a SAMPLE message from
upstream, answers RECEIVED at once (with ``receive_ms``: its first to last byte on its
own clock) and unpacks the tensors; the part runs; an agent that sends packs its sends
at their bits (:mod:`splitopt.agents.wire`), sends SAMPLE, reads RECEIVED and then DONE
(the sample is done downstream); the last agent reads the model outputs. Then the agent
answers DONE upstream and sends the controller a SAMPLE_REPORT.

Pipelined (RUN's ``pipelined``, the throughput): samples stream through the devices, as
many in flight as the devices and the queues hold. An agent with an upstream reads the
SAMPLE messages in a reader thread (:class:`UpstreamReader`), answers RECEIVED at once
and hands each message to its compute loop through a queue of at most
:data:`PIPELINE_QUEUE` samples; while the queue is full the reader reads nothing, so the
sender's RECEIVED is late and the sender waits: back-pressure, as in a pipeline whose
stages hand work over in small buffers. The compute loop takes the next sample (the first
device: its next input, back to back, so the pipeline stays full), unpacks, computes,
packs, sends and waits for RECEIVED only (the stage's transfer, which the evaluator
charges to the sender), then takes the next one; no DONE is sent. A device held back by a
slower next device waits for RECEIVED longer than the transfer takes (its ``wait_ms``
includes the back-pressure). The reader's failure (a drop, a silence past the timeout, a
bad message) ends the run once the samples read before it are done, as a failure of the
loop does; the reader is stopped and joined before the run returns.

Link time without a shared clock: the sender times, on its own clock, from the start of
the SAMPLE send to the arrival of RECEIVED, and takes off half the round trip measured
at connect time: ``transfer_ms`` estimates the time from the sender's first byte to the
receiver's last byte (RECEIVED's own way back being half a round trip). The receiver's
``receive_ms`` (its first to last byte) is reported beside it.

SAMPLE_REPORT fields: ``sample``; ``compute_ms`` (the part's onnxruntime call),
``unpack_ms``, ``pack_ms``; ``sample_ms``: on this agent's clock, from the sample in hand
(the first device: its input taken; the others: its SAMPLE taken, unpacking included)
until this agent is done with it: one at a time, when it is done downstream (DONE from
the next device; the last device: its outputs read), so the first device's is the
sample's end-to-end latency (plus the small DONE messages' way back); pipelined, when its
RECEIVED came (the last device: its outputs read); ``done_s``: that moment on this
agent's ``time.perf_counter`` clock (s; None on an idle agent): intervals between two
samples' ``done_s`` on one agent are meaningful, values of two agents are not compared;
``link`` (None for the last device): ``to``, ``bytes`` (the message on the wire: frame
and headers included), ``payload_bytes`` (packed tensor payloads), ``header_bytes``
(packing headers), ``send_ms`` (the send call), ``wait_ms`` (from the send's start to
RECEIVED, on the sender's clock), ``transfer_ms``, ``receive_ms``, ``rtt_ms``;
``outputs`` (last device: array specs, one blob each); ``waited_ms``: from the end of
the previous sample here until this one was in hand (None for the first sample): how
long the device waited for its input, idle (an idle wait makes the work after it slower
than the layers measured back to back). A failure (a peer that drops or
stays silent past the timeout, a bad message) ends the run: RUN_END carries one line
naming the device and the sample, the reports sent so far stand, and the links are
closed.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

import numpy as np

from splitopt.agents.addresses import Address
from splitopt.agents.channel import Channel, client_handshake, connect
from splitopt.agents.probe import round_trip_ms
from splitopt.agents.protocol import Message, ProtocolError, array_blob, int_field
from splitopt.agents.runtime import DeployedPart
from splitopt.core.errors import SplitoptError
from splitopt.core.packing import PackedTensor
from splitopt.netrun.frames import FrameError, FrameTimeout

#: samples a pipelined run's upstream reader may hold for the compute loop (module docstring)
PIPELINE_QUEUE = 2
#: seconds between a pipelined run's checks for a failed reader or a run that is ending
POLL_S = 0.1


class ControllerGone(Exception):
    """The controller's own channel failed: nobody is left to report to."""


class Upstreams:
    """Connections handed over by STREAM, waiting for the RUN whose id they carry."""

    def __init__(self) -> None:
        self.waiting: queue.Queue[tuple[str, Channel]] = queue.Queue()

    def hand_over(self, run: str, channel: Channel) -> None:
        self.waiting.put((run, channel))

    def take(self, run: str, timeout_s: float, what: str) -> Channel:
        """The connection of run ``run`` (others, left from earlier runs, are closed);
        FrameError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                got, channel = self.waiting.get(timeout=max(left, 0.0))
            except queue.Empty:
                raise FrameError(f"{what} did not connect within {timeout_s:g} s") from None
            if got == run:
                return channel
            channel.close()

    def drain(self) -> None:
        while True:
            try:
                _, channel = self.waiting.get_nowait()
            except queue.Empty:
                return
            channel.close()


def _previous_device(part: DeployedPart) -> str | None:
    for p in part.manifest["parts"]:
        if any(s["to_device"] == part.device for s in p["sends"]):
            return p["device"]
    return None


class AgentRun:
    """The RUN of ``part`` (see the module docstring); :meth:`run` reports to
    ``controller`` and returns the samples done."""

    def __init__(self, part: DeployedPart, next_address: Address | None, controller: Channel, upstreams: Upstreams,
                 *, token: bytes, agent_name: str, timeout_s: float, max_frame_bytes: int,
                 log: Callable[[str], None]) -> None:
        self.part = part
        self.next_address = next_address
        self.controller = controller
        self.upstreams = upstreams
        self.token = token
        self.agent_name = agent_name
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.log = log
        self.up: Channel | None = None
        self.down: Channel | None = None
        self.rtt_ms = 0.0

    def shutdown(self) -> None:
        """Wake the run's blocked reads (the agent is stopping)."""
        for ch in (self.up, self.down):
            if ch is not None:
                ch.shutdown()

    @staticmethod
    def _read(channel: Channel, types: tuple[str, ...]) -> Message:
        """A message from a neighbour; its failures name the neighbour."""
        try:
            return channel.read(types)
        except FrameError as e:
            raise type(e)(f"{channel.peer}: {e}") from None

    @staticmethod
    def _send_to(channel: Channel, type_: str, fields: dict[str, Any], blobs: list[bytes] | None = None
                 ) -> tuple[float, float]:
        try:
            return channel.send(type_, fields, blobs or [])
        except FrameError as e:
            raise type(e)(f"{channel.peer}: {e}") from None

    def _report(self, type_: str, fields: dict[str, Any], blobs: list[bytes] | None = None) -> None:
        try:
            self.controller.send(type_, fields, blobs or [])
        except FrameError as e:
            raise ControllerGone(str(e)) from None

    def _open_links(self, run: str) -> None:
        part = self.part
        if part.next_device is not None:
            if self.next_address is None:
                raise ProtocolError(f"device '{part.device}' sends to '{part.next_device}' but DEPLOY gave no next "
                                    f"address")
            what = f"next device '{part.next_device}'"
            self.down = connect(self.next_address, self.timeout_s, self.max_frame_bytes, what)
            client_handshake(self.down, self.token, "peer", self.agent_name)
            self.rtt_ms = round_trip_ms(self.down)
            self.down.send("STREAM", {"run": run})
        prev = _previous_device(part)
        if not part.is_first and prev is not None:  # a device nothing is sent to is idle: no upstream
            self.up = self.upstreams.take(run, self.timeout_s, f"previous device '{prev}'")
            self.up.peer = f"previous device '{prev}'"

    def _read_sample(self, k: int) -> Message:
        """SAMPLE ``k`` from upstream, acknowledged at once (RECEIVED)."""
        assert self.up is not None
        msg = self._read(self.up, ("SAMPLE",))
        got = int_field(msg, "sample", 0, 2 ** 62)
        if got != k:
            raise ProtocolError(f"{self.up.peer} sent sample {got}, expected {k}")
        self._send_to(self.up, "RECEIVED", {"sample": k, "receive_ms": 1000.0 * (msg.last_byte_s - msg.first_byte_s)})
        return msg

    def _unpack(self, msg: Message) -> tuple[dict[str, np.ndarray], float]:
        """The tensors of a SAMPLE message and the ms taken to unpack them."""
        names = msg.get("tensors")
        if not isinstance(names, list) or len(names) != len(msg.blobs) or not all(isinstance(n, str) for n in names):
            raise ProtocolError(f"SAMPLE field tensors must name each of its {len(msg.blobs)} blobs")
        started = time.perf_counter()
        store = {}
        for name, raw in zip(names, msg.blobs):
            try:
                packed = PackedTensor.from_bytes(raw)
            except ValueError as e:
                raise ProtocolError(f"SAMPLE tensor '{name[:80]}': {e}") from None
            store[name] = self.part.unpack(name, packed)
        return store, 1000.0 * (time.perf_counter() - started)

    def _send(self, k: int, store: dict[str, np.ndarray], wait_done: bool) -> tuple[dict[str, Any], float]:
        """Send sample ``k``'s tensors downstream and wait for RECEIVED (and, when
        ``wait_done``, DONE): the link's report and the ms taken to pack."""
        assert self.down is not None
        started = time.perf_counter()
        packed = self.part.pack_sends(store)
        pack_ms = 1000.0 * (time.perf_counter() - started)
        blobs = [p.to_bytes() for _, p in packed]
        t0, t1 = self._send_to(self.down, "SAMPLE", {"sample": k, "tensors": [n for n, _ in packed]}, blobs)
        received = self._read(self.down, ("RECEIVED",))
        if received.get("sample") != k:
            raise ProtocolError(f"{self.down.peer} acknowledged sample {received.get('sample')}, expected {k}")
        ack_ms = 1000.0 * (received.last_byte_s - t0)
        link = {"to": self.part.next_device, "bytes": self.down.last_sent_bytes,
                "payload_bytes": sum(p.payload_bytes for _, p in packed),
                "header_bytes": sum(p.header_bytes for _, p in packed), "send_ms": 1000.0 * (t1 - t0),
                "wait_ms": ack_ms, "transfer_ms": max(ack_ms - self.rtt_ms / 2.0, 0.0),
                "receive_ms": received.get("receive_ms"), "rtt_ms": self.rtt_ms}
        if wait_done:
            done = self._read(self.down, ("DONE",))
            if done.get("sample") != k:
                raise ProtocolError(f"{self.down.peer} finished sample {done.get('sample')}, expected {k}")
        return link, pack_ms

    def run(self, run: str, samples: int, inputs: np.ndarray | None, pipelined: bool = False) -> int:
        """Run ``samples`` samples (module docstring), one at a time or ``pipelined``; the
        number done. ControllerGone when the controller's channel fails."""
        k = 0
        where = f"agent '{self.agent_name}' (device '{self.part.device}')"
        reader: UpstreamReader | None = None
        finished: float | None = None  # when the previous sample was done here
        try:
            self._open_links(run)
            if pipelined and self.up is not None:
                reader = UpstreamReader(self, samples)
            for k in range(samples):
                unpack_ms = 0.0
                if inputs is not None:
                    started = time.perf_counter()
                    store = self.part.input_store(np.ascontiguousarray(inputs[k:k + 1]))
                elif self.up is not None:
                    msg = reader.take(k) if reader is not None else self._read_sample(k)
                    started = time.perf_counter()
                    store, unpack_ms = self._unpack(msg)
                else:  # idle: the plan puts no layer here and sends nothing here
                    store, started = {}, time.perf_counter()
                waited_ms = None if finished is None else 1000.0 * (started - finished)
                compute_ms = self.part.compute(store)
                report: dict[str, Any] = {"sample": k, "compute_ms": compute_ms, "unpack_ms": unpack_ms,
                                          "pack_ms": 0.0, "link": None, "outputs": [], "waited_ms": waited_ms}
                blobs: list[bytes] = []
                if self.down is not None:
                    report["link"], report["pack_ms"] = self._send(k, store, wait_done=not pipelined)
                else:
                    for o, value in zip(self.part.outputs, self.part.model_outputs(store)):
                        spec, raw = array_blob(np.asarray(value))
                        report["outputs"].append(dict(spec, name=o["name"]))
                        blobs.append(raw)
                done = time.perf_counter()
                report["sample_ms"] = 1000.0 * (done - started)
                idle = inputs is None and self.up is None
                report["done_s"] = None if idle else done
                if self.up is not None and not pipelined:
                    self._send_to(self.up, "DONE", {"sample": k})
                self._report("SAMPLE_REPORT", report, blobs)
                finished = time.perf_counter()
            k = samples
            if self.down is not None:
                self._send_to(self.down, "END", {})
            self._report("RUN_END", {"samples": samples, "error": None})
            return samples
        except (FrameError, SplitoptError) as e:
            line = " ".join(f"{where}, sample {k}: {e}"[:2000].split())
            self.log(line)
            self._report("RUN_END", {"samples": k, "error": line})
            return k
        finally:
            if reader is not None:
                reader.stop()
            for ch in (self.up, self.down):
                if ch is not None:
                    ch.close()


class UpstreamReader:
    """A pipelined run's upstream link (module docstring): a thread reads each SAMPLE,
    answers RECEIVED at once and hands the message to the compute loop (:meth:`take`)
    through a queue of at most :data:`PIPELINE_QUEUE` samples; while the queue is full it
    reads nothing, which holds the sender back. Started at construction; :meth:`stop`
    ends and joins it."""

    def __init__(self, agent_run: AgentRun, samples: int) -> None:
        assert agent_run.up is not None
        self.agent_run = agent_run
        self.up: Channel = agent_run.up
        self.timeout_s = agent_run.timeout_s
        self.handoff: queue.Queue[Message] = queue.Queue(maxsize=PIPELINE_QUEUE)
        self.failure: BaseException | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._read_all, args=(samples,), daemon=True,
                                       name=f"agent-run-reader-{agent_run.part.device}")
        self.thread.start()

    def _read_all(self, samples: int) -> None:
        try:
            for k in range(samples):
                msg = self.agent_run._read_sample(k)
                while True:  # a full queue: wait (nothing more is read), unless the run is ending
                    if self.stopping.is_set():
                        return
                    try:
                        self.handoff.put(msg, timeout=POLL_S)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # noqa: BLE001 - handed to the compute loop, which raises it
            self.failure = e

    def take(self, k: int) -> Message:
        """The next SAMPLE (sample ``k``); the reader's failure once the samples it read
        are taken; FrameTimeout when none comes within twice the timeout (the reader's
        own reads time out first)."""
        deadline = time.monotonic() + 2 * self.timeout_s
        while True:
            try:
                return self.handoff.get(timeout=POLL_S)
            except queue.Empty:
                pass
            if self.failure is not None:
                try:
                    return self.handoff.get_nowait()
                except queue.Empty:
                    raise self.failure from None
            if time.monotonic() > deadline:
                raise FrameTimeout(f"{self.up.peer}: sample {k} did not come within {2 * self.timeout_s:g} s")

    def stop(self) -> None:
        """End the thread (a blocked read is woken by shutting the link down) and join it."""
        self.stopping.set()
        if self.thread.is_alive():
            self.up.shutdown()
        self.thread.join(self.timeout_s)
