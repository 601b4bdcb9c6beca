"""Start-up time of the command line: whole-process wall and CPU time of a few commands.

Commands: ``splitopt --help``, ``splitopt solvers``, ``splitopt schema``, ``splitopt
validate instances/resnet50_eyeriss.json``, ``splitopt solve instances/resnet50_eyeriss.json``
(``auto``, the default), ``splitopt validate`` and ``solve`` of the peer benchmark's
``bert24`` (when ``../shared`` is present), and for reference ``python -c "pass"`` (the interpreter alone) and
``python -c "import torch"``. splitopt runs as ``python -m splitopt`` from this checkout
(the source tree first on ``PYTHONPATH``); ``--also PYTHON`` adds the same commands run by
another interpreter with the splitopt installed in its environment (e.g. a core-only
venv without torch: ``python3 -m venv /tmp/corevenv && /tmp/corevenv/bin/pip install .``),
side by side.

Side by side: each of ``--repeats`` rounds runs every command once, in turn, so that a
change in the machine's load hits all commands alike. Reported per command: median and
minimum wall seconds, median CPU seconds (user + system of the process and its children,
e.g. CBC) and the heavy packages the command had loaded when it exited (one extra,
untimed run). The machine is described (CPU model, cores, Python) with its load average
before and after: on a shared machine CPU time is the steadier figure.

Run: ``python benchmarks/startup.py [--repeats 9] [--also /path/to/core-venv/bin/python]``;
writes ``benchmarks/results/startup.md`` and ``benchmarks/results/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = "instances/resnet50_eyeriss.json"
#: the peer benchmark's 32-node bert24 (issue 13's start-up target: a whole solve < 0.5 s),
#: where ../shared is present
PEER = "../shared/peer-instances/dnn-partitioning/throughput-inputs/LayerGraphs/bert24_inference.json"
SPLITOPT_ARGS = [["--help"], ["solvers"], ["schema"], ["validate", INSTANCE], ["solve", INSTANCE]]
if (ROOT / PEER).is_file():
    SPLITOPT_ARGS += [["validate", PEER], ["solve", PEER]]
#: packages the report checks for (each costs 0.1-2 s to import)
HEAVY = ("torch", "transformers", "sklearn", "networkx", "matplotlib", "numpy", "scipy", "ortools", "pandas", "pulp",
         "highspy", "jsonschema", "jsonschema_rs", "pydantic")

#: runs the splitopt CLI like ``python -m splitopt ARGS``, then prints the heavy packages loaded
REPORT_LOADED = f"""
import runpy, sys
sys.argv = ["splitopt", *sys.argv[1:]]
try:
    runpy.run_module("splitopt", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    print("LOADED " + " ".join(sorted({{m.split(".")[0] for m in list(sys.modules)
                                        if m.split(".")[0] in {HEAVY!r} and sys.modules[m] is not None}})))
"""


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def version_of(python: str, package: str) -> str | None:
    """``package.__version__`` as ``python`` imports it; None when it is not installed."""
    proc = subprocess.run([python, "-c", f"import {package}; print({package}.__version__)"], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    return proc.stdout.strip() if proc.returncode == 0 else None


def commands(python: str, label: str, from_source: bool) -> list[dict]:
    """The splitopt commands run by ``python`` (``from_source``: this checkout on PYTHONPATH)."""
    env = dict(os.environ, COLUMNS="100")
    if from_source:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    else:
        env.pop("PYTHONPATH", None)
    return [{"label": label, "command": "splitopt " + " ".join(args), "argv": [python, "-m", "splitopt", *args],
             "env": env, "splitopt_args": args} for args in SPLITOPT_ARGS]


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """Run ``argv`` once: (wall seconds, CPU seconds of it and its children, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def loaded(cmd: dict, cwd: Path) -> list[str] | None:
    """The heavy packages a splitopt command had loaded when it exited (None for the references)."""
    if not cmd.get("splitopt_args"):
        return None
    python = cmd["argv"][0]
    proc = subprocess.run([python, "-c", REPORT_LOADED, *cmd["splitopt_args"]], capture_output=True, text=True,
                          env=cmd["env"], cwd=cwd, timeout=600)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("LOADED")), "LOADED ?")
    return line.split()[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="rounds; every command runs once per round")
    parser.add_argument("--also", action="append", default=[], metavar="PYTHON",
                        help="also time the commands with this interpreter and the splitopt installed beside it")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()

    cmds = [{"label": "reference", "command": 'python -c "pass"', "argv": [sys.executable, "-c", "pass"],
             "env": dict(os.environ)}]
    cmds += commands(sys.executable, "source tree", from_source=True)
    for python in args.also:
        cmds += commands(python, f"installed ({python})", from_source=False)
    torch_version = version_of(sys.executable, "torch")
    if torch_version is not None:
        cmds.append({"label": "reference", "command": 'python -c "import torch"',
                     "argv": [sys.executable, "-c", "import torch"], "env": dict(os.environ)})

    load_before = os.getloadavg()
    for cmd in cmds:  # one untimed run each: warms the file cache, and tells what it loads
        cmd["loaded"] = loaded(cmd, ROOT)
        cmd["exit"] = timed(cmd["argv"], cmd["env"], ROOT)[2]
        cmd["wall_s"], cmd["cpu_s"] = [], []
    for r in range(args.repeats):
        for cmd in cmds:
            wall, cpu, code = timed(cmd["argv"], cmd["env"], ROOT)
            if code != cmd["exit"]:
                raise SystemExit(f"{cmd['command']}: exit status {code} in round {r + 1}, {cmd['exit']} before")
            cmd["wall_s"].append(wall)
            cmd["cpu_s"].append(cpu)
        print(f"round {r + 1}/{args.repeats} done", flush=True)
    load_after = os.getloadavg()

    rows = [{"label": c["label"], "command": c["command"], "exit": c["exit"], "loaded": c["loaded"],
             "median_wall_s": statistics.median(c["wall_s"]), "min_wall_s": min(c["wall_s"]),
             "median_cpu_s": statistics.median(c["cpu_s"]), "wall_s": c["wall_s"], "cpu_s": c["cpu_s"]}
            for c in cmds]
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "system": f"{platform.system()} {platform.release()}",
            "torch": torch_version, "repeats": args.repeats,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")

    also = "".join(f" --also {p}" for p in args.also)
    lines = [
        "# Start-up time of the command line",
        "",
        f"`python benchmarks/startup.py --repeats {args.repeats}{also}`; {meta['cpu']}, {meta['cores']} cores "
        f"({meta['usable_cores']} usable), Python {meta['python']}, {meta['system']}"
        + (f", torch {torch_version}" if torch_version else ", torch not installed") + ".",
        "",
        f"Whole process, {args.repeats} rounds, every command once per round in turn (side by side). "
        "Wall: seconds from start to exit; CPU: user + system seconds of the process and its children "
        "(CBC for `solve`). Load average (1, 5, 15 min) before: "
        f"{', '.join(map(str, meta['load_average_before']))}; after: {', '.join(map(str, meta['load_average_after']))} "
        "on this shared machine, so wall times include waiting for a core: CPU time is the steadier figure. "
        "splitopt runs as `python -m splitopt` with the source tree first on `PYTHONPATH`"
        + (" (\"source tree\"), or from the package installed in another venv (\"installed\"; a core-only venv: "
           "`python3 -m venv /tmp/corevenv && /tmp/corevenv/bin/pip install .`, no torch)" if args.also else "")
        + ". Heavy packages: which of " + ", ".join(HEAVY) + " the command had loaded when it exited.",
        "",
        "| where | command | exit | median wall s | min wall s | median CPU s | heavy packages loaded |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        heavy = "-" if r["loaded"] is None else (", ".join(r["loaded"]) or "none")
        lines.append(f"| {r['label']} | `{r['command']}` | {r['exit']} | {r['median_wall_s']:.2f} | "
                     f"{r['min_wall_s']:.2f} | {r['median_cpu_s']:.2f} | {heavy} |")
    (args.out / "startup.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
