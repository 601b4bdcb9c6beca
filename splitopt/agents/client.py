"""The controller's side of one agent: :class:`AgentClient`.

``AgentClient(name, address, token, timeout_s)`` connects and authenticates at once
(mutually: the agent proves the token first), so that an agent that is unreachable,
holds another token or speaks another protocol version is one line naming it
(:class:`AgentUnavailable`, a kind of InvalidOption: exit 2) before any work;
:func:`connect_agents` opens every agent of an ``--agents`` list that way. A request the
agent refuses is :class:`AgentError` (one line: the agent's name and its reason).

Requests: :meth:`~AgentClient.info`, :meth:`~AgentClient.measure_layers`,
:meth:`~AgentClient.probe_link`, :meth:`~AgentClient.deploy`, :meth:`~AgentClient.reset`;
a run over several agents is :func:`splitopt.agents.chain.run_chain` (it uses
:meth:`~AgentClient.start_run` and :meth:`~AgentClient.read_run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from splitopt.agents.addresses import Address, Agents, parse_address
from splitopt.agents.channel import AuthError, Channel, client_handshake, connect
from splitopt.agents.protocol import Message, PeerError, array_blob
from splitopt.core.errors import InvalidOption, SplitoptError
from splitopt.netrun.frames import DEFAULT_MAX_FRAME_BYTES, FrameError

#: default seconds an agent may stay silent inside an exchange (a layer measurement and a
#: link probe answer within it)
DEFAULT_TIMEOUT_S = 120.0
#: seconds :meth:`AgentClient.close` waits for the agent to end the session
CLOSE_WAIT_S = 5.0


class AgentUnavailable(InvalidOption):
    """An agent cannot be used: unreachable, another token, another protocol version."""


class AgentError(SplitoptError):
    """An agent refused a request or failed while answering it (one line naming it)."""


@dataclass(frozen=True)
class LayerLatency:
    """MEASURE_LAYERS' answer: per layer the median latency (``latency_ms``, ms; keyed by
    the ONNX bridge's layer names, or by the instance's when a name map was given), and
    how it was measured; ``run_ms``: the median wall time of a whole run without
    profiling, ``layers_run_ms``
    the median of a run's layers added up (None from an agent that does not report them)."""

    agent: str
    latency_ms: dict[str, float]
    repeats: int
    warmup: int
    threads: int
    optimization: str
    onnxruntime: str
    measured_at: str
    seconds: float
    run_ms: float | None = None
    layers_run_ms: float | None = None


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class AgentClient:
    """A session with one agent (module docstring); a context manager (``close`` at the end)."""

    def __init__(self, name: str, address: Address | str, token: bytes, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, client_name: str = "controller") -> None:
        self.name = name
        self.address = address if isinstance(address, Address) else parse_address(address, f"agent '{name}'")
        self.timeout_s = float(timeout_s)
        what = f"agent '{name}'"
        try:
            self.channel: Channel = connect(self.address, self.timeout_s, max_frame_bytes, what)
        except FrameError as e:
            raise AgentUnavailable(str(e)) from None
        try:
            welcome = client_handshake(self.channel, token, "controller", client_name)
        except AuthError as e:
            self.channel.close()
            raise AgentUnavailable(f"{what} at {self.address}: {e}") from None
        except FrameError as e:
            self.channel.close()
            raise AgentUnavailable(f"{what} at {self.address}: {e}") from None
        #: what the agent told on connecting (INFO's fields)
        self.welcome_info: dict[str, Any] = dict(welcome.get("info") or {})
        self.agent_name = str(welcome.get("name", ""))

    def __repr__(self) -> str:
        return f"AgentClient({self.name!r}, '{self.address}')"

    def _request(self, type_: str, fields: dict[str, Any] | None = None, blobs=(), wait_s: float | None = None
                 ) -> Message:
        try:
            return self.channel.request(type_, fields, blobs, wait_s=wait_s)
        except PeerError as e:
            raise AgentError(f"agent '{self.name}' at {self.address}: {e}") from None
        except FrameError as e:
            raise AgentError(f"agent '{self.name}' at {self.address}: {type_}: {e}") from None

    def info(self) -> dict[str, Any]:
        """The agent's INFO: ``name``, ``protocol``, ``hostname``, ``cpu_count``,
        ``cpus_usable``, ``cpu_quota``, ``threads``, ``memory_bytes``, ``runtimes``
        (onnxruntime, onnx, numpy, torch: versions or None), ``deployed``."""
        return dict(self._request("INFO").get("info") or {})

    def measure_layers(self, onnx_bytes: bytes, *, input_shape: Any = None, input_high: int | None = None,
                       repeats: int = 5, warmup: int = 1, optimization: str = "basic",
                       layer_names: Mapping[str, str] | None = None) -> LayerLatency:
        """Per-layer latency of the ONNX model ``onnx_bytes`` on the agent, by the rules of
        ``splitopt profile MODEL.onnx --measure`` (:mod:`splitopt.agents.runtime`; the
        agent's threads). ``layer_names``: ONNX bridge layer name -> instance layer name
        (:func:`splitopt.agents.model_onnx.model_onnx`); every measured layer must be in
        it. ``input_shape``: as ``--input-shape`` (a dynamic input)."""
        fields: dict[str, Any] = {"repeats": repeats, "warmup": warmup, "optimization": optimization,
                                  "input_high": input_high,
                                  "input_shape": list(input_shape) if isinstance(input_shape, tuple) else input_shape}
        # a measurement may take long: a layer-profiled run per repeat
        msg = self._request("MEASURE_LAYERS", fields, [bytes(onnx_bytes)], wait_s=max(self.timeout_s, 600.0))
        pairs = [(str(n), float(ms)) for n, ms in msg.get("layers", [])]
        if layer_names is not None:
            unknown = [n for n, _ in pairs if n not in layer_names]
            if unknown:
                raise AgentError(f"agent '{self.name}': measured layer '{unknown[0]}' is not in the layer name map")
            pairs = [(layer_names[n], ms) for n, ms in pairs]
        return LayerLatency(self.name, dict(pairs), int(msg.get("repeats")), int(msg.get("warmup")),
                            int(msg.get("threads")), str(msg.get("optimization")), str(msg.get("onnxruntime")),
                            str(msg.get("measured_at")), float(msg.get("seconds", 0.0)),
                            _float_or_none(msg.get("run_ms")), _float_or_none(msg.get("layers_run_ms")))

    def probe_link(self, peer_name: str, peer_address: Address | str, *, max_bytes: int | None = None,
                   max_seconds: float | None = None) -> dict[str, Any]:
        """The link from this agent to agent ``peer_name`` at ``peer_address`` (the address
        this agent reaches it at), both ways (:func:`splitopt.agents.probe.probe_link`):
        ``rtt_ms``, and ``to_peer`` / ``from_peer`` with ``bits_per_s`` and
        ``latency_ms``."""
        fields: dict[str, Any] = {"peer": peer_name, "address": str(peer_address)}
        if max_bytes is not None:
            fields["max_bytes"] = int(max_bytes)
        if max_seconds is not None:
            fields["max_seconds"] = float(max_seconds)
        return dict(self._request("PROBE_LINK", fields, wait_s=self.timeout_s + 2 * (max_seconds or 3.0)).fields)

    def deploy(self, manifest: Mapping[str, Any], device: str, part_bytes: bytes | None,
               next_address: Address | str | None) -> dict[str, Any]:
        """Deploy the part of ``device`` of an ONNX export (``manifest``: the export's
        ``manifest.json`` object; ``part_bytes``: the part's file, None for a part that
        only forwards); ``next_address``: where this agent reaches the next device's agent
        (None for the last). The agent's summary of the part."""
        fields = {"manifest": dict(manifest), "device": device,
                  "next": None if next_address is None else str(next_address)}
        return dict(self._request("DEPLOY", fields, [] if part_bytes is None else [bytes(part_bytes)]).fields)

    def reset(self) -> None:
        """Drop the deployed part."""
        self._request("RESET")

    def start_run(self, run: str, samples: int, inputs: np.ndarray | None, pipelined: bool = False) -> None:
        """Start run ``run`` of ``samples`` samples (``inputs`` (samples, ...) for the agent
        of the first device), one at a time or ``pipelined``
        (:mod:`splitopt.agents.agent_run`); then :meth:`read_run` until RUN_END."""
        fields: dict[str, Any] = {"run": run, "samples": int(samples), "pipelined": bool(pipelined)}
        blobs: list[bytes] = []
        if inputs is not None:
            spec, raw = array_blob(inputs)
            fields["input"] = spec
            blobs.append(raw)
        try:
            self.channel.send("RUN", fields, blobs)
        except FrameError as e:
            raise AgentError(f"agent '{self.name}' at {self.address}: RUN: {e}") from None

    def read_run(self) -> Message:
        """The next SAMPLE_REPORT or RUN_END of a run (FrameError when the agent drops or
        stays silent past the timeout; PeerError when it refuses the run)."""
        return self.channel.read(("SAMPLE_REPORT", "RUN_END"))

    def close(self) -> None:
        """End the session (BYE), wait (up to :data:`CLOSE_WAIT_S`) until the agent has
        closed its side, so that the next controller finds it free, and close."""
        try:
            self.channel.send("BYE", {})
            self.channel.sock.settimeout(CLOSE_WAIT_S)
            while self.channel.sock.recv(65536):
                pass
        except (FrameError, OSError):
            pass
        self.channel.close()

    def __enter__(self) -> "AgentClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect_agents(agents: Agents, token: bytes, timeout_s: float = DEFAULT_TIMEOUT_S,
                   max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> dict[str, AgentClient]:
    """A client per agent of ``agents`` (all connected and authenticated), in their order;
    on the first that fails the others are closed and its AgentUnavailable raised."""
    clients: dict[str, AgentClient] = {}
    try:
        for name in agents.names:
            clients[name] = AgentClient(name, agents[name].address, token, timeout_s, max_frame_bytes)
    except BaseException:
        for c in clients.values():
            c.close()
        raise
    return clients
