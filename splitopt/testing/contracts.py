"""Contract suites: what every registered family and every backend must satisfy, written
once and run over the registries (as optuna ships its sampler tests). A new family
(``splitopt.families.registry``) or backend (``splitopt.backends.registry``) gets every
check below by registering; ``tests/test_contracts.py`` parametrises them.

Each ``check_*`` takes a family name and a seed (and a backend where it applies), draws
a small random instance of the family (``splitopt.testing.generators.
random_family_instance``), and asserts:

* ``check_protocol``: the family provides every member of the protocol;
* ``check_exact_matches_brute_force``: an exact backend finds the brute-force optimum
  (OPTIMAL within its stated tolerance, a bound that is a true lower bound, INFEASIBLE
  exactly when brute force finds no plan, and then a message naming a limit);
* ``check_program_agrees_with_evaluator``: on random plans, the family's linear program
  (where it offers an encoding) has the evaluator's objective and meets its rows exactly
  when the evaluator finds the plan feasible;
* ``check_methods_never_beat_the_optimum``: the family's baselines (and exact methods)
  never return a feasible plan better than the optimum, and an exact method finds it;
* ``check_plan_json_round_trip``: a plan's JSON form parses back to an equal plan;
* ``check_start_plan``: a start plan, when the family gives one, meets every limit;
* ``check_exact_never_worse_than_hints``: the plan the exact program backends start from
  and fall back on is no worse than the family's start plan or any hint baseline's
  feasible plan (``Method.hint``), and a solve by each of them is no worse either;
* ``check_same_seed_same_plan``: two solves with the same seed give the same plan;
* ``check_search_space``: every sampled genome decodes to a plan the evaluator accepts,
  and (where the space represents every plan) decoding a plan's genome gives the plan;
* ``check_heuristic``: a heuristic backend returns a plan the evaluator accepts, with the
  evaluator's objective, never OPTIMAL, never better than the brute-force optimum,
  FEASIBLE only where a feasible plan exists, within its evaluation budget, and the same
  plan for the same seed;
* ``check_auto``: the ``auto`` portfolio finds the brute-force optimum (OPTIMAL) or says
  INFEASIBLE exactly when brute force does, with a bound below the optimum.
"""

from __future__ import annotations

import json
import random
from typing import Any

from splitopt.api import evaluate, plan_from_dict, plan_to_dict
from splitopt.backends.registry import backend_class, get_backend, names
from splitopt.core.errors import NotApplicable, SplitoptError
from splitopt.core.options import SolveOptions
from splitopt.core.program import row_violations
from splitopt.core.result import Status
from splitopt.families.base import PROTOCOL_MEMBERS, Family
from splitopt.families.registry import READERS, family, family_of
from splitopt.solve import solve
from splitopt.testing.generators import random_family_instance

#: the generic exact backends every family's programs run on
EXACT_BACKENDS = ("cpsat", "milp-highs", "milp-cbc")
#: evaluations a heuristic gets in the contract checks (small instances: enough to find
#: good plans, cheap enough to run on many draws)
HEURISTIC_EVALUATIONS = 300
#: words one of which an INFEASIBLE message must contain (it names the binding limit)
LIMIT_WORDS = ("memory", "budget", "required", "min_accuracy", "maxSizePerFPGA", "supportedOnFpga", "device",
               "limit", "route", "link")


def _reference(inst: Any):
    """The brute-force optimum of ``inst`` (None if brute force does not apply)."""
    try:
        return solve(inst, "brute-force")
    except NotApplicable:
        return None


def check_protocol(family_name: str) -> None:
    fam = family(family_name)
    missing = [m for m in PROTOCOL_MEMBERS if not hasattr(fam, m)]
    assert not missing, f"family '{family_name}' lacks {missing}"
    assert fam.problems and fam.plan_format and fam.program_kinds and fam.objectives
    for m in fam.methods():
        assert m.kind in ("baseline", "exact", "heuristic") and m.name and m.description
    for kind in fam.program_kinds:
        assert kind in ("linear", "cpsat"), kind
    # reading a file asks only the READERS families: any other must keep the base ``reads``
    imports_a_format = type(fam).reads is not Family.reads
    assert imports_a_format == (family_name in READERS), (family_name, "reads", "registry.READERS")
    # what the generic layers ask: consistent with the rest of the protocol
    assert set(fam.affine_objectives) <= set(fam.objectives), (family_name, fam.affine_objectives)
    assert isinstance(fam.contract_examples, int) and fam.contract_examples >= 1
    assert fam.front_measure is None or (isinstance(fam.front_measure, str) and fam.front_measure)
    for problem in fam.problems:
        for objective in fam.objectives:
            solvers = fam.default_solvers(problem, objective)
            assert solvers and all(isinstance(n, str) for n in solvers), (family_name, problem, objective, solvers)
            for name in solvers:
                assert name in names() or any(name in (m.name, *m.aliases) for m in fam.methods()), (family_name, name)
    for case in fam.scale_cases():
        assert case.problem in fam.problems and case.stem and case.solvers, (family_name, case)


def check_exact_matches_brute_force(family_name: str, backend: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    ref = _reference(inst)
    if ref is None:
        return
    res = solve(inst, backend)
    if ref.status is Status.INFEASIBLE:
        assert res.status is Status.INFEASIBLE, (backend, res.status, res.message)
        assert any(w in res.message for w in LIMIT_WORDS), res.message
        return
    assert ref.status is Status.OPTIMAL
    assert res.status is Status.OPTIMAL, (backend, res.status, res.message)
    assert res.metrics is not None and res.metrics.feasible
    rtol = get_backend(backend).optimal_rtol
    best = ref.objective
    assert res.objective <= best * (1 + rtol) + 1e-9, (backend, res.objective, best)
    assert res.objective >= best * (1 - 1e-9) - 1e-12, (backend, res.objective, best, "beats the brute force")
    assert res.bound is not None and res.bound <= best * (1 + 1e-9) + 1e-12, (backend, res.bound, best)
    assert res.gap is not None and res.gap <= rtol + 1e-12


def check_program_agrees_with_evaluator(family_name: str, seed: int, plans: int = 5) -> None:
    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    if "linear" not in fam.program_kinds:
        return
    program = fam.build_program(inst, "linear", fam.start_plan(inst))
    if program.encode is None:
        return
    space = fam.space(inst)
    rng = random.Random(seed)
    for _ in range(plans):
        plan = space.decode(space.sample(rng))
        metrics = fam.evaluate(inst, plan)
        values = program.encode(plan)
        lp = program.model
        value = program.to_ms(lp.evaluate_objective(values))  # the program's objective in the evaluator's unit
        assert abs(value - metrics.objective_ms) <= 1e-9 * max(1.0, metrics.objective_ms), \
            (value, metrics.objective_ms)
        broken = row_violations(lp, values)
        assert (not broken) == metrics.feasible, (broken, metrics.violations)


def check_methods_never_beat_the_optimum(family_name: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    ref = _reference(inst)
    if ref is None:
        return
    for method in family(family_name).methods():
        try:
            res = solve(inst, method.name)
        except NotApplicable:
            continue
        if res.problem != inst.problem:  # it ran another problem of the instance (a float method)
            ref_here = _reference(inst.with_settings(problem=res.problem))
        else:
            ref_here = ref
        if res.metrics is None or not res.metrics.feasible:
            continue
        assert ref_here is not None and ref_here.status is Status.OPTIMAL, \
            f"{method.name} found a feasible plan where brute force found none"
        assert res.objective >= ref_here.objective * (1 - 1e-9) - 1e-12, (method.name, res.objective, ref_here.objective)
        assert res.status is not Status.OPTIMAL or method.kind == "exact", f"{method.name} claims OPTIMAL"
        if method.kind == "exact" and res.status is Status.OPTIMAL:  # within the method's stated tolerance
            rtol = 1e-9 if method.optimal_rtol is None else method.optimal_rtol
            assert res.objective <= ref_here.objective * (1 + rtol) + 1e-12, (method.name, res.objective)


def check_plan_json_round_trip(family_name: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    space = fam.space(inst)
    rng = random.Random(seed)
    candidates = [space.decode(space.sample(rng)) for _ in range(3)]
    start = fam.start_plan(inst)
    if start is not None:
        candidates.append(start)
    for plan in candidates:
        text = json.dumps(plan_to_dict(inst, plan))
        back = plan_from_dict(inst, json.loads(text))
        assert back.key() == plan.key(), (plan, back)
        assert evaluate(inst, back).objective_ms == evaluate(inst, plan).objective_ms


def check_start_plan(family_name: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    start = fam.start_plan(inst)
    if start is None:
        return
    fam.evaluate(inst, start)  # well-formed (InvalidPlan otherwise)


def check_exact_never_worse_than_hints(family_name: str, seed: int) -> None:
    from splitopt.backends.base import feasible_start_plan

    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    fam.prepare(inst)
    values = []
    start_plan = fam.start_plan(inst)
    if start_plan is not None and fam.evaluate(inst, start_plan).feasible:
        values.append(fam.evaluate(inst, start_plan).objective_ms)
    for method in fam.methods():
        if method.hint and (method.problems is None or inst.problem in method.problems):
            try:
                plan = method.run(inst, SolveOptions()).plan
                metrics = None if plan is None else fam.evaluate(inst, plan)
            except SplitoptError:  # does not apply here: no hint
                continue
            if metrics is not None and metrics.feasible:
                values.append(metrics.objective_ms)
    start = feasible_start_plan(fam, inst)
    if not values:
        assert start is None or fam.evaluate(inst, start).feasible
        return
    best = min(values)
    assert start is not None and fam.evaluate(inst, start).objective_ms <= best, (start, best)
    for backend in EXACT_BACKENDS:
        try:
            res = solve(inst, backend, time_limit=30, threads=1)
        except NotApplicable:
            continue
        assert res.status.has_plan and res.objective <= best * (1 + 1e-9) + 1e-9, (backend, res.status, res.objective, best)


def check_same_seed_same_plan(family_name: str, backend: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    first = solve(inst, backend, seed=seed % 1000, threads=1)
    again = solve(inst, backend, seed=seed % 1000, threads=1)
    assert first.status is again.status
    if first.plan is not None:
        assert again.plan is not None and first.plan.key() == again.plan.key()


def check_search_space(family_name: str, seed: int, samples: int = 10) -> None:
    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    space = fam.space(inst)
    rng = random.Random(seed)
    for _ in range(samples):
        genome = space.sample(rng)
        space.check(genome)
        repaired = space.repair(dict(genome))
        space.check(repaired)
        fam.evaluate(inst, space.decode(genome))  # InvalidPlan here is a broken repair
    every = space.meta.get("represents_every_plan", True)
    if every or space.meta.get("represents_every_feasible_plan", False):
        try:
            plans = list(fam.enumerate_plans(inst, 2000))
        except NotApplicable:
            return
        if not every:  # only the plans that meet every limit decode to themselves
            plans = [p for p in plans if fam.evaluate(inst, p).feasible]
        for plan in plans[:50]:
            assert space.decode(space.from_plan(plan)).key() == plan.key(), plan


def heuristic_backends() -> tuple[str, ...]:
    """The registered heuristic backends whose packages are installed."""
    return tuple(n for n in names(kind="heuristic") if backend_class(n).is_installed())


def check_heuristic(family_name: str, backend: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    budget = {"evaluations": HEURISTIC_EVALUATIONS}
    res = solve(inst, backend, seed=seed % 1000, threads=1, options=budget)
    ref = _reference(inst)
    if fam.proven_infeasible(inst) is not None:  # the data alone proves it: no search, INFEASIBLE
        assert res.status is Status.INFEASIBLE and res.plan is None, (backend, res.status)
        assert ref is None or ref.status is Status.INFEASIBLE, ref.status
        return
    assert res.status in (Status.FEASIBLE, Status.NO_SOLUTION_FOUND), (backend, res.status, res.message)
    assert res.extra["evaluations"] <= HEURISTIC_EVALUATIONS, res.extra["evaluations"]
    if res.plan is not None:
        metrics = fam.evaluate(inst, res.plan)  # InvalidPlan here: a malformed plan
        assert (res.status is Status.FEASIBLE) == metrics.feasible, (res.status, metrics.violations)
        if metrics.feasible:
            assert res.objective == metrics.objective_ms, (res.objective, metrics.objective_ms)
            if res.bound is not None:  # the family's relaxation bound
                assert res.objective is not None and res.bound <= res.objective * (1 + 1e-9) + 1e-12, \
                    (res.bound, res.objective)
            if ref is not None:
                assert ref.status is Status.OPTIMAL, f"{backend} found a feasible plan where brute force found none"
                assert res.objective >= ref.objective * (1 - 1e-9) - 1e-12, (res.objective, ref.objective)
    seed_best = res.extra.get("seed_best_ms")
    if seed_best is not None:  # the search starts from its seeds: never worse than the best of them
        assert res.status is Status.FEASIBLE and res.objective is not None and \
            res.objective <= seed_best * (1 + 1e-12), (res.objective, seed_best)
    again = solve(inst, backend, seed=seed % 1000, threads=1, options=budget)
    assert again.status is res.status and again.extra["evaluations"] == res.extra["evaluations"]
    if res.plan is not None:
        assert again.plan is not None and again.plan.key() == res.plan.key()


def check_lower_bound(family_name: str, seed: int) -> None:
    """The family's relaxation bound never exceeds the brute-force optimum (nor, where no
    plan meets the limits, claims anything a feasible plan would break)."""
    inst = random_family_instance(family_name, seed)
    fam = family_of(inst)
    bound = fam.lower_bound(inst)
    if bound is None:
        return
    assert bound >= 0.0 and bound == bound, bound
    ref = _reference(inst)
    if ref is not None and ref.status is Status.OPTIMAL:
        assert bound <= ref.objective * (1 + 1e-9) + 1e-12, (bound, ref.objective)
    start = fam.start_plan(inst)
    if start is not None:
        metrics = fam.evaluate(inst, start)
        if metrics.feasible:
            assert bound <= metrics.objective_ms * (1 + 1e-9) + 1e-12, (bound, metrics.objective_ms)


def heuristic_finds_optimum(family_name: str, backend: str, seed: int, evaluations: int) -> bool | None:
    """Whether ``backend`` with ``evaluations`` reaches the brute-force optimum of a random
    instance (within 1e-9 relative); None where brute force does not apply or no plan is
    feasible."""
    inst = random_family_instance(family_name, seed)
    ref = _reference(inst)
    if ref is None or ref.status is not Status.OPTIMAL:
        return None
    res = solve(inst, backend, seed=seed % 1000, threads=1, options={"evaluations": evaluations})
    return res.status is Status.FEASIBLE and res.objective <= ref.objective * (1 + 1e-9) + 1e-12


def check_auto(family_name: str, seed: int) -> None:
    inst = random_family_instance(family_name, seed)
    res = solve(inst, "auto", seed=seed % 1000, threads=1)
    ref = _reference(inst)
    if ref is None:
        return
    if ref.status is Status.INFEASIBLE:
        assert res.status is Status.INFEASIBLE, (res.status, res.message)
        return
    assert res.status is Status.OPTIMAL, (res.status, res.message)
    assert abs(res.objective - ref.objective) <= 1e-4 * abs(ref.objective) + 1e-9, (res.objective, ref.objective)
    assert res.bound is not None and res.bound <= ref.objective * (1 + 1e-9) + 1e-12
