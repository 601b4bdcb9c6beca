"""``splitopt bandwidth`` and ``splitopt.analysis.breakpoints``: the exact bandwidth
breakpoints against fresh solves and against the lower envelope of every plan's line
(brute force), the sweep, the JSON table, and one-line errors."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import splitopt
from splitopt.analysis.breakpoints import (bandwidth_breakpoints, bandwidth_sweep, log_points, plan_line,
                                           resolve_link, with_bandwidth)
from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.result import Status
from splitopt.families.registry import family_of
from splitopt.solve import solve
from splitopt.families.edge_cloud.examples import random_instance
from splitopt.families.edge_cloud.plan import edge_layers

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "instances" / "resnet50_eyeriss.json"
CHAIN = ROOT / "instances" / "jmsnas_chain_mobilenetv2.json"
RTOL = 1e-6


def run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="60")  # narrow: errors must still be one line
    return subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def geometric_mid(a: float, b: float) -> float:
    return math.sqrt(a * b)


def check_table(inst, table, solver: str) -> None:
    """Each interval's plan is optimal at both ends and in the middle (a fresh solve by
    ``solver``), its line is the evaluator's, and adjacent intervals differ."""
    link = resolve_link(inst, "->".join(table.link))
    fam = family_of(inst)
    assert table.intervals and table.proven
    assert table.intervals[0].bandwidth_from == table.low and table.intervals[-1].bandwidth_to == table.high
    for iv, nxt in zip(table.intervals, table.intervals[1:]):
        assert iv.bandwidth_to == nxt.bandwidth_from
        assert iv.plan.key() != nxt.plan.key()
        assert abs(iv.line.b - nxt.line.b) > 1e-9 * max(abs(iv.line.b), 1.0)  # different lines, not ties
    for iv in table.intervals:
        for bw in (iv.bandwidth_from, geometric_mid(iv.bandwidth_from, iv.bandwidth_to), iv.bandwidth_to):
            variant = with_bandwidth(inst, link, bw)
            fresh = solve(variant, solver, diagnose=False)
            assert fresh.status is Status.OPTIMAL
            value = fam.evaluate(variant, iv.plan).objective_ms
            assert value == pytest.approx(iv.line.at_bandwidth(bw), rel=1e-9)
            assert value <= fresh.objective * (1 + RTOL) + 1e-9, (bw, value, fresh.objective)


def envelope_breakpoints(lines: list[tuple[float, float]], x_lo: float, x_hi: float) -> list[float]:
    """Breakpoints (in x) of min over lines (a, b) of a + b x on [x_lo, x_hi]: walk right
    from x_lo, each time to the first crossing with a line of smaller slope."""
    def key(line):
        return (line[0] + line[1] * x_lo, line[1])

    cur = min(lines, key=key)
    x, out = x_lo, []
    while True:
        best = None
        for a, b in lines:
            if b < cur[1] - 1e-12 * abs(cur[1]):
                xs = (a - cur[0]) / (cur[1] - b)
                if xs > x * (1 + 1e-12) and (best is None or (xs, b) < best[:2]):
                    best = (xs, b, (a, b))
        if best is None or best[0] >= x_hi:
            return out
        # among lines through the crossing, continue with the least slope
        x = best[0]
        through = [l for l in lines if abs(l[0] + l[1] * x - (cur[0] + cur[1] * x)) <= 1e-9 * abs(cur[0] + cur[1] * x)]
        cur = min(through, key=lambda l: l[1])
        out.append(x)


def feasible_lines(inst, low: float, high: float) -> list[tuple[float, float]]:
    fam = family_of(inst)
    link = resolve_link(inst, None)
    out = {}
    for plan in fam.enumerate_plans(inst, 10**6):
        if not fam.evaluate(inst, plan).feasible:
            continue
        line = plan_line(inst, link, plan, low, high)
        out[(round(line.a_ms, 9), round(line.b, 3))] = (line.a_ms, line.b)
    return list(out.values())


# ----- library ---------------------------------------------------------------------------------

def test_resnet50_table_matches_cbc_and_set_override():
    inst = splitopt.load_instance(RESNET)
    table = bandwidth_breakpoints(inst, None, 1e5, 1e9)
    assert table.link == ("eyeriss", "tpu")
    # the 2-layer split until the image is cheaper to send than the pooled map plus edge work
    assert len(table.breakpoints) == 1 and 5e7 < table.breakpoints[0] < 1e8
    check_table(inst, table, "milp-cbc")
    # the line is the one the --set route gives
    iv = table.intervals[0]
    bw = 4.2e6
    via_set = splitopt.load_instance(RESNET, overrides=[f"links[eyeriss->tpu].bandwidth_bits_per_s={bw}"])
    assert splitopt.evaluate(via_set, iv.plan).total_ms == pytest.approx(iv.line.at_bandwidth(bw), rel=1e-12)
    # b = 1000 x the bits sent (ms units)
    sent = splitopt.evaluate(inst, iv.plan).transmitted_bytes
    assert iv.line.b == pytest.approx(8000.0 * sent, rel=1e-9)
    assert table.lookup(1e6) is iv and table.lookup(1e9) is table.intervals[-1]


def test_resnet50_table_8_range_has_one_interval():
    inst = splitopt.load_instance(RESNET)
    table = bandwidth_breakpoints(inst, None, 1e6, 2e7)
    assert table.breakpoints == [] and table.proven and table.solves == 2
    assert edge_layers(inst, table.intervals[0].plan) == ["conv1", "maxpool"]


@pytest.mark.parametrize("seed,kwargs", [(0, dict(n_layers=5, bit_widths=[4, 8])),
                                         (3, dict(n_layers=5, bit_widths=[4, 8])),
                                         (2, dict(n_layers=9, problem="split")),
                                         (1, dict(n_layers=9, problem="split")),
                                         (5, dict(n_layers=5, bit_widths=[4, 8]))])
def test_random_instances_match_the_brute_force_envelope(seed, kwargs):
    inst = random_instance(seed, **kwargs)
    low, high = 1e3, 1e12
    lines = feasible_lines(inst, low, high)
    expected = sorted(1.0 / x for x in envelope_breakpoints(lines, 1.0 / high, 1.0 / low))
    for solver in ("brute-force", "cpsat"):
        table = bandwidth_breakpoints(inst, None, low, high, solver=solver)
        assert table.proven, table.notes
        assert len(table.breakpoints) == len(expected), (solver, table.breakpoints, expected)
        for got, want in zip(table.breakpoints, expected):
            assert got == pytest.approx(want, rel=1e-6)
        # at most 2 solves per line of the envelope, plus the ends
        assert table.solves <= 2 * len(table.intervals) + 1
    check_table(inst, table, "brute-force")


def test_some_random_instance_has_several_breakpoints():
    inst = random_instance(2, 9, problem="split")
    table = bandwidth_breakpoints(inst, None, 1e3, 1e12, solver="brute-force")
    assert len(table.breakpoints) >= 2


def test_chain_latency_breakpoints_and_throughput_refused():
    inst = splitopt.load_instance(CHAIN)
    table = bandwidth_breakpoints(inst, "UE->SBS", 1e6, 1e9, solver="cpsat")
    assert len(table.breakpoints) >= 2
    check_table(inst, table, "cpsat")
    with pytest.raises(InvalidOption, match="give the link"):
        bandwidth_breakpoints(inst, None, 1e6, 1e9)
    with pytest.raises(NotApplicable, match="max of affine"):
        bandwidth_breakpoints(inst.with_settings(objective="throughput"), "UE->SBS", 1e6, 1e9)


def test_sweep_marks_where_the_plan_moves():
    inst = random_instance(2, 9, problem="split")
    table = bandwidth_breakpoints(inst, None, 1e3, 1e12, solver="brute-force")
    sweep = bandwidth_sweep(inst, None, 1e3, 1e12, points=25, solver="brute-force")
    assert [p.bandwidth for p in sweep] == log_points(1e3, 1e12, 25)
    for p in sweep:
        assert p.result.objective == pytest.approx(table.lookup(p.bandwidth).line.at_bandwidth(p.bandwidth),
                                                   rel=1e-9)
    assert sum(p.moved for p in sweep) <= len(table.breakpoints)
    assert not sweep[0].moved


@pytest.mark.parametrize("low,high,match", [(2e7, 1e6, "must be below"), (0.0, 1e6, "positive"),
                                            (-1.0, 1e6, "positive"), (1e6, math.inf, "positive"),
                                            (1e6, 1e22, r"\[1, 1e\+21\]")])
def test_bad_ranges_are_refused(low, high, match):
    inst = random_instance(0, 3, problem="split")
    with pytest.raises(InvalidOption, match=match):
        bandwidth_breakpoints(inst, None, low, high)


# ----- command line -------------------------------------------------------------------------------

def test_cli_exact_writes_the_table(tmp_path):
    out, png = tmp_path / "t.json", tmp_path / "t.png"
    proc = run("bandwidth", str(CHAIN), "--link", "UE->SBS", "--from", "1e6", "--to", "1e9", "--exact",
               "--solver", "cpsat", "-o", str(out), "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    assert "Breakpoints" in proc.stdout and "every interval proven optimal" in proc.stdout
    data = json.loads(out.read_text())
    assert data["format"] == "splitopt-bandwidth-breakpoints/1" and data["proven"]
    assert data["link"] == {"source": "UE", "target": "SBS"} and data["solver"] == "cpsat"
    assert data["tolerance"]["rtol"] == 1e-6 and data["instance"] == "jmsnas_chain_mobilenetv2"
    ivs = data["intervals"]
    assert ivs[0]["bandwidth_from"] == 1e6 and ivs[-1]["bandwidth_to"] == 1e9
    assert data["breakpoints"] == [iv["bandwidth_to"] for iv in ivs[:-1]]
    inst = splitopt.load_instance(CHAIN)
    for iv in ivs:
        plan = splitopt.plan_from_dict(inst, iv["plan"])  # the plan as save_plan writes it
        assert iv["plan"] == splitopt.plan_to_dict(inst, plan)
        lo, hi = iv["objective_at_ends"]
        a, b = iv["objective"]["a_ms"], iv["objective"]["b_ms_bits_per_s"]
        assert lo == pytest.approx(a + b / iv["bandwidth_from"]) and hi == pytest.approx(a + b / iv["bandwidth_to"])
    assert png.stat().st_size > 0


def test_cli_sweep_json():
    proc = run("bandwidth", str(RESNET), "--from", "1e6", "--to", "1e9", "--points", "4", "--solver", "cpsat",
               "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [round(p["bandwidth"]) for p in data["points"]] == [1e6, 1e7, 1e8, 1e9]
    assert [p["moved"] for p in data["points"]] == [False, False, True, False]
    assert data["points"][-1]["split"] == "cloud-only (tpu)"


@pytest.mark.parametrize("args,needles", [
    (["--link", "eyeriss->nowhere"], ["--link eyeriss->nowhere", "no such link", "eyeriss->tpu"]),
    (["--link", "eyeriss"], ["--link eyeriss", "SOURCE->TARGET"]),
    (["--from", "2e7", "--to", "1e6"], ["--from 2e+07", "below --to"]),
    (["--from", "0", "--to", "1e6"], ["--from 0", "positive"]),
    (["--from", "-1e6", "--to", "1e6"], ["--from -1e+06", "positive"]),
    (["--from", "1e6", "--to", "-2"], ["--to -2", "positive"]),
    (["--points", "4", "--exact"], ["--points 4", "--exact"]),
])
def test_cli_bad_options_are_one_line(args, needles):
    base = {"--from": "1e6", "--to": "2e7"}
    for i in range(0, len(args) - 1):
        if args[i] in base:
            base.pop(args[i])
    extra = [x for k, v in base.items() for x in (k, v)]
    assert_one_line_error(run("bandwidth", str(RESNET), *extra, *args), 2, *needles)


def test_cli_exact_refused_on_throughput_in_one_line():
    proc = run("bandwidth", str(ROOT / "instances" / "jmsnas_chain_mobilenetv2_throughput.json"), "--link",
               "UE->SBS", "--from", "1e6", "--to", "1e9", "--exact")
    assert_one_line_error(proc, 2, "--exact", "throughput", "max of affine")
