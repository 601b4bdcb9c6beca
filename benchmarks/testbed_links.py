"""How well the one-machine testbed (:mod:`splitopt.agents.testbed`) emulates what it is
asked for: achieved against configured.

In one testbed (network namespaces, needs root):

1. links: one device pair per rate (``--rates``, default 2, 10, 20 and 100 Mbit/s), each pair
   joined by a veth pair shaped by tbf at that rate both ways; per direction, bulk TCP for
   ``--seconds`` with a plain Python socket pair (``testbed_probe send`` / ``receive``: the
   receiver's bytes from its first byte to its last), ``--runs`` times, the median; its
   ratio to the configured rate (TCP payload over Ethernet frames caps it at 1448/1514 =
   0.956: tbf counts link-layer bytes);
2. round trips: 1-byte ping-pong (TCP_NODELAY, median of 200) on loopback, over a control
   veth (root namespace to a device, unshaped) and over the 10 Mbit/s link: what the
   emulation adds to latency (it emulates none: no netem here);
3. messages: K messages of each of several sizes over the 20 Mbit/s link, each after 50 ms
   idle (``testbed_probe messages`` / ``sink``), timed from the first byte sent to the
   receiver's one-byte answer, the median against size over the payload rate (rate x
   0.956): tbf's peak rate keeps a message that fits in the bucket from passing at once;
4. work after an idle wait (``testbed_probe idle``: a 16 MB matrix times a vector, 4
   times, after 0 to 100 ms idle, median of 21) in a device without a quota and in the
   device of share 0.3: what waiting for an input costs the part that runs next;
5. CPU: one device per share (``--shares``, default 0.1, 0.3, 0.5, 1.0 of one core, a
   cgroup CFS quota), a busy loop for ``--seconds`` (``testbed_probe busy``: CPU seconds per
   wall second), ``--runs`` times, the median and its ratio to the share; and the same loop
   with no quota, in the root namespace, before and after: what the load left this run
   (on shared cores a share near 1 can be held back by the load, not the quota).

Measurements run one at a time. Writes ``benchmarks/results/testbed_links.md`` and ``.json``
with the machine and its load average before and after. Run:
``sudo python benchmarks/testbed_links.py [--seconds 2] [--runs 3]``; about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitopt.agents.testbed import Testbed  # noqa: E402
from splitopt.agents.testbed_probe import ping  # noqa: E402
from splitopt.agents.testbed_spec import DeviceSpec, LinkSpec  # noqa: E402

PROBE = "{python} -m splitopt.agents.testbed_probe"
RESULTS = ROOT / "benchmarks" / "results"
#: TCP payload bytes per Ethernet frame at MTU 1500 with timestamps: the ceiling of goodput/rate
PAYLOAD_SHARE = 1448 / 1514


def _json_of(proc: subprocess.Popen, timeout: float = 60.0) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"probe failed (exit {proc.returncode}): {out}")
    return json.loads(out.strip().splitlines()[-1])


def throughput(tb: Testbed, sender: str, receiver: str, seconds: float) -> float:
    env = {"PYTHONPATH": str(ROOT)}
    rx = tb.start(receiver, tb.command(PROBE + " receive --port {port}", receiver), env=env, stdout=subprocess.PIPE,
                  text=True)
    tb.wait_listening(receiver, 20)
    to = tb.agents_map()[sender]["peers"][receiver]
    tx = tb.start(sender, tb.command(PROBE + f" send --to {to} --seconds {seconds}", sender), env=env,
                  stdout=subprocess.PIPE, text=True)
    _json_of(tx)
    return _json_of(rx)["bits_per_s"]


def round_trip(tb: Testbed, device: str, sender: str | None) -> dict:
    """Ping-pong to an echo in ``device``: from this process (``sender`` None: the root
    namespace, over the control veth) or from device ``sender`` over their link."""
    env = {"PYTHONPATH": str(ROOT)}
    echo = tb.start(device, tb.command(PROBE + " echo --port {port}", device), env=env, stdout=subprocess.PIPE,
                    text=True)
    tb.wait_listening(device, 20)
    if sender is None:
        result = ping(tb.address(device), 200, 30.0)
    else:
        to = tb.agents_map()[sender]["peers"][device]
        result = _json_of(tb.start(sender, tb.command(PROBE + f" ping --to {to} --count 200", sender), env=env,
                                   stdout=subprocess.PIPE, text=True))
    _json_of(echo)
    return result


def loopback_round_trip() -> dict:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    echo = subprocess.Popen([sys.executable, "-m", "splitopt.agents.testbed_probe", "echo", "--port", str(port)],
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while True:
        try:
            result = ping(f"127.0.0.1:{port}", 200, 30.0)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    _json_of(echo)
    return result


MESSAGE_SIZES = (1_000, 5_000, 8_192, 20_000, 31_360, 60_000, 150_528)


def message_times(tb: Testbed, sender: str, receiver: str) -> dict:
    """Median ms per message size, each message after 50 ms idle (module docstring)."""
    env = {"PYTHONPATH": str(ROOT)}
    sink = tb.start(receiver, tb.command(PROBE + " sink --port {port}", receiver), env=env, stdout=subprocess.PIPE,
                    text=True)
    tb.wait_listening(receiver, 20)
    to = tb.agents_map()[sender]["peers"][receiver]
    sizes = ",".join(str(x) for x in MESSAGE_SIZES)
    result = _json_of(tb.start(sender, tb.command(PROBE + f" messages --to {to} --sizes {sizes} --count 15", sender),
                               env=env, stdout=subprocess.PIPE, text=True), timeout=120)
    _json_of(sink)
    return result


def free_cpu(seconds: float, runs: int) -> float:
    """Median CPU seconds per wall second of the busy loop with no quota (root namespace)."""
    got = []
    for _ in range(runs):
        proc = subprocess.Popen([sys.executable, "-m", "splitopt.agents.testbed_probe", "busy", "--seconds",
                                 str(seconds)], env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                                text=True)
        got.append(_json_of(proc)["share"])
    return statistics.median(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="2e6,10e6,20e6,100e6", help="link rates, bits/s, comma-separated")
    parser.add_argument("--shares", default="0.1,0.3,0.5,1.0", help="CPU shares of one core, comma-separated")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per throughput or busy-loop run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "testbed_links")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    shares = [float(s) for s in args.shares.split(",")]
    devices = [DeviceSpec(f"{end}{i}") for i in range(len(rates)) for end in ("a", "b")]
    devices += [DeviceSpec(f"cpu{i}", cpu=s) for i, s in enumerate(shares)]
    links = [LinkSpec(f"a{i}", f"b{i}", r) for i, r in enumerate(rates)]
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M")
    report: dict = {"machine": machine(shared=True), "kernel": platform.release(), "started": started,
                    "seconds": args.seconds, "runs": args.runs, "links": [], "round_trips": {}, "cpu": []}
    with Testbed(devices, links, emulation="netns") as tb:
        report["tbf"] = {str(x["rate_bps"]): x["tbf"] for x in tb.describe()["links"]}
        for i, rate in enumerate(rates):
            for sender, receiver in ((f"a{i}", f"b{i}"), (f"b{i}", f"a{i}")):
                got = [throughput(tb, sender, receiver, args.seconds) for _ in range(args.runs)]
                median = statistics.median(got)
                report["links"].append({"rate_bps": rate, "direction": "a->b" if sender.startswith("a") else "b->a",
                                        "achieved_bps": got, "median_bps": median, "ratio": median / rate})
                print(f"{rate / 1e6:g} Mbit/s {sender}->{receiver}: {median / 1e6:.3f} Mbit/s ({median / rate:.3f})",
                      flush=True)
        ten = rates.index(10e6) if 10e6 in rates else 0
        report["round_trips"] = {
            "loopback (root namespace)": loopback_round_trip(),
            "control veth (root -> device, unshaped)": round_trip(tb, f"b{ten}", None),
            f"{rates[ten] / 1e6:g} Mbit/s link (device -> device, tbf)": round_trip(tb, f"b{ten}", f"a{ten}"),
        }
        twenty = rates.index(20e6) if 20e6 in rates else 0
        report["messages"] = {"rate_bps": rates[twenty], "gap_ms": 50.0, "count": 15,
                              "median_ms": message_times(tb, f"a{twenty}", f"b{twenty}")}
        report["cpu_period_us"] = tb.cpu_period_us
        report["idle"] = {}
        for label, name in (("no quota", "a0"), *((f"share {x:g}", f"cpu{i}") for i, x in enumerate(shares)
                                                  if x == 0.3)):
            proc = tb.start(name, tb.command(PROBE + " idle", name), env={"PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, text=True)
            report["idle"][label] = _json_of(proc, timeout=300)
            print(f"idle {label}: {report['idle'][label]}", flush=True)
        report["cpu_free_before"] = free_cpu(args.seconds, args.runs)
        for i, share in enumerate(shares):
            name = f"cpu{i}"
            got = []
            for _ in range(args.runs):
                proc = tb.start(name, tb.command(PROBE + f" busy --seconds {args.seconds}", name),
                                env={"PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
                got.append(_json_of(proc)["share"])
            median = statistics.median(got)
            report["cpu"].append({"share": share, "achieved": got, "median": median, "ratio": median / share})
            print(f"cpu={share:g}: {median:.3f} CPU s per wall s ({median / share:.3f})", flush=True)
        report["cpu_free_after"] = free_cpu(args.seconds, args.runs)
    report["load_before"], report["load_after"] = load_before, os.getloadavg()
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {args.out.with_suffix('.md')}")


def markdown(r: dict) -> str:
    load = f"load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in r['load_before'])} before, " \
           f"{', '.join(f'{x:.2f}' for x in r['load_after'])} after"
    lines = [
        "# The testbed's emulation: achieved against configured",
        "",
        f"{r['machine']}; Linux {r['kernel']}; {load} (the machine is shared with other jobs); {r['started']}.",
        f"`python benchmarks/testbed_links.py --seconds {r['seconds']:g} --runs {r['runs']}` (as root: network "
        "namespaces, veth pairs shaped by tbf, cgroup v1/v2 CPU quotas; one measurement at a time).",
        "",
        "## Link rate (tbf on a veth pair between two namespaces)",
        "",
        f"Bulk TCP with a plain Python socket pair for {r['seconds']:g} s, the receiver's bytes from its first to its "
        f"last byte; median of {r['runs']} runs. tbf counts Ethernet frames, so TCP payload tops out at "
        f"1448/1514 = {PAYLOAD_SHARE:.3f} of the configured rate.",
        "",
        "| configured (Mbit/s) | direction | tbf burst / limit / peak bucket (bytes) | peak rate (Mbit/s) | "
        "achieved TCP payload (Mbit/s) | ratio | ratio / 0.956 |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for x in r["links"]:
        tbf = r["tbf"][str(x["rate_bps"])]
        lines.append(f"| {x['rate_bps'] / 1e6:g} | {x['direction']} | {tbf['burst_bytes']} / {tbf['limit_bytes']} / "
                     f"{tbf['peak_bucket_bytes']} | {tbf['peakrate_bps'] / 1e6:g} | "
                     f"{x['median_bps'] / 1e6:.3f} | {x['ratio']:.3f} | {x['ratio'] / PAYLOAD_SHARE:.3f} |")
    m = r["messages"]
    lines += [
        "",
        f"## Messages over the {m['rate_bps'] / 1e6:g} Mbit/s link",
        "",
        f"{m['count']} messages of each size, each after {m['gap_ms']:g} ms idle, timed from the first byte sent to "
        "the receiver's one-byte answer (so one round trip is included); median. Predicted: size x 8 / (rate x "
        f"{PAYLOAD_SHARE:.3f}). tbf's peak rate drains the bucket at 1.02 x the rate, so a message that fits in the "
        "bucket does not pass at once.",
        "",
        "| bytes | measured (ms) | predicted (ms) | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for size, ms in m["median_ms"].items():
        predicted = int(size) * 8 / (m["rate_bps"] * PAYLOAD_SHARE) * 1e3
        lines.append(f"| {int(size):,} | {ms:.2f} | {predicted:.2f} | {ms / predicted:.2f} |")
    lines += [
        "",
        "## Round trip (1 byte each way, TCP_NODELAY, median of 200)",
        "",
        "No latency is emulated (this kernel has no netem): the senders pace a link's latency. The table shows what "
        "the namespaces and veths themselves add.",
        "",
        "| path | median (µs) | min (µs) |",
        "|---|---:|---:|",
    ]
    for path, x in r["round_trips"].items():
        lines.append(f"| {path} | {x['median_ms'] * 1e3:.1f} | {x['min_ms'] * 1e3:.1f} |")
    idle = r.get("idle") or {}
    if idle:
        gaps = list(next(iter(idle.values())))
        lines += [
            "",
            "## Work after an idle wait",
            "",
            "A 16 MB float32 matrix times a vector, 4 times (memory-bound, as a layer's weights are), after an idle "
            "wait; median of 21, ms. Every part of a split waits for its input, so what an idle wait costs the work "
            "after it is a cost the back-to-back measurement of the layers does not see.",
            "",
            "| device | " + " | ".join(f"after {g} ms" for g in gaps) + " |",
            "|---|" + "---:|" * len(gaps),
        ]
        lines += [f"| {label} | " + " | ".join(f"{v:.2f}" for v in x.values()) + " |" for label, x in idle.items()]
    lines += [
        "",
        f"## CPU share (cgroup CFS quota, {r['cpu_period_us'] / 1000:g} ms period)",
        "",
        f"A Python busy loop for {r['seconds']:g} s in a device with that share: CPU seconds per wall second; "
        f"median of {r['runs']} runs. A share of a core, not a slower core: cache and memory bandwidth stay the "
        "host's.",
        "",
        "| configured share of one core | achieved | ratio |",
        "|---:|---:|---:|",
        f"| none (no quota), before | {r['cpu_free_before']:.3f} | |",
    ]
    for x in r["cpu"]:
        lines.append(f"| {x['share']:g} | {x['median']:.3f} | {x['ratio']:.3f} |")
    lines.append(f"| none (no quota), after | {r['cpu_free_after']:.3f} | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
