"""The pipelined run on device agents (:mod:`splitopt.agents.agent_run`, RUN's
``pipelined``), real ``splitopt agent`` processes on loopback (:mod:`agent_helpers`).

A model of six equal convolutions cut after the third (two stages of the same work) is
exported at 32 and at 4 bits and run one sample at a time and pipelined: the outputs
and bytes are the same, the stages overlap (the last device finishes a sample more
often than the two stages' work added up allows), and a device that drops mid-run ends
it with one line, the samples before it kept, no thread left on the surviving agent.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from agent_helpers import TOKEN, AgentProcess, children, export_edge_cloud, wait_for_log
from splitopt.agents.addresses import parse_agents
from splitopt.agents.client import connect_agents

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch

KEY = TOKEN.encode()
#: six equal 64-channel convolutions on 64x64: a few ms each, so a stage's work outweighs
#: the messages' overhead
MODEL = '''
import torch
from torch import nn


class Twin(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(64, 64, 3, padding=1) for _ in range(6)])
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.head(x.mean((2, 3)))


def build():
    return Twin().eval(), torch.zeros(1, 64, 64, 64)
'''


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The model profiled as an edge/cloud instance, cut after its third convolution and
    exported at 32 and 4 bits: ``{"parts": {bits: (manifest, files)}, "x", "unsplit"}``."""
    made = export_edge_cloud(MODEL, tmp_path_factory.mktemp("twin"), "twin", torch.randn(2, 64, 64, 64),
                             edge_layers=3, samples=16, edge_memory_bytes=1e9)
    assert made["names"][:3] == ["convs.0", "convs.1", "convs.2"]
    return made


@pytest.fixture
def two_agents(tmp_path):
    """Agents 'edge' and 'cloud' for one test; stopped (exit 0) and no child left."""
    started = [AgentProcess(tmp_path, "edge"), AgentProcess(tmp_path, "cloud")]
    yield {a.name: a for a in started}
    assert [a.stop() for a in started] == [0, 0], [a.log() for a in started]
    assert not children(), "a child process is left"


def connected(agents, manifest, files, timeout_s: float = 20.0):
    from splitopt.agents.chain import deploy_export

    spec = parse_agents(",".join(f"{n}={agents[n].address}" for n in ("edge", "cloud")))
    clients = connect_agents(spec, KEY, timeout_s)
    deploy_export(clients, spec, manifest, files)
    return clients


def period_and_work_ms(result) -> tuple[float, float]:
    """The last device's mean interval between finished samples (its own clock) and the
    two stages' work (compute, pack and unpack) per sample, each device's mean, added."""
    done = [s["devices"]["cloud"]["done_s"] for s in result.samples]
    period = 1000.0 * (done[-1] - done[0]) / (len(done) - 1)
    work = sum(np.mean([sum(s["devices"][d][k] for k in ("compute_ms", "pack_ms", "unpack_ms"))
                        for s in result.samples]) for d in ("edge", "cloud"))
    return period, work


def test_pipelined_run_gives_the_outputs_and_bytes_of_the_run_one_at_a_time(two_agents, twin):
    from splitopt.agents.chain import run_chain
    from splitopt.agents.runtime import reference_run
    from splitopt.torch.export_parts import ONNX_ATOL

    x = twin["x"][:6]
    for bits in (32, 4):
        manifest, files = twin["parts"][bits]
        clients = connected(two_agents, manifest, files)
        try:
            one = run_chain(clients, manifest, x, warmup=1)
            streamed = run_chain(clients, manifest, x, warmup=1, pipelined=True)
        finally:
            for c in clients.values():
                c.close()
        assert one.ok and streamed.ok, (one.error, streamed.error)
        assert len(streamed.samples) == 6
        assert np.array_equal(streamed.outputs[0], one.outputs[0])  # the same parts on the same inputs
        reference = reference_run(manifest, files, x)
        magnitude = max(1.0, float(np.abs(twin["unsplit"]).max()))
        assert np.abs(streamed.outputs[0] - reference[0]).max() <= ONNX_ATOL * magnitude
        if bits == 32:
            assert np.abs(streamed.outputs[0] - twin["unsplit"][:6]).max() <= ONNX_ATOL * magnitude
        payload = sum(int(np.ceil(t["elements"] * bits / 8)) for t in manifest["crossings"][0]["tensors"])
        for run in (one, streamed):
            for s in run.samples:
                (link,) = s["links"]
                assert link["payload_bytes"] == payload and link["wait_ms"] >= link["transfer_ms"] >= 0
        for d in ("edge", "cloud"):  # each agent's own clock runs forward over the samples
            done = [s["devices"][d]["done_s"] for s in streamed.samples]
            assert all(b > a for a, b in zip(done, done[1:]))


def test_pipelining_overlaps_the_stages(two_agents, twin):
    """Two stages of the same work: one at a time, the last device finishes a sample at
    most once per the two stages' work added up (each cycle holds both); pipelined, far
    more often (under 0.9 of it; 0.6 to 0.75 measured with two busy loops beside on 2
    cores, about 0.6 idle). Period and work are measured in the same run (wall clock: a
    loaded machine stretches the stages and the period alike), so the comparison holds
    however busy the cores are; the rate against the run one at a time would not (on
    one free core the stages cannot overlap)."""
    from splitopt.agents.chain import run_chain

    manifest, files = twin["parts"][32]
    clients = connected(two_agents, manifest, files)
    try:
        one = run_chain(clients, manifest, twin["x"], warmup=2)
        streamed = run_chain(clients, manifest, twin["x"], warmup=2, pipelined=True)
    finally:
        for c in clients.values():
            c.close()
    assert one.ok and streamed.ok, (one.error, streamed.error)
    one_period, one_work = period_and_work_ms(one)
    period, work = period_and_work_ms(streamed)
    assert one_period >= 0.95 * one_work, (one_period, one_work)
    assert period < 0.9 * work, (period, work, one_period, one_work, os.getloadavg())


def test_a_device_that_drops_mid_pipelined_run_ends_it_with_one_line(twin, tmp_path):
    """The edge killed while samples stream: the cloud's reader sees the link drop, the
    run ends with one line naming the device and the sample, the samples before are
    kept, and the cloud's reader thread is joined (its threads back to those before)."""
    from splitopt.agents.chain import run_chain

    edge, cloud = AgentProcess(tmp_path, "edge"), AgentProcess(tmp_path, "cloud")
    manifest, files = twin["parts"][4]
    clients = connected({"edge": edge, "cloud": cloud}, manifest, files, timeout_s=10)
    threads = thread_count(cloud.proc.pid)
    x = np.repeat(twin["x"][:1], 40, axis=0)  # 40 MiB of inputs

    def kill_edge_at_the_fifth(device, report):
        if device == "cloud" and report["sample"] == 4:
            edge.kill()

    try:
        started = time.monotonic()
        result = run_chain(clients, manifest, x, on_report=kill_edge_at_the_fifth, pipelined=True)
        assert time.monotonic() - started < 20
        assert result.error is not None and "\n" not in result.error
        kept = len(result.samples)  # the reports race the kill: 5 or a few more samples completed
        assert 5 <= kept < 40 and result.outputs[0].shape[0] == kept
        assert result.error.startswith(f"run stopped at sample {kept} ({kept} measured sample(s) kept): agent 'edge'")
        assert "dropped" in result.error
        line = wait_for_log(cloud, "previous device 'edge'")
        assert "agent 'cloud' (device 'cloud'), sample" in line
        deadline = time.monotonic() + 10
        while thread_count(cloud.proc.pid) > threads and time.monotonic() < deadline:
            time.sleep(0.05)
        assert thread_count(cloud.proc.pid) == threads
        assert clients["cloud"].info()["deployed"]["device"] == "cloud"  # the surviving agent serves on
    finally:
        for c in clients.values():
            c.close()
        edge.stop()
        assert cloud.stop() == 0, cloud.log()
    assert not {edge.proc.pid, cloud.proc.pid} & set(children())


def thread_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))
