"""The peer's own max-load DP (``code/throughput-dp/dp.cpp`` of ../shared/peer-instances/
dnn-partitioning, MIT) side by side with splitopt's ``ideal-dp`` on the 16 peer throughput
instances.

The peer DP is built with g++ (``-O3 -std=c++17``) into a temporary folder outside the
package (skipped with a message when there is no compiler or the peer data is absent) and
run as ``dp < FILE``; its split (stdout) is valued by splitopt's evaluator, its ideal
count read from stderr. Each run has a wall-clock limit (``--timeout``, default 120 s) and
an address-space cap (``--mem-gb``, default 6 GB): a run that passes either is reported
"did not finish in X s" (or "out of memory").

splitopt, each in a fresh process (``python -m splitopt`` from this checkout):

* ``ideal-dp``: ``splitopt solve FILE --solver ideal-dp --json``, the exact method (what
  ``auto`` runs where it applies): its DP where that is exact; where devices could wait on
  each other in a cycle, the acyclic DP's plan proven optimal (or beaten) by CP-SAT asked
  for a better placement (``splitopt/families/maxload/certify.py``); it declines
  (NotApplicable) for colour classes without a forward node or too many ideals, and the
  reason is reported.
* ``acyclic DP``: the same DP with the test for devices that wait on each other skipped
  (``solve_ideal_dp(..., acyclic_only=True)``): the optimum over placements whose devices
  can be ordered so that each prefix is a downset, the peer DP's model (an upper bound on
  splitopt's optimum). This is the like-for-like timing of the two DPs.

Reported per instance: ideals (splitopt's units; the peer DP's count after its own
contractions), median whole-process wall (s) and CPU (user + system, s) over
``--repeats`` rounds (one round when the first run takes more than ``LONG_S``), splitopt's
in-process solve time (lattice + DP), the values (ms, by splitopt's evaluator), and
whether they agree with each other and with CP-SAT's proven optimum from
``benchmarks/results/maxload_throughput.json`` (relative tolerance 1e-6). Each round runs
every program once, in turn, so the machine's load hits all alike.

Contiguity rules (``formulations/maxload_models.md``, rule 5): on
``OperatorGraphs/bert_l-3_training`` (14 backward-only colour groups) also ``splitopt solve
FILE --solver cpsat --contiguity R`` and the acyclic DP under both rules, R = ``splitopt``
(the default: those groups free) and ``authors`` (dp.cpp's artificial forward nodes), one
run each; ``--contiguity-only`` runs just these and merges them into the existing results.

Run: ``python benchmarks/maxload_peer_dp.py [--repeats 3] [--timeout 120]``; writes
``benchmarks/results/maxload_peer_dp.{json,md}``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import machine  # noqa: E402

PEER = ROOT.parent / "shared" / "peer-instances" / "dnn-partitioning"
RESULTS = ROOT / "benchmarks" / "results"
#: a run longer than this (s) is not repeated
LONG_S = 10.0
#: values agree within this relative tolerance
RTOL = 1e-6
#: the peer graph on which the two contiguity rules differ (backward-only colour classes)
CONTIGUITY_INSTANCE = "OperatorGraphs/bert_l-3_training"

ACYCLIC = """
import json, sys, time
t0 = time.perf_counter()
from splitopt.families.maxload.instance import read_peer_instance
from splitopt.families.maxload.ideal_dp import solve_ideal_dp
from splitopt.families.maxload.evaluate import evaluate
from splitopt.core.errors import NotApplicable
inst = read_peer_instance(sys.argv[1], contiguity=sys.argv[2] if len(sys.argv) > 2 else "splitopt")
t1 = time.perf_counter()
try:
    r = solve_ideal_dp(inst, None, 5000, acyclic_only=True)
    solve_s = time.perf_counter() - t1
    m = evaluate(inst, r.plan)
    out = {"value_ms": m.max_load_ms, "feasible": m.feasible, "ideals": r.ideals, "pairs": r.pairs,
           "solve_s": solve_s}
except NotApplicable as e:
    out = {"declined": str(e)}
out["loaded"] = sorted({m.split(".")[0] for m in sys.modules} & {"ortools", "pandas", "networkx", "numpy", "scipy"})
print(json.dumps(out))
"""


def limit_memory(gb: float):
    def apply() -> None:
        cap = int(gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return apply


def timed(argv: list[str], timeout: float, stdin=None, env=None, preexec=None) -> dict:
    """Run ``argv``: wall and CPU seconds (the child's user + system), return code,
    stdout, stderr; ``timed_out`` when it passed ``timeout`` (then killed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT, preexec_fn=preexec)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "rc": proc.returncode, "stdout": out, "stderr": err,
            "timed_out": timed_out}


def build_peer_dp(folder: Path) -> tuple[Path | None, str]:
    """(the built binary or None, what happened)."""
    src = PEER / "code" / "throughput-dp" / "dp.cpp"
    if not src.exists():
        return None, f"peer DP source not found ({src})"
    gxx = shutil.which("g++")
    if gxx is None:
        return None, "no C++ compiler (g++) on PATH: the peer DP is not run"
    exe = folder / "dp"
    t0 = time.perf_counter()
    proc = subprocess.run([gxx, "-O3", "-std=c++17", "-I", str(PEER / "code" / "nlohmann"), str(src), "-o", str(exe)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"g++ failed: {proc.stderr.strip()[-300:]}"
    return exe, f"built with `g++ -O3 -std=c++17` in {time.perf_counter() - t0:.0f} s ({folder})"


def evaluate_split(path: Path, split_text: str) -> tuple[float | None, list[str]]:
    """The max-load (ms) of the peer DP's split by splitopt's evaluator, and its violations."""
    from splitopt.families.maxload.evaluate import evaluate
    from splitopt.families.maxload.instance import read_peer_instance
    from splitopt.families.maxload.plan import parse_expert

    inst = read_peer_instance(path)
    m = evaluate(inst, parse_expert(inst, json.loads(split_text), source="peer dp"))
    return m.max_load_ms, list(m.violations)


def run_peer(exe: Path, path: Path, timeout: float, mem_gb: float) -> dict:
    with open(path) as f:
        r = timed([str(exe)], timeout, stdin=f, preexec=limit_memory(mem_gb))
    out = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    m = re.search(r"^(\d+) ideals$", r["stderr"], re.M)
    out["ideals"] = int(m.group(1)) if m else None
    if r["timed_out"]:
        out["result"] = f"did not finish in {timeout:g} s"
    elif "finished successfully" not in r["stderr"]:
        tail = r["stderr"].strip().splitlines()[-1:] or [f"exit code {r['rc']}"]
        oom = "bad_alloc" in r["stderr"] or r["rc"] in (-6, -9, 134, 137)
        out["result"] = f"out of memory ({mem_gb:g} GB cap)" if oom else f"failed: {tail[0][:120]}"
    else:
        value, violations = evaluate_split(path, r["stdout"])
        out.update(result="ok", value_ms=value, violations=violations)
    return out


def splitopt_env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
                COLUMNS="100")


def run_ideal_dp(path: Path, timeout: float) -> dict:
    r = timed([sys.executable, "-m", "splitopt", "solve", str(path), "--solver", "ideal-dp", "--json"], timeout,
              env=splitopt_env())
    out = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    if r["timed_out"]:
        out["result"] = f"did not finish in {timeout:g} s"
        return out
    try:
        data = json.loads(r["stdout"])
    except json.JSONDecodeError:
        msg = (r["stderr"] or r["stdout"]).strip().splitlines()
        out["result"] = "declined"
        out["reason"] = next((line for line in msg if "ideal-dp:" in line), msg[-1] if msg else "")[:300]
        return out
    out.update(result=data["status"], value_ms=data["objective_ms"], solve_s=data["solve_s"],
               certified="acyclic optimum" in (data.get("message") or ""))
    return out


def run_cpsat_cli(path: Path, timeout: float, contiguity: str | None = None) -> dict:
    """``splitopt solve FILE --solver cpsat --json [--contiguity R]``: the whole process,
    for comparison."""
    rule = [] if contiguity is None else ["--contiguity", contiguity]
    r = timed([sys.executable, "-m", "splitopt", "solve", str(path), "--solver", "cpsat", "--json", *rule], timeout,
              env=splitopt_env())
    out = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    try:
        data = json.loads(r["stdout"])
        out.update(result=data["status"], value_ms=data["objective_ms"], solve_s=data["solve_s"])
    except json.JSONDecodeError:
        out["result"] = "did not finish" if r["timed_out"] else "failed"
    return out


def run_acyclic(path: Path, timeout: float, contiguity: str | None = None) -> dict:
    r = timed([sys.executable, "-c", ACYCLIC, str(path), *([] if contiguity is None else [contiguity])], timeout,
              env=splitopt_env())
    out = {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]}
    if r["timed_out"]:
        out["result"] = f"did not finish in {timeout:g} s"
        return out
    if r["rc"] != 0:
        out["result"] = f"failed: {r['stderr'].strip().splitlines()[-1][:200]}"
        return out
    data = json.loads(r["stdout"].strip().splitlines()[-1])
    out.update(data)
    out["result"] = "declined" if "declined" in data else "ok"
    return out


def run_contiguity(timeout: float) -> list[dict]:
    """CP-SAT (whole process) and the acyclic DP on :data:`CONTIGUITY_INSTANCE` under each
    contiguity rule, one run each."""
    path = PEER / "throughput-inputs" / f"{CONTIGUITY_INSTANCE}.json"
    if not path.exists():
        return []
    rows = []
    for rule in ("splitopt", "authors"):
        row = {"instance": CONTIGUITY_INSTANCE, "contiguity": rule, "cpsat": run_cpsat_cli(path, timeout, rule),
               "acyclic": run_acyclic(path, timeout, rule)}
        rows.append(row)
        print(json.dumps({k: row[k] if k in ("instance", "contiguity") else
                          {x: row[k].get(x) for x in ("result", "wall_s", "value_ms")} for k in row}), flush=True)
    return rows


def cpsat_reference() -> dict[str, dict]:
    """Instance -> CP-SAT's proven optimum and time from maxload_throughput.json."""
    path = RESULTS / "maxload_throughput.json"
    if not path.exists():
        return {}
    out = {}
    for row in json.loads(path.read_text())["rows"]:
        if row["solver"] == "cpsat" and row["summary"]["status"] == "OPTIMAL":
            out[row["instance"]] = {"value_ms": row["summary"]["objective_ms"], "time_s": row["summary"]["time_s"]}
    return out


def median(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def same(a: float | None, b: float | None, rtol: float = RTOL) -> bool | None:
    if a is None or b is None:
        return None
    return abs(a - b) <= rtol * max(1.0, abs(a), abs(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120.0, help="wall-clock limit of one run (s)")
    ap.add_argument("--mem-gb", type=float, default=6.0, help="address-space cap of one peer DP run (GB)")
    ap.add_argument("--only", default="", help="run only instances whose name contains this")
    ap.add_argument("--report-only", action="store_true", help="rewrite the .md from the .json, run nothing")
    ap.add_argument("--contiguity-only", action="store_true",
                    help=f"run only the contiguity rows ({CONTIGUITY_INSTANCE}) and merge them into the results")
    args = ap.parse_args()
    if args.report_only:
        (RESULTS / "maxload_peer_dp.md").write_text(markdown(json.loads((RESULTS / "maxload_peer_dp.json").read_text())))
        return
    if args.contiguity_only:
        report = json.loads((RESULTS / "maxload_peer_dp.json").read_text())
        report["contiguity"] = run_contiguity(args.timeout)
        report["contiguity_run"] = {"started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                    "machine": machine(shared=True), "load_before": os.getloadavg()}
        (RESULTS / "maxload_peer_dp.json").write_text(json.dumps(report, indent=1) + "\n")
        (RESULTS / "maxload_peer_dp.md").write_text(markdown(report))
        print(f"wrote {RESULTS / 'maxload_peer_dp.md'}")
        return
    files = sorted((PEER / "throughput-inputs").glob("*/*.json"))
    if not files:
        print(f"peer data not found under {PEER}: nothing to run")
        return
    files = [f for f in files if args.only in f"{f.parent.name}/{f.stem}"]
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_before = os.getloadavg()
    reference = cpsat_reference()
    rows = []
    with tempfile.TemporaryDirectory(prefix="splitopt-peer-dp-") as tmp:
        exe, built = build_peer_dp(Path(tmp))
        print(built, flush=True)
        for path in files:
            name = f"{path.parent.name}/{path.stem}"
            runs: dict[str, list[dict]] = {"peer": [], "ideal_dp": [], "acyclic": [], "cpsat_cli": []}
            for i in range(args.repeats):
                if exe is not None and (i == 0 or runs["peer"][0]["wall_s"] < LONG_S):
                    runs["peer"].append(run_peer(exe, path, args.timeout, args.mem_gb))
                if i == 0 or runs["ideal_dp"][0]["wall_s"] < LONG_S:
                    runs["ideal_dp"].append(run_ideal_dp(path, args.timeout))
                if i == 0 or runs["acyclic"][0]["wall_s"] < LONG_S:
                    runs["acyclic"].append(run_acyclic(path, args.timeout))
                if runs["ideal_dp"][0].get("result") == "OPTIMAL":  # where it applies: the whole CP-SAT solve too
                    runs["cpsat_cli"].append(run_cpsat_cli(path, args.timeout))
            row = {"instance": name, "started": started, "cpsat": reference.get(name)}
            for key, rs in runs.items():
                if not rs:
                    row[key] = None
                    continue
                first = rs[0]
                row[key] = {**{k: v for k, v in first.items() if k not in ("wall_s", "cpu_s", "solve_s")},
                            "runs": len(rs), "wall_s": median(rs, "wall_s"), "cpu_s": median(rs, "cpu_s"),
                            "solve_s": median(rs, "solve_s")}
            ref = (row["cpsat"] or {}).get("value_ms")
            peer_v = (row["peer"] or {}).get("value_ms")
            acy_v = row["acyclic"].get("value_ms")
            row["same_optimum"] = {"acyclic_vs_peer": same(acy_v, peer_v), "acyclic_vs_cpsat": same(acy_v, ref),
                                   "peer_vs_cpsat": same(peer_v, ref),
                                   "ideal_dp_vs_cpsat": same(row["ideal_dp"].get("value_ms"), ref)}
            rows.append(row)
            print(json.dumps({"instance": name, "peer": row["peer"] and {k: row["peer"].get(k) for k in
                                                                         ("result", "wall_s", "value_ms")},
                              "ideal_dp": {k: row["ideal_dp"].get(k) for k in ("result", "wall_s", "value_ms")},
                              "acyclic": {k: row["acyclic"].get(k) for k in ("result", "wall_s", "solve_s",
                                                                             "value_ms")}}), flush=True)
    contiguity = run_contiguity(args.timeout) if not args.only or args.only in CONTIGUITY_INSTANCE else None
    old = RESULTS / "maxload_peer_dp.json"
    merged = None
    if args.only and old.exists():  # a partial run: keep the other instances' rows
        ran = {r["instance"] for r in rows}
        before = json.loads(old.read_text())
        first = before.get("merged_from") or before
        kept = [r for r in before["rows"] if r["instance"] not in ran]
        for r in kept:  # rows of runs that did not record their start: the earliest run's
            r.setdefault("started", first["started"])
        merged = {"started": first["started"], "repeats": first.get("repeats", before["args"]["repeats"]),
                  "instances": sorted(r["instance"] for r in kept)}
        rows = sorted(kept + rows, key=lambda r: r["instance"])
    report = {"merged_from": merged, "started": started, "machine": machine(shared=True), "load_before": load_before,
              "load_after": os.getloadavg(), "peer_build": built, "args": vars(args), "rows": rows}
    if contiguity is not None:
        report["contiguity"] = contiguity
    elif old.exists() and "contiguity" in json.loads(old.read_text()):
        report["contiguity"] = json.loads(old.read_text())["contiguity"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "maxload_peer_dp.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "maxload_peer_dp.md").write_text(markdown(report))
    print(f"wrote {RESULTS / 'maxload_peer_dp.md'}")


def fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def fmt_v(x: float | None) -> str:
    return "-" if x is None else f"{x:.6f}"


def fmt_same(x: bool | None) -> str:
    return "-" if x is None else ("yes" if x else "NO")


def markdown(rep: dict) -> str:
    a = rep["args"]
    lines = [
        "# The peer's max-load DP (dp.cpp) and splitopt's ideal-dp, side by side",
        "",
        f"`python benchmarks/maxload_peer_dp.py` ({rep['started']}; {rep['machine']}; load average "
        f"{rep['load_before'][0]:.2f} before, {rep['load_after'][0]:.2f} after). Peer DP: {rep['peer_build']}; "
        f"each run limited to {a['timeout']:g} s and {a['mem_gb']:g} GB of address space. Medians of "
        f"{a['repeats']} rounds (1 where the first run took more than {LONG_S:g} s); every program in a fresh "
        "process. Wall and CPU: the whole process (CPU = user + system). splitopt solve: in-process time of the "
        "acyclic DP (ideal lattice + DP, no imports). Values (ms) by splitopt's evaluator; \"same\": within "
        f"{RTOL:g} relative of CP-SAT's proven optimum (`maxload_throughput.json`, its time there in the last "
        "column, build + solve in process).",
        "",
        *([f"This run (`--only {a['only']}`) redid the matching instances; the rows come from the runs of "
           + "; ".join(f"{when} ({n} instances)" for when, n in sorted(collections.Counter(
               r.get("started", rep["merged_from"]["started"]) for r in rep["rows"]).items()))
           + f" (same machine kind and limits, medians of {rep['merged_from'].get('repeats', '?')} rounds)."]
          if rep.get("merged_from") else []),
        "",
        "* **ideal-dp** (the exact method, `splitopt solve FILE --solver ideal-dp`; what `auto` runs where it "
        "applies): its DP where that is exact for splitopt's rules; where contiguous devices could wait on each "
        "other in a cycle (a cyclic device quotient: allowed by splitopt's contiguity rule, not representable by "
        "a chain of ideals; found by an exact search, which on these graphs finds two-device cycles only), the "
        "acyclic DP's plan, proven optimal by CP-SAT asked for a better placement (\"+ proof\"; "
        "`splitopt/families/maxload/certify.py`). It declines for colour classes with no forward node (placed "
        "freely by splitopt) or more than 5,000 ideals.",
        "* **acyclic DP**: the same DP without the cyclic-wait test, i.e. the peer DP's model (devices ordered so "
        "that each prefix is a downset): the like-for-like comparison of the two DPs. Its value is an upper "
        "bound on splitopt's optimum; where it equals CP-SAT's optimum the acyclic restriction cost nothing.",
        "",
        "| instance | ideals splitopt / peer | peer DP wall s | peer CPU s | peer ms | acyclic DP solve s | "
        "acyclic wall s | acyclic CPU s | acyclic ms | same as peer | same as CP-SAT | ideal-dp (exact) | "
        "CP-SAT s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|",
    ]
    for r in rep["rows"]:
        peer, acy, idp = r["peer"] or {}, r["acyclic"], r["ideal_dp"]
        if peer.get("result") == "ok":
            pw, pc, pv = fmt_s(peer["wall_s"]), fmt_s(peer["cpu_s"]), fmt_v(peer["value_ms"])
        elif peer:
            pw, pc, pv = peer["result"], fmt_s(peer["cpu_s"]), "-"
        else:
            pw = pc = pv = "not run"
        if acy.get("result") == "ok":
            aw = (fmt_s(acy["solve_s"]), fmt_s(acy["wall_s"]), fmt_s(acy["cpu_s"]), fmt_v(acy["value_ms"]))
        else:
            reason = acy.get("declined", acy["result"])
            aw = (re.sub(r"^ideal-dp: ", "declined: ", reason)[:70], "-", "-", "-")
        if idp.get("result") == "OPTIMAL":
            proof = " (acyclic DP + proof)" if idp.get("certified") else ""
            exact = f"OPTIMAL {fmt_v(idp['value_ms'])} in {fmt_s(idp['wall_s'])} s wall{proof}"
        elif idp.get("result") == "declined":
            reason = idp.get("reason", "")
            kind = ("free backward classes" if "no forward node" in reason else
                    "cyclic wait possible" if "wait on each other" in reason else
                    "too many ideals" if "ideals" in reason else reason[:60])
            exact = f"declined ({kind})"
        else:
            exact = str(idp.get("result"))
        ideals = f"{acy.get('ideals', '-')} / {peer.get('ideals') if peer.get('ideals') is not None else '-'}"
        ref = r["cpsat"] or {}
        lines.append(f"| {r['instance']} | {ideals} | {pw} | {pc} | {pv} | {aw[0]} | {aw[1]} | {aw[2]} | {aw[3]} | "
                     f"{fmt_same(r['same_optimum']['acyclic_vs_peer'])} | "
                     f"{fmt_same(r['same_optimum']['acyclic_vs_cpsat'])} | {exact} | {fmt_s(ref.get('time_s'))} |")
    whole = [r for r in rep["rows"] if r.get("cpsat_cli")]
    if whole:
        lines += ["", "Whole `splitopt solve FILE` where ideal-dp applies (what `auto` runs there), against "
                  "`--solver cpsat`, medians, same rounds:", "",
                  "| instance | ideal-dp wall s | ideal-dp CPU s | ideal-dp solve s | cpsat wall s | cpsat CPU s | "
                  "cpsat solve s | same value |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in whole:
            i, c = r["ideal_dp"], r["cpsat_cli"]
            lines.append(f"| {r['instance']} | {fmt_s(i['wall_s'])} | {fmt_s(i['cpu_s'])} | {fmt_s(i.get('solve_s'))} | "
                         f"{fmt_s(c['wall_s'])} | {fmt_s(c['cpu_s'])} | {fmt_s(c.get('solve_s'))} | "
                         f"{fmt_same(same(i.get('value_ms'), c.get('value_ms')))} |")
    if rep.get("contiguity"):
        run = rep.get("contiguity_run") or {"started": rep["started"], "machine": rep["machine"]}
        peer = next((r["peer"] or {} for r in rep["rows"] if r["instance"] == CONTIGUITY_INSTANCE), {})
        lines += ["", f"Contiguity rules on {CONTIGUITY_INSTANCE} (`--contiguity splitopt|authors`; one run each, "
                  f"{run['started']}, {run['machine']}): `splitopt` leaves its 14 backward-only colour groups free, "
                  "`authors` gives them dp.cpp's artificial forward nodes. CP-SAT: the whole `splitopt solve FILE "
                  "--solver cpsat --contiguity R` process; acyclic DP as above. Peer DP (dp.cpp) value from the table: "
                  f"{fmt_v(peer.get('value_ms'))} ms. The two optima differ by less than the {RTOL:g} relative "
                  "tolerance of the table above (which therefore counts them as the same), so this one compares "
                  "to 1e-9.", "",
                  "| contiguity | CP-SAT | CP-SAT ms | CP-SAT solve s | CP-SAT wall s | acyclic DP ms | acyclic DP "
                  "solve s | ideals | CP-SAT = peer DP (1e-9 rel.) |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in rep["contiguity"]:
            c, a = r["cpsat"], r["acyclic"]
            acy = (fmt_v(a.get("value_ms")), fmt_s(a.get("solve_s")), a.get("ideals", "-")) \
                if a.get("result") == "ok" else (re.sub(r"^ideal-dp: ", "declined: ", a.get("declined", ""))[:60],
                                                  "-", "-")
            lines.append(f"| {r['contiguity']} | {c.get('result')} | {fmt_v(c.get('value_ms'))} | "
                         f"{fmt_s(c.get('solve_s'))} | {fmt_s(c.get('wall_s'))} | {acy[0]} | {acy[1]} | {acy[2]} | "
                         f"{fmt_same(same(c.get('value_ms'), peer.get('value_ms'), 1e-9))} |")
    loaded = sorted({m for r in rep["rows"] for m in r["acyclic"].get("loaded", [])})
    lines += ["", f"Packages the acyclic-DP processes had loaded: {', '.join(loaded) or 'none checked'} (of ortools, "
              "pandas, networkx, numpy, scipy; networkx, where listed, came from the evaluator's latency check, which "
              "now uses the standard library's graphlib). `tests/test_maxload_ideal_dp.py` checks that a solve with ideal-dp imports "
              "neither ortools nor pandas where its DP is exact (the proof of an acyclic optimum imports both).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
