"""Plan on the devices you have, end to end: ``splitopt profile MODEL --agents`` -> ``splitopt
solve`` -> ``splitopt run --agents``, on a testbed of three emulated devices, measured
against the prediction; beside it the plan and prediction from the device presets'
assumed (vendor peak) numbers.

Testbed (:class:`splitopt.agents.testbed.Testbed`; network namespaces, needs root, else
loopback, which the report says): ``edge`` 0.3 of a core, ``server`` 0.6 of a core,
``cloud`` no quota (one core of this machine when it is idle), each one onnxruntime
thread, CFS period ``--period-ms`` (default: the testbed's, 5 ms), the two devices with a
share pinned to a CPU each; links shaped by tbf (with a peak rate): edge-server 60 Mbit/s,
server-cloud 30 Mbit/s, edge-cloud 40 Mbit/s. An agent in each device.

Per model (MobileNetV2, ResNet-50, built in code with seed 0) and topology (edge/cloud:
edge + cloud; chain: edge -> server -> cloud):

1. measured instance: ``splitopt profile MODEL --agents ... --calibration-images 0``
   (float split, every crossing tensor in float32);
2. assumed instance: ``splitopt profile MODEL --preset pi4,v100`` (chain:
   ``pi4,jetson,v100``), the presets' devices renamed to the agents', their links set to
   the testbed's configured rates (no latency) and the reference precision 32 bits (the
   agents' float32);
3. plans: the measured instance's optimum (``solve``), the assumed instance's optimum, for
   the chain the measured instance's throughput optimum (``--set
   settings.objective=throughput``), and the best plan (on the measured instance) that
   gives every device a contiguous share of the layers (so that every link is measured),
   where the optima do not already;
4. each plan run on the agents (``splitopt run --agents``, ``--samples`` after
   ``--warmup``, one sample at a time, then pipelined): measured medians per part, per
   link and end to end, and the pipelined throughput, against the measured instance's
   prediction, and the assumed instance's prediction of the same plan.

``--rounds`` (default 2) repeats 1-4 afresh: how far the ratios move between rounds.

Writes ``benchmarks/results/agents_loop.md`` and ``.json`` and the table between the
README's markers. Run: ``sudo python benchmarks/agents_loop.py`` (about 9 minutes on 2
cores; ``--models mobilenet_v2 --rounds 1`` for a quick one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitopt.agents.testbed import DEFAULT_AGENT_COMMAND, Testbed  # noqa: E402
from splitopt.agents.testbed_spec import DeviceSpec, LinkSpec  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
MARKERS = ("<!-- agents-loop:start -->", "<!-- agents-loop:end -->")
DEVICES = [DeviceSpec("edge", cpu=0.3, threads=1), DeviceSpec("server", cpu=0.6, threads=1),
           DeviceSpec("cloud", threads=1)]
LINKS = [LinkSpec("edge", "server", 60e6), LinkSpec("server", "cloud", 30e6), LinkSpec("edge", "cloud", 40e6)]
MEMORY = {"edge": 1_000_000_000, "server": 4_000_000_000, "cloud": 16_000_000_000}
TOPOLOGIES = {"edge-cloud": (["edge", "cloud"], "pi4,v100"), "chain": (["edge", "server", "cloud"], "pi4,jetson,v100")}


def splitopt(*args: str, token_file: Path | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPLITOPT_PROGRESS="0")
    cmd = [sys.executable, "-m", "splitopt", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


#: CPU work (ms) after 50 ms idle, timed in a device with a 0.3 share: how much the share acts
#: like a slower core at a CFS period (``python -c`` program; prints JSON)
SHARE_PROGRAM = """
import json, statistics, time
def work(ms):
    t0, c0 = time.perf_counter(), time.thread_time()
    while (time.thread_time() - c0) * 1000 < ms:
        pass
    return (time.perf_counter() - t0) * 1000
out = {}
for ms in (2, 5, 10, 25, 60, 200):
    walls = []
    for _ in range(7):
        time.sleep(0.05)
        walls.append(work(ms))
    out[ms] = statistics.median(walls)
print(json.dumps(out))
"""
SHARE = 0.3


def share_as_slower_core(periods_ms: list[float]) -> dict[float, dict[str, float]]:
    """Per CFS period: wall ms of each amount of CPU work after 50 ms idle, in a device of
    share :data:`SHARE` (a slower core would take work / share)."""
    out = {}
    for period in periods_ms:
        with Testbed([DeviceSpec("probe", cpu=SHARE, threads=1)], cpu_period_us=int(period * 1000)) as tb:
            proc = tb.start("probe", [sys.executable, "-c", SHARE_PROGRAM], stdout=subprocess.PIPE, text=True)
            text, _ = proc.communicate(timeout=300)
            out[period] = json.loads(text.strip().splitlines()[-1])
    return out


def load() -> tuple[float, float, float]:
    return os.getloadavg()


def assumed_instance(model: str, topology: str, names: list[str], presets: str, out: Path, work: Path) -> None:
    """The presets' instance with the agents' device names, the testbed's link rates and
    the agents' reference precision (module docstring)."""
    raw = work / f"{model}_{topology}_presets.json"
    splitopt("profile", model, "--preset", presets, "--topology", topology, "--calibration-images", "0", "-o",
             str(raw), "--quiet")
    data = json.loads(raw.read_text())
    rename = dict(zip([d["name"] for d in data["devices"]], names))
    rates = {(l.a, l.b): l.rate_ab_bps for l in LINKS} | {(l.b, l.a): l.rate_ab_bps for l in LINKS}
    for d in data["devices"]:
        d["description"] = f"preset {d['name']} as {rename[d['name']]}: {d['description']}"
        d["name"] = rename[d["name"]]
        if 32 not in d["bit_widths"]:
            d["bit_widths"] = sorted(set(d["bit_widths"]) | {32})
    for link in data["links"]:
        link["source"], link["target"] = rename[link["source"]], rename[link["target"]]
        link["bandwidth_bits_per_s"], link["latency_ms"] = rates[(link["source"], link["target"])], 0.0
    s = data["settings"]
    for key in ("edge", "cloud"):
        if key in s:
            s[key] = rename[s[key]]
    if "chain" in s:
        s["chain"] = [rename[n] for n in s["chain"]]
    s["cloud_bits"] = 32
    if "edge_memory_bytes" in s:
        s["edge_memory_bytes"] = next(d["memory_bytes"] for d in data["devices"] if d["name"] == names[0])
    data["name"] = f"{model}_{topology}_presets"
    out.write_text(json.dumps(data, indent=1))


def every_device_plan(inst):
    """The best plan on ``inst`` (by its evaluator) that gives every device, in order, a
    contiguous non-empty run of the layers (in the instance's layer order)."""
    import itertools

    from splitopt.api import evaluate
    from splitopt.families.chain.plan import plan_on_devices
    from splitopt.families.edge_cloud.plan import uniform_plan

    names = [l.name for l in inst.layers]
    best = None
    if inst.problem == "chain":
        chain = list(inst.settings.chain)
        cuts = itertools.combinations(range(1, len(names)), len(chain) - 1)
        candidates = (plan_on_devices(inst, {n: chain[sum(i >= c for c in cut)] for i, n in enumerate(names)})
                      for cut in cuts)
    else:
        candidates = (uniform_plan(inst, names[:k]) for k in range(1, len(names)))
    for plan in candidates:
        m = evaluate(inst, plan)
        if m.feasible and (best is None or m.objective_ms < best[0]):
            best = (m.objective_ms, plan)
    assert best is not None
    return best[1]


def layer_counts(inst, plan, devices: list[str]) -> str:
    counts = {d: 0 for d in devices}
    for layer in inst.layers:
        counts[plan.device[layer.name]] += 1
    return "/".join(str(counts[d]) for d in devices)


def run_case(model: str, topology: str, agents_file: Path, token: Path, work: Path, args) -> dict:
    from splitopt.api import evaluate, load_instance, load_plan, save_plan

    names, presets = TOPOLOGIES[topology]
    measured_path, assumed_path = work / f"{model}_{topology}_agents.json", work / f"{model}_{topology}_assumed.json"
    pick = ["--edge", "edge", "--cloud", "cloud"] if topology == "edge-cloud" else []
    started = time.monotonic()
    splitopt("profile", model, "--agents", str(agents_file), "--token-file", str(token), "--topology", topology,
             *pick, "--calibration-images", "0", "--repeats", str(args.repeats), "-o", str(measured_path), "--quiet")
    profile_s = time.monotonic() - started
    assumed_instance(model, topology, names, presets, assumed_path, work)
    measured, assumed = load_instance(measured_path), load_instance(assumed_path)
    plans = {}
    for label, solved, inst in (("optimum, measured", measured_path, measured),
                                ("optimum, presets", assumed_path, assumed)):
        path = work / f"{model}_{topology}_{label.split(', ')[1]}_plan.json"
        r = splitopt("solve", str(solved), "--json", "--time-limit", "60")
        path.write_text(r.stdout)
        plans[label] = load_plan(inst, path)  # the same devices and precision: a plan of either instance
    if topology == "chain":  # the plan that keeps a pipelined stream fastest
        r = splitopt("solve", str(measured_path), "--json", "--time-limit", "60", "--set",
                     "settings.objective=throughput")
        path = work / f"{model}_{topology}_throughput_plan.json"
        path.write_text(r.stdout)
        plans["throughput optimum, measured"] = load_plan(measured, path)
    plans["every device, measured"] = every_device_plan(measured)
    rows = []
    seen: list = []
    for label, plan in plans.items():
        same = next((l for l, p in seen if p.device == plan.device), None)
        if same is not None:
            rows.append({"plan": label, "same_as": same})
            continue
        seen.append((label, plan))
        path = work / f"{model}_{topology}_{len(seen)}.plan.json"
        save_plan(measured, plan, path)
        r = splitopt("run", str(measured_path), str(path), "--model", model, "--agents", str(agents_file),
                     "--token-file", str(token), "--samples", str(args.samples), "--warmup", str(args.warmup),
                     "--json")
        report = json.loads(r.stdout)
        report.pop("per_sample", None)  # the medians stay; every sample's reports would swell the results
        if isinstance(report.get("throughput"), dict):
            report["throughput"].pop("per_sample", None)
        m_pred = evaluate(measured, plan)
        a_pred = evaluate(assumed, plan)
        rows.append({"plan": label, "layers": layer_counts(measured, plan, names), "report": report,
                     "predicted_measured_ms": float(m_pred.objective_ms), "predicted_presets_ms": float(a_pred.objective_ms),
                     "presets_feasible": bool(a_pred.feasible)})
        e = report["end_to_end"]
        print(f"{model} {topology} {label}: measured {e['measured_ms']:.1f} ms, predicted {e['predicted_ms']:.1f} "
              f"(ratio {e['ratio']}), presets {float(a_pred.objective_ms):.1f}; ok {report['ok']}", flush=True)
    return {"model": model, "topology": topology, "profile_s": profile_s, "rows": rows,
            "measured_source": measured.source["agents"], "plans_equal": plans["optimum, measured"].device
            == plans["optimum, presets"].device}


def ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def pipelined(report: dict) -> dict | None:
    """The pipelined run's throughput figures of a run report (None where not measured)."""
    t = report.get("throughput")
    return t if isinstance(t, dict) and t.get("measured_per_s") is not None else None


def tables(cases: list[dict]) -> tuple[list[str], list[str]]:
    """The results file's table (every plan of every round) and its per-part and per-link
    lines."""
    compact = ["| round | model | topology | plan | layers per device | predicted (agents) ms | measured ms | "
               "measured / predicted | pipelined: predicted / s | measured / s | ratio | predicted (presets) ms | "
               "presets / measured |",
               "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    detail = []
    for c in cases:
        where = f"{c.get('round', 1)} | {c['model']} | {c['topology']}"
        for row in c["rows"]:
            if "same_as" in row:
                compact.append(f"| {where} | {row['plan']} | = {row['same_as']} | | | | | | | | |")
                continue
            r, e = row["report"], row["report"]["end_to_end"]
            t = pipelined(r)
            presets = row["predicted_presets_ms"]
            through = (f"{t['predicted_per_s']:.1f} | {t['measured_per_s']:.1f} | {ratio(t['ratio'])}" if t else
                       "- | - | -")
            compact.append(f"| {where} | {row['plan']} | {row['layers']} | "
                           f"{e['predicted_ms']:.1f} | {e['measured_ms']:.1f} | {ratio(e['ratio'])} | {through} | "
                           f"{presets:.2f}{'' if row['presets_feasible'] else ' (infeasible)'} | "
                           f"{presets / e['measured_ms']:.3f} |")
            detail.append(f"* round {c.get('round', 1)}, {c['model']}, {c['topology']}, {row['plan']} "
                          f"({row['layers']} layers; {r['completed']} samples"
                          f"{'' if r['ok'] else ', NOT OK: ' + str(r['error'] or r['check'])}):")
            for k, p in enumerate(r["parts"]):
                waited = p.get("waited_ms")
                detail.append(f"  part {p['device']}: {p['measured_ms']:.2f} ms measured, {p['predicted_ms']:.2f} "
                              f"predicted ({ratio(p['ratio'])})"
                              + (f", after {waited:.1f} ms waiting for its input" if p["layers"] and waited is not None
                                 else ""))
                if k < len(r["links"]):
                    l = r["links"][k]
                    detail.append(f"  link {l['source']}->{l['target']}: {l['payload_bytes']:,.0f} B (evaluator "
                                  f"{l['evaluator_bytes']:,.0f}), {l['measured_ms']:.2f} ms measured, "
                                  f"{l['predicted_ms']:.2f} predicted at {l['bandwidth_bits_per_s'] / 1e6:.2f} Mbit/s "
                                  f"probed ({ratio(l['ratio'])})")
            detail.append(f"  end to end {e['measured_ms']:.2f} ms ({e['sum_of_pieces_ms']:.2f} summed over parts and "
                          f"links, pack + unpack {e['pack_unpack_ms']:.2f}); predicted {e['predicted_ms']:.2f}")
            if t:
                stages = ", ".join(f"{x['device']} {x['measured_ms']:.2f}/{x['predicted_ms']:.2f}"
                                   for x in t.get("stages", []))
                detail.append(f"  pipelined: {t['measured_per_s']:.2f} samples/s measured, "
                              f"{t['predicted_per_s']:.2f} predicted ({ratio(t['ratio'])}); bottleneck predicted "
                              f"{t.get('bottleneck_predicted')}; stages ms measured/predicted: {stages}")
            elif isinstance(r.get("throughput"), str):
                detail.append(f"  pipelined: {r['throughput']}")
    return compact, detail


def write_readme(compact: list[str], header: str) -> None:
    text = README.read_text()
    body = "\n".join([MARKERS[0], header, "", *compact, MARKERS[1]])
    if MARKERS[0] in text:
        start, end = text.index(MARKERS[0]), text.index(MARKERS[1]) + len(MARKERS[1])
        text = text[:start] + body + text[end:]
    else:
        raise SystemExit(f"README.md has no {MARKERS[0]} marker")
    README.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50")
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7, help="profile --repeats (per-layer medians)")
    parser.add_argument("--period-ms", type=float, default=None,
                        help="CFS period of the CPU quotas, ms (default: the testbed's, the shortest the kernel allows)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of profile, solve and run (each afresh): how far the ratios move between them")
    parser.add_argument("--no-write", action="store_true", help="print, do not write the results")
    parser.add_argument("--render", action="store_true",
                        help="only write agents_loop.md and the README table again from agents_loop.json")
    args = parser.parse_args()
    if args.render:
        render(json.loads((RESULTS / "agents_loop.json").read_text()))
        return
    before = load()
    started = time.monotonic()
    cases = []
    with tempfile.TemporaryDirectory(prefix="splitopt_agents_loop_") as tmp, \
            Testbed(DEVICES, LINKS, cpu_period_us=None if args.period_ms is None else int(args.period_ms * 1000)) as tb:
        period_ms = tb.cpu_period_us / 1000
        work = Path(tmp)
        template = DEFAULT_AGENT_COMMAND + " --memory-bytes {memory} --timeout-s 120"
        for d in DEVICES:
            tb.start(d.name, tb.command(template.replace("{memory}", str(MEMORY[d.name])), d.name),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for d in DEVICES:
            tb.wait_listening(d.name, 60)
        agents_file = work / "agents.json"
        agents_file.write_text(json.dumps(tb.agents_map()))
        description = tb.describe()
        for round_ in range(1, args.rounds + 1):  # each round profiles, solves and runs afresh
            for model in args.models.split(","):
                for topology in TOPOLOGIES:
                    case = run_case(model, topology, agents_file, tb.token_file, work, args)
                    cases.append(dict(case, round=round_))
    shares = share_as_slower_core(sorted({100.0, 10.0, period_ms}, reverse=True)) \
        if description["emulated"] == "netns" else {}
    after = load()
    emulated = description["emulated"]
    how = ("network namespaces, tbf-shaped veth links, cgroup CPU quotas, devices with a share pinned to a CPU each"
           if emulated == "netns" else
           f"LOOPBACK: {description['fallback_reason']}; links unshaped, no CPU quota")
    command = (f"python benchmarks/agents_loop.py --models {args.models} --samples {args.samples} --warmup "
               f"{args.warmup} --repeats {args.repeats} --rounds {args.rounds}" + ("" if args.period_ms is None else
                                                          f" --period-ms {args.period_ms:g}"))
    header = (f"`{command}` on {machine(shared=True)}; load average {before[0]:.2f} before, {after[0]:.2f} after; "
              f"testbed: {how}; edge 0.3 core, server 0.6 core, cloud no quota, one onnxruntime thread each, CFS "
              f"period {period_ms:g} ms; links edge-server 60, server-cloud 30, edge-cloud 40 Mbit/s (tbf with a peak "
              f"rate). Medians "
              f"of {args.samples} samples after {args.warmup} warm-up: latency one sample at a time, then "
              f"throughput pipelined; predicted: the evaluator on the agents' instance; presets: the same plan on "
              f"pi4/jetson/v100 presets.")
    results = {"header": header, "testbed": description, "cases": cases, "share_as_slower_core": shares,
               "seconds": time.monotonic() - started}
    if args.no_write:
        print(report_text(json.loads(json.dumps(results, default=str))))
        return
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "agents_loop.json").write_text(json.dumps(results, indent=1, default=str))
    render(json.loads((RESULTS / "agents_loop.json").read_text()))


def report_text(results: dict) -> str:
    """The results file (``agents_loop.md``) from the results' JSON form."""
    cases, shares = results["cases"], results["share_as_slower_core"]
    compact, detail = tables(cases)
    plans_line = "; ".join(f"round {c.get('round', 1)} {c['model']} {c['topology']}: optimum "
                           f"{'equal' if c['plans_equal'] else 'DIFFERS'}" for c in cases)
    share_lines = []
    if shares:
        amounts = list(next(iter(shares.values())))
        share_lines = ["## A CPU share as a slower core\n",
                       f"Wall ms of an amount of CPU work started after 50 ms idle, in a device of share {SHARE:g} "
                       f"(median of 7); a core {1 / SHARE:.2f} times slower would take work / {SHARE:g}.\n",
                       "| CFS period | " + " | ".join(f"{a} ms" for a in amounts) + " |",
                       "|---|" + "---:|" * len(amounts),
                       "| slower core | " + " | ".join(f"{float(a) / SHARE:.1f}" for a in amounts) + " |"]
        share_lines += [f"| {float(p):g} ms | " + " | ".join(f"{v:.1f}" for v in shares[p].values()) + " |"
                        for p in shares]
        share_lines.append("")
    return "\n".join(["# Plan on the devices you have: profile, solve and run on agents\n", results["header"], "",
                      f"Total {results['seconds']:.0f} s. Measured-instance optimum vs presets optimum: "
                      f"{plans_line}.", "", *compact, "", *share_lines, "## Per part and per link\n", *detail, ""])


def readme_table(cases: list[dict]) -> list[str]:
    """Per model and topology, the agents' optimum (latency; for the chain also the
    throughput optimum, pipelined) measured against its prediction: the first round's
    figures, the ratio of every round, and the presets' optimum."""
    lines = ["| model | topology | objective | optimum: layers per device | predicted | measured | "
             "measured / predicted, each round | presets' optimum: its prediction / measured |",
             "|---|---|---|---|---:|---:|---|---|"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for c in cases:
        groups.setdefault((c["model"], c["topology"]), []).append(c)

    def row_of(c: dict, label: str) -> dict:
        rows = {r["plan"]: r for r in c["rows"]}
        row = rows[label]
        return rows[row["same_as"]] if "same_as" in row else row

    for (model, topology), rounds in groups.items():
        first = rounds[0]
        best = row_of(first, "optimum, measured")
        e = best["report"]["end_to_end"]
        presets = row_of(first, "optimum, presets")
        layers = " or ".join(dict.fromkeys(row_of(c, "optimum, measured")["layers"] for c in rounds))
        ratios = ", ".join(ratio(row_of(c, "optimum, measured")["report"]["end_to_end"]["ratio"]) for c in rounds)
        lines.append(f"| {model} | {topology} | latency | {layers} | {e['predicted_ms']:.1f} ms | "
                     f"{e['measured_ms']:.1f} ms | {ratios} | "
                     f"{'the same plan' if first['plans_equal'] else presets['layers']}: "
                     f"{presets['predicted_presets_ms']:.1f} / {presets['report']['end_to_end']['measured_ms']:.1f} ms |")
        if any(r["plan"] == "throughput optimum, measured" for r in first["rows"]):
            plans = [row_of(c, "throughput optimum, measured") for c in rounds]
            t = pipelined(plans[0]["report"])
            if t is None:
                continue
            layers = " or ".join(dict.fromkeys(p["layers"] for p in plans))
            ratios = ", ".join(ratio((pipelined(p["report"]) or {}).get("ratio")) for p in plans)
            lines.append(f"| {model} | {topology} | throughput, pipelined | {layers} | "
                         f"{t['predicted_per_s']:.1f} /s | {t['measured_per_s']:.1f} /s | {ratios} | |")
    return lines


def render(results: dict) -> None:
    """Write ``agents_loop.md`` and the README's table from the results' JSON form."""
    (RESULTS / "agents_loop.md").write_text(report_text(results))
    write_readme(readme_table(results["cases"]), results["header"])
    print(f"wrote {RESULTS / 'agents_loop.md'} and the table in README.md")


if __name__ == "__main__":
    main()
