"""The llm family's limits on time and its Pareto fronts: ``settings.ttft_limit_ms`` and
``settings.min_tokens_per_s`` in the evaluator, the path program and the CP-SAT model
(against brute force over every plan, and the program's rows against the evaluator on
random plans), ``llm-dp`` refusing them; the fronts of ``splitopt pareto`` (time to first
token against tokens/s, tokens/s against error) against the Pareto set of every plan on
small random instances, every point re-checked by the evaluator; the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from splitopt.analysis.pareto import pareto_front
from splitopt.cli.app import app
from splitopt.core.errors import InvalidOption
from splitopt.core.program import row_violations
from splitopt.core.result import Status
from splitopt.families.llm.pareto import STEP_RTOL, free_error_budget
from splitopt.families.registry import family
from splitopt.solve import solve
from splitopt.testing.contracts import LIMIT_WORDS

ROOT = Path(__file__).resolve().parent.parent
QWEN = ROOT / "instances" / "llm_qwen25_7b_ring3.json"
runner = CliRunner()
fam = family("llm")
SEEDS = st.integers(0, 10_000)
FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def every_plan(inst):
    """Every plan with its metrics."""
    return [(p, fam.evaluate(inst, p)) for p in fam.enumerate_plans(inst, 10**5)]


def with_limits(seed: int):
    """A random instance with a time to first token limit and/or a tokens/s floor drawn
    among its best plans' values (exactly one plan's value, or just above or below it)."""
    inst = fam.random_instance(seed)
    ok = [m for _, m in every_plan(inst) if m.feasible]
    rng = random.Random(seed)
    if not ok:
        return inst.with_settings(ttft_limit_ms=1.0)
    change: dict = {}
    draw = rng.random()
    tight = max(1, len(ok) // 4)  # among the quarter of plans best in the measure: the limit likely binds
    if draw < 0.7:
        change["ttft_limit_ms"] = rng.choice(sorted(m.ttft_ms for m in ok)[:tight]) * rng.choice([1.0, 1.001, 0.999])
    if draw > 0.3:
        ms = rng.choice(sorted(m.ms_per_token for m in ok)[:tight])
        change["min_tokens_per_s"] = 1000.0 / (ms * rng.choice([1.0, 1.001, 0.999]))
    limited = inst.with_settings(**change)
    fam.prepare(limited)
    return limited


# ----- the limits -----------------------------------------------------------------------------------

@FAST
@given(SEEDS)
def test_programs_hold_the_time_limits_as_brute_force_does(seed):
    inst = with_limits(seed)
    ref = solve(inst, "brute-force")
    for backend in ("milp-highs", "cpsat", "auto"):
        res = solve(inst, backend)
        assert res.status is ref.status, (backend, res.status, ref.status, res.message)
        if ref.status is Status.OPTIMAL:
            assert res.metrics.feasible, (backend, res.metrics.violations)
            assert abs(res.objective - ref.objective) <= 1e-6 * ref.objective + 1e-9, (backend, res.objective,
                                                                                       ref.objective)
        else:
            assert any(w in res.message for w in LIMIT_WORDS), res.message


@FAST
@given(SEEDS)
def test_program_rows_agree_with_the_evaluator_on_every_plan(seed):
    inst = with_limits(seed)
    program = fam.build_program(inst, "linear", None)
    for plan, metrics in every_plan(inst)[:200]:
        broken = row_violations(program.model, program.encode(plan))
        assert (not broken) == metrics.feasible, (broken, metrics.violations)


def test_the_evaluator_names_a_broken_time_limit():
    inst = fam.random_instance(3)
    plan, m = next((p, m) for p, m in every_plan(inst) if m.feasible)
    assert fam.evaluate(inst.with_settings(ttft_limit_ms=m.ttft_ms, min_tokens_per_s=1000 / m.ms_per_token),
                        plan).feasible
    tight = fam.evaluate(inst.with_settings(ttft_limit_ms=m.ttft_ms * 0.99), plan)
    assert [v for v in tight.violations if "settings.ttft_limit_ms" in v], tight.violations
    slow = fam.evaluate(inst.with_settings(min_tokens_per_s=1000 / m.ms_per_token * 1.01), plan)
    assert [v for v in slow.violations if "settings.min_tokens_per_s" in v], slow.violations


def test_llm_dp_holds_a_limit_on_a_second_measure_and_auto_runs_it():
    from splitopt.api import load_instance

    inst = load_instance(QWEN, overrides=["settings.ttft_limit_ms=480", "settings.objective=throughput"])
    assert fam.exact_method(inst) == "llm-dp"
    res, program = solve(inst, "llm-dp"), solve(inst, "milp-highs")
    assert res.status is Status.OPTIMAL and program.status is Status.OPTIMAL
    assert res.objective == pytest.approx(program.objective, rel=1e-6)
    assert res.metrics.feasible and res.metrics.ttft_ms <= 480
    free = solve(inst.with_settings(ttft_limit_ms=None), "auto")
    assert free.metrics.ttft_ms > 480 and free.objective < res.objective  # the limit binds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS, st.sampled_from(["ttft", "token_latency", "throughput"]), st.booleans())
def test_llm_dp_holds_limits_on_second_measures_as_brute_force_does(seed, objective, with_budget):
    """A time to first token limit and/or a tokens/s floor drawn among the best plans'
    values, under every objective, with and without an error budget that binds: llm-dp
    (the limits as resources of its search) gives brute force's answer; where none is met,
    the message names a limit."""
    inst = with_limits(seed).with_settings(objective=objective)
    if with_budget:
        fam.prepare(inst)
        errors = sorted({round(m.error, 12) for _, m in every_plan(inst) if m.feasible})
        if len(errors) > 1:
            inst = inst.with_settings(error_budget=errors[len(errors) // 2])
    fam.prepare(inst)
    ref, res = solve(inst, "brute-force"), solve(inst, "llm-dp")
    assert res.status is ref.status, (res.message, ref.message)
    if ref.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12), (res.objective, ref.objective)
        assert res.metrics.feasible, res.metrics.violations
    else:
        assert any(w in res.message for w in LIMIT_WORDS), res.message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS, st.sampled_from(["ttft", "throughput"]), st.sampled_from([0.999, 1.0, 1.001]))
def test_llm_dp_holds_a_limit_on_the_measure_it_minimises_as_brute_force_does(seed, objective, factor):
    """A time to first token limit under ``ttft``, a tokens/s floor under ``throughput``:
    llm-dp takes it (its optimum meets it or no plan does), with brute force's answer."""
    inst = fam.random_instance(seed).with_settings(objective=objective)
    fam.prepare(inst)
    free = solve(inst, "brute-force")
    if free.status is not Status.OPTIMAL:
        return
    limit = {"ttft_limit_ms": free.objective * factor} if objective == "ttft" else \
        {"min_tokens_per_s": 1000.0 / (free.objective * factor)}
    limited = inst.with_settings(**limit)
    fam.prepare(limited)
    ref, res = solve(limited, "brute-force"), solve(limited, "llm-dp")
    assert fam.exact_method(limited) == "llm-dp"
    assert res.status is ref.status, (res.message, ref.message)
    if ref.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12) and res.metrics.feasible
    else:  # the diagnosis names the limits that conflict (the time limit, or the budget it leaves)
        assert "infeasible" in res.message.lower() and ("limit" in res.message or "budget" in res.message), res.message


def test_an_unreachable_limit_is_infeasible_naming_it():
    res = runner.invoke(app, ["solve", str(QWEN), "--set", "settings.ttft_limit_ms=10"])
    assert res.exit_code != 0
    assert "time to first token at most 10 ms" in res.stdout, res.stdout


@pytest.mark.parametrize("field, value, words", [("ttft_limit_ms", "-1", "settings.ttft_limit_ms"),
                                                 ("min_tokens_per_s", "0", "settings.min_tokens_per_s")])
def test_bad_limits_are_one_line(field, value, words):
    res = runner.invoke(app, ["solve", str(QWEN), "--set", f"settings.{field}={value}"])
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in res.stderr, res.stderr


# ----- the fronts -------------------------------------------------------------------------------------

def non_dominated(pairs):
    """The Pareto set of (a, b) pairs, both minimised."""
    return [p for p in pairs if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in pairs)]


def check_points(inst, front, measure_of):
    """Every point's plan re-evaluated on ``inst``: it meets every limit, and its values are
    the point's."""
    for p in front.points:
        m = fam.evaluate(inst, p.result.plan)
        assert m.feasible, m.violations
        assert p.result.status is Status.OPTIMAL
        assert abs(measure_of(m) - p.measure) <= 1e-9 * max(1.0, abs(p.measure))


@FAST
@given(SEEDS)
@example(5).via("a front of three corners")
@example(44).via("a front of three corners")
def test_ttft_front_is_the_pareto_set_of_every_plan(seed):
    inst = fam.random_instance(seed)
    ok = [m for _, m in every_plan(inst) if m.feasible]
    front = pareto_front(inst)
    if not ok:
        assert not front.points
        return
    check_points(inst, front, lambda m: m.tokens_per_s)
    tol = 1e-9
    got = [(p.latency_ms, p.result.metrics.ms_per_token) for p in front.points]
    for ttft, ms in got:  # no plan better in one and not worse in the other (beyond the step)
        assert not any(m.ttft_ms <= ttft and m.ms_per_token < ms / (1 + STEP_RTOL) - tol for m in ok), (ttft, ms)
        assert not any(m.ms_per_token <= ms and m.ttft_ms < ttft * (1 - tol) - tol for m in ok), (ttft, ms)
    for ttft, ms in non_dominated([(m.ttft_ms, m.ms_per_token) for m in ok]):  # every corner found
        assert any(t <= ttft / (1 - STEP_RTOL) * (1 + tol) + tol and s <= ms * (1 + STEP_RTOL) * (1 + tol) + tol
                   for t, s in got), (ttft, ms, got)
    assert [p.measure for p in front.points] == sorted(p.measure for p in front.points)


@FAST
@given(SEEDS)
@example(14).via("a front of eight corners")
@example(36).via("a front of seven corners")
def test_error_front_is_the_pareto_set_of_every_plan(seed):
    inst = fam.random_instance(seed)  # its own error budget is drawn on the plot, not applied to the sweep
    judged = inst.with_settings(error_budget=free_error_budget(inst))
    fam.prepare(judged)
    ok = [m for _, m in every_plan(judged) if m.feasible]
    if not ok:
        return
    front = pareto_front(inst, against="error")
    check_points(judged, front, lambda m: m.error)
    tol = 1e-9
    got = [(p.measure, p.latency_ms) for p in front.points]
    for err, ms in got:
        assert not any(m.error <= err * (1 + tol) + 1e-12 and m.ms_per_token < ms * (1 - tol) - tol for m in ok)
    for err, ms in non_dominated([(m.error, m.ms_per_token) for m in ok]):
        assert any(e <= err / (1 - STEP_RTOL) + 1e-12 and s <= ms * (1 + tol) + tol for e, s in got), (err, ms, got)


def test_grid_mode_and_the_front_on_a_shipped_instance(tmp_path):
    from splitopt.api import load_instance

    inst = load_instance(QWEN)
    exact = pareto_front(inst, points=3)
    assert len(exact.points) == 3 and exact.chosen is exact.points[-1]  # objective throughput: the most tokens/s
    grid = pareto_front(inst, mode="grid", points=3)
    assert 2 <= len(grid.points) <= 3 and grid.mode == "grid"
    ends = {round(p.measure, 6) for p in grid.points}
    assert round(exact.points[-1].measure, 6) in ends  # the fastest pipeline is the grid's last point too


def test_the_instance_limits_on_the_measures_are_drawn_and_pick_the_starred_point():
    base = fam.random_instance(5).with_settings(objective="throughput")  # a front of three corners
    free = pareto_front(base)
    assert len(free.points) == 3
    limit = (free.points[1].latency_ms + free.points[2].latency_ms) / 2
    inst = base.with_settings(ttft_limit_ms=limit)
    front = pareto_front(inst)
    assert [p.latency_ms for p in front.points] == [p.latency_ms for p in free.points]  # not cut at the limit
    assert [(lim.axis, lim.value) for lim in front.limits] == [("latency", limit)]
    best = solve(inst, "auto")  # the most tokens/s with the first token within the limit
    assert front.chosen is front.points[1]
    assert abs(front.chosen.measure - best.metrics.tokens_per_s) <= 1e-9 * front.chosen.measure


def test_against_names_the_fronts():
    from splitopt.api import load_instance

    inst = load_instance(QWEN)
    with pytest.raises(InvalidOption, match="against: problem 'llm' has fronts against throughput, error, got 'bytes'"):
        pareto_front(inst, against="bytes")


def test_cli_front_json_plot_and_bad_against(tmp_path):
    png = tmp_path / "front.png"
    res = runner.invoke(app, ["pareto", str(QWEN), "--points", "2", "--json", "--plot", str(png), "-q"])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    records = json.loads(res.stdout)
    assert len(records) == 2 and all(r["status"] == "OPTIMAL" for r in records)
    assert records[0]["tokens_per_s"] < records[-1]["tokens_per_s"] and records[0]["ttft_ms"] < records[-1]["ttft_ms"]
    assert png.stat().st_size > 0
    res = runner.invoke(app, ["pareto", str(QWEN), "--against", "error", "-q"])
    assert res.exit_code == 0 and "error" in res.stdout, (res.stdout, res.stderr)
    res = runner.invoke(app, ["pareto", str(QWEN), "--against", "bytes"])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "against" in lines[0] and "'bytes'" in lines[0], res.stderr
