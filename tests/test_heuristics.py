"""Heuristic search (issue 10): the search loop's rules (memo, termination, ranking,
anytime curve), determinism across processes, the settings, and the ``auto`` portfolio.
The contract suites (tests/test_contracts.py) check every heuristic on every family."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from splitopt.api import load_instance
from splitopt.core.errors import InvalidOption
from splitopt.core.options import SolveOptions
from splitopt.core.result import Status
from splitopt.families.registry import family_of
from splitopt.heuristics.evolutionary import Evolutionary
from splitopt.heuristics.search import Search, Termination, rank
from splitopt.solve import solve
from splitopt.families.edge_cloud.data import candidate_bits

ROOT = Path(__file__).parent.parent
RESNET = ROOT / "instances" / "resnet50_eyeriss.json"
MESH = ROOT / "instances" / "jmsnas_mesh_threebranch.json"


def _search(path: Path, termination: Termination) -> tuple[Search, object]:
    inst = load_instance(path)
    fam = family_of(inst)
    fam.prepare(inst)
    return Search(fam, inst, fam.space(inst), SolveOptions(), termination), fam


def test_a_plan_met_again_is_looked_up_not_evaluated():
    search, _ = _search(MESH, Termination(evaluations=100))
    rng = random.Random(1)
    genome = search.space.sample(rng)
    first = search.score([genome, dict(genome)])
    assert search.evaluations == 1 and len(first) == 2 and first[0].key == first[1].key
    search.score([genome])
    assert search.evaluations == 1 and search.lookups == 3


def test_the_evaluation_budget_is_never_exceeded_and_unjudged_genomes_are_left_out():
    search, _ = _search(MESH, Termination(evaluations=5))
    rng = random.Random(2)
    scored = search.score([search.space.sample(rng) for _ in range(40)])
    assert search.evaluations == 5 and len({s.key for s in scored}) == 5
    assert search.done and search.stop_reason == "5 evaluations"


def test_a_search_past_its_deadline_judges_its_first_plan_and_nothing_more():
    """Past the deadline a search still judges its very first plan (a search whose seeding
    used the budget answers with its first seed), and decodes and judges nothing more."""
    inst = load_instance(MESH)
    fam = family_of(inst)
    fam.prepare(inst)
    late = SolveOptions(deadline=time.monotonic() - 1)
    search = Search(fam, inst, fam.space(inst), late, Termination(evaluations=100))
    rng = random.Random(3)
    genomes = [search.space.sample(rng) for _ in range(5)]
    scored = search.score_each(genomes)
    assert search.evaluations == 1 and scored[0] is not None and scored[1:] == [None] * 4
    assert search.best is scored[0]
    assert search.score(genomes[1:]) == [] and search.evaluations == 1


@pytest.mark.parametrize("solver", ["evolutionary", "q-learning"])
def test_a_search_whose_budget_ends_in_seeding_answers_with_its_start_plan(solver, monkeypatch):
    """A budget that ends while seeding (here: the start plan takes it all, as the seeds of
    a 10,000-layer graph can) still returns the start plan, judged, and starts no
    baseline; and the baselines get only ``SEEDING_SHARE`` of the budget."""
    import splitopt.backends.heuristic as heuristic

    inst = load_instance(RESNET)
    fam = family_of(inst)
    start = fam.start_plan(inst)

    def slow_start(inst):
        time.sleep(0.6)
        return start

    monkeypatch.setattr(type(fam), "start_plan", lambda self, inst: slow_start(inst))
    res = solve(inst, solver, time_limit=0.5)
    assert res.status is Status.FEASIBLE and res.extra["evaluations"] == 1
    assert res.extra["seeds"] == ["start plan"] and res.plan.key() == start.key()
    monkeypatch.setattr(heuristic, "SEEDING_SHARE", 0.0)
    monkeypatch.setattr(type(fam), "start_plan", lambda self, inst: start)
    res = solve(inst, solver, time_limit=0.5)
    assert res.status is Status.FEASIBLE and res.extra["seeds"] == ["start plan"] and res.extra["evaluations"] > 1


def test_generation_and_stall_limits_stop_the_search():
    search, _ = _search(MESH, Termination(evaluations=None, generations=3))
    for _ in range(3):
        assert not search.done
        search.end_generation()
    assert search.done and search.stop_reason == "3 generations"
    search, _ = _search(MESH, Termination(evaluations=None, stall=2))
    search.score([search.space.sample(random.Random(3))])
    search.end_generation()  # improved (first plan)
    search.end_generation()
    assert not search.done
    search.end_generation()
    assert search.done and "no better plan in 2" in search.stop_reason


def test_feasibility_first_ranking_and_a_monotone_anytime_curve():
    search, fam = _search(RESNET, Termination(evaluations=300))
    rng = random.Random(4)
    Evolutionary().run(search, rng, [], Evolutionary.configure({"evaluations": 300, "population": 16}))
    scored = [search.memo[k] for k in search.memo]
    best = min(r for _, r in scored)
    assert search.best.rank == best
    if any(r[0] == 0 for _, r in scored):  # a feasible plan ranks before every infeasible one
        assert search.best.feasible
    curve = [(not p.feasible, p.objective) for p in search.history]
    assert curve == sorted(curve, reverse=True) or all(a >= b for a, b in zip(curve, curve[1:]))
    assert rank(fam.evaluate(search.inst, search.best.plan)) == search.best.rank


def test_same_seed_same_plan_across_processes():
    """Nothing depends on hash order: two processes with different hash seeds agree."""
    plans = []
    for hash_seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-m", "splitopt", "solve", str(MESH), "--solver", "evolutionary",
                              "--seed", "7", "--option", "evaluations=400", "--json"], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=120, check=True)
        data = json.loads(out.stdout)
        plans.append((data["objective_ms"], json.dumps(data["plan"], sort_keys=True)))
    assert plans[0] == plans[1]


def test_heuristics_never_claim_optimal_and_report_their_search():
    inst = load_instance(RESNET)
    for solver in ("evolutionary", "q-learning"):
        res = solve(inst, solver, options={"evaluations": 500})
        # the bound is the family's relaxation (edge/cloud: the minimum cut), never the search's
        assert res.status is Status.FEASIBLE and res.bound == pytest.approx(family_of(inst).lower_bound(inst))
        assert res.gap is not None and res.gap > 0
        assert res.extra["evaluations"] <= 500 and res.extra["stopped_by"]
        assert "start plan" in res.extra["seeds"] and res.extra["anytime"]


def test_evolutionary_settings_and_presets():
    config = Evolutionary.configure({"preset": "splitnets"})
    assert (config["population"], config["offspring"], config["generations"]) == (512, 512, 20)
    assert Evolutionary.configure({"preset": "splitnets", "population": 8})["population"] == 8
    with pytest.raises(InvalidOption, match="population"):
        Evolutionary.configure({"population": 0})
    with pytest.raises(InvalidOption, match="not a preset"):
        Evolutionary.configure({"preset": "nope"})


def test_evolutionary_search_does_not_import_torch():
    code = ("import sys; from splitopt.api import load_instance; from splitopt.solve import solve; "
            f"solve(load_instance({str(MESH)!r}), 'evolutionary', options={{'evaluations': 50}}); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_auto_returns_what_its_probe_proves():
    """An instance the exact backend proves within the probe (a tenth of the limit) costs
    no search."""
    inst = load_instance(MESH)
    res = solve(inst, "auto", time_limit=60)
    exact = solve(inst, "cpsat", time_limit=60)
    assert res.status is Status.OPTIMAL and res.objective == pytest.approx(exact.objective, rel=1e-4)
    assert res.extra["exact_backend"] == "cpsat" and res.extra["probe"]["status"] == "OPTIMAL"
    assert "search" not in res.extra and res.message.startswith("auto: cpsat for")


def test_auto_proves_the_optimum_after_its_search(monkeypatch):
    """A probe too short to prove anything: the search runs, seeded with the probe's plan
    if it has one, then the exact run proves the optimum."""
    import splitopt.backends.auto as auto

    monkeypatch.setattr(auto, "PROBE_SHARE", 1e-5)
    inst = load_instance(MESH)
    res = solve(inst, "auto", time_limit=60)
    exact = solve(inst, "cpsat", time_limit=60)
    assert res.extra["probe"]["status"] != "OPTIMAL"
    assert res.status is Status.OPTIMAL and res.objective == pytest.approx(exact.objective, rel=1e-4)
    assert res.extra["search"]["evaluations"] > 0 and res.extra["exact"]["status"] == "OPTIMAL"
    assert "evolutionary:" in res.message


def test_auto_returns_the_search_plan_when_the_exact_program_cannot_be_built_in_time(monkeypatch):
    """Where the exact program is not built within the budget, the search's plan comes
    back FEASIBLE with the family's relaxation bound, and the message says what happened."""
    import splitopt.backends.base as base

    inst = load_instance(MESH)
    original = base.ProgramBackend.solve

    def slow_build(self, family, inst, options):  # as if building took the whole budget
        import time
        time.sleep(max(0.0, options.remaining_s()) + 0.01)
        return original(self, family, inst, options)

    monkeypatch.setattr(base.ProgramBackend, "solve", slow_build)
    res = solve(inst, "auto", time_limit=1.0)
    assert res.status is Status.FEASIBLE and res.plan is not None
    assert "time limit ran out while building the program" in res.message
    # the bound known without a program: the family's relaxation, and the message says so
    relaxation = family_of(inst).lower_bound(inst)
    assert relaxation is not None and res.bound == pytest.approx(relaxation) and res.gap is not None
    assert "bound: the family's relaxation" in res.message


@pytest.mark.parametrize("seed", range(40))
def test_edge_cloud_repair_meets_the_error_budget_when_raising_bits_can(seed):
    """The budget repair only raises bits of edge layers (same edge set, no bit lower);
    afterwards the plan meets the error budget whenever the same edge set at the highest
    candidate bits does; on random genomes of random split_bits instances."""
    from splitopt.families.edge_cloud.space import CLOUD
    from splitopt.testing.generators import random_family_instance

    inst = random_family_instance("edge_cloud", seed)
    if inst.problem != "split_bits" or inst.settings.error_budget is None:
        inst = inst.with_settings(problem="split_bits", error_budget=0.01 + 0.05 * (seed % 4))
    fam = family_of(inst)
    fam.prepare(inst)
    space = fam.space(inst)
    rng = random.Random(seed)
    top = max(candidate_bits(inst))
    for _ in range(20):
        genome = space.sample(rng)
        down = dict(genome)
        repaired = space.repair(genome)
        assert [n for n, v in repaired.items() if v == CLOUD] == [n for n, v in space.repair(
            {n: (top, top) if v != CLOUD else v for n, v in down.items()}).items() if v == CLOUD]
        for n, v in repaired.items():
            if v != CLOUD and down[n] != CLOUD:
                assert v[0] >= down[n][0] and v[1] >= down[n][1], (n, down[n], v)
        best = {n: (top, top) if v != CLOUD else v for n, v in repaired.items()}
        if fam.evaluate(inst, space.to_plan(best)).error <= inst.settings.error_budget:
            assert fam.evaluate(inst, space.to_plan(repaired)).error <= inst.settings.error_budget * (1 + 1e-6)


def test_evolutionary_search_finds_googlenet_eyeriss_optimum_through_the_budget_repair():
    """The deeper cut of the optimum needs layers added to the edge and bits raised
    elsewhere at once (the error budget is nearly spent): the repair makes that one move."""
    inst = load_instance(ROOT / "instances" / "googlenet_eyeriss.json")
    exact = solve(inst, "cpsat")
    res = solve(inst, "evolutionary", options={"evaluations": 4000})
    assert res.objective <= exact.objective * (1 + 1e-6), (res.objective, exact.objective)
