"""The device agent (``splitopt agent``, :mod:`splitopt.agents`) as real processes on
loopback, and its controller client.

Agents are started on port 0 with a ready file (:mod:`agent_helpers`) and stopped with
SIGTERM at the end of each test or module (exit status 0); no child process may be left.
Covered: the handshake (right token, wrong token, a replayed proof, another protocol
version, no token at start-up, a non-loopback address), refusals that leave the agent
serving (an oversized frame, an unknown message type, a payload that is no ONNX model, a
second controller), per-layer latency with the ONNX bridge's layer names, a link probe
between two agents, a 2-part chain exported by ``splitopt export``'s function deployed
and run (outputs against the unsplit model and the one-process reference), a device
that drops mid-run, and the ``--agents`` parsing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from agent_helpers import TOKEN, AgentProcess, children, export_edge_cloud, wait_for_log
from resblock_model import SOURCE
from splitopt.agents import protocol
from splitopt.agents.addresses import parse_address, parse_agents
from splitopt.agents.auth import agent_proof, client_proof
from splitopt.agents.channel import Channel
from splitopt.agents.client import AgentClient, AgentError, AgentUnavailable, connect_agents
from splitopt.core.errors import InvalidOption
from splitopt.netrun.frames import HEAD, LENGTH, MAGIC, Kind, encode

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

KEY = TOKEN.encode()


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    """Two agents, 'edge' and 'cloud', for the module; torch cannot be imported in them (a
    device with the onnx extra alone)."""
    tmp = tmp_path_factory.mktemp("agents")
    started = [AgentProcess(tmp, "edge", block_torch=True), AgentProcess(tmp, "cloud", block_torch=True)]
    yield {a.name: a for a in started}
    assert [a.stop() for a in started] == [0, 0], [a.log() for a in started]
    assert not children(), "a child process is left"


def client(agent: AgentProcess, timeout_s: float = 20.0) -> AgentClient:
    return AgentClient(agent.name, agent.address, KEY, timeout_s)


def raw_channel(agent: AgentProcess) -> Channel:
    address = parse_address(agent.address)
    return Channel(socket.create_connection((address.host, address.port), timeout=10), 10, 2 ** 24, agent.name)


def small_onnx(path) -> bytes:
    """A small ONNX model built with onnx.helper: conv (+bias) + relu, global pool, flatten, gemm."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "fw"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="/relu/Relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["g"], ["f"], name="/Flatten"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="/fc/Gemm", transB=1)]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path.read_bytes()


# ----- handshake and refusals ---------------------------------------------------------------

def test_info_right_and_wrong_token_and_the_agent_keeps_serving(agents):
    with client(agents["edge"]) as c:
        info = c.info()
    assert info["name"] == "edge" and info["protocol"] == protocol.PROTOCOL_VERSION
    assert info["threads"] == 1 and info["cpu_count"] >= 1 and info["memory_bytes"] > 0
    assert info["runtimes"]["onnxruntime"] and info["deployed"] is None
    with pytest.raises(AgentUnavailable) as e:
        AgentClient("edge", agents["edge"].address, b"another-token-of-enough-length", 10)
    line = str(e.value)
    assert "agent 'edge'" in line and "authentication failed" in line and "\n" not in line
    assert "authentication failed" in wait_for_log(agents["edge"], "refused")
    with client(agents["edge"]) as c:
        assert c.info()["name"] == "edge"


def test_a_replayed_proof_does_not_open_a_session(agents):
    nonce = bytes(range(32))
    first = raw_channel(agents["cloud"])
    first.send("HELLO", {"role": "controller", "name": "eve", "nonce": nonce.hex()})
    challenge = first.read(("CHALLENGE",))
    agent_nonce = bytes.fromhex(challenge.get("nonce"))
    assert challenge.get("proof") == agent_proof(KEY, nonce, agent_nonce)  # the agent proves the token
    recorded = client_proof(KEY, nonce, agent_nonce)
    first.send("AUTH", {"proof": recorded})
    assert first.read(("WELCOME",)).get("name") == "cloud"
    first.send("BYE", {})
    first.close()
    again = raw_channel(agents["cloud"])  # same client nonce, the recorded proof
    again.send("HELLO", {"role": "controller", "name": "eve", "nonce": nonce.hex()})
    assert again.read(("CHALLENGE",)).get("nonce") != agent_nonce.hex()
    again.send("AUTH", {"proof": recorded})
    with pytest.raises(protocol.PeerError, match="authentication failed"):
        again.read(("WELCOME",))
    again.close()
    wait_for_log(agents["cloud"], "controller 'eve' gave a proof that does not match")


@pytest.mark.parametrize("controller_version", [1, 3])
def test_another_protocol_version_is_named(agents, monkeypatch, controller_version):
    """A controller of version 1 (runs one sample at a time only) or of a later version
    is refused at the handshake, both versions named."""
    agent_version = protocol.PROTOCOL_VERSION
    assert agent_version == 2
    monkeypatch.setattr(protocol, "PROTOCOL_VERSION", controller_version)
    with pytest.raises(AgentUnavailable) as e:
        client(agents["edge"])
    line = str(e.value)
    assert "agent 'edge'" in line and f"version {agent_version}" in line and f"version {controller_version}" in line


def test_unreachable_agent_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    with pytest.raises(AgentUnavailable, match=f"agent 'gone' at 127.0.0.1:{port}: cannot connect"):
        AgentClient("gone", f"127.0.0.1:{port}", KEY, 5)


def test_oversized_frame_and_unknown_type_are_refused_and_serving_goes_on(agents):
    agent = agents["edge"]
    address = parse_address(agent.address)
    with socket.create_connection((address.host, address.port), timeout=10) as s:
        s.sendall(HEAD.pack(MAGIC, 1, int(Kind.AGENT), 0) + LENGTH.pack(2 ** 40))
        assert s.recv(65536) is not None
    wait_for_log(agent, "exceeds the max frame size")
    ch = raw_channel(agent)  # authenticated, then a message type the protocol does not have
    nonce = bytes(32)
    ch.send("HELLO", {"role": "controller", "name": "t", "nonce": nonce.hex()})
    agent_nonce = bytes.fromhex(ch.read(("CHALLENGE",)).get("nonce"))
    ch.send("AUTH", {"proof": client_proof(KEY, nonce, agent_nonce)})
    ch.read(("WELCOME",))
    head = json.dumps({"v": protocol.PROTOCOL_VERSION, "type": "FORMAT_DISK", "blobs": []}).encode()
    ch.sock.sendall(encode(Kind.AGENT, "", protocol.HEADER_LENGTH.pack(len(head)) + head))
    with pytest.raises(protocol.PeerError, match="message type 'FORMAT_DISK' is unknown"):
        ch.read(("RESULT",))
    ch.close()
    with client(agent) as c:
        assert c.info()["name"] == "edge"


def test_a_second_controller_is_refused_while_one_is_connected(agents):
    with client(agents["cloud"]):
        with pytest.raises(AgentUnavailable, match="busy"):
            client(agents["cloud"])
    with client(agents["cloud"]) as c:
        assert c.info()["name"] == "cloud"


@pytest.mark.parametrize("args, env_token, message", [
    ((), None, "no token"),
    (("--insecure-no-token",), TOKEN, "a token is given too"),
    (("--listen", "0.0.0.0:0"), TOKEN, "--allow-remote"),
    (("--listen", "0.0.0.0:0", "--allow-remote", "--insecure-no-token"), None, "only on a loopback address"),
    (("--listen", "127.0.0.1:99999"), TOKEN, "port 99999"),
    (("--threads", "0"), TOKEN, "--threads 0"),
])
def test_start_up_refusals_are_one_line_exit_2(args, env_token, message, tmp_path):
    import os

    env = dict(os.environ)
    env.pop("SPLITOPT_AGENT_TOKEN", None)
    if env_token is not None:
        env["SPLITOPT_AGENT_TOKEN"] = env_token
    proc = subprocess.run([sys.executable, "-m", "splitopt", "agent", *args], capture_output=True, text=True,
                          env=env, timeout=60)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (proc.returncode, proc.stderr)


def test_short_or_unreadable_token_file_is_one_line(tmp_path):
    short = tmp_path / "short"
    short.write_text("abc\n")
    for path, message in ((short, "at least 16"), (tmp_path / "missing", "cannot read the token")):
        proc = subprocess.run([sys.executable, "-m", "splitopt", "agent", "--token-file", str(path)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# ----- layer latency and link probe --------------------------------------------------------

def test_measure_layers_names_the_layers_as_profile_does(agents, tmp_path):
    from splitopt.onnx import profile_onnx

    data = small_onnx(tmp_path / "small.onnx")
    with client(agents["edge"]) as c:
        got = c.measure_layers(data, repeats=3, warmup=1)
        with pytest.raises(AgentError) as e:
            c.measure_layers(b"this is not an ONNX model at all")
        assert "agent 'edge'" in str(e.value) and "not an ONNX model" in str(e.value)
        assert c.info()["name"] == "edge"  # the session goes on after a refused request
    inst = profile_onnx(tmp_path / "small.onnx", calibration=0)
    assert list(got.latency_ms) == [l.name for l in inst.layers]
    assert all(ms >= 0 for ms in got.latency_ms.values()) and sum(got.latency_ms.values()) > 0
    assert (got.repeats, got.warmup, got.threads, got.optimization) == (3, 1, 1, "basic")


def test_probe_link_between_two_agents_both_ways(agents):
    with client(agents["edge"]) as c:
        link = c.probe_link("cloud", agents["cloud"].address, max_bytes=1 << 20, max_seconds=1.0)
    assert link["peer"] == "cloud" and link["rtt_ms"] > 0
    for way in ("to_peer", "from_peer"):
        assert link[way]["bits_per_s"] > 1e6 and 0 < link[way]["bytes"] <= 1 << 20
        assert link[way]["latency_ms"] == pytest.approx(link["rtt_ms"] / 2)
        assert link[way]["seconds"] < 5


def test_agents_option_inline_and_json(tmp_path):
    a = parse_agents("edge=127.0.0.1:7000,cloud=[::1]:7001")
    assert a.names == ["edge", "cloud"] and str(a["cloud"].address) == "[::1]:7001"
    assert str(a.peer_address("edge", "cloud")) == "[::1]:7001"
    f = tmp_path / "agents.json"
    f.write_text(json.dumps({"edge": {"address": "10.0.0.2:7431", "peers": {"cloud": "10.1.0.3:7431"}},
                             "cloud": {"address": "10.0.0.3:7431"}}))
    b = parse_agents(str(f))
    assert str(b.peer_address("edge", "cloud")) == "10.1.0.3:7431"
    assert str(b.peer_address("cloud", "edge")) == "10.0.0.2:7431"
    for bad, message in (("edge=127.0.0.1", "no port"), ("edge:7000", "not NAME=HOST:PORT"),
                         ("edge=h:1,edge=h:2", "given twice"), ("a b=h:1", "agent name"),
                         ("edge=h:70000", "port 70000"), ("edge=h:1,", "empty entry"),
                         (str(tmp_path / "none.json"), "cannot read")):
        with pytest.raises(InvalidOption, match=message) as e:
            parse_agents(bad)
        assert "\n" not in str(e.value)
    f.write_text(json.dumps({"edge": {"address": "h:1", "peers": {"other": "h:2"}}}))
    with pytest.raises(InvalidOption, match="not another agent"):
        parse_agents(str(f))


# ----- deploy and run a chain ---------------------------------------------------------------

MODEL = SOURCE


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The residual CNN profiled as an edge/cloud instance (devices 'edge' and 'cloud'),
    cut after c2 and exported by ``splitopt export``'s function at 32 bits (float) and
    at 4 bits: ``{bits: (manifest, files)}``, with the module and inputs."""
    torch = pytest.importorskip("torch")
    made = export_edge_cloud(MODEL, tmp_path_factory.mktemp("export"), "resblock", torch.randn(4, 3, 8, 8),
                             edge_layers=2, samples=4, edge_memory_bytes=4e6)
    assert made["names"][:2] == ["c1", "c2"]
    return made


def deploy(agents, manifest, files, clients):
    from splitopt.agents.chain import deploy_export

    spec = parse_agents(",".join(f"{n}={agents[n].address}" for n in ("edge", "cloud")))
    return deploy_export(clients, spec, manifest, files)


@pytest.mark.torch
def test_deploy_and_run_a_two_part_chain(agents, exported):
    from splitopt.agents.chain import run_chain
    from splitopt.agents.runtime import reference_run
    from splitopt.torch.export_parts import ONNX_ATOL

    spec = parse_agents(",".join(f"{n}={agents[n].address}" for n in ("edge", "cloud")))
    clients = connect_agents(spec, KEY, 20)
    try:
        for bits in (32, 4):
            manifest, files = exported["parts"][bits]
            summaries = deploy(agents, manifest, files, clients)
            assert summaries["edge"]["part"]["next_device"] == "cloud" and summaries["cloud"]["part"]["first"] is False
            seen = []
            result = run_chain(clients, manifest, exported["x"], warmup=1, on_report=lambda d, r: seen.append(d))
            assert result.ok, result.error
            assert len(result.samples) == 4 and len(seen) == 2 * 5
            reference = reference_run(manifest, files, exported["x"])
            got = result.outputs[0]
            magnitude = max(1.0, float(np.abs(exported["unsplit"]).max()))
            assert np.abs(got - reference[0]).max() <= ONNX_ATOL * magnitude
            if bits == 32:  # float32 on the wire: the unsplit model's outputs
                assert np.abs(got - exported["unsplit"]).max() <= ONNX_ATOL * magnitude
            payload = sum(int(np.ceil(t["elements"] * bits / 8)) for t in manifest["crossings"][0]["tensors"])
            for s in result.samples:
                assert s["devices"]["edge"]["compute_ms"] > 0 and s["devices"]["cloud"]["compute_ms"] > 0
                (link,) = s["links"]
                assert (link["from"], link["to"]) == ("edge", "cloud")
                assert link["payload_bytes"] == payload and link["bytes"] > payload + link["header_bytes"]
                assert link["transfer_ms"] >= 0 and link["receive_ms"] >= 0 and link["rtt_ms"] > 0
        assert clients["cloud"].info()["deployed"]["file"] is not None
        clients["cloud"].reset()
        assert clients["cloud"].info()["deployed"] is None
    finally:
        for c in clients.values():
            c.close()


@pytest.mark.torch
def test_deploy_refusals(agents, exported, tmp_path):
    manifest, files = exported["parts"][32]
    with client(agents["edge"]) as c:
        with pytest.raises(AgentError, match="not an ONNX model"):
            c.deploy(manifest, "edge", b"garbage bytes", agents["cloud"].address)
        with pytest.raises(AgentError, match="device 'nowhere' has 0 parts"):
            c.deploy(manifest, "nowhere", files["edge"], None)
        with pytest.raises(AgentError, match="field next"):
            c.deploy(manifest, "edge", files["edge"], None)
        c.reset()
        from splitopt.agents.chain import run_chain

        result = run_chain({"edge": c}, dict(manifest, run_order=[0]), exported["x"][:1])
        assert "agent 'edge' refused the run" in result.error and "has no part deployed" in result.error
        assert c.info()["deployed"] is None  # the session goes on
    small = AgentProcess(tmp_path, "tiny", "--memory-bytes", "1000")
    try:
        with client(small) as c:
            with pytest.raises(AgentError, match="over this agent's --memory-bytes 1,000"):
                c.deploy(manifest, "edge", files["edge"], agents["cloud"].address)
    finally:
        assert small.stop() == 0


@pytest.mark.torch
def test_a_device_that_drops_mid_run_ends_it_with_one_line(exported, tmp_path):
    from splitopt.agents.chain import run_chain

    edge, cloud = AgentProcess(tmp_path, "edge"), AgentProcess(tmp_path, "cloud")
    try:
        spec = parse_agents(f"edge={edge.address},cloud={cloud.address}")
        clients = connect_agents(spec, KEY, 10)
        manifest, files = exported["parts"][4]
        deploy({"edge": edge, "cloud": cloud}, manifest, files, clients)
        x = np.repeat(exported["x"][:1], 400, axis=0)
        reported = []

        def kill_cloud_at_the_fifth(device, report):
            reported.append(device)
            if device == "cloud" and report["sample"] == 4:
                cloud.kill()

        started = time.monotonic()
        result = run_chain(clients, manifest, x, on_report=kill_cloud_at_the_fifth)
        assert time.monotonic() - started < 20
        assert result.error is not None and "\n" not in result.error
        kept = len(result.samples)  # the reports race the kill: 5 or a few more samples completed
        assert 5 <= kept < 400 and result.outputs[0].shape[0] == kept
        assert result.error.startswith(f"run stopped at sample {kept} ({kept} measured sample(s) kept): agent 'cloud'")
        assert "dropped" in result.error
        with clients["edge"] as c:  # the surviving agent ended its side and serves on
            assert c.info()["deployed"]["device"] == "edge"
        wait_for_log(edge, "next device 'cloud'")
    finally:
        edge.stop()
        cloud.stop()
    assert not {edge.proc.pid, cloud.proc.pid} & set(children())


def test_an_agent_without_the_onnx_extra_says_so_in_one_line(tmp_path):
    agent = AgentProcess(tmp_path, "bare", block_torch=True, block=("onnx", "onnxruntime"))
    try:
        with client(agent) as c:
            with pytest.raises(AgentError) as e:
                c.measure_layers(b"\x08\x07")
            assert "onnx extra" in str(e.value) and "\n" not in str(e.value)
            link = c.probe_link("bare", agent.address, max_bytes=1 << 16, max_seconds=0.5)  # probing itself
            assert link["to_peer"]["bits_per_s"] > 0
    finally:
        assert agent.stop() == 0


def test_stop_with_sigterm_closes_open_sessions(tmp_path):
    agent = AgentProcess(tmp_path, "lone")
    c = client(agent)
    assert c.info()["name"] == "lone"
    assert agent.stop() == 0  # a controller still connected
    with pytest.raises(AgentError):
        c.info()
    c.close()


# ----- the wire form and the layer name map --------------------------------------------------

@pytest.mark.torch
@pytest.mark.parametrize("bits", [2, 4, 8, 16, 32])
def test_agents_pack_crossing_tensors_as_run_tcp_does(bits):
    """splitopt.agents.wire (numpy) gives the bytes of splitopt.netrun.wire (torch)."""
    torch = pytest.importorskip("torch")
    from splitopt.agents.wire import wire_pack, wire_unpack
    from splitopt.netrun import wire as netrun_wire

    g = torch.Generator().manual_seed(bits)
    floats = torch.randn(1, 4, 5, 3, generator=g)
    ids = torch.randint(0, 3, (1, 7), generator=g)
    for name, t, ranges in (("a", floats, {}), ("b", floats, {"b": (-0.5, 0.25)}), ("ids", ids, {})):
        ours = wire_pack(name, t.numpy(), bits, ranges)
        theirs = netrun_wire.wire_pack(name, t, bits, ranges)
        assert ours.to_bytes() == theirs.to_bytes()
        assert np.array_equal(wire_unpack(ours, t.numpy().dtype), netrun_wire.wire_unpack(theirs, t.dtype).numpy())


@pytest.mark.torch
def test_model_onnx_maps_the_agent_layer_names_to_the_instance(agents):
    """A model built in code with a rename: the agent measures the ONNX file under the
    ONNX bridge's names, the map turns them into the instance's (captured and renamed)."""
    torch = pytest.importorskip("torch")
    from splitopt.agents.model_onnx import model_onnx
    from splitopt.torch.capture import capture

    namespace: dict = {}
    exec(MODEL, namespace)
    torch.manual_seed(0)
    module, example = namespace["build"]()

    def rename(path: str) -> str:
        return {"c1": "stem", "c2": "block.conv_a", "c3": "block.conv_b", "fc": "head"}.get(path, f"x.{path}")

    m = model_onnx(module, example, rename)
    instance_names = [l.name for l in capture(module, example, rename=rename).layers]
    assert list(m.layer_names.values()) == instance_names and list(m.layer_names) != instance_names
    with client(agents["cloud"]) as c:
        got = c.measure_layers(m.data, repeats=2, layer_names=m.layer_names)
    assert list(got.latency_ms) == instance_names
    with client(agents["cloud"]) as c, pytest.raises(AgentError, match="not in the layer name map"):
        c.measure_layers(m.data, repeats=1, layer_names={})


@pytest.mark.torch
@pytest.mark.slow
def test_model_onnx_of_mobilenet_v2_names_the_profiled_instance_layers():
    pytest.importorskip("transformers")
    from splitopt.agents.model_onnx import model_onnx_by_name
    from splitopt.torch.architectures import MOBILENET_RENAME
    from splitopt.torch.capture import capture
    from splitopt.torch.models import build_model

    m = model_onnx_by_name("mobilenet_v2", 0)
    module, rename, example, _, _ = build_model("mobilenet_v2", 0)
    assert rename is MOBILENET_RENAME
    names = [l.name for l in capture(module, example, rename=rename).layers]
    assert list(m.layer_names.values()) == names and len(names) == 64
    assert "block11.project" in names
