"""``splitopt bench SUITE``: the suites are listed, the scale suite runs end to end on the
local pool (JSONL, table, CSV, plots), a second run resumes (runs nothing, the same
records, the generated instances regenerated identically), and bad input is one line
naming the option and value, exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from splitopt.cli.app import app
from splitopt.core.errors import InvalidOption
from splitopt.sweep.store import read_records

runner = CliRunner()


def one_line(res, *needles: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_list_prints_the_suites():
    res = runner.invoke(app, ["bench", "--list"])
    assert res.exit_code == 0, res.stderr
    for name in ("shipped", "peer", "scale"):
        assert any(line.startswith(name) for line in res.stdout.splitlines()), res.stdout
    assert "split_bits:" in res.stdout


def test_every_default_solver_exists():
    from splitopt.backends.registry import check_backend
    from splitopt.sweep.suites import default_solvers

    listed = default_solvers()
    assert "split_bits" in listed and "maxload/throughput" in listed and "scale chain" in listed
    for names in listed.values():
        for name in names:
            check_backend(name, {})


def test_scale_runs_end_to_end_and_resumes(tmp_path):
    out, md, csv, png = tmp_path / "runs.jsonl", tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "time.png"
    args = ["bench", "scale", "--sizes", "20,40", "-s", "cpsat", "-s", "cloud-only", "-s", "evolutionary", "-t", "3",
            "-j", "2", "-o", str(out), "--table", str(md), "--csv", str(csv), "--plot", str(png)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, (first.stdout, first.stderr)
    records = read_records(out)
    # cloud-only is an edge/cloud method: not run on the chain instances
    assert len(records) == 2 * 3 + 2 * 2
    assert all(r["status"] in ("OPTIMAL", "FEASIBLE") for r in records), [r.get("message") for r in records]
    for r in records:
        assert r["family"] in ("edge_cloud", "chain") and r["size"] in (20, 40) and r["size_unit"] == "layers"
        for key in ("build_s", "solve_s", "read_s", "wall_s", "cpu_s", "objective", "gap", "bound"):
            assert key in r, key
    assert all(r.get("anytime") for r in records if r["solver"] == "evolutionary")
    table = md.read_text()
    assert "| edge_cloud | split_bits | edge_cloud_split_bits_n20_s0.json | 20 | cpsat | 1 | 1 OPTIMAL |" in table
    assert table in first.stdout
    assert csv.read_text().splitlines()[0].startswith("family,problem,instance,size,solver,runs,statuses")
    assert png.stat().st_size > 0 and (tmp_path / "time_objective_vs_time.png").stat().st_size > 0

    # the same command again: nothing runs, the same records; the generated instances are
    # regenerated first (the cache removed), identically, or their keys would change
    cache = tmp_path / "runs-instances"
    before = {p.name: p.read_text() for p in cache.iterdir()}
    for p in cache.iterdir():
        p.unlink()
    again = runner.invoke(app, args)
    assert again.exit_code == 0, (again.stdout, again.stderr)
    assert "[1/" not in again.stdout  # no job ran
    assert read_records(out) == records
    assert {p.name: p.read_text() for p in cache.iterdir()} == before
    assert md.read_text() == table


def test_no_anytime_curve_draws_no_objective_plot(tmp_path):
    from splitopt.sweep.plots import plot_objective_vs_time, plot_time_vs_size

    records = [{"instance": "a.json", "solver": "cpsat", "seed": 0, "family": "chain", "problem": "chain",
                "size": n, "size_unit": "layers", "build_s": 0.1 * n, "solve_s": 0.2 * n} for n in (10, 100)]
    assert plot_objective_vs_time(records, tmp_path / "o.png") is None
    assert not (tmp_path / "o.png").exists()
    plot_time_vs_size(records, tmp_path / "t.svg")
    assert (tmp_path / "t.svg").stat().st_size > 0


@pytest.mark.parametrize("args, needles", [
    (["nope"], ("SUITE", "'nope'")),
    (["scale", "--sizes", "abc"], ("--sizes", "'abc'")),
    (["scale", "--sizes", "100,0"], ("--sizes", "'100,0'")),
    (["scale", "--sizes", "10,x"], ("--sizes", "'10,x'")),
    (["shipped", "--sizes", "100"], ("--sizes", "100")),
    (["peer", "--peer-dir", "MISSING"], ("--peer-dir", "MISSING")),
    (["shipped", "--instances-dir", "MISSING"], ("--instances-dir", "MISSING")),
    (["scale", "-s", "no-such-solver"], ("no-such-solver",)),
    (["scale", "--plot", "x.txt"], ("--plot", "x.txt")),
    ([], ("SUITE",)),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    args = [a.replace("MISSING", str(tmp_path / "missing")) for a in args]
    needles = tuple(n.replace("MISSING", str(tmp_path / "missing")) for n in needles)
    one_line(runner.invoke(app, ["bench", *args, "-o", str(tmp_path / "r.jsonl")]), *needles)
    assert not (tmp_path / "r.jsonl").exists()


def test_peer_default_folder_is_relative_to_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line(runner.invoke(app, ["bench", "peer", "-o", "r.jsonl"]), "--peer-dir",
             "../shared/peer-instances/dnn-partitioning")


def test_suite_sources_with_solvers(tmp_path):
    """The peer suite's latency files get no throughput-only method; ``-s`` keeps a family
    method only on its family's instances."""
    from splitopt.families.maxload.examples import random_maxload_data
    from splitopt.sweep.suites import SuiteOptions, peer_sources, scale_sources, solvers_for

    peer = tmp_path / "peer"
    for objective in ("throughput", "latency"):
        (peer / f"{objective}-inputs" / "LayerGraphs").mkdir(parents=True)
        (peer / f"{objective}-inputs" / "LayerGraphs" / "g.json").write_text(json.dumps(random_maxload_data(0)))
    sources = peer_sources(SuiteOptions(peer_dir=peer))
    assert [s.path.parent.parent.name for s in sources] == ["throughput-inputs", "latency-inputs"]
    assert "intervals" in sources[0].solvers and "intervals" not in sources[1].solvers
    # a file there that is not in the format is named, not skipped
    (peer / "latency-inputs" / "LayerGraphs" / "h.json").write_text(json.dumps({"nodes": []}))
    with pytest.raises(InvalidOption, match="h.json: not a format splitopt imports"):
        peer_sources(SuiteOptions(peer_dir=peer))
    scale = scale_sources(SuiteOptions(sizes=(5,), cache_dir=tmp_path / "cache"))
    chosen = solvers_for(scale, ["cloud-only", "cpsat"])
    assert [(s.family, names) for s, names in chosen] == [("edge_cloud", ("cloud-only", "cpsat")),
                                                        ("chain", ("cpsat",))]


def test_the_shipped_suite_skips_files_that_are_not_instances(tmp_path):
    """A JSON file whose settings are not an object (or that is not JSON) is not an
    instance of the suite: skipped, where it had raised AttributeError. An instance of a
    problem no family handles is an error naming the file and the problem."""
    from splitopt.families.edge_cloud.examples import random_instance_data
    from splitopt.sweep.suites import SuiteOptions, shipped_sources

    (tmp_path / "a.json").write_text(json.dumps({"settings": []}))
    (tmp_path / "b.json").write_text("{not json")
    (tmp_path / "c.json").write_text(json.dumps(random_instance_data(0, 4, edge_required=False)))
    options = SuiteOptions(cache_dir=tmp_path / "cache", instances_dir=tmp_path)
    sources = shipped_sources(options)
    assert [s.path.name for s in sources] == ["c.json"]
    assert sources[0].solvers[0] == "milp-cbc" and "u8" in sources[0].solvers
    unknown = random_instance_data(0, 4, edge_required=False)
    unknown["settings"]["problem"] = "teleport"
    (tmp_path / "d.json").write_text(json.dumps(unknown))
    with pytest.raises(InvalidOption, match="d.json: .*unknown problem 'teleport'"):
        shipped_sources(options)


def test_bench_refuses_a_plot_whose_second_image_cannot_be_written(tmp_path):
    (tmp_path / "p_objective_vs_time.png").mkdir()
    result = CliRunner().invoke(app, ["bench", "shipped", "--plot", str(tmp_path / "p.png"),
                                      "--out", str(tmp_path / "b.jsonl")])
    assert result.exit_code == 2 and "p_objective_vs_time.png" in result.output, result.output
    assert not (tmp_path / "b.jsonl").exists()  # refused before any job ran
