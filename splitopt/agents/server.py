"""The device agent (``splitopt agent``): a long-lived TCP server that measures, probes and
runs deployed parts for one controller at a time.

Connections. The server listens on ``host:port`` (port 0: the system's choice, read back
as :attr:`AgentServer.port`) and serves every connection in its own thread. Each one
starts with the handshake (:mod:`splitopt.agents.auth`): a client that does not prove
the token, speaks another protocol version, sends a malformed, oversized or unexpected
message or stays silent past ``timeout_s`` is refused in one logged line (logger
``splitopt.agents``, level ERROR: the agent, the peer, the reason) and its connection
closed; the server goes on serving. A client is either

* the **controller** (one at a time; a second one is refused as busy until the first
  leaves): requests INFO, MEASURE_LAYERS, PROBE_LINK, DEPLOY, RESET, RUN, BYE
  (:mod:`splitopt.agents.protocol`). A request that cannot be answered (a bad field, a
  payload that is no ONNX model, a part over the agent's memory, nothing deployed, a
  peer that cannot be reached) is answered with ERROR (one line, also logged) and the
  session goes on; a broken message ends it. The session may wait ``idle_timeout_s``
  for the next request;
* a **peer** (another agent with the same token): PING, PROBE_SINK, PROBE_SOURCE (a link
  probe, :mod:`splitopt.agents.probe`) or STREAM, which hands the connection to this
  agent's RUN as its upstream link (:mod:`splitopt.agents.agent_run`).

The agent never executes what it is sent: models are ONNX bytes run by onnxruntime
(:mod:`splitopt.agents.runtime`), tensors numeric arrays; nothing is unpickled.
:meth:`AgentServer.stop` (Ctrl-C or SIGTERM in ``splitopt agent``) closes the listening
socket and every open connection, which ends their threads.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from splitopt.agents.addresses import Address, parse_address
from splitopt.agents.agent_run import AgentRun, ControllerGone, Upstreams
from splitopt.agents.channel import Channel, agent_handshake, client_handshake, connect
from splitopt.agents.probe import DEFAULT_MAX_BYTES, DEFAULT_MAX_SECONDS, MAX_PROBE_BYTES, answer_probe, probe_link
from splitopt.agents.protocol import (
    PROTOCOL_VERSION, Message, ProtocolError, array_from, blob, bool_field, int_field, number_field, str_field,
)
from splitopt.core.errors import InvalidModel, SplitoptError
from splitopt.netrun.frames import DEFAULT_MAX_FRAME_BYTES, FrameError, PeerClosed

log = logging.getLogger("splitopt.agents")

#: requests of a controller session
CONTROLLER_REQUESTS = ("INFO", "MEASURE_LAYERS", "PROBE_LINK", "DEPLOY", "RESET", "RUN", "BYE")
#: requests of a peer session
PEER_REQUESTS = ("PING", "PROBE_SINK", "PROBE_SOURCE", "STREAM", "BYE")
#: default seconds a connected peer may stay silent inside an exchange
DEFAULT_TIMEOUT_S = 30.0
#: default seconds a controller session may wait for its next request
DEFAULT_IDLE_TIMEOUT_S = 1800.0
#: seconds a controller waits for the previous one's session to end before it is refused as busy
BUSY_WAIT_S = 2.0
#: the most samples one RUN may ask for
MAX_SAMPLES = 1_000_000


@dataclass(frozen=True)
class AgentConfig:
    """What an agent is started with. ``token``: the shared secret (empty: the insecure
    mode); ``threads``: onnxruntime intra-op threads; ``memory_bytes``: memory a deployed
    part may use; ``timeout_s``: silence allowed inside an exchange; ``idle_timeout_s``:
    a controller's silence between requests."""

    name: str
    host: str = "127.0.0.1"
    port: int = 0
    token: bytes = b""
    threads: int = 1
    memory_bytes: int = 0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S


def _package_version(name: str) -> str | None:
    """The installed version of ``name`` without importing it (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def cpu_quota() -> float | None:
    """CPUs this process may use by its cgroup's CPU quota (cgroup v1 ``cpu.cfs_quota_us``
    / ``cpu.cfs_period_us``, v2 ``cpu.max``); None without a quota or where unreadable."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controllers == "":  # cgroup v2
                quota, period = open(f"/sys/fs/cgroup{path}/cpu.max", encoding="utf-8").read().split()
                return None if quota == "max" else int(quota) / int(period)
            if "cpu" in controllers.split(","):
                base = f"/sys/fs/cgroup/{controllers}{path}"
                if not os.path.isdir(base):
                    base = f"/sys/fs/cgroup/cpu{path}"
                quota_us = int(open(f"{base}/cpu.cfs_quota_us", encoding="utf-8").read())
                period_us = int(open(f"{base}/cpu.cfs_period_us", encoding="utf-8").read())
                return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None
    return None


def total_memory_bytes() -> int:
    """Physical memory of this host, bytes."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


class AgentServer:
    """The agent (module docstring). Bind at construction (FrameError, one line, when the
    address cannot be bound), then :meth:`serve_forever` until :meth:`stop`."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((config.host, config.port))
            self.sock.listen(16)
        except OSError as e:
            self.sock.close()
            raise FrameError(f"cannot listen on {Address(config.host, config.port)}: {e.strerror or e}") from None
        self.stopping = threading.Event()
        self.controller_lock = threading.Lock()
        self.open: set[Channel] = set()
        self.open_lock = threading.Lock()
        self.threads: set[threading.Thread] = set()
        self.upstreams = Upstreams()
        self.deployed: Any = None  # a DeployedPart
        self.next_address: Address | None = None
        self.active_run: AgentRun | None = None
        self.refused: list[str] = []  # one line per refused client or request

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def address(self) -> Address:
        return Address(self.config.host, self.port)

    # ----- what the agent tells ------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """INFO: protocol version, host, CPUs, threads, memory, runtimes, what is deployed."""
        try:
            usable = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            usable = os.cpu_count() or 1
        return {"name": self.config.name, "protocol": PROTOCOL_VERSION, "hostname": socket.gethostname(),
                "cpu_count": os.cpu_count(), "cpus_usable": usable, "cpu_quota": cpu_quota(),
                "threads": self.config.threads, "memory_bytes": self.config.memory_bytes,
                "max_frame_bytes": self.config.max_frame_bytes, "timeout_s": self.config.timeout_s,
                "runtimes": {"onnxruntime": _package_version("onnxruntime"), "onnx": _package_version("onnx"),
                             "numpy": _package_version("numpy"), "torch": _package_version("torch")},
                "python": platform.python_version(), "platform": platform.platform(terse=True),
                "deployed": self.deployed.summary if self.deployed is not None else None}

    def _refuse(self, peer: str, reason: str) -> None:
        line = " ".join(f"splitopt agent '{self.config.name}': refused {peer}: {reason}"[:2000].split())
        self.refused.append(line)
        log.error(line)

    # ----- the accept loop -----------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Accept and serve connections until :meth:`stop`."""
        self.sock.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                sock, addr = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self.stopping.is_set():
                    break
                raise
            peer = str(Address(addr[0], addr[1]))
            channel = Channel(sock, self.config.timeout_s, self.config.max_frame_bytes, peer)
            t = threading.Thread(target=self._serve, args=(channel,), name=f"agent-{peer}", daemon=True)
            with self.open_lock:
                self.open.add(channel)
                self.threads = {x for x in self.threads if x.is_alive()} | {t}
            t.start()

    def stop(self, join_s: float = 5.0) -> None:
        """Stop accepting, close every connection, wait up to ``join_s`` for the sessions."""
        self.stopping.set()
        try:
            self.sock.close()
        except OSError:
            pass
        with self.open_lock:
            channels, threads = list(self.open), list(self.threads)
        for ch in channels:
            ch.shutdown()
        self.upstreams.drain()
        active = self.active_run
        if active is not None:
            active.shutdown()
        deadline = time.monotonic() + join_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    # ----- one connection ------------------------------------------------------------------------
    def _serve(self, channel: Channel) -> None:
        kept = False
        controller = False

        def welcome(role: str) -> dict[str, Any]:
            nonlocal controller
            if role == "controller":  # one controller at a time: a second one is refused before WELCOME
                if not self.controller_lock.acquire(timeout=BUSY_WAIT_S):  # (the last one may be leaving)
                    raise ProtocolError(f"agent '{self.config.name}' is busy: another controller is connected")
                controller = True
            return self._welcome(role)

        try:
            role, client = agent_handshake(channel, self.config.token, self.config.name, welcome)
            channel.peer = f"{role} '{client[:60]}' at {channel.peer}"
            try:
                if role == "peer":
                    kept = self._peer_session(channel)
                else:
                    self._controller_session(channel)
            finally:  # free before the refusal below is sent: the client may reconnect at once
                if controller:
                    self.controller_lock.release()
                    controller = False
        except ControllerGone as e:
            self._refuse(channel.peer, f"the controller's connection failed: {e}")
        except FrameError as e:
            if not self.stopping.is_set():
                self._refuse(channel.peer, str(e))
                try:
                    channel.send("ERROR", {"message": " ".join(str(e)[:2000].split())})
                except FrameError:
                    pass
        except Exception as e:  # noqa: BLE001 - a defect in one session must not end the agent
            self._refuse(channel.peer, f"internal error: {type(e).__name__}: {str(e)[:300]}")
        finally:
            if controller:
                self.controller_lock.release()
            with self.open_lock:
                self.open.discard(channel)
            if not kept:
                channel.close()

    def _welcome(self, role: str) -> dict[str, Any]:
        return {"name": self.config.name, "info": self.info() if role == "controller" else {}}

    def _peer_session(self, channel: Channel) -> bool:
        """Answer a peer's probes until it leaves; True when the connection was handed
        to a RUN (STREAM)."""
        while True:
            try:
                msg = channel.read(PEER_REQUESTS)
            except PeerClosed:
                return False
            if msg.type == "BYE":
                return False
            if msg.type == "STREAM":
                run = str_field(msg, "run", max_len=100)
                assert run is not None
                self.upstreams.hand_over(run, channel)
                return True
            answer_probe(channel, msg)

    def _controller_session(self, channel: Channel) -> None:
        while True:
            try:
                msg = channel.read(CONTROLLER_REQUESTS, wait_s=self.config.idle_timeout_s)
            except PeerClosed:
                return
            if msg.type == "BYE":
                return
            try:  # what goes wrong answering (a bad field or payload, an unreachable peer) is answered
                if msg.type == "RUN":
                    self._run(channel, msg)
                    continue
                result = self._answer(msg)
            except SplitoptError as e:
                line = " ".join(f"{msg.type}: {e}"[:2000].split())
                self._refuse(channel.peer, line)
                channel.send("ERROR", {"message": line})
                continue
            channel.send("RESULT", result)

    def _answer(self, msg: Message) -> dict[str, Any]:
        if msg.type == "INFO":
            return {"info": self.info()}
        if msg.type == "MEASURE_LAYERS":
            return self._measure(msg)
        if msg.type == "PROBE_LINK":
            return self._probe(msg)
        if msg.type == "DEPLOY":
            return self._deploy(msg)
        assert msg.type == "RESET"
        self.deployed, self.next_address = None, None
        return {}

    def _measure(self, msg: Message) -> dict[str, Any]:
        from splitopt.agents.runtime import measure_layers
        from splitopt.onnx.deps import require_onnx

        require_onnx(f"agent '{self.config.name}': MEASURE_LAYERS")
        high = msg.get("input_high")
        if high is not None:
            high = int_field(msg, "input_high", 1, 2 ** 62)
        shape = msg.get("input_shape")
        if shape is not None and not isinstance(shape, (list, dict, str)):
            raise ProtocolError(f"MEASURE_LAYERS field input_shape {str(shape)[:60]!r} is not a shape")
        return measure_layers(blob(msg, 0, "the ONNX model"), self.config.threads, input_shape=shape,
                              input_high=high, repeats=int_field(msg, "repeats", 1, 1000, 5),
                              warmup=int_field(msg, "warmup", 0, 100, 1),
                              optimization=str_field(msg, "optimization", ("basic", "all", "none")) or "basic")

    def _probe(self, msg: Message) -> dict[str, Any]:
        peer = str_field(msg, "peer", max_len=64)
        address = parse_address(str_field(msg, "address", max_len=300) or "", "PROBE_LINK address")
        max_bytes = int_field(msg, "max_bytes", 1, MAX_PROBE_BYTES, DEFAULT_MAX_BYTES)
        max_seconds = number_field(msg, "max_seconds", 0.01, 600.0, DEFAULT_MAX_SECONDS)
        channel = connect(address, self.config.timeout_s, self.config.max_frame_bytes, f"peer agent '{peer}'")
        try:
            client_handshake(channel, self.config.token, "peer", self.config.name)
            result = probe_link(channel, max_bytes, max_seconds)
            channel.send("BYE", {})
        finally:
            channel.close()
        return dict(result, peer=peer, address=str(address))

    def _deploy(self, msg: Message) -> dict[str, Any]:
        from splitopt.agents.runtime import DeployedPart, check_deployable, part_memory_bytes
        from splitopt.onnx.deps import require_onnx

        require_onnx(f"agent '{self.config.name}': DEPLOY")
        device = str_field(msg, "device", max_len=64)
        assert device is not None
        manifest = msg.get("manifest")
        if not isinstance(manifest, dict):
            raise ProtocolError("DEPLOY field manifest is not a JSON object")
        part = check_deployable(manifest, device)
        data = blob(msg, 0, "the part's ONNX file") if part["file"] is not None else None
        if data is not None and part["file"].endswith(".pt2"):
            raise InvalidModel("agents run ONNX parts (`splitopt export --format onnx`)")
        need = part_memory_bytes(part, len(data) if data is not None else 0)
        if self.config.memory_bytes and need > self.config.memory_bytes:
            raise InvalidModel(f"the part of device '{device}' needs {need:,} bytes (file, inputs and outputs), over "
                               f"this agent's --memory-bytes {self.config.memory_bytes:,}")
        nxt = str_field(msg, "next", optional=True, max_len=300)
        self.deployed = None
        deployed = DeployedPart(manifest, device, data, self.config.threads)
        if deployed.next_device is not None and nxt is None:
            raise ProtocolError(f"DEPLOY: device '{device}' sends to '{deployed.next_device}': field next (its "
                                f"agent's HOST:PORT) is missing")
        self.deployed = deployed
        self.next_address = parse_address(nxt, "DEPLOY next") if nxt is not None else None
        return {"part": deployed.summary, "memory_bytes": need}

    def _run(self, channel: Channel, msg: Message) -> None:
        part = self.deployed
        if part is None:
            raise InvalidModel(f"agent '{self.config.name}' has no part deployed (DEPLOY first)")
        run = str_field(msg, "run", max_len=100)
        assert run is not None
        samples = int_field(msg, "samples", 1, MAX_SAMPLES)
        pipelined = bool_field(msg, "pipelined", False)
        inputs = None
        if part.is_first:
            inputs = array_from(msg.get("input"), blob(msg, 0, "the inputs"), "RUN input")
            want = (samples, *part.manifest["input"]["shape"][1:])
            if tuple(inputs.shape) != want or str(inputs.dtype) != part.manifest["input"]["dtype"]:
                raise InvalidModel(f"RUN inputs are {inputs.dtype} {tuple(inputs.shape)}, the manifest's input "
                                   f"{part.manifest['input']['dtype']} {want}")
        agent_run = AgentRun(part, self.next_address, channel, self.upstreams, token=self.config.token,
                             agent_name=self.config.name, timeout_s=self.config.timeout_s,
                             max_frame_bytes=self.config.max_frame_bytes,
                             log=lambda line: log.error(f"splitopt agent '{self.config.name}': {line}"))
        self.active_run = agent_run
        try:
            agent_run.run(run, samples, inputs, pipelined)
        finally:
            self.active_run = None
