"""Plan on the devices you have: ``splitopt profile MODEL --agents`` (the instance's
devices, links and latencies measured by device agents), solved, and ``splitopt run
INSTANCE PLAN --agents`` (the plan's parts deployed and run on the agents, measured
against the evaluator).

Real ``splitopt agent`` processes on loopback (:mod:`agent_helpers`), always; in a testbed
of network namespaces with a CPU quota and a tbf-shaped link where this process may make
one (skipped with the reason otherwise). A small residual CNN (a user factory) keeps the
module short; the full models belong to ``benchmarks/agents_loop.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from agent_helpers import TOKEN, AgentProcess, children

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c3 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.c4 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        z = torch.relu(self.b2(self.c2(y)) + y)
        w = torch.relu(self.c4(torch.relu(self.c3(z))))
        return self.fc(w.mean((2, 3)))


def build():
    return SmallNet().eval(), torch.zeros(1, 3, 32, 32)
'''
MEMORY = 300_000_000


def cli(*args: str, env_token: str | None = TOKEN, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPLITOPT_AGENT_TOKEN", None)
    if env_token is not None:
        env["SPLITOPT_AGENT_TOKEN"] = env_token
    return subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """Three agents on loopback ('edge', 'server', 'cloud', each --memory-bytes MEMORY),
    the model file, and the three-agent list."""
    tmp = tmp_path_factory.mktemp("loop")
    (tmp / "small.py").write_text(MODEL)
    (tmp / "token").write_text(TOKEN + "\n")
    started = [AgentProcess(tmp, n, "--memory-bytes", str(MEMORY)) for n in ("edge", "server", "cloud")]
    agents = {a.name: a for a in started}
    yield {"tmp": tmp, "spec": f"{tmp / 'small.py'}:build", "agents": agents, "token": tmp / "token",
           "list": ",".join(f"{a.name}={a.address}" for a in started)}
    assert [a.stop() for a in started] == [0, 0, 0], [a.log() for a in started]
    assert not children(), "a child process is left"


def profile_on_agents(loop, agents: str, topology: str | None, **more):
    from splitopt.torch.profile_model import LayerGraphProfileOptions, profile_model

    options = LayerGraphProfileOptions(agents=agents, token_file=loop["token"], topology=topology,
                                       calibration_images=0, repeats=2, **more)
    return profile_model(loop["spec"], options).instance


def check_provenance(inst, names):
    """Devices named after the agents, their memory the agents', every layer measured on
    every device, and the source saying by which agent, where, when, how."""
    assert [d.name for d in inst.devices] == names
    assert all(d.memory_bytes == MEMORY for d in inst.devices)
    # (a layer onnxruntime fuses into its neighbour, e.g. an add into the conv before it, measures 0)
    assert all(set(l.latency_ms) == set(names) and all(v >= 0 for v in l.latency_ms.values()) for l in inst.layers)
    assert all(sum(l.latency_ms[n] for l in inst.layers) > 0 for n in names)
    agents = inst.source["agents"]
    for n in names:
        d = agents["devices"][n]
        assert d["agent"] == n and d["hostname"] and d["threads"] == 1 and d["memory_bytes"] == MEMORY
        m = d["latency_ms"]
        assert m["repeats"] == 2 and m["warmup"] == 1 and m["threads"] == 1 and m["optimization"] == "all"
        assert m["measured_at"] and m["onnxruntime"]
        assert f"agent '{n}' on host" in inst.device_by_name[n].description
    for link, probed in zip(inst.links, agents["links"]):
        assert (link.source, link.target) == (probed["source"], probed["target"]) and probed["probed_by"] == link.source
        assert link.bandwidth_bits_per_s == probed["to_target"]["bits_per_s"] > 0
        assert probed["from_target"]["bits_per_s"] > 0 and link.latency_ms == pytest.approx(probed["rtt_ms"] / 2)


def run_plan(inst, plan, loop, agents, samples=3, **more):
    from splitopt.agents.run_plan import AgentRunOptions, run_on_agents

    return run_on_agents(inst, plan, AgentRunOptions(agents=agents, model=loop["spec"], token_file=loop["token"],
                                                     samples=samples, timeout=20, **more))


def check_run(report, devices, crossing: bool):
    assert report["ok"], report["error"] or report["check"]
    assert report["completed"] == report["samples"] == len(report["per_sample"])
    assert [p["device"] for p in report["parts"]] == devices
    c = report["check"]
    assert c["max_abs_diff_reference"] <= c["tolerance"]
    # a plan that sends the raw input (e.g. all on the cloud) sends it at the input's bits, not 32
    if c["float32_crossings"]:
        assert c["max_abs_diff_unsplit"] <= c["tolerance"]
    else:
        assert all(p["layers"] == 0 for p in report["parts"][:1]), "only the raw input may travel below 32 bits"
    for p in report["parts"]:
        assert (p["measured_ms"] > 0) == (p["layers"] > 0) and p["predicted_ms"] >= 0
    for l in report["links"]:
        assert l["bytes_ok"] and abs(l["payload_bytes"] - l["evaluator_bytes"]) < 1
    if crossing:
        assert all(l["payload_bytes"] > 0 and l["measured_ms"] > 0 and l["wire_bytes"] > l["payload_bytes"]
                   for l in report["links"])
        # one sample at a time, the last device waits at least while the first one computes the next sample
        first, last = report["parts"][0], report["parts"][-1]
        if report["completed"] + report["warmup"] >= 2:
            assert last["waited_ms"] >= 0.8 * first["measured_ms"], (first, last)
    for p in report["parts"]:
        assert p["waited_ms"] is None or p["waited_ms"] >= 0
    e = report["end_to_end"]
    assert e["measured_ms"] >= max(p["measured_ms"] for p in report["parts"]) and e["predicted_ms"] > 0
    check_throughput(report, devices, crossing)


def check_throughput(report, devices, crossing: bool):
    """The pipelined run: every sample, right outputs, the evaluator's bytes; the rate
    from the last working device's period; per device its stage beside the evaluator's
    (compute + outgoing link), the predicted bottleneck the slowest of those."""
    t = report["throughput"]
    assert t["error"] is None and t["samples"] == report["samples"] == len(t["per_sample"])
    c = t["check"]
    assert c["ok"] and c["samples"] == report["samples"]
    assert c["float32_crossings"] == report["check"]["float32_crossings"]
    if c["float32_crossings"]:
        assert c["max_abs_diff_unsplit"] <= c["tolerance"]
    for s in t["per_sample"]:
        for link, measured in zip(s["links"], report["links"]):
            assert abs(link["payload_bytes"] - measured["evaluator_bytes"]) < 1
    # a device works when the plan gives it layers or it sends (the first device sends the input)
    working = [d for k, d in enumerate(devices)
               if report["parts"][k]["layers"] > 0 or (k < len(report["links"]) and report["links"][k]["payload_bytes"])]
    assert t["period_device"] == working[-1]
    if crossing:
        assert t["period_device"] == devices[-1]
    assert t["measured_per_s"] > 0 and t["period_ms"] == pytest.approx(1000.0 / t["measured_per_s"])
    stages = [p["predicted_ms"] + (l["predicted_ms"] if k < len(report["links"]) else 0.0)
              for k, (p, l) in enumerate(zip(report["parts"], report["links"] + [None]))]
    assert [s["device"] for s in t["stages"]] == devices
    assert [s["predicted_ms"] for s in t["stages"]] == pytest.approx(stages)
    assert t["predicted_per_s"] == pytest.approx(1000.0 / max(stages))
    assert t["bottleneck_predicted"] == devices[stages.index(max(stages))]
    assert t["ratio"] == pytest.approx(t["measured_per_s"] / t["predicted_per_s"])
    for s, p in zip(t["stages"], report["parts"]):
        assert s["measured_ms"] >= s["compute_ms"] > 0 if p["layers"] else s["compute_ms"] == 0
    assert t["one_at_a_time_per_s"] == pytest.approx(1000.0 / report["end_to_end"]["measured_ms"])


def test_edge_cloud_profiled_solved_and_run_on_agents(loop):
    from splitopt import solve
    from splitopt.families.edge_cloud.plan import uniform_plan

    # three agents given, the topology takes two: --edge and --cloud pick them
    inst = profile_on_agents(loop, loop["list"], "edge-cloud", edge="edge", cloud="cloud")
    check_provenance(inst, ["edge", "cloud"])
    assert inst.problem == "split" and inst.settings.edge == "edge" and inst.settings.cloud_bits == 32
    assert inst.source["agents"]["topology"] == "edge-cloud" and len(inst.links) == 1
    best = solve(inst, time_limit=20).plan
    check_run(run_plan(inst, best, loop, loop["list"]), ["edge", "cloud"], crossing=False)
    cut = uniform_plan(inst, [l.name for l in inst.layers[:3]])  # a plan that sends a tensor
    report = run_plan(inst, cut, loop, loop["list"], warmup=1)
    check_run(report, ["edge", "cloud"], crossing=True)
    assert report["links"][0]["tensors"] and report["parts"][0]["layers"] == 3
    one = run_plan(inst, cut, loop, loop["list"], samples=1)
    assert one["ok"] and one["throughput"].startswith("not measurable from one sample")


def test_chain_profiled_and_run_on_three_agents(loop):
    from splitopt.families.chain.plan import plan_on_devices

    inst = profile_on_agents(loop, loop["list"], "chain")
    check_provenance(inst, ["edge", "server", "cloud"])
    assert inst.settings.chain == ("edge", "server", "cloud")
    assert [(l.source, l.target) for l in inst.links] == [("edge", "server"), ("server", "cloud")]
    names = [l.name for l in inst.layers]
    plan = plan_on_devices(inst, {n: "edge" if i < 2 else "server" if i < 4 else "cloud" for i, n in enumerate(names)})
    check_run(run_plan(inst, plan, loop, loop["list"], samples=2), ["edge", "server", "cloud"],
              crossing=True)


def test_an_onnx_file_profiled_on_agents(loop, tmp_path):
    """An .onnx model: the agents measure the file itself, its layers named by the ONNX
    bridge as `profile MODEL.onnx` names them."""
    from splitopt.agents.model_onnx import model_onnx
    from splitopt.onnx.graph import load

    namespace: dict = {}
    exec(MODEL, namespace)
    module, example = namespace["build"]()
    path = tmp_path / "small.onnx"
    path.write_bytes(model_onnx(module, example).data)
    from splitopt.torch.profile_model import LayerGraphProfileOptions, profile_model

    two = ",".join(f"{n}={loop['agents'][n].address}" for n in ("edge", "cloud"))
    inst = profile_model(str(path), LayerGraphProfileOptions(agents=two, token_file=loop["token"],
                                                             calibration_images=0, repeats=2)).instance
    assert [l.name for l in inst.layers] == [l.name for l in load(path).layers]
    check_provenance(inst, ["edge", "cloud"])
    assert inst.source["generator"] == "splitopt.onnx.profile"


def test_the_commands_profile_solve_and_run_on_agents(loop, tmp_path):
    """The command line: profile --agents, solve, run --agents --json (exit 0) and the
    printed report."""
    inst, plan = tmp_path / "inst.json", tmp_path / "plan.json"
    two = ",".join(f"{n}={loop['agents'][n].address}" for n in ("edge", "cloud"))
    r = cli("profile", loop["spec"], "--agents", two, "--calibration-images", "0", "--repeats", "2", "-o", str(inst))
    assert r.returncode == 0, r.stderr
    assert "devices measured by agents edge, cloud" in r.stdout
    data = json.loads(inst.read_text())
    assert data["settings"]["edge"] == "edge" and data["source"]["agents"]["devices"]["cloud"]["memory_bytes"] == MEMORY
    r = cli("solve", str(inst), "--json")
    assert r.returncode == 0, r.stderr
    plan.write_text(r.stdout)
    r = cli("run", str(inst), str(plan), "--model", loop["spec"], "--agents", two, "--samples", "2", "--json",
            "--no-pipeline")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] is True and report["throughput"] == "not measured: the pipelined run was left out"
    r = cli("run", str(inst), str(plan), "--model", loop["spec"], "--agents", two, "--samples", "2")
    assert r.returncode == 0, r.stderr
    assert "end to end:" in r.stdout and "OK" in r.stdout and "one sample at a time" in r.stdout
    assert "ms waiting for its input" in r.stdout
    assert "throughput, pipelined (2 sample(s)):" in r.stdout and "predicted;" in r.stdout
    assert "bottleneck (predicted)" in r.stdout and "stages, compute + pack/unpack" in r.stdout
    r = cli("run", str(inst), str(plan), "--model", loop["spec"], "--no-pipeline")
    assert r.returncode == 2 and r.stderr.strip() == "error: --no-pipeline: applies with --agents", r.stderr


@pytest.mark.parametrize("case", ["unreachable", "wrong token", "no token", "unknown edge", "count", "with preset"])
def test_profile_with_a_bad_agent_is_one_line_exit_2_before_the_model_is_built(loop, tmp_path, case):
    good = loop["list"]
    two = ",".join(f"{n}={loop['agents'][n].address}" for n in ("edge", "cloud"))
    args, token, message = {
        "unreachable": ([f"edge={loop['agents']['edge'].address},cloud=127.0.0.1:1"], TOKEN, "agent 'cloud'"),
        "wrong token": ([two], "another-token-0123456789abcdef", "agent 'edge'"),
        "no token": ([two], None, "no token"),
        "unknown edge": ([good, "--edge", "nowhere", "--topology", "edge-cloud"], TOKEN, "--edge nowhere"),
        "count": ([good, "--topology", "edge-cloud"], TOKEN, "takes two agents, 3 given"),
        "with preset": ([two, "--preset", "pi4,v100"], TOKEN, "--preset: not with --agents"),
    }[case]
    out = tmp_path / "inst.json"
    started = time.monotonic()
    r = cli("profile", loop["spec"], "--agents", *args, "-o", str(out), env_token=token)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists() and time.monotonic() - started < 60


def test_run_with_a_missing_or_unreachable_agent_is_one_line_exit_2(loop, tmp_path):
    from splitopt.api import save_plan
    from splitopt.core.instance_io import instance_json

    inst = profile_on_agents(loop, loop["list"], "edge-cloud", edge="edge", cloud="cloud")
    ipath, ppath = tmp_path / "inst.json", tmp_path / "plan.json"
    ipath.write_text(instance_json(inst))
    from splitopt.families.edge_cloud.plan import uniform_plan

    save_plan(inst, uniform_plan(inst, [inst.layers[0].name]), ppath)
    for agents, message in ((f"edge={loop['agents']['edge'].address}", "no agent for device 'cloud'"),
                            (f"edge={loop['agents']['edge'].address},cloud=127.0.0.1:1", "agent 'cloud'")):
        r = cli("run", str(ipath), str(ppath), "--model", loop["spec"], "--agents", agents)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


@pytest.mark.parametrize("pipelined", [False, True], ids=["one at a time", "pipelined"])
def test_a_device_that_drops_mid_run_is_one_line_and_the_samples_are_kept(loop, tmp_path, monkeypatch, pipelined):
    """The cloud killed at its fifth sample of the run one at a time, or of the pipelined
    run (the first run then complete): one line naming the device and the sample, the
    samples before it kept and checked, not ok."""
    from splitopt.agents import chain
    from splitopt.families.edge_cloud.plan import uniform_plan

    edge, cloud = AgentProcess(tmp_path, "edge", "--memory-bytes", str(MEMORY)), \
        AgentProcess(tmp_path, "cloud", "--memory-bytes", str(MEMORY))
    try:
        agents = f"edge={edge.address},cloud={cloud.address}"
        inst = profile_on_agents(loop, agents, "edge-cloud")
        run_chain = chain.run_chain

        def killing_at_the_fifth(clients, manifest, inputs, warmup=0, on_report=None, pipelined=False):
            def report(device, r):
                if on_report is not None:
                    on_report(device, r)
                if device == "cloud" and r["sample"] == 4 and pipelined == killed_run:
                    cloud.kill()
            return run_chain(clients, manifest, inputs, warmup, report, pipelined)

        killed_run = pipelined

        monkeypatch.setattr(chain, "run_chain", killing_at_the_fifth)
        report = run_plan(inst, uniform_plan(inst, [l.name for l in inst.layers[:2]]), loop, agents,
                          samples=300, warmup=0)
        assert not report["ok"] and report["error"] is not None and "\n" not in report["error"]
        if pipelined:
            assert report["completed"] == 300 and report["check"]["ok"]
            streamed = report["throughput"]
            kept = streamed["samples"]
            assert 5 <= kept < 300 and len(streamed["per_sample"]) == kept and streamed["check"]["samples"] == kept
            assert streamed["check"]["ok"] and streamed["error"] and streamed["measured_per_s"] > 0
            assert report["error"].startswith(f"pipelined run stopped at sample {kept} ({kept} measured sample(s) "
                                              f"kept): agent 'cloud'")
            return
        kept = report["completed"]
        assert 5 <= kept < 300 and len(report["per_sample"]) == kept and report["check"]["samples"] == kept
        assert report["check"]["ok"]  # the samples kept are right
        assert report["error"].startswith(f"run stopped at sample {kept} ({kept} measured sample(s) kept): "
                                          f"agent 'cloud'")
        assert report["throughput"] == "not measured: the run one sample at a time stopped"
    finally:
        edge.stop()
        cloud.stop()
    assert not {edge.proc.pid, cloud.proc.pid} & set(children())


def test_the_predicted_bottleneck_is_the_chain_evaluators():
    """For a chain instance whose objective is throughput, the slowest stage of the
    torch side's figures (compute + outgoing link per device) is the evaluator's
    bottleneck, and the throughput report predicts 1000 / bottleneck_ms at its device."""
    from pathlib import Path

    from splitopt.agents.chain import ChainRun
    from splitopt.agents.run_plan import throughput_report
    from splitopt.api import evaluate, load_instance
    from splitopt.families.chain.plan import plan_on_devices
    from splitopt.netrun.setup import tcp_side

    inst = load_instance(Path(__file__).parents[1] / "instances" / "jmsnas_chain_mobilenetv2_throughput.json")
    assert inst.objective == "throughput"
    side = tcp_side(inst, "run --agents")
    devices, _ = side.tcp_devices(inst)
    names = [l.name for l in inst.layers]
    cuts = [len(names) * (k + 1) // len(devices) for k in range(len(devices))]
    plan = plan_on_devices(inst, {n: devices[next(k for k, c in enumerate(cuts) if i < c)]
                                  for i, n in enumerate(names)})
    metrics = evaluate(inst, plan)
    predicted = side.tcp_predicted(inst, metrics)
    stages = [p + (predicted["links_ms"][k] if k < len(predicted["links_ms"]) else 0.0)
              for k, p in enumerate(predicted["parts_ms"])]
    assert len(set(d.device for d in metrics.devices)) == len(devices) and all(p > 0 for p in predicted["parts_ms"])
    assert max(stages) == pytest.approx(metrics.bottleneck_ms, rel=1e-12)
    t = throughput_report(ChainRun(list(devices), 0), {"ok": False, "samples": 0}, devices, predicted, 10.0)
    assert t["predicted_per_s"] == pytest.approx(1000.0 / metrics.bottleneck_ms)
    assert t["bottleneck_predicted"] == metrics.bottleneck_device
    assert t["measured_per_s"] is None and t["period_ms"] is None and t["samples"] == 0


def test_in_a_testbed_the_link_and_quota_are_measured_and_the_plan_runs(loop):
    """Two devices in network namespaces, the edge under a CPU quota, joined by a
    tbf-shaped 8 Mbit/s link: the probed bandwidth is the link's, the edge's layers are
    slower than the cloud's, and a plan that crosses the link runs; nothing is left."""
    from splitopt.agents.testbed import Testbed, netns_unavailable
    from splitopt.agents.testbed_spec import DeviceSpec, LinkSpec
    from splitopt.families.edge_cloud.plan import uniform_plan

    why = netns_unavailable()
    if isinstance(why, str):
        pytest.skip(f"no namespaced testbed here: {why}")
    tmp = loop["tmp"]
    rate = 8e6
    with Testbed([DeviceSpec("edge", cpu=0.4, threads=1), DeviceSpec("cloud", threads=1)],
                 [LinkSpec("edge", "cloud", rate)], emulation="netns", cpu_period_us=10_000) as tb:
        prefix = tb.prefix
        edge = tb.describe()["devices"]["edge"]
        assert (edge["cfs_period_us"], edge["cfs_quota_us"]) == (10_000, 4_000)
        tb.start_agents(tb_command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for d in ("edge", "cloud"):
            tb.wait_listening(d, 60)
        agents_file = tmp / "testbed_agents.json"
        agents_file.write_text(json.dumps(tb.agents_map()))
        token = tb.token_file
        from splitopt.torch.profile_model import LayerGraphProfileOptions, profile_model

        inst = profile_model(loop["spec"], LayerGraphProfileOptions(agents=str(agents_file), token_file=token,
                                                                    calibration_images=0, repeats=3)).instance
        (link,) = inst.links
        assert 0.85 * rate <= link.bandwidth_bits_per_s <= 1.0 * rate
        assert inst.source["agents"]["devices"]["edge"]["cpu_quota"] == pytest.approx(0.4)
        from splitopt.agents.run_plan import AgentRunOptions, run_on_agents

        plan = uniform_plan(inst, [l.name for l in inst.layers[:2]])
        report = run_on_agents(inst, plan, AgentRunOptions(agents=str(agents_file), model=loop["spec"],
                                                           token_file=token, samples=3, timeout=30))
        check_run(report, ["edge", "cloud"], crossing=True)
        assert report["agents"]["edge"]["cpu_quota"] == pytest.approx(0.4)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in listed


def tb_command() -> str:
    from splitopt.agents.testbed import DEFAULT_AGENT_COMMAND

    return DEFAULT_AGENT_COMMAND + f" --memory-bytes {MEMORY}"


def test_the_testbed_cpu_period_is_checked():
    from splitopt.agents.testbed import Testbed
    from splitopt.agents.testbed_spec import DeviceSpec
    from splitopt.core.errors import InvalidOption

    for period, message in ((500, "must be an integer in"), (2_000, "quota under the kernel's 1 ms")):
        with pytest.raises(InvalidOption, match=message) as e:
            Testbed([DeviceSpec("edge", cpu=0.3)], cpu_period_us=period)
        assert "\n" not in str(e.value)


def test_the_testbed_period_is_5_ms_unless_a_share_needs_a_longer_one():
    """5 ms, or 1 ms of quota for the smallest share where that is longer; the kernel's
    default where no device has a share."""
    from splitopt.agents.testbed import Testbed
    from splitopt.agents.testbed_cgroups import PERIOD_US, default_period_us
    from splitopt.agents.testbed_spec import DeviceSpec

    assert default_period_us([0.3, None, 0.6]) == 5000 and default_period_us([2.0]) == 5000
    assert default_period_us([0.1]) == 10_000 and default_period_us([0.15]) == 6667
    assert default_period_us([None]) == default_period_us([]) == PERIOD_US
    assert default_period_us([0.001]) == 1_000_000
    tb = Testbed([DeviceSpec("edge", cpu=0.3), DeviceSpec("cloud")], emulation="loopback")
    assert tb.cpu_period_us == 5000  # nothing is made before `with`


def test_a_quantized_plan_runs_on_agents(loop):
    """A split_bits plan (W8A8 on the edge, the crossing sent at 8 bits): the agents'
    outputs pass the quantized check, the link carries the evaluator's 8-bit bytes."""
    from splitopt.api import evaluate
    from splitopt.families.edge_cloud.plan import uniform_plan

    two = ",".join(f"{n}={loop['agents'][n].address}" for n in ("edge", "cloud"))
    from splitopt.torch.profile_model import LayerGraphProfileOptions, profile_model

    inst = profile_model(loop["spec"], LayerGraphProfileOptions(agents=two, token_file=loop["token"],
                                                                calibration_images=4, repeats=2)).instance
    assert inst.problem == "split_bits"
    plan = uniform_plan(inst, [l.name for l in inst.layers[:3]], bits=8)
    report = run_plan(inst, plan, loop, two, samples=3)
    assert report["ok"] and report["quantized"], report["error"] or report["check"]
    assert not report["check"]["float32_crossings"]
    assert report["check"]["relative_mse_reference"] <= report["check"]["relative_mse_limit"] \
        or report["check"]["max_abs_diff_reference"] <= report["check"]["tolerance"]
    (link,) = report["links"]
    sent = evaluate(inst, plan).transmitted_bytes
    assert link["bytes_ok"] and 0 < sent == pytest.approx(link["payload_bytes"], abs=len(link["tensors"]))
    assert link["wire_bytes"] < 4 * sent  # 8 bits a value travelled, not 32
