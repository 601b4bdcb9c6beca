"""What the generic layers ask the families, called as a library (no command line):
changing an instance's problem, objective and family options (``api.adjust_instance``),
the Pareto front of each family that has one, a plan's one-line description and its
picture, the links a bandwidth sweep varies and the sweep's JSON table, the suites'
default solvers, and the peer evaluator's report."""

from __future__ import annotations

from pathlib import Path

import pytest

from splitopt.families.edge_cloud.data import uplink
from splitopt.analysis.breakpoints import PLAN_COLUMN, bandwidth_sweep, plan_text, resolve_link, sweep_table
from splitopt.analysis.pareto import pareto_front
from splitopt.api import adjust_instance, load_instance, plan_from_dict
from splitopt.core.drawing import Gantt, Pipeline, Timeline
from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.front import Front
from splitopt.families.chain.examples import random_chain_instance
from splitopt.families.edge_cloud.examples import random_instance
from splitopt.families.registry import family, family_of
from splitopt.solve import solve

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "data" / "toy.json"
CHAIN = ROOT / "instances" / "jmsnas_chain_mobilenetv2.json"
PEER = ROOT / "tests" / "data" / "maxload_bert24_first8.json"


# ----- changing an instance -----------------------------------------------------------------

def test_adjust_instance_changes_the_problem_within_its_family_only():
    toy = load_instance(TOY)
    other = "split" if toy.problem == "split_bits" else "split_bits"
    changed = adjust_instance(toy, problem=other)
    assert changed.problem == other and toy.problem != other
    assert adjust_instance(toy, problem=toy.problem) is toy
    chain = load_instance(CHAIN)
    with pytest.raises(NotApplicable, match=r"^problem split: applies to edge_cloud instances \(split, split_bits\), "
                                            r"not to problem 'chain'$"):
        adjust_instance(chain, problem="split")
    with pytest.raises(InvalidOption, match=r"^--problem teleport: unknown problem \(problems: split, "):
        adjust_instance(chain, problem="teleport", prefix="--")


def test_adjust_instance_changes_the_objective_through_the_family():
    chain = adjust_instance(load_instance(CHAIN), objective="throughput")
    assert chain.objective == "throughput"
    with pytest.raises(InvalidOption, match="objective throughput: problem 'split.*' has objectives latency"):
        adjust_instance(load_instance(TOY), objective="throughput")
    peer = load_instance(PEER)
    other = "latency" if peer.objective == "throughput" else "throughput"
    assert adjust_instance(peer, objective=other).objective == other  # not a core instance: the family's way


def test_adjust_instance_applies_family_options_where_the_family_takes_them():
    peer = load_instance(PEER)
    assert adjust_instance(peer, options={"contiguity": "authors"}).contiguity == "authors"
    with pytest.raises(InvalidOption, match="--contiguity paper: must be one of splitopt, authors"):
        adjust_instance(peer, options={"contiguity": "paper"}, prefix="--")
    with pytest.raises(NotApplicable, match="^contiguity authors: applies to problem maxload, not to problem 'split"):
        adjust_instance(load_instance(TOY), options={"contiguity": "authors"})


# ----- fronts -------------------------------------------------------------------------------

def test_a_separable_front_from_the_library():
    inst = family("separable").random_instance(3)
    front = pareto_front(inst, points=3)
    assert isinstance(front, Front) and front.mode is None and 1 <= len(front.points) <= 3
    assert [p.measure for p in front.points] == sorted((p.measure for p in front.points), reverse=True)
    assert len(front.rows) == len(front.records) == len(front.points)
    for p, record in zip(front.points, front.records):
        assert record["bytes"] == p.measure == p.result.metrics.total_bytes
        assert plan_from_dict(inst, record["plan"]).key() == p.result.plan.key()


def test_an_edge_cloud_front_runs_split_bits_and_keeps_its_mode():
    inst = load_instance(TOY)
    front = pareto_front(inst, solver="cpsat", mode="grid", points=3)
    assert front.instance.problem == "split_bits" and front.mode == "grid"
    assert front.columns[0] == "error" and all("error_budget" in r for r in front.records)


def test_a_family_without_a_front_and_a_bad_mode_are_refused():
    with pytest.raises(NotApplicable, match="problem 'chain' has no Pareto front; fronts are defined for split, "
                                            r"split_bits \(latency / error\)"):
        pareto_front(load_instance(CHAIN))
    with pytest.raises(InvalidOption, match="mode: must be one of exact, grid"):
        pareto_front(load_instance(TOY), mode="corners")


# ----- plans described and drawn ----------------------------------------------------------------

def test_a_plan_in_one_line():
    toy = load_instance(TOY)
    cloud = solve(toy, "cloud-only").plan
    assert plan_text(toy, cloud) == f"cloud-only ({toy.settings.cloud})"
    chain = random_chain_instance(0, 6, 3)
    plan = solve(chain, "brute-force").plan
    text = family_of(chain).describe_plan(chain, plan)  # the base's: layers per device, in instance order
    counts = [int(part.split()[-1]) for part in text.split(" | ")]
    assert sum(counts) == len(chain.layers) and text.split()[0] in chain.device_by_name
    assert plan_text(chain, plan, limit=2) == text[:2] + "..." and plan_text(chain, plan, limit=len(text)) == text


def test_each_family_says_what_its_plan_picture_is():
    toy = load_instance(TOY)
    drawing = family_of(toy).plan_drawing(toy, solve(toy, "brute-force").metrics)
    assert isinstance(drawing, Timeline) and [row.split()[0] for row, _, _, _ in drawing.bars] == \
        ["edge", "uplink", "cloud"]
    chain = random_chain_instance(2, 8, 3, objective="throughput")
    m = solve(chain, "brute-force").metrics
    assert isinstance(family_of(chain).plan_drawing(chain, m), Pipeline)
    latency = adjust_instance(chain, objective="latency")
    assert isinstance(family_of(latency).plan_drawing(latency, solve(latency, "brute-force").metrics), Gantt)
    assert family_of(toy).draws_plans(toy) and not family_of(toy).has_schedule


# ----- bandwidth ------------------------------------------------------------------------------

def test_the_link_a_sweep_varies_by_default_is_the_family_s():
    toy = load_instance(TOY)
    assert resolve_link(toy, None) is uplink(toy)
    two = random_chain_instance(1, 5, 2)
    assert resolve_link(two, None) is family_of(two).bandwidth_links(two)[0]
    with pytest.raises(InvalidOption, match="give the link to vary"):
        resolve_link(load_instance(CHAIN), None)
    with pytest.raises(NotApplicable, match="no links with a bandwidth of their own"):
        resolve_link(load_instance(PEER), None)


def test_the_sweep_table_without_the_command_line():
    inst = random_instance(2, 6, problem="split")
    link = resolve_link(inst, None)
    sweep = bandwidth_sweep(inst, link, 1e5, 1e9, points=3, solver="brute-force")
    data = sweep_table(inst, link, sweep, 1e5, 1e9, "brute-force")
    assert data["format"] == "splitopt-bandwidth-sweep/1" and data["solver"] == "brute-force"
    assert [p["bandwidth"] for p in data["points"]] == [p.bandwidth for p in sweep]
    for row, p in zip(data["points"], sweep):
        assert row[PLAN_COLUMN] == plan_text(inst, p.result.plan) and row["bytes_sent"] is not None
        assert plan_from_dict(inst, row["plan"]).key() == p.result.plan.key()
    chain = adjust_instance(random_chain_instance(1, 5, 2), objective="throughput")
    link = resolve_link(chain, None)
    data = sweep_table(chain, link, bandwidth_sweep(chain, link, 1e6, 1e8, points=2, solver="brute-force"), 1e6, 1e8,
                       None)
    assert data["solver"] == "auto" and all(row["bytes_sent"] is None for row in data["points"])  # not affine


def test_the_breakpoint_plot_from_the_library(tmp_path):
    from splitopt.analysis.breakpoints import bandwidth_breakpoints
    from splitopt.analysis.plots import plot_breakpoints

    inst = random_instance(2, 9, problem="split")
    table = bandwidth_breakpoints(inst, None, 1e3, 1e12, solver="brute-force")
    fig = plot_breakpoints(inst, table, tmp_path / "b.png")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert (tmp_path / "b.png").stat().st_size > 0
    assert [label for label in labels if not label.startswith("_")] == \
        [plan_text(inst, iv.plan, limit=40) for iv in table.intervals]


# ----- suites and the peer report ------------------------------------------------------------------

def test_default_solvers_follow_problem_and_objective():
    edge_cloud, maxload = family("edge_cloud"), family("maxload")
    assert "neurosurgeon" in edge_cloud.default_solvers("split", "latency")
    assert "auto-split" in edge_cloud.default_solvers("split_bits", "latency")
    assert "neurosurgeon" not in edge_cloud.default_solvers("split_bits", "latency")
    assert edge_cloud.default_solvers("split", "latency")[0] == "milp-cbc"  # the family's default backend first
    assert "intervals" in maxload.default_solvers("maxload", "throughput")
    assert "intervals" not in maxload.default_solvers("maxload", "latency")


def test_the_peer_report_and_who_has_one():
    peer = load_instance(PEER)
    fam = family_of(peer)
    report = fam.foreign_report(peer, solve(peer, "all-on-cpu").metrics)
    assert set(report) == {"instance", "max_load_ms", "loads_ms", "latency_ms", "violations"}
    toy = load_instance(TOY)
    with pytest.raises(NotApplicable, match="not read from a foreign format"):
        family_of(toy).foreign_report(toy, solve(toy, "cloud-only").metrics)


def test_the_command_line_checks_problem_and_family_options_before_reading(tmp_path):
    from typer.testing import CliRunner

    from splitopt.cli.app import app

    missing = str(tmp_path / "missing.json")  # never read: the options are refused first
    for args, needle in ((["solve", missing, "--problem", "teleport"], "--problem teleport: unknown problem"),
                         (["solve", missing, "--contiguity", "paper"], "--contiguity paper: must be one of "
                                                                       "splitopt, authors"),
                         (["evaluate", missing, missing, "--contiguity", "paper"], "--contiguity paper")):
        res = CliRunner().invoke(app, args)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and needle in lines[0], (args, res.stderr)
