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

from splitopt.analysis.pareto import pareto_front
from splitopt.api import load_instance
from splitopt.backends.cbc import progress_in_cbc_line
from splitopt.backends.milp import PROGRESS_MARK, LogTail
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


@pytest.mark.parametrize("solver", ["milp-cbc", "milp-highs"])
def test_milp_children_report_incumbents_and_bounds_while_they_run(solver):
    # CBC and HiGHS run as child processes: what they find comes from their logs (CBC's
    # own lines, HiGHS's child's progress lines), in ms with the program's constant
    inst = load_instance(INSTANCES / "resnet50_eyeriss.json")
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        result = solve(inst, solver, time_limit=120)
    assert result.status.value == "OPTIMAL"
    solving = [p for p in seen if p.phase.endswith("solving")]
    found = incumbents(solving)
    assert found and found[-1] == pytest.approx(result.objective, rel=1e-6), found
    bounds = [p.bound_ms for p in solving if p.bound_ms is not None]
    assert bounds == sorted(bounds) and bounds[-1] <= result.objective + 1e-3
    assert bounds[-1] == pytest.approx(result.objective, rel=1e-3)  # the child's own bound, not only the start's


def test_cbc_log_lines_give_incumbents_and_bounds():
    read = progress_in_cbc_line
    assert read("Continuous objective value is 0.647137 - 0.03 seconds") == (None, 0.647137)
    assert read("Cbc0012I Integer solution of 0.88492333 found by feasibility pump after 0 iterations") == (
        0.88492333, None)
    assert read("Cbc0004I Integer solution of 22 found after 1433 iterations and 12 nodes (0.90 seconds)") == (22.0, None)
    assert read("Cbc0010I After 100 nodes, 19 on tree, 0.88492333 best solution, best possible 0.72640817 "
                "(11.25 seconds)") == (0.88492333, 0.72640817)
    assert read("Cbc0010I After 0 nodes, 1 on tree, 1e+50 best solution, best possible 2.5 (0.1 seconds)") == (
        1e50, 2.5)  # no incumbent yet: the reader drops values of 1e30 and more
    assert read("Cbc0013I At root node, 25 cuts changed objective from 0.66876493 to 0.72640817 in 25 passes") == (
        None, 0.72640817)
    assert read("Cbc0005I Partial search - best objective 0.88 (best possible 0.72), took 37291 iterations") == (
        0.88, 0.72)
    assert read("Cbc0038I Full problem 120 rows 80 columns") is None


def test_log_tail_hands_over_whole_lines_and_hides_progress_lines(tmp_path, capsys):
    log = tmp_path / "solver.log"
    log.write_text("")
    lines: list[str] = []
    with LogTail(str(log), echo=True, on_line=lines.append):
        with open(log, "a") as f:
            f.write("first li")
            f.flush()
            time.sleep(3 * LogTail.POLL_S)
            f.write(f"ne\n{PROGRESS_MARK} 12.5 10.0\nlast")
            f.flush()
            time.sleep(3 * LogTail.POLL_S)
    assert lines[:2] == ["first line", f"{PROGRESS_MARK} 12.5 10.0"] and lines[2:] == ["last"]
    err = capsys.readouterr().err
    assert "first line" in err and "last" in err and PROGRESS_MARK not in err


def test_pareto_names_each_point_it_solves():
    inst = load_instance(INSTANCES / "resnet50_eyeriss.json")
    seen: list[Progress] = []
    with progress.reporting(seen.append):
        front = pareto_front(inst, "milp-highs", mode="grid", points=3)
    steps = list(dict.fromkeys(p.step for p in seen if p.step))
    assert steps[0] == "point 1 of 3: no error budget" and steps[1].startswith("point 2 of 3: error budget 0")
    assert steps[-1].startswith("point 3 of 3") and len(steps) == 3 and front.points
    assert seen[-1].step == ""  # cleared when the sweep ends


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
