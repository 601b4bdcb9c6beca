"""Progress of long work: the library's reporter (``splitopt.core.progress``) and the
command line's status line (``splitopt.cli.progress``)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from splitopt.api import load_instance
from splitopt.cli import app
from splitopt.cli import progress as view
from splitopt.core import progress
from splitopt.core.progress import Progress
from splitopt.solve import solve

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
TOY = Path(__file__).parent / "data" / "toy.json"


def incumbents(seen: list[Progress]) -> list[float]:
    """The distinct incumbents reported, in order."""
    out: list[float] = []
    for p in seen:
        if p.incumbent_ms is not None and (not out or p.incumbent_ms != out[-1]):
            out.append(p.incumbent_ms)
    return out


def test_library_is_silent_without_a_callback():
    assert progress.current() is None
    progress.report(1.0, 0.5)  # no-ops
    progress.step("point 1 of 2")
    with progress.phase("x"), progress.solving("y"):
        assert progress.current() is None
    with progress.reporting(None) as reporter:
        assert reporter is None and progress.current() is None


def test_reporter_keeps_the_best_incumbent_and_bound_per_solve():
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        with progress.solving("cpsat"), progress.phase("solving"):
            progress.report(10.0, 2.0)
            progress.report(12.0, 1.0)  # worse on both counts: no report
            progress.report(9.0, 3.0)
        with progress.solving("cpsat"):  # the next solve starts afresh
            progress.report(20.0)
    assert progress.current() is None
    shown = [(p.phase, p.incumbent_ms, p.bound_ms, p.solves) for p in seen]
    assert ("cpsat / solving", 10.0, 2.0, 1) in shown and ("cpsat / solving", 9.0, 3.0, 1) in shown
    assert all(p.incumbent_ms != 12.0 for p in seen)
    assert shown[-1] == ("cpsat", 20.0, None, 2)
    assert all(b.elapsed_s >= a.elapsed_s for a, b in zip(seen, seen[1:]))


def test_evolutionary_reports_improving_incumbents():
    inst = load_instance(INSTANCES / "googlenet_eyeriss.json")
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        result = solve(inst, "evolutionary", options={"evaluations": 60})
    found = incumbents(seen)
    assert len(found) >= 2 and found == sorted(found, reverse=True), found
    assert found[-1] == pytest.approx(result.objective, rel=1e-9)
    assert {"evolutionary / seeding", "evolutionary / searching"} <= {p.phase for p in seen}
    bounds = [p.bound_ms for p in seen if p.bound_ms is not None]
    assert bounds and all(b <= found[-1] + 1e-9 for b in bounds)


def test_cpsat_reports_its_solutions_and_bounds():
    inst = load_instance(INSTANCES / "jmsnas_mesh_threebranch.json")
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        result = solve(inst, "cpsat")
    found = incumbents(seen)
    assert len(found) >= 2 and found == sorted(found, reverse=True), found
    assert found[-1] == pytest.approx(result.objective, rel=1e-6)
    bounds = [p.bound_ms for p in seen if p.bound_ms is not None]
    assert bounds == sorted(bounds) and bounds[-1] <= found[-1] + 1e-6
    assert "cpsat / solving" in {p.phase for p in seen}


def test_auto_names_its_phases():
    inst = load_instance(INSTANCES / "jmsnas_mesh_threebranch.json")
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        solve(inst)
    assert "auto / probe (cpsat) / solving" in {p.phase for p in seen}
    assert incumbents(seen)


def test_progress_text_shows_incumbent_bound_and_gap():
    text = view.progress_text(Progress("auto / probe (cpsat) / solving", 3.0, 12.5, 10.0, 3), 3.04, total=12).plain
    assert text == "3.0 s  solve 3 of 12  auto / probe (cpsat) / solving  incumbent 12.5 ms  bound 10 ms  gap 20 %"
    assert view.progress_text(None, 2.5).plain == "2.5 s"


def test_status_line_on_a_terminal_shows_incumbent_and_bound():
    buf = io.StringIO()
    console = Console(force_terminal=True, file=buf, width=200)
    with view.showing_progress(console=console, delay_s=0.0) as line:
        assert line is not None
        with progress.solving("cpsat"):
            progress.report(12.5, 10.0)
            time.sleep(0.6)  # a few redraws
    out = buf.getvalue()
    assert "incumbent 12.5 ms" in out and "bound 10 ms" in out and "cpsat" in out
    assert progress.current() is None


def test_status_line_waits_and_stays_off_other_streams():
    buf = io.StringIO()
    with view.showing_progress(console=Console(force_terminal=True, file=buf), delay_s=5.0):
        progress.report(1.0)
    assert buf.getvalue() == ""  # ended before the delay: nothing drawn at all
    with view.showing_progress(console=Console(file=buf, force_terminal=False), delay_s=0.0) as line:
        assert line is None and progress.current() is None
    with view.showing_progress(quiet=True, console=Console(force_terminal=True, file=buf), delay_s=0.0) as line:
        assert line is None
    assert buf.getvalue() == ""


def _solve(*args: str, progress_env: str | None, monkeypatch):
    if progress_env is None:
        monkeypatch.delenv(view.ENV, raising=False)
    else:
        monkeypatch.setenv(view.ENV, progress_env)
    monkeypatch.setattr(view, "DELAY_S", 0.0)
    return CliRunner().invoke(app, ["solve", *args])


def test_json_stays_valid_with_progress_on(monkeypatch):
    res = _solve(str(INSTANCES / "jmsnas_mesh_threebranch.json"), "--json", progress_env="1",
                 monkeypatch=monkeypatch)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "OPTIMAL"
    assert "incumbent" in res.stderr  # the line was drawn, on stderr only


def test_quiet_and_captured_stderr_print_no_progress(monkeypatch):
    res = _solve(str(TOY), "--quiet", progress_env="1", monkeypatch=monkeypatch)
    assert res.exit_code == 0 and res.stderr == ""
    res = _solve(str(TOY), progress_env=None, monkeypatch=monkeypatch)  # not a terminal
    assert res.exit_code == 0 and res.stderr == ""
    assert "Status   OPTIMAL" in res.stdout


@pytest.mark.parametrize("command", [["pareto"], ["bandwidth", "--from", "1e6", "--to", "2e6"], ["sweep"],
                                     ["bench"], ["profile", "resnet50", "-o", "x.json"]])
def test_long_commands_take_quiet(command):
    res = CliRunner().invoke(app, [*command, "--help"])
    assert res.exit_code == 0 and "--quiet" in res.stdout


def test_sweep_quiet_drops_the_line_per_job(tmp_path):
    args = ["sweep", str(TOY), "-s", "cpsat", "-j", "1"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a.jsonl")])
    assert res.exit_code == 0, res.output
    assert "[1/1] toy.json cpsat seed 0: OPTIMAL" in res.stdout
    quiet = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b.jsonl"), "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    assert "[1/1]" not in quiet.stdout and "cpsat" in quiet.stdout  # the table still
