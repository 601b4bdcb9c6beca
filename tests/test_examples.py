"""The examples gallery: every script of ``examples/`` runs as a user would run it (its own
process, from another directory), within a time bound, exits 0 and prints what it
promises. A new example needs its line in ``EXPECTED``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))

#: per script: the extras it needs, a bound on its wall time (s), and patterns its output must match
EXPECTED: dict[str, tuple[tuple[str, ...], float, tuple[str, ...]]] = {
    "library_use.py": ((), 120, (
        r"status\s+OPTIMAL",
        r"objective 276\.760 ms",
        r"edge layer conv1: weights at 6 bits, activations at 6 bits",
        r"cloud only: 405\.378 ms, meets every limit",
        r"edge only, 8 bits: .* breaks: edge memory",
    )),
    "scenario_sweep.py": ((), 300, (
        r"\s3\s+4\s+OPTIMAL\s+276\.760\s+2\s+100,352\s+maxpool",
        r"\s300\s+4\s+OPTIMAL\s+7\.985\s+0\s+150,528\s+-",
        r"\s0\.1\s+64\s+OPTIMAL\s+184\.103\s+72\s+0\s+fc",
    )),
    "profile_solve_run.py": (("torch",), 300, (
        r"wrote .*profiled\.json: 6 layers",
        r"solve: OPTIMAL, .* edge layers \['0', '3'\], sent 512 B",
        r"512\.0 B/sample \(evaluator 512\.0 B\)",
        r"\nOK\n",
    )),
    "llm_context_sweep.py": ((), 300, (
        r"\s2,048\s+OPTIMAL\s+15\.140\s+66\.05\s+2\.52x the optimum\s+20\.07x the optimum\s+rtx4090 blocks \[0, 32\)",
        r"\s131,072\s+OPTIMAL\s+48\.315\s+20\.70\s+does not fit\s+does not fit\s+macbook_m1max blocks \[0, 11\) "
        r"\+embedding; rtx4090 blocks \[11, 32\) \+head",
    )),
    "pareto_plot.py": ((), 300, (
        r"none\s+[\d.]+\s+141\.849\s+OPTIMAL",
        r"\s0\s+405\.378\s+OPTIMAL\s+0",
        r"wrote pareto_resnet50\.png \([\d,]+ B\): \d+ points",
    )),
    "ray_sweep.py": (("ray",), 300, (
        r"6 jobs on Ray",
        r"resnet50_eyeriss\.json \| cpsat \| 1 OPTIMAL \| 276\.760",
        r"jmsnas_chain_mobilenetv2\.json \| milp-highs \| 1 OPTIMAL \| 38\.986",
        r"resumed from the store: same records, nothing re-run",
    )),
}


def test_every_example_has_its_expectations():
    assert {p.name for p in SCRIPTS} == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_example_runs(script, tmp_path):
    extras, bound_s, patterns = EXPECTED[script.name]
    for extra in extras:
        pytest.importorskip(extra, reason=f"the example needs the {extra} extra")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("MPLBACKEND", "Agg")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=bound_s)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    for pattern in patterns:
        assert re.search(pattern, output), f"{script.name}: no match for {pattern!r} in:\n{output[-4000:]}"
    if script.name == "pareto_plot.py":
        png = tmp_path / "pareto_resnet50.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
