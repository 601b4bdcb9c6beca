"""``auto`` (the default backend): a short exact run, then evolutionary search, then the
exact program for the rest of the budget; the better plan, with the best bound known.

0. Hints: the family's start plan and its hint baselines (``feasible_start_plan``), on the
   whole budget, kept with the instance (every later run reuses them) and a candidate
   answer of their own, so ``auto`` never returns worse than a baseline it could have
   been hinted with (the probe's 5 % slice had been too short for them). Not before an
   anytime exact method, which seeds itself as its time allows.
1. Probe: the exact backend (``cpsat`` where it runs the family's programs, else the
   family's default exact backend) runs for ``PROBE_SHARE`` of the time limit
   (``PROBE_WITHOUT_LIMIT_S`` without one). Most instances are proven here, and then
   ``auto`` costs no more than the exact backend alone; an INFEASIBLE proof ends it too.
2. Search: evolutionary search (``splitopt.backends.heuristic``), seeded with the family's
   start plan, its baselines' plans and the probe's incumbent, for ``HEURISTIC_SHARE`` of
   what is left of the limit (at most ``EVALUATIONS_WITH_LIMIT`` evaluations); without a
   limit, ``EVALUATIONS_WITHOUT_LIMIT`` evaluations or ``SEARCH_WITHOUT_LIMIT_S``,
   whichever comes first.
3. Exact: the exact backend again, for the rest of the budget, from the family's own
   start plan. The search's plan is not given to it as a hint: measured on
   ``transformer1000_chain8_throughput``, CP-SAT hinted with the search's plan (65.5 ms)
   proved the optimum in 9-19 s in 3 runs and not within 24 s in 3; unhinted, in 9-11 s
   in 6 runs of 6.

An *anytime* exact backend (``Backend.anytime``: a family's branch and bound, which
keeps its best plan and bound and has no use for a plan found elsewhere) runs once
instead, for the whole budget (without a limit: to the end); only where it stops early
without a proof (no plan found) does the search get what is left, seeded with its plan.
Restarting it from scratch after the search threw its tree away: ``chain-bb`` proves the
1,000-layer memory-bound random chain (seed 4) in 27.5 s alone, which the probe and the
search pushed past 30 s. A share for the search after it was tried (10 %) and dropped: at
10,000 layers the search's seeding (the baselines' plans) overran its slice by 7 s with no
evaluation done.

The answer is the best plan of the runs by the family's evaluator, with the best
lower bound known: the exact runs' bounds and the family's cheap relaxation bound
(``Family.lower_bound``, computed first, inside the budget), so the gap is honest;
OPTIMAL only when an exact run proved it, or when the plan is within OPTIMAL's tolerance
of that bound (the exact backend's ``optimal_rtol``; a 10,000-layer ``split_bits``
instance whose start plan meets the relaxation bound, where the probe's program could
not be built in its slice). Where the exact program could not be built or solved in
time, the search's plan comes back FEASIBLE with that bound, and the message says so.

Ctrl-C during any phase returns at once with the best plan found so far (the later
phases do not start).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping

from splitopt.backends.base import Backend, feasible_start_plan, optimal_atol_ms
from splitopt.backends.heuristic import HeuristicBackend
from splitopt.backends.registry import backend_class, get_backend
from splitopt.core import progress
from splitopt.core.errors import InvalidOption, SolverFailure
from splitopt.core.jsonfile import cut
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status

#: share of the time limit the first exact run (the probe) gets. Probe and search together
#: take at most 15 % of a limit, so the exact run keeps 85 %: with 10 % and 20 % of the
#: rest, CP-SAT lost its proof of OperatorGraphs/bert_L-12_training at 30 s (it needs
#: about 20 s; auto returned the optimal plan FEASIBLE with a 28 % gap)
PROBE_SHARE = 0.05
#: length of the probe when there is no time limit (s)
PROBE_WITHOUT_LIMIT_S = 2.0
#: share of what is left after the probe that evolutionary search gets
HEURISTIC_SHARE = 0.1
#: evaluations of evolutionary search when there is no time limit
EVALUATIONS_WITHOUT_LIMIT = 2000
#: seconds of evolutionary search at most when there is no time limit (an evaluation of
#: the 1,000-layer chain takes about 40 ms: 2,000 of them would dwarf the exact run)
SEARCH_WITHOUT_LIMIT_S = 2.0
#: evaluations of evolutionary search at most, within its slice of a time limit
EVALUATIONS_WITH_LIMIT = 10_000
#: the exact backend auto prefers, where it handles the family
PREFERRED_EXACT = "cpsat"
#: a slice shorter than this (s) is not started
MIN_SLICE_S = 1e-3


def exact_backend_for(family: Any, inst: Any = None) -> str:
    """The exact backend auto runs on ``family``: the family's special-purpose exact method
    where it names one for ``inst`` (``Family.exact_method``, e.g. a polynomial algorithm
    that solves the instance outright), else CP-SAT where it handles the family's programs
    and is installed (fastest on every family in the benchmarks), else the family's
    default."""
    special = None if inst is None else family.exact_method(inst)
    if special is not None:
        return special
    cls = backend_class(PREFERRED_EXACT)
    if cls.is_installed() and cls().handles(family, family.problems[0]):
        return PREFERRED_EXACT
    return family.default_backend


def _sliced(options: SolveOptions, seconds: float | None, solver_options: Mapping[str, Any]) -> SolveOptions:
    """``options`` with a budget of ``seconds`` from now (None: none, or the user's
    deadline when that comes first)."""
    left = options.remaining_s()
    if seconds is None and left is None:
        return dataclasses.replace(options, solver_options=dict(solver_options))
    budget = min(s for s in (seconds, left) if s is not None)
    return options.with_budget(max(budget, MIN_SLICE_S), solver_options=dict(solver_options))


def _stopped_by_user(out: BackendOutput) -> bool:
    """Whether the user's Ctrl-C stopped a run (every exact backend says so in
    ``ctrl_c``, apart from stops at its deadline, which it marks only ``interrupted``)."""
    return bool(out.extra.get("ctrl_c"))


def _out_of_time(options: SolveOptions) -> bool:
    left = options.remaining_s()
    return left is not None and left < MIN_SLICE_S


class AutoBackend(Backend):
    name = "auto"
    kind = "portfolio"
    description = ("default: a short exact run (cpsat where it applies), then evolutionary search, then the exact "
                   "program for the rest of the budget; the best plan with the best bound known")

    def check_options(self, options: Mapping[str, Any]) -> None:
        for key in options:
            raise InvalidOption(f"option '{cut(key)}': solver 'auto' takes no solver options (name a backend, "
                                f"e.g. --solver cpsat or --solver evolutionary, to pass its options)")

    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        self.check_options(options.solver_options)
        t0 = time.perf_counter()
        # the family's relaxation bound first, inside the budget (the answer's bound where
        # no run proves one; at 10,000 layers the chain's takes a second or two, which
        # after the runs overran the limit)
        relaxation = family.lower_bound(inst)
        exact_name = exact_backend_for(family, inst)
        exact_backend = get_backend(exact_name, family)
        extra: dict[str, Any] = {"exact_backend": exact_name}
        runs: list[tuple[str, BackendOutput]] = []
        # the hint baselines once, on the whole budget (kept with the instance for every run
        # after): the probe's slice was too short for them, and on the 3 s run of a BERT
        # training graph auto returned 944 ms where the hint group-moves gives 442.6 ms.
        # Not before an anytime method: it seeds itself as its time allows (chain-bb skips
        # the chain's start plan, 3 s of priced cuts at 10,000 layers, under a short limit)
        if not exact_backend.anytime:
            hinted = feasible_start_plan(family, inst, options)
            if hinted is not None:
                runs.append(("hints", BackendOutput(Status.FEASIBLE, plan=hinted)))

        # 1. the probe (an anytime backend: its one run)
        limit = options.remaining_s()
        anytime = exact_backend.anytime
        if anytime:
            probe_s = None  # the whole budget (to the end without a limit)
        else:
            probe_s = PROBE_WITHOUT_LIMIT_S if limit is None else PROBE_SHARE * limit
        with progress.phase(f"{'exact' if anytime else 'probe'} ({exact_name})"):
            probe = exact_backend.solve(family, inst, _sliced(options, probe_s, {}))
        runs.append(("exact" if anytime else "probe", probe))  # an anytime run is the exact run
        extra["probe"] = {"status": probe.status.value, "s": time.perf_counter() - t0,
                          **{k: v for k, v in probe.extra.items() if k in ("build_s", "solve_s", "returned")}}
        said = [f"{exact_name} for {extra['probe']['s']:.2f} s: {probe.message or probe.status.value}"]
        if probe.status in (Status.OPTIMAL, Status.INFEASIBLE) or _stopped_by_user(probe):
            extra["interrupted"] = probe.status not in (Status.OPTIMAL, Status.INFEASIBLE)
            return self._answer(family, inst, runs, extra, said, t0, relaxation)

        # 2. the search, seeded with the probe's plan too
        if not _out_of_time(options):
            left = options.remaining_s()
            if left is None:
                search_options = _sliced(options, SEARCH_WITHOUT_LIMIT_S, {"evaluations": EVALUATIONS_WITHOUT_LIMIT})
            else:  # after an anytime backend that stopped early: what is left
                search_options = _sliced(options, None if anytime else HEURISTIC_SHARE * left,
                                         {"evaluations": EVALUATIONS_WITH_LIMIT})
            t1 = time.perf_counter()
            probe_plan = [("exact probe", probe.plan)] if probe.plan is not None and probe.status.has_plan else []
            with progress.phase("search (evolutionary)"):
                searcher = get_backend("evolutionary")
                assert isinstance(searcher, HeuristicBackend)  # the registry's evolutionary backend
                search = searcher.solve(family, inst, search_options, extra_seeds=probe_plan)
            runs.append(("search", search))
            search_s = time.perf_counter() - t1
            extra.update(search={k: v for k, v in search.extra.items() if k != "anytime"},
                         anytime=search.extra.get("anytime", []), search_s=search_s)
            said.append(f"evolutionary: {search.extra.get('evaluations', 0)} evaluations in {search_s:.2f} s")
            if search.extra.get("interrupted"):
                extra["interrupted"] = True
                return self._answer(family, inst, runs, extra, said, t0, relaxation)

        # 3. the exact run for the rest of the budget (not again for an anytime backend)
        if not anytime and not _out_of_time(options):
            t2 = time.perf_counter()
            with progress.phase(f"exact ({exact_name})"):
                exact = exact_backend.solve(family, inst, _sliced(options, None, {}))
            runs.append(("exact", exact))
            if _stopped_by_user(exact):
                extra["interrupted"] = True
            extra["exact"] = {"status": exact.status.value, "s": time.perf_counter() - t2,
                              **{k: v for k, v in exact.extra.items() if k in ("build_s", "solve_s", "returned")}}
            said.append(f"{exact_name}: {exact.message or exact.status.value}")
        return self._answer(family, inst, runs, extra, said, t0, relaxation)

    def _answer(self, family: Any, inst: Any, runs: list[tuple[str, BackendOutput]], extra: dict[str, Any],
                said: list[str], t0: float, relaxation: float | None) -> BackendOutput:
        """The best plan of ``runs`` by the evaluator, with the best bound known (theirs and
        the family's ``relaxation``)."""
        extra["solve_s"] = time.perf_counter() - t0
        if not extra.get("interrupted"):
            extra.pop("interrupted", None)
        message = "auto: " + "; ".join(said)
        proofs = [(phase, out) for phase, out in runs if out.status in (Status.OPTIMAL, Status.INFEASIBLE)]
        found = [(phase, out) for phase, out in runs if out.plan is not None and out.status.has_plan]
        if any(out.status is Status.INFEASIBLE for _, out in proofs):
            if found:
                raise SolverFailure(f"auto: {extra['exact_backend']} claims the instance is infeasible, but "
                                    f"{found[0][0]} found a plan that meets every limit")
            phase, out = proofs[0]
            extra["returned"] = "nothing"
            return dataclasses.replace(out, message=message, extra=extra)
        if not found:
            extra["returned"] = "nothing"
            last = runs[-1][1]
            return BackendOutput(last.status, message=message, extra=extra)
        scored = [(family.evaluate(inst, out.plan).objective_ms, i, phase, out) for i, (phase, out) in enumerate(found)]
        best_value, _, phase, best = min(scored, key=lambda t: (t[0], t[1]))
        bounds = [out.bound for _, out in runs if out.bound is not None and out.status is not Status.ERROR]
        if relaxation is not None:
            bounds.append(relaxation)
            extra["relaxation_bound_ms"] = relaxation
        bound = max(bounds) if bounds else None
        extra["returned"] = {"hints": "start plan (the best of the start plan and the hint baselines)",
                             "probe": "probe plan", "search": "search plan", "exact": "exact plan"}[phase]
        # a plan no worse than a proven optimum is proven optimal by the same bound; so is
        # one within OPTIMAL's tolerance of the best proven bound (the relaxation's, say,
        # where the exact program could not be built in time)
        rtol = min(self.optimal_rtol, get_backend(extra["exact_backend"], family).optimal_rtol)
        attained = bound is not None and best_value <= bound + rtol * abs(bound) + optimal_atol_ms(best_value, bound)
        status = Status.OPTIMAL if proofs or attained else Status.FEASIBLE
        if status is Status.OPTIMAL and not proofs:
            message += f"; the {extra['returned']} attains the best bound known ({bound:.6g} ms)"
            extra["optimal_rtol"] = rtol
            bound = min(bound, best_value)
        if status is Status.FEASIBLE:
            if bound is not None and relaxation is not None and bound == relaxation:
                message += f"; bound: the family's relaxation ({relaxation:.6g} ms)"
            message += f"; returning the {extra['returned']}"
        return BackendOutput(status, plan=best.plan, objective=best.objective, bound=bound,
                             objective_tolerance_ms=best.objective_tolerance_ms, one_sided=best.one_sided,
                             message=message, extra=extra)
