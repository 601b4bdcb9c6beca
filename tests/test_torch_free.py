"""The core runs without the torch extra: every core command works through the CLI entry
point (``splitopt.cli:main``, what the ``splitopt`` script calls) in a process where
``torch``, ``transformers`` and ``sklearn`` cannot be imported, and the torch bridge's
commands each say in one line that they need the torch extra (exit 3). And the commands
that only talk (``--help``, ``solvers``, ``schema``) load none of the heavy packages
(:data:`HEAVY`: start-up cost, ``benchmarks/startup.py``).

The packages are blocked by ``sys.modules[name] = None`` (an import of them raises
ImportError, ``importlib.util.find_spec`` returns None), so this runs in an environment
that has them; ``.ci/run`` also runs the same commands in a venv without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = str(ROOT / "instances" / "resnet50_eyeriss.json")
BLOCKED = ("torch", "transformers", "sklearn")
#: packages that the commands which only talk must not import (each costs 0.1-2 s at start-up)
HEAVY = ("torch", "networkx", "matplotlib", "numpy", "ortools", "pulp", "highspy", "jsonschema", "scipy")

#: run the CLI entry point with the torch extra's packages blocked; afterwards check
#: that none of them (nor a submodule) got into sys.modules some other way, and report
#: which of the HEAVY packages were loaded
PROGRAM = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
sys.argv = ["splitopt", *sys.argv[1:]]
from splitopt.cli import main
try:
    main()
finally:
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r} and sys.modules[m] is not None)
    if loaded:
        sys.stderr.write("loaded despite the block: " + ", ".join(loaded) + "\\n")
    heavy = sorted({{m.split(".")[0] for m in sys.modules if m.split(".")[0] in {HEAVY!r}
                     and sys.modules[m] is not None}})
    sys.stderr.write("heavy packages loaded: " + " ".join(heavy) + "\\n")
"""


def splitopt_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``splitopt ARGS`` through the entry point with torch, transformers, sklearn blocked."""
    env = dict(os.environ, COLUMNS="80")
    return subprocess.run([sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=300)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "loaded despite the block" not in proc.stderr, proc.stderr
    return proc


def heavy_loaded(proc: subprocess.CompletedProcess) -> list[str]:
    """The heavy packages the command had loaded when it finished."""
    line = next(l for l in proc.stderr.splitlines() if l.startswith("heavy packages loaded:"))
    return line.split(":", 1)[1].split()


def problem_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """Non-empty output lines, without the report of heavy packages."""
    text = proc.stdout + proc.stderr
    return [l for l in text.splitlines() if l.strip() and not l.startswith("heavy packages loaded:")]


def test_help_solvers_schema_validate():
    assert "solve" in ok(splitopt_cli("--help")).stdout
    assert "milp-cbc" in ok(splitopt_cli("solvers")).stdout
    schema = json.loads(ok(splitopt_cli("schema")).stdout)
    assert schema.get("type") == "object"
    assert ok(splitopt_cli("validate", INSTANCE)).stdout.startswith("ok:")


@pytest.mark.parametrize("args", [("--help",), ("solvers",), ("schema",)], ids=["help", "solvers", "schema"])
def test_commands_that_only_talk_load_no_heavy_package(args):
    assert heavy_loaded(ok(splitopt_cli(*args))) == []


def test_solve_evaluate_pareto(tmp_path):
    plan = tmp_path / "plan.json"
    out = ok(splitopt_cli("solve", INSTANCE, "-o", str(plan))).stdout
    assert "Status   OPTIMAL" in out and plan.exists()
    assert "Latency" in ok(splitopt_cli("evaluate", INSTANCE, str(plan))).stdout
    front = json.loads(ok(splitopt_cli("pareto", INSTANCE, "--points", "3", "--json")).stdout)
    assert len(front) == 3 and all(p["status"] == "OPTIMAL" for p in front)
    from splitopt.api import evaluate, load_instance, plan_from_dict
    from splitopt.solve import solve

    inst = load_instance(INSTANCE)
    # the last point has no error budget: its latency is the unconstrained optimum, found
    # here by another backend; every other point is slower
    fastest = solve(inst.with_settings(error_budget=None), "milp-highs").objective
    assert front[-1]["error_budget"] is None
    assert front[-1]["latency_ms"] == pytest.approx(fastest, rel=1e-6)
    assert all(p["latency_ms"] >= fastest * (1 - 1e-6) for p in front)
    # a trade-off: each point has less error and more latency than the next (none dominated)
    for a, b in zip(front, front[1:]):
        assert a["error"] < b["error"] and a["latency_ms"] > b["latency_ms"], (a, b)
    for point in front:  # each point's plan has the latency and error the front reports
        metrics = evaluate(inst, plan_from_dict(inst, point["plan"]))
        assert metrics.objective_ms == pytest.approx(point["latency_ms"], rel=1e-9)
        assert metrics.error == pytest.approx(point["error"], rel=1e-9)
        assert point["error_budget"] is None or point["error"] <= point["error_budget"]


@pytest.mark.parametrize("args", [
    ("profile", "resnet50", "-o", "{tmp}/x.json"),
    ("run", INSTANCE, "{tmp}/plan.json", "--model", "resnet50"),
    ("retrain",),
], ids=["profile", "run", "retrain"])
def test_torch_commands_say_they_need_the_extra(tmp_path, args):
    (tmp_path / "plan.json").write_text("{}")
    proc = splitopt_cli(*(a.format(tmp=tmp_path) for a in args))
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = problem_lines(proc)
    assert len(lines) == 1, lines
    assert "torch extra" in lines[0] and f"splitopt {args[0]}" in lines[0], lines[0]
    assert "splitopt[torch]" in lines[0], lines[0]
