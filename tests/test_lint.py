"""The code checks: ruff (``[tool.ruff]`` in pyproject.toml) on the package, the tests, the
examples, the benchmarks, the instance scripts and the documentation's code, and mypy
(``[tool.mypy]``: the package) each find nothing. Both run as the test environment's own
executables (the ``test`` extra pins them), from the repository root where their
configuration lives; a failure shows what they found.

mypy keeps its cache in ``.mypy_cache`` (ignored by git): a run after a small change takes
a second or two; from no cache, as in CI, about 35 s (1.8 GB of memory)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what ruff checks
RUFF_PATHS = ("splitopt", "tests", "examples", "benchmarks", "instances", "docs")
#: a run past this is reported as a failure, not waited for
TIMEOUT_S = 900


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess:
    """Run the environment's ``name`` executable in the repository root."""
    exe = Path(sys.executable).parent / name
    assert exe.exists(), f"{exe}: not installed (pip install -e '.[test]')"
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)


def findings(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_ruff_finds_nothing():
    done = run_tool("ruff", "check", "--no-fix", *RUFF_PATHS)
    assert done.returncode == 0, findings(done)


def test_mypy_finds_nothing():
    done = run_tool("mypy")
    assert done.returncode == 0, findings(done)
