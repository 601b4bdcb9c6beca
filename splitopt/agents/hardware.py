"""The hardware of ``splitopt profile MODEL --agents SPEC``: the devices and links of a
topology measured by device agents instead of taken from presets (on the controller;
no torch).

:func:`open_agents` picks the agents the topology uses (edge/cloud: the first two, or
``--edge``/``--cloud``; chain and mesh: every agent, in the order given), reads the
token, connects to each of them (an unreachable agent, a wrong token or another protocol
version is one line, exit 2, before any model is built), asks each for its INFO and
probes every link the topology needs (:meth:`splitopt.families.base.Family.topology_links`),
both ways, from the link's source agent to the address it reaches its target at. Then
:meth:`AgentHardware.measure` sends one ONNX file of the model to every agent
(MEASURE_LAYERS, at onnxruntime's optimisation of the deployed parts,
:data:`MEASURE_OPTIMIZATION`) and returns each device's per-layer latency keyed by the
instance's layer names, and :meth:`AgentHardware.parts` gives the devices, links and settings in
the instance's JSON form, each field saying where it came from:

* a device is named after its agent; ``memory_bytes`` is what the agent says a part may
  use (its ``--memory-bytes``); ``mac_per_s`` is the model's MACs over the sum of the
  agent's layer medians (informative only: every layer carries its measured latency);
  ``bit_widths`` 2..32 (the agent runs float32 and quantize-dequantized parts);
  ``description``: the agent, its host, CPUs, CPU quota, threads and onnxruntime;
* every layer's latency on a device is the agent's median, scaled so that the layers add
  up to the agent's median whole run (:func:`run_scale`: under a CPU quota the throttled
  pauses of a run fall into a few layers, which per-layer medians would leave out);
* a link's ``bandwidth_bits_per_s`` is the probed rate from its source to its target
  (TCP payload) and ``latency_ms`` half the probed round trip;
* settings: the family's (:meth:`splitopt.families.base.Family.topology_settings`) at the
  reference precision :data:`REFERENCE_BITS` (the agents compute in float32);
* :meth:`AgentHardware.provenance`: the instance's ``source["agents"]``: per device the
  agent, address, host, when, repeats, warm-up, threads, optimization, onnxruntime and
  quota, and per link both directions as probed.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from splitopt.agents.addresses import AgentSpec, Agents, parse_agents
from splitopt.agents.client import DEFAULT_TIMEOUT_S, AgentClient, LayerLatency, connect_agents
from splitopt.core.errors import InvalidOption

#: onnxruntime's graph optimisation of the measurements: that of the parts an agent runs
#: (onnxruntime's default, ``all``: fused kernels, NCHWc layouts), so that a part's
#: predicted compute is the sum of its layers as they run (``basic`` measures every layer
#: apart but runs MobileNetV2 2.4 times slower than the deployed part)
MEASURE_OPTIMIZATION = "all"
#: the reference precision of agent devices (onnxruntime on CPU computes float32)
REFERENCE_BITS = 32
#: the bit-widths an agent device runs (quantize-dequantized parts; float32 compute)
AGENT_BIT_WIDTHS = [2, 4, 6, 8, 16, 32]


def agent_names(agents: Agents, kind: str, edge: str | None = None, cloud: str | None = None) -> list[str]:
    """The agents topology ``kind`` uses, in the topology's order: edge-cloud: ``[edge,
    cloud]`` (default the first two given; with more agents ``--edge``/``--cloud`` pick
    two); chain, mesh: every agent in the order given. InvalidOption (one line) for a
    name that is no agent, or a count the topology does not take."""
    from splitopt.families.topologies import topology_family

    family = topology_family(kind)
    names = agents.names
    for option, name in (("--edge", edge), ("--cloud", cloud)):
        if name is not None and name not in names:
            raise InvalidOption(f"{option} {name}: not an agent of --agents (agents: {', '.join(names)})")
    if family.topology_devices == (2, 2):
        if edge is None and cloud is None and len(names) != 2:
            raise InvalidOption(f"--agents: topology {kind} takes two agents, {len(names)} given "
                                f"({', '.join(names)}); name them with --edge NAME --cloud NAME")
        rest = [n for n in names if n not in (edge, cloud)]
        edge = edge if edge is not None else rest.pop(0)
        cloud = cloud if cloud is not None else rest.pop(0)
        if edge == cloud:
            raise InvalidOption(f"--edge {edge} --cloud {cloud}: the edge and the cloud are two different agents")
        return [edge, cloud]
    if edge is not None or cloud is not None:
        raise InvalidOption(f"--edge/--cloud: apply to topology edge-cloud, not {kind} (its devices are the agents "
                            f"in the order given)")
    low, high = family.topology_devices
    if len(names) < low or (high is not None and len(names) > high):
        raise InvalidOption(f"--agents: topology {kind} takes at least {low} agents, {len(names)} given")
    return names


def topology_of(agents: Agents, topology: str | None) -> str:
    """``--topology``, else the default of as many devices as agents (two: edge-cloud;
    more: a chain)."""
    from splitopt.families.topologies import default_topology

    return str(getattr(topology, "value", topology)) if topology is not None else default_topology(len(agents.names))


@dataclass
class AgentHardware:
    """The agents of one profile, connected (see the module docstring). ``names``: the
    devices in the topology's order; ``clients``, ``infos``: per device; ``probes``: per
    link ``(source, target)`` the agent's PROBE_LINK answer."""

    kind: str
    agents: Agents
    names: list[str]
    clients: dict[str, AgentClient]
    infos: dict[str, dict[str, Any]]
    probes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    measured: dict[str, LayerLatency] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)
    probed_at: str = ""

    def close(self) -> None:
        for c in self.clients.values():
            c.close()

    def __enter__(self) -> "AgentHardware":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def link_pairs(self) -> list[tuple[str, str]]:
        """The topology's links over the agents, as ``(source, target)``."""
        from splitopt.families.topologies import topology_family

        return topology_family(self.kind).topology_links(self.names)

    def probe(self, max_seconds: float | None = None) -> None:
        """Probe every link of the topology, both ways, from its source's agent."""
        from splitopt.core import progress

        self.probed_at = _now()
        for source, target in self.link_pairs:
            progress.step(f"link {source} -> {target}")
            self.probes[(source, target)] = self.clients[source].probe_link(
                target, self.agents.peer_address(source, target), max_seconds=max_seconds)
        progress.step("")

    def measure(self, onnx_bytes: bytes, layer_names: Mapping[str, str] | None, *, repeats: int = 5,
                warmup: int = 1, input_shape: Any = None, input_high: int | None = None) -> dict[str, dict[str, float]]:
        """Per device (agent) the latency of every layer of the ONNX model ``onnx_bytes``
        (ms): its median, scaled by :func:`run_scale`; keyed by the instance's layer names
        (``layer_names``: the agent's names -> the instance's; None: the same)."""
        from splitopt.core import progress

        out = {}
        for name in self.names:
            progress.step(f"agent {name}")
            got = self.clients[name].measure_layers(onnx_bytes, repeats=repeats, warmup=warmup,
                                                    optimization=MEASURE_OPTIMIZATION,
                                                    input_shape=input_shape, input_high=input_high,
                                                    layer_names=layer_names)
            self.measured[name] = got
            self.scales[name] = scale = run_scale(got)
            out[name] = {layer: ms * scale for layer, ms in got.latency_ms.items()}
        progress.step("")
        return out

    def parts(self, total_macs: float, bit_widths: Sequence[int], quantized: bool
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        """Devices, links and settings (instance JSON) of the measured topology
        (module docstring); ``total_macs``: the model's, for each device's effective rate;
        ``bit_widths``, ``quantized``: the edge bit-widths the error tables offer and
        whether they are measured (as :func:`splitopt.families.topologies.preset_hardware`)."""
        from splitopt.families.topologies import topology_family

        devices = [self._device(n, total_macs) for n in self.names]
        links = [{"source": s, "target": t, "bandwidth_bits_per_s": float(p["to_peer"]["bits_per_s"]),
                  "latency_ms": float(p["to_peer"]["latency_ms"])} for (s, t), p in self.probes.items()]
        family = topology_family(self.kind)
        try:
            settings = family.topology_settings(self.names, devices, tuple(bit_widths), quantized, REFERENCE_BITS)
        except InvalidOption as e:
            raise InvalidOption(f"--agents: {e}") from None
        settings["cloud_bits"] = REFERENCE_BITS
        return devices, links, settings

    def _device(self, name: str, total_macs: float) -> dict[str, Any]:
        info, m, scale = self.infos[name], self.measured[name], self.scales[name]
        total_s = scale * sum(m.latency_ms.values()) / 1000.0
        rate = total_macs / total_s if total_s > 0 and total_macs > 0 else 1e9
        quota = info.get("cpu_quota")
        cpu = f"{info.get('cpus_usable')} of {info.get('cpu_count')} CPUs" + \
            (f", CPU quota {quota:g}" if isinstance(quota, (int, float)) else ", no CPU quota")
        memory = int(info.get("memory_bytes") or 0)
        if memory <= 0:
            raise InvalidOption(f"--agents: agent '{name}' reports no memory (memory_bytes {memory}); start it with "
                                f"--memory-bytes")
        return {"name": name,
                "description": f"agent '{name}' on host {info.get('hostname')} ({cpu}, {m.threads} thread(s), "
                               f"onnxruntime {m.onnxruntime}): per-layer latency measured {m.measured_at}, median of "
                               f"{m.repeats} runs after {m.warmup} warm-up, times {scale:.3f} (the layers add up to "
                               f"the median run); mac_per_s informative (MACs over the layers' sum)",
                "mac_per_s": rate, "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": float(memory),
                "bit_widths": list(AGENT_BIT_WIDTHS)}

    def provenance(self) -> dict[str, Any]:
        """``source["agents"]`` of the instance (module docstring)."""
        devices = {}
        for name in self.names:
            info, m = self.infos[name], self.measured.get(name)
            devices[name] = {
                "agent": self.clients[name].agent_name or name, "address": str(self.agents[name].address),
                "hostname": info.get("hostname"), "cpu_count": info.get("cpu_count"),
                "cpus_usable": info.get("cpus_usable"), "cpu_quota": info.get("cpu_quota"),
                "threads": info.get("threads"), "memory_bytes": info.get("memory_bytes"),
                "runtimes": info.get("runtimes"), "platform": info.get("platform"),
                "latency_ms": None if m is None else {
                    "what": "per-layer latency (ms), onnxruntime on the agent: each layer's median of repeats, times "
                            "scale (run_ms, a whole run's median wall time without profiling, over the medians' sum)",
                    "measured_at": m.measured_at, "repeats": m.repeats, "warmup": m.warmup, "threads": m.threads,
                    "optimization": m.optimization, "onnxruntime": m.onnxruntime, "seconds": m.seconds,
                    "run_ms": m.run_ms, "layers_run_ms": m.layers_run_ms,
                    "medians_sum_ms": sum(m.latency_ms.values()), "scale": self.scales.get(name)}}
        links = []
        for (s, t), p in self.probes.items():
            links.append({"source": s, "target": t, "probed_by": s, "address": p.get("address"),
                          "probed_at": self.probed_at, "rtt_ms": p.get("rtt_ms"), "method": p.get("method"),
                          "to_target": p.get("to_peer"), "from_target": p.get("from_peer"),
                          "used": "bandwidth_bits_per_s: to_target.bits_per_s (TCP payload); latency_ms: half the "
                                  "round trip"})
        return {"topology": self.kind, "devices": devices, "links": links}


def run_scale(measured: LayerLatency) -> float:
    """The factor on an agent's per-layer medians that makes them add up to its median
    whole run (``run_ms``; 1 where the agent reports none). Without a CPU quota it is
    near 1 (onnxruntime's work between kernels); under a quota it is large: the quota
    throttles a run for the rest of each period once its share is spent, and those
    pauses fall into a few layers of each run, which the per-layer medians leave out
    (the run's wall time keeps them)."""
    total = sum(measured.latency_ms.values())
    if measured.run_ms is None or measured.run_ms <= 0 or total <= 0:
        return 1.0
    return float(measured.run_ms / total)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def open_agents(spec: str, token_file: Path | str | None, topology: str | None = None, *, edge: str | None = None,
                cloud: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> AgentHardware:
    """Parse ``--agents``, pick the topology's agents (:func:`agent_names`), read the token
    (``--token-file`` or the environment), connect and authenticate to each and ask its
    INFO. InvalidOption (one line, exit 2) for a bad list, no token, or an agent that
    cannot be used; the links are probed by :meth:`AgentHardware.probe`."""
    from splitopt.agents.auth import TOKEN_ENV, read_token

    agents = parse_agents(spec)
    kind = topology_of(agents, topology)
    names = agent_names(agents, kind, edge, cloud)
    token = read_token(token_file)
    if token is None:
        raise InvalidOption(f"--agents: no token: give --token-file FILE or set ${TOKEN_ENV} (the agents' token)")
    used = Agents({n: AgentSpec(n, agents[n].address, agents[n].peers) for n in names})
    clients = connect_agents(used, token, timeout_s)
    try:
        infos = {n: c.info() for n, c in clients.items()}
    except BaseException:
        for c in clients.values():
            c.close()
        raise
    return AgentHardware(kind, agents, names, clients, infos)
