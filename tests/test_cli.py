"""The command line as a user runs it: exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TOY = DATA / "toy.json"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="60")  # narrow: errors must still be one line
    return subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_solve_text_report():
    proc = run("solve", str(TOY))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Status   OPTIMAL" in out
    assert "edge-only: all 3 layers on 'eyeriss'" in out
    assert "Memory" in out and "of limit 1,000,000 B" in out


def test_solve_json_plan_round_trips_through_evaluate(tmp_path):
    proc = run("solve", str(TOY), "--solver", "cpsat", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "OPTIMAL" and data["solver"] == "cpsat"
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(data["plan"]))
    proc = run("evaluate", str(TOY), str(plan_path), "--json")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)["metrics"]
    assert metrics["total_ms"] == pytest.approx(data["objective_ms"], rel=1e-9)
    assert metrics["edge_memory_bytes"] == pytest.approx(data["metrics"]["edge_memory_bytes"])
    # the whole `solve --json` output is accepted as a plan too
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(data))
    assert run("evaluate", str(TOY), str(whole)).returncode == 0


def test_solve_output_and_export(tmp_path):
    plan, model = tmp_path / "p.json", tmp_path / "m.lp"
    proc = run("solve", str(TOY), "-o", str(plan), "--export-model", str(model))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(plan.read_text())["format"] == "splitopt-plan/1"
    assert "Minimize" in model.read_text() or "MINIMIZE" in model.read_text()


def test_validate_and_solvers_and_schema():
    proc = run("validate", str(TOY))
    assert proc.returncode == 0 and "ok: toy: 3 layers" in proc.stdout
    proc = run("solvers", "--json")
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["milp-cbc"]["installed"] and rows["cpsat"]["kind"] == "exact"
    assert json.loads(run("schema").stdout)["title"] == "splitopt instance"


def test_pareto_json_is_a_front():
    proc = run("pareto", str(TOY), "--json")
    assert proc.returncode == 0, proc.stderr
    front = json.loads(proc.stdout)
    assert len(front) >= 2
    errors = [p["error"] for p in front]
    lat = [p["latency_ms"] for p in front]
    assert errors == sorted(errors) and lat == sorted(lat, reverse=True)
    assert errors[0] == 0.0  # the least-error corner: cloud-only


def test_infeasible_exit_code_and_reason(tmp_path):
    data = json.loads(TOY.read_text())
    data["settings"].update(edge_required=["c"], error_budget=1e-4)
    path = tmp_path / "inf.json"
    path.write_text(json.dumps(data))
    proc = run("solve", str(path))
    assert proc.returncode == 4
    assert "INFEASIBLE" in proc.stdout and "error budget 0.0001" in proc.stdout


@pytest.mark.parametrize(
    "mutate,needles",
    [
        (lambda d: d["graph"]["layers"][0].update(macs=-5), ["instance.graph.layers[0].macs", "-5"]),
        (lambda d: d["graph"]["layers"][1].update(inputs=["nope"]), ["layers[1].inputs", "'nope'", "dangling"]),
        (lambda d: d["graph"]["layers"][0].update(inputs=["c"]), ["cycle"]),
        (lambda d: d["settings"].update(edge="gpu"), ["instance.settings.edge", "'gpu'"]),
        (lambda d: d["settings"].update(bit_widths=[3, 8]), ["instance.settings.bit_widths", "3 bits"]),
        (lambda d: d["devices"][0].update(mac_per_s=float("nan")), ["instance.devices[0].mac_per_s", "nan"]),
    ],
)
def test_bad_instances_give_one_line_and_exit_2(tmp_path, mutate, needles):
    data = json.loads(TOY.read_text())
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert_one_line_error(run("solve", str(path)), 2, *needles)


def test_malformed_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": ')
    assert_one_line_error(run("solve", str(bad)), 2, "malformed JSON", "line 1")
    assert_one_line_error(run("validate", str(tmp_path / "none.json")), 2, "cannot read file")


def test_unknown_solver_lists_available():
    assert_one_line_error(run("solve", str(TOY), "--solver", "gurobi"), 2, "unknown solver 'gurobi'", "milp-cbc")


def test_plan_not_matching_instance(tmp_path):
    plan = {"format": "splitopt-plan/1", "layers": {"a": {"device": "eyeriss", "weight_bits": 3, "activation_bits": 8},
                                                    "b": {"device": "tpu"}, "c": {"device": "tpu"}}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert_one_line_error(run("evaluate", str(TOY), str(path)), 2, "layers.a.weight_bits", "3 bits")
    plan["layers"]["zz"] = {"device": "tpu"}
    path.write_text(json.dumps(plan))
    assert_one_line_error(run("evaluate", str(TOY), str(path)), 2, "zz", "unknown layer")


def test_export_with_wrong_suffix(tmp_path):
    assert_one_line_error(run("solve", str(TOY), "--export-model", str(tmp_path / "m.xyz")), 2, ".lp, .mps")


@pytest.mark.parametrize("solver,marker", [("milp-cbc", "Cbc"), ("milp-highs", "HiGHS"), ("cpsat", "CP-SAT")])
def test_verbose_streams_the_solver_log_to_stderr_and_keeps_json_clean(solver, marker):
    proc = run("solve", str(TOY), "--solver", solver, "--json", "--verbose")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "OPTIMAL"  # stdout is JSON only
    assert marker.lower() in proc.stderr.lower() and len(proc.stderr.splitlines()) > 10


def test_dnnp_eval_on_a_peer_instance():
    root = Path(__file__).resolve().parents[2] / "shared" / "peer-instances" / "dnn-partitioning"
    if not root.exists():
        pytest.skip("peer instances not beside the checkout")
    proc = run("dnnp-eval", str(root / "throughput-inputs/LayerGraphs/bert24_inference.json"),
               str(root / "human-experts/bert24_inference_expert.json"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["violations"] == []
    assert data["max_load_ms"] == pytest.approx(max(data["loads_ms"].values()))


def _command_paths():
    """Every command of the CLI, a group's subcommands included, as argument lists."""
    import typer.main

    from splitopt.cli.app import app

    def walk(command, path):
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                yield from walk(sub, [*path, name])
        if path:
            yield path

    return list(walk(typer.main.get_command(app), []))


def test_every_command_prints_its_help():
    """Each help text renders (rich markup in an option's help, e.g. ``[/RATE]``, must be
    escaped: unescaped it raised MarkupError instead of printing the help)."""
    from typer.testing import CliRunner

    from splitopt.cli.app import app

    paths = _command_paths()
    assert ["testbed", "up"] in paths and ["agent"] in paths
    for path in paths:
        res = CliRunner().invoke(app, [*path, "--help"])
        assert res.exit_code == 0 and "Usage" in res.stdout, (path, res.stdout[-400:], res.exception)
