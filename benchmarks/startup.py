"""Start-up time of the command line: whole-process wall and CPU time of a few commands.

Commands: ``splitopt --help``, ``splitopt solvers``, ``splitopt schema``, ``splitopt
validate instances/resnet50_eyeriss.json``, ``splitopt solve instances/resnet50_eyeriss.json``
(``auto``, the default), ``splitopt validate`` and ``solve`` of the peer benchmark's
``bert24`` (when ``../shared`` is present), and for reference ``python -c "pass"`` (the interpreter alone) and
``python -c "import torch"``. splitopt runs as ``python -m splitopt`` from this checkout
(the source tree first on ``PYTHONPATH``); ``--before DIR`` adds the same commands run
from another checkout (e.g. an earlier commit: ``git worktree add --detach /tmp/before
COMMIT``), side by side; ``--also PYTHON`` adds them run by another interpreter with the
splitopt installed in its environment (e.g. a core-only venv without torch: ``python3 -m
venv /tmp/corevenv && /tmp/corevenv/bin/pip install .``).

Side by side: each of ``--repeats`` rounds runs every command once, in turn, so that a
change in the machine's load hits all commands alike. Reported per command: median and
minimum wall seconds, median CPU seconds (user + system of the process and its children,
e.g. CBC) and the heavy packages the command had loaded when it exited (one extra,
untimed run). The machine is described (CPU model, cores, Python) with its load average
before and after: on a shared machine CPU time is the steadier figure. Byte code is
cached as in an installed package (``PYTHONDONTWRITEBYTECODE`` is dropped for the
splitopt commands; the untimed run writes it).

Import breakdown (``--imports``, default 7 rounds): ``python -X importtime`` of ``solve``
and ``--help``, the self time of every module summed per top-level package (splitopt per
subpackage), median over the rounds (each runs every checkout once, in turn), for each
checkout: where the imports' time goes.

Run: ``python benchmarks/startup.py [--repeats 9] [--before DIR] [--also /path/to/core-venv/bin/python]``;
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


def splitopt_env(source: Path | None) -> dict:
    """The environment splitopt runs in: ``source`` (a checkout) first on PYTHONPATH, or
    (None) the installed package; byte code cached as an installed package has it."""
    env = dict(os.environ, COLUMNS="100")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [os.environ.get("PYTHONPATH")])])
    else:
        env.pop("PYTHONPATH", None)
    return env


def commands(python: str, label: str, source: Path | None) -> list[dict]:
    """The splitopt commands run by ``python`` from the checkout ``source`` (None: installed)."""
    env = splitopt_env(source)
    return [{"label": label, "command": "splitopt " + " ".join(args), "argv": [python, "-m", "splitopt", *absolute(args)],
             "env": env, "cwd": source or ROOT, "splitopt_args": absolute(args)} for args in SPLITOPT_ARGS]


def absolute(args: list[str]) -> list[str]:
    """``args`` with this checkout's files as absolute paths: a checkout's commands run in
    it (``python -m`` puts the working directory first on ``sys.path``)."""
    return [str(ROOT / a) if (ROOT / a).is_file() else a for a in args]


def checkout_label(source: Path) -> str:
    """``source``'s name and commit (``git rev-parse --short HEAD``), with ``+`` where its
    tracked files differ from that commit."""
    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, timeout=60)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "?"
    dirty = "+" if git("status", "--porcelain", "--untracked-files=no") else ""
    return f"{commit}{dirty}"


def import_times(python: str, source: Path, args: list[str]) -> dict[str, float]:
    """Self import time (ms) per top-level package (splitopt: per subpackage, families per
    family) of one ``python -X importtime -m splitopt ARGS`` from ``source``."""
    proc = subprocess.run([python, "-X", "importtime", "-m", "splitopt", *absolute(args)], capture_output=True, text=True,
                          env=splitopt_env(source), cwd=source, timeout=600)
    total: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, self_us, _, name = [part.strip() for part in line.replace("import time:", "|", 1).split("|")]
        parts = name.split(".")
        key = ".".join(parts[:3] if parts[:2] == ["splitopt", "families"] else parts[:2] if parts[0] == "splitopt"
                       else parts[:1])
        total[key] = total.get(key, 0.0) + int(self_us) / 1000.0
    return total


def import_breakdown(python: str, trees: list[tuple[str, Path]], args: list[str], runs: int) -> dict[str, dict]:
    """Per checkout (label, path): :func:`import_times` of ``ARGS``, median of ``runs``
    rounds, each round running every checkout once in turn (side by side)."""
    per: dict[str, dict[str, list[float]]] = {label: {} for label, _ in trees}
    for r in range(runs):
        for label, tree in trees:
            total = import_times(python, tree, args)
            for key in set(per[label]) | set(total):
                per[label].setdefault(key, [0.0] * r).append(total.get(key, 0.0))
    return {label: {key: statistics.median(values) for key, values in times.items()} for label, times in per.items()}


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """Run ``argv`` once: (wall seconds, CPU seconds of it and its children, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def loaded(cmd: dict) -> list[str] | None:
    """The heavy packages a splitopt command had loaded when it exited (None for the references)."""
    if not cmd.get("splitopt_args"):
        return None
    python = cmd["argv"][0]
    proc = subprocess.run([python, "-c", REPORT_LOADED, *cmd["splitopt_args"]], capture_output=True, text=True,
                          env=cmd["env"], cwd=cmd["cwd"], timeout=600)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("LOADED")), "LOADED ?")
    return line.split()[1:]


#: what the import breakdown is taken of
BREAKDOWN_ARGS = {"solve": ["solve", INSTANCE], "--help": ["--help"]}
#: packages shown in the import breakdown: the most expensive ones
BREAKDOWN_ROWS = 14

#: how the command line keeps its start-up short (the code as it is; the tables above measure it)
HOW = """\
## What a command imports, and why

* `splitopt --help` imports typer, rich and the command modules; `import splitopt` loads the
  errors and the instance model alone (the reading code, `splitopt.api` with the schema and
  the families' protocol, is imported on first use).
* Reading an instance imports its problem's family alone (the families are asked in registry
  order, each imported only until one has the problem) and checks the instance against that
  family's part of the schema first; the whole schema, which imports every family, is built
  only where the instance does not meet it, and then words the defect. An instance whose
  layers are listed in an execution order is acyclic, so networkx is imported only to name a
  cycle where the order is broken.
* In the command line's own process (never in the library's, which is a guest in its
  caller's process), `splitopt.cli.deferred_imports` defers what two third-party modules
  import at module level for functions splitopt does not call: OR-Tools' `cp_model` imports
  pandas (for its pandas-indexed functions), typer's help formatter `rich.markdown`
  (markdown-it, pygments) and `rich.traceback` (attrs). They are imported where something
  uses them; the functions that use them work as before (`tests/test_startup.py`).
* CP-SAT's solver parameters need no protobuf module: checking solver options imports
  `sat_parameters_pb2` only where options are given.
* What is left for an edge/cloud `solve`: numpy and the OR-Tools library (`libortools`, loaded
  by the first of the relaxation's minimum cut and CP-SAT; CP-SAT imports numpy itself), the
  CP-SAT search with `--threads 2` (the default), and Python's own work: reading and checking
  the instance, the relaxation bound, the hint baselines (cloud-only, edge-only, u8), the
  program (built, then emitted for CP-SAT), the evaluator's re-check of the plan and the
  report. Of the exact backends CP-SAT proves this instance fastest (in one process, after
  the imports: CP-SAT 0.1-0.15 s, CBC 0.37 s, HiGHS 0.47 s); the family's polynomial
  reduction, the relaxation's minimum cut, bounds it at 133.2 ms against the optimum
  276.8 ms, so it proves nothing here.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="rounds; every command runs once per round")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also run the commands from this checkout (e.g. an earlier commit), side by side")
    parser.add_argument("--also", action="append", default=[], metavar="PYTHON",
                        help="also time the commands with this interpreter and the splitopt installed beside it")
    parser.add_argument("--imports", type=int, default=7, metavar="RUNS",
                        help="runs of -X importtime per command and checkout for the import breakdown (0: none)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()

    here = f"this checkout ({checkout_label(ROOT)})"
    before = None if args.before is None else f"before ({checkout_label(args.before.resolve())})"
    cmds = [{"label": "reference", "command": 'python -c "pass"', "argv": [sys.executable, "-c", "pass"],
             "env": dict(os.environ), "cwd": ROOT}]
    if args.before is not None:
        cmds += commands(sys.executable, before, args.before.resolve())
    cmds += commands(sys.executable, here, ROOT)
    for python in args.also:
        cmds += commands(python, f"installed ({python})", None)
    torch_version = version_of(sys.executable, "torch")
    if torch_version is not None:
        cmds.append({"label": "reference", "command": 'python -c "import torch"',
                     "argv": [sys.executable, "-c", "import torch"], "env": dict(os.environ), "cwd": ROOT})

    load_before = os.getloadavg()
    for cmd in cmds:  # one untimed run each: warms the file cache, and tells what it loads
        cmd["loaded"] = loaded(cmd)
        cmd["exit"] = timed(cmd["argv"], cmd["env"], cmd["cwd"])[2]
        cmd["wall_s"], cmd["cpu_s"] = [], []
    for r in range(args.repeats):
        for cmd in cmds:
            wall, cpu, code = timed(cmd["argv"], cmd["env"], cmd["cwd"])
            if code != cmd["exit"]:
                raise SystemExit(f"{cmd['command']}: exit status {code} in round {r + 1}, {cmd['exit']} before")
            cmd["wall_s"].append(wall)
            cmd["cpu_s"].append(cpu)
        print(f"round {r + 1}/{args.repeats} done", flush=True)
    breakdown: dict[str, dict[str, dict[str, float]]] = {}
    if args.imports > 0:
        trees = ([(before, args.before.resolve())] if args.before is not None else []) + [(here, ROOT)]
        for what, cli_args in BREAKDOWN_ARGS.items():
            breakdown[what] = import_breakdown(sys.executable, trees, cli_args, args.imports)
    load_after = os.getloadavg()

    rows = [{"label": c["label"], "command": c["command"], "exit": c["exit"], "loaded": c["loaded"],
             "median_wall_s": statistics.median(c["wall_s"]), "min_wall_s": min(c["wall_s"]),
             "median_cpu_s": statistics.median(c["cpu_s"]), "wall_s": c["wall_s"], "cpu_s": c["cpu_s"]}
            for c in cmds]
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "system": f"{platform.system()} {platform.release()}",
            "torch": torch_version, "repeats": args.repeats, "import_runs": args.imports,
            "this_checkout": here, "before": before,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps({"meta": meta, "rows": rows, "import_breakdown_ms": breakdown},
                                                      indent=1) + "\n")

    options = (f" --before {args.before}" if args.before is not None else "") + "".join(f" --also {p}" for p in args.also)
    lines = [
        "# Start-up time of the command line",
        "",
        f"`python benchmarks/startup.py --repeats {args.repeats}{options}`; {meta['cpu']}, {meta['cores']} cores "
        f"({meta['usable_cores']} usable), Python {meta['python']}, {meta['system']}"
        + (f", torch {torch_version}" if torch_version else ", torch not installed") + ".",
        "",
        f"Whole process, {args.repeats} rounds, every command once per round in turn (side by side). "
        "Wall: seconds from start to exit; CPU: user + system seconds of the process and its children "
        "(CBC for `solve`; CP-SAT's worker threads are the process's own). Load average (1, 5, 15 min) before: "
        f"{', '.join(map(str, meta['load_average_before']))}; after: {', '.join(map(str, meta['load_average_after']))} "
        f"on this machine ({meta['usable_cores']} cores, shared with other jobs when the load is above 1), so wall "
        "times include waiting for a core: CPU time is the steadier figure. "
        "splitopt runs as `python -m splitopt` with a checkout first on `PYTHONPATH`"
        + (f": {here} and, for comparison, {before}" if before else f": {here}")
        + (" or from the package installed in another venv (\"installed\"; a core-only venv: "
           "`python3 -m venv /tmp/corevenv && /tmp/corevenv/bin/pip install .`, no torch)" if args.also else "")
        + ", byte code cached. Heavy packages: which of " + ", ".join(HEAVY) + " the command had loaded when it exited.",
        "",
    ]
    if before is not None:
        by = {(r["label"], r["command"]): r for r in rows}
        lines += [f"## Side by side: {before} and {here}", "",
                  "| command | median wall s, before | median wall s, now | median CPU s, before | median CPU s, now "
                  "| CPU now / before |",
                  "|---|---:|---:|---:|---:|---:|"]
        for args_ in SPLITOPT_ARGS:
            command = "splitopt " + " ".join(args_)
            old, now = by[(before, command)], by[(here, command)]
            lines.append(f"| `{command}` | {old['median_wall_s']:.2f} | {now['median_wall_s']:.2f} | "
                         f"{old['median_cpu_s']:.2f} | {now['median_cpu_s']:.2f} | "
                         f"{now['median_cpu_s'] / old['median_cpu_s']:.2f} |")
        lines.append("")
    lines += ["## Every command", "",
              "| where | command | exit | median wall s | min wall s | median CPU s | heavy packages loaded |",
              "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        heavy = "-" if r["loaded"] is None else (", ".join(r["loaded"]) or "none")
        lines.append(f"| {r['label']} | `{r['command']}` | {r['exit']} | {r['median_wall_s']:.2f} | "
                     f"{r['min_wall_s']:.2f} | {r['median_cpu_s']:.2f} | {heavy} |")
    for what, per_tree in breakdown.items():
        labels = list(per_tree)
        packages = sorted({k for t in per_tree.values() for k in t}, key=lambda k: -max(t.get(k, 0.0)
                                                                                         for t in per_tree.values()))
        lines += ["", f"## Import breakdown: `splitopt {' '.join(BREAKDOWN_ARGS[what])}`", "",
                  f"`python -X importtime`, self time of every module summed per package (splitopt per subpackage, "
                  f"the families per family), ms, median of {args.imports} rounds (each runs every checkout once, in turn; "
                  f"`-X importtime` adds its own overhead to every import); the {BREAKDOWN_ROWS} most expensive.",
                  "",
                  "| package | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels),
                  "| all imports | " + " | ".join(f"{sum(per_tree[l].values()):.1f}" for l in labels) + " |"]
        for k in packages[:BREAKDOWN_ROWS]:
            lines.append(f"| {k} | " + " | ".join(f"{per_tree[l].get(k, 0.0):.1f}" for l in labels) + " |")
    lines += ["", HOW]
    (args.out / "startup.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
