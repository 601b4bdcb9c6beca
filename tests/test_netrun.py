"""splitopt.netrun and ``splitopt run-tcp``: a plan run as one process per device over TCP.

Wire format and service (no torch, no processes): frames round-trip; the receiving
service, hit with raw sockets sending garbage, a huge payload length, a truncated frame
and nothing at all, refuses each in one logged line, drops that connection and serves
the next one. The pacer: a transfer takes the link's latency + 8 * bytes / bandwidth.

Runs (a 6-layer CNN with a skip connection profiled into a tmp pi4 -> v100 instance,
one torch thread per process): an edge/cloud cut across the skip (two tensors cross at
8 bits) gives the same output as the single-process split with the same packing, and
per tensor the payload bytes of the wire equal the evaluator's ``elements * bits / 8``
rounded up; a 3-device chain; a breakpoint table with a bandwidth schedule switches
plans at the breakpoint, and the outputs still agree; a failing run (a receiver whose
max frame size is below the tensors' frames) ends with one error line and no child
process left. CLI: bad input is one line, exit 2; without torch, exit 3.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitopt.cli.app import app
from splitopt.netrun import frames
from splitopt.netrun.frames import Kind, encode, read_frame
from splitopt.netrun.pacing import Pacer
from splitopt.netrun.service import FrameService, connect
from splitopt.api import plan_to_dict
from splitopt.families.edge_cloud.plan import uniform_plan

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        a = torch.relu(self.conv1(x))
        b = torch.relu(self.conv2(a)) + a
        c = torch.relu(self.conv3(b))
        return self.fc(torch.flatten(self.pool(c), 1))


def build():
    return Net(), torch.randn(1, 3, 16, 16)
'''


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(res, code, *needles):
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ----- frames, service, pacer (no torch) ---------------------------------------------------------

def test_frames_round_trip_and_header_size():
    a, b = socket.socketpair()
    with a, b:
        payload = bytes(range(200))
        a.sendall(encode(Kind.TENSOR, "layer.ä", payload) + frames.ack_frame(7) + frames.plan_frame(2, 5e6))
        f = read_frame(b)
        assert (f.kind, f.name, f.payload) == (Kind.TENSOR, "layer.ä", payload)
        assert f.wire_bytes == 16 + len("layer.ä".encode()) + 200 == f.header_bytes + 200
        assert frames.ACK.unpack(read_frame(b).payload) == (7,)
        assert frames.PLAN.unpack(read_frame(b).payload) == (2, 5e6)


def _raw(port, data, close=True, wait=0.0):
    s = socket.create_connection(("127.0.0.1", port))
    if data:
        s.sendall(data)
    time.sleep(wait)
    if close:
        s.close()
    return s


def test_service_refuses_bad_peers_in_one_line_and_keeps_serving(caplog):
    got, sessions = [], []

    def session(conn):
        while True:
            f = conn.read()
            if f.kind is Kind.CLOSE:
                sessions.append(got[:])
                return
            got.append((f.kind, f.name, f.payload))

    service = FrameService("127.0.0.1", 0, timeout_s=0.5, max_frame_bytes=1000, accept_timeout_s=10)
    with caplog.at_level(logging.ERROR, logger="splitopt.netrun"), service:
        t = threading.Thread(target=service.serve, args=(session, 1), daemon=True)
        t.start()
        port = service.port
        assert port > 0
        huge = frames.HEAD.pack(frames.MAGIC, 1, int(Kind.TENSOR), 1) + b"x" + frames.LENGTH.pack(2 ** 62)
        whole = encode(Kind.TENSOR, "t", b"0123456789")
        bad = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # garbage: not our magic
               huge,  # a huge payload length: refused before anything is allocated
               whole[:-4],  # truncated: the stream ends inside the payload
               frames.HEAD.pack(frames.MAGIC, 9, 1, 0) + frames.LENGTH.pack(0),  # unknown version
               encode(Kind.ACK, "", b"abc")]  # wrong payload size for the kind
        for data in bad:
            _raw(port, data)
        silent = _raw(port, b"", close=False)  # nothing at all: the timeout drops it
        good = connect("127.0.0.1", port, timeout_s=5)
        good.sendall(whole + frames.close_frame())
        t.join(10)
        silent.close()
        good.close()
    assert not t.is_alive()
    assert sessions == [[(Kind.TENSOR, "t", b"0123456789")]]
    lines = service.rejected
    assert len(lines) == 6, lines
    assert all("\n" not in line and "refused 127.0.0.1:" in line for line in lines)
    for line, needle in zip(lines, ["magic b'GET ", "payload length 4611686018427387904 bytes exceeds the max frame "
                                    "size 1000", "truncated frame", "version 9", "ACK frame payload length 3",
                                    "sent nothing for 0.5 s"]):
        assert needle in line, (needle, line)
    assert [r.getMessage() for r in caplog.records if r.name == "splitopt.netrun"] == lines


def test_pacer_takes_latency_plus_bytes_at_the_bandwidth():
    a, b = socket.socketpair()
    received = bytearray()

    def drain():
        while len(received) < 25_000:
            received.extend(b.recv(65536))

    with a, b:
        t = threading.Thread(target=drain, daemon=True)
        t.start()
        pacer = Pacer(2e6, latency_ms=20.0)
        tr = pacer.send(a.sendall, [bytes(5_000), bytes(20_000)])
        t.join(5)
    want = 20.0 + 1000 * 8 * 25_000 / 2e6  # 120 ms
    assert pacer.model_ms(25_000) == pytest.approx(want)
    assert tr.bytes == 25_000 and len(received) == 25_000
    assert want <= tr.ms < want * 1.25, tr.ms


# ----- runs ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("netrun")
    (d / "net.py").write_text(MODEL)
    spec = f"{d / 'net.py'}:build"
    inst_path = d / "inst.json"
    res = invoke("profile", spec, "-o", inst_path, "--preset", "pi4,v100", "--bandwidth", "2e6",
                 "--calibration-images", "2")
    assert res.exit_code == 0, res.output
    from splitopt.api import load_instance

    inst = load_instance(inst_path)
    skip = d / "skip.json"  # conv1 and conv2 on the edge: both cross (the skip connection)
    skip.write_text(json.dumps(plan_to_dict(inst, uniform_plan(inst, ["conv1", "conv2"], bits=8))))
    return {"dir": d, "spec": spec, "inst": inst_path, "skip": skip}


def test_edge_cloud_run_matches_single_process_and_evaluator_bytes(setup):
    import torch

    from splitopt.netrun.runner import run_tcp

    rep = run_tcp(setup["inst"], json.loads(setup["skip"].read_text()), model=setup["spec"], samples=3,
                  warmup=1, threads=1)
    assert rep["ok"] and rep["outputs_equal"] and rep["bytes_match"], rep
    assert rep["max_abs_diff"] <= 1e-5 and rep["relative_mse_vs_unsplit"] < 1e-3
    assert rep["devices"] == ["pi4", "v100"]
    link = rep["plans"][0]["links"][0]
    assert [t["tensor"] for t in link["tensors"]] == ["conv1", "conv2"]
    for t in link["tensors"]:  # 8 x 16 x 16 elements at 8 bits: 2048 bytes, as the evaluator counts
        assert t["payload_bytes"] == math.ceil(t["evaluator_bytes"]) == 2048
    assert link["payload_bytes"] == link["evaluator_bytes"] == 4096
    assert link["wire_bytes"] == 4096 + link["packing_header_bytes"] + link["frame_header_bytes"]
    seg = rep["segments"][0]
    assert seg["count"] == 3 and len(rep["per_sample"]) == 4 and rep["per_sample"][0]["warmup"]
    # the link: 2 Mbit/s, 0 ms; the pacer sends every byte (headers too) at that rate
    assert seg["predicted"]["links_ms"][0] == pytest.approx(1000 * 8 * 4096 / 2e6)
    assert 1000 * 8 * link["wire_bytes"] / 2e6 <= seg["measured"]["links_ms"][0] < 40.0
    assert seg["ratio"] == pytest.approx(seg["measured"]["total_ms"] / seg["predicted"]["total_ms"])
    del torch


def test_chain_of_three_processes(setup):
    from splitopt.api import load_instance, parse_instance
    from splitopt.core.instance_io import to_dict
    from splitopt.core.plan import Plan
    from splitopt.netrun.runner import run_tcp

    data = to_dict(load_instance(setup["inst"]))
    data["devices"] = [dict(data["devices"][0], name=n, bit_widths=[8, 16]) for n in ("a", "b", "c")]
    data["links"] = [{"source": s, "target": t, "bandwidth_bits_per_s": 5e7, "latency_ms": 1.0}
                     for s, t in (("a", "b"), ("b", "c"))]
    data["settings"] = {"problem": "chain", "objective": "latency", "chain": ["a", "b", "c"], "cloud_bits": 16}
    parse_instance(data)
    path = setup["dir"] / "chain.json"
    path.write_text(json.dumps(data))
    where = {"conv1": "a", "conv2": "b", "add": "b", "conv3": "c", "pool": "c", "fc": "c"}
    plan = Plan(where, {n: 16 for n in where}, {n: 16 for n in where})
    rep = run_tcp(path, plan_to_dict(load_instance(path), plan), model=setup["spec"], samples=2, warmup=1, threads=1)
    assert rep["ok"] and rep["outputs_equal"] and rep["bytes_match"], rep
    links = rep["plans"][0]["links"]
    # a -> b: conv1 (16 bits: float16); b -> c: the sum (add), and nothing else
    assert [[t["tensor"] for t in l["tensors"]] for l in links] == [["conv1"], ["add"]]
    assert [l["payload_bytes"] for l in links] == [8 * 16 * 16 * 2] * 2
    seg = rep["segments"][0]
    assert len(seg["measured"]["parts_ms"]) == 3 and len(seg["measured"]["links_ms"]) == 2
    for ms in seg["measured"]["links_ms"]:  # 1 ms + 4 KB at 50 Mbit/s
        assert ms >= 1.0 + 1000 * 8 * 4096 / 5e7


def test_breakpoint_table_switches_plans_at_the_breakpoint(setup):
    from splitopt.netrun.runner import run_tcp

    table_path = setup["dir"] / "table.json"
    res = invoke("bandwidth", setup["inst"], "--from", "1e5", "--to", "1e10", "--exact", "-o", table_path)
    assert res.exit_code == 0, res.output
    table = json.loads(table_path.read_text())
    assert len(table["intervals"]) >= 2
    cut = table["breakpoints"][0]
    below, above = cut / 4, min(cut * 4, table["range"]["bandwidth_to"])
    rep = run_tcp(setup["inst"], table=table, model=setup["spec"], samples=4, warmup=1, threads=1,
                  schedule=[(0, below), (2, above)])
    assert rep["ok"] and rep["outputs_equal"] and rep["bytes_match"], rep
    assert rep["switches"] == [{"sample": 2, "from_plan": 0, "to_plan": 1, "bandwidth": above}]
    measured = [s for s in rep["per_sample"] if not s["warmup"]]
    assert [s["plan"] for s in measured] == [0, 0, 1, 1]
    assert [s["bandwidth"] for s in measured] == [below, below, above, above]
    assert [(g["plan"], g["first_sample"], g["last_sample"]) for g in rep["segments"]] == [(0, 0, 1), (1, 2, 3)]
    for g, iv in zip(rep["segments"], table["intervals"]):  # the evaluator's line of the interval's plan
        o = iv["objective"]
        assert g["predicted"]["total_ms"] == pytest.approx(o["a_ms"] + o["b_ms_bits_per_s"] / g["bandwidth"])


def test_a_failing_run_leaves_no_child_process(setup):
    from splitopt.netrun.runner import NetRunError, run_tcp

    with pytest.raises(NetRunError) as err:  # the receiver refuses the 2 KB tensor frames
        run_tcp(setup["inst"], json.loads(setup["skip"].read_text()), model=setup["spec"], samples=1, warmup=0,
                threads=1, max_frame_bytes=100, check=False, run_timeout_s=120)
    assert "device 'pi4'" in str(err.value) and "\n" not in str(err.value)
    assert len(err.value.pids) == 2
    for pid in err.value.pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(NetRunError, match="timed out after 0.5 s") as err:  # the deadline, while they build
        run_tcp(setup["inst"], json.loads(setup["skip"].read_text()), model=setup["spec"], run_timeout_s=0.5)
    for pid in err.value.pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _children(pid):
    """Pids of the processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}").exists() else "X"
    return state not in ("Z", "X")


def test_ctrl_c_stops_every_device_process(setup):
    """SIGINT to the parent alone (the harder case than Ctrl-C to the whole group): it
    stops its device processes, says "interrupted" in one line and exits 130."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "splitopt", "run-tcp", str(setup["inst"]), str(setup["skip"]),
                             "-m", setup["spec"], "--samples", "1000", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        spawned = []
        while time.monotonic() < deadline and len(spawned) < 2:
            time.sleep(0.2)
            spawned = [c for c in _children(proc.pid)
                       if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")]
        assert len(spawned) == 2, _children(proc.pid)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"], err
    end = time.monotonic() + 10
    while time.monotonic() < end and any(_alive(c) for c in spawned):
        time.sleep(0.1)
    assert not any(_alive(c) for c in spawned)


# ----- the command line ---------------------------------------------------------------------------

def test_cli_bad_input_is_one_line(tmp_path):
    inst = ROOT / "instances" / "resnet50_eyeriss.json"
    plan = tmp_path / "plan.json"
    res = invoke("run-tcp", inst, "-m", "resnet50")
    one_line_error(res, 2, "give a PLAN file or --breakpoints TABLE")
    plan.write_text("{}")
    res = invoke("run-tcp", inst, plan, "-m", "resnet50", "--bandwidth-schedule", "0-5e6")
    one_line_error(res, 2, "--bandwidth-schedule", "'0-5e6'")
    res = invoke("run-tcp", inst, plan, "-m", "resnet50", "--bandwidth-schedule", "0:5e6")
    one_line_error(res, 2, "--bandwidth-schedule: needs --breakpoints")
    res = invoke("run-tcp", inst, "-m", "resnet50", "--breakpoints", plan)
    one_line_error(res, 2, "--breakpoints", "format")
    res = invoke("run-tcp", inst, plan, "-m", "resnet50", "--host", "no such host!")
    one_line_error(res, 2, "--host no such host!")
    # TEST-NET-1 (RFC 5737): resolves, but no interface of this host has it
    res = invoke("run-tcp", inst, plan, "-m", "resnet50", "--host", "192.0.2.1")
    one_line_error(res, 2, "--host 192.0.2.1: this host cannot listen there")
    res = invoke("run-tcp", inst, plan, "-m", "resnet50", "--timeout", "0")
    one_line_error(res, 2, "--timeout")
    res = invoke("run-tcp", ROOT / "instances" / "jmsnas_mesh_googlenet.json", plan, "-m", "googlenet")
    one_line_error(res, 2, "problem 'mesh' is not supported")


def test_cli_without_torch_says_so_exit_3(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    program = ("import sys\nfor n in ('torch', 'transformers', 'sklearn'):\n    sys.modules[n] = None\n"
               "sys.argv = ['splitopt', *sys.argv[1:]]\nfrom splitopt.cli import main\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", program, "run-tcp", str(ROOT / "instances" / "resnet50_eyeriss.json"),
                           str(plan), "-m", "resnet50"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "torch extra" in lines[0], proc.stderr


def test_frame_fields_are_little_endian():
    raw = encode(Kind.PLAN, "", frames.PLAN.pack(1, 2.0))
    assert raw[:4] == b"SPNR" and raw[4] == 1 and raw[5] == int(Kind.PLAN)
    assert struct.unpack_from("<H", raw, 6) == (0,) and struct.unpack_from("<Q", raw, 8) == (12,)
