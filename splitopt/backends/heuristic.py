"""Heuristic search methods as backends (``evolutionary``, ``q-learning``, ``reinforce``):
one adapter for all of them. It builds the family's search space, seeds the search with
the family's start plan and its baselines' plans (each run only while the budget lasts),
runs the heuristic (``splitopt.heuristics``) under the user's deadline and its own
termination rule, and returns the best plan found: FEASIBLE when it meets every limit
(never OPTIMAL: a heuristic proves nothing), NO_SOLUTION_FOUND otherwise, with the
evaluations done and the anytime curve in ``extra``. Its bound (and so its gap) is the
family's cheap relaxation bound (``Family.lower_bound``) where the family states one;
the ``auto`` backend pairs a heuristic with an exact run for a proven one.
"""

from __future__ import annotations

import importlib
import random
import sys
import time
from typing import Any, ClassVar, Mapping, Sequence

from splitopt.backends.base import Backend
from splitopt.core import progress
from splitopt.core.errors import InvalidPlan
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.heuristics.base import Heuristic
from splitopt.heuristics.search import Search
from splitopt.search.space import Genome


#: share of the budget left that the seeding may take (the baselines' plans); the rest is
#: the search's. At 10,000 layers a baseline can take seconds (AUTO-SPLIT's list: minutes
#: uncut), which without this share left the search no time to judge a plan
SEEDING_SHARE = 0.5


def seed_genomes(family: Any, inst: Any, options: SolveOptions, space: Any,
                 extra: Sequence[tuple[str, Any]] = ()) -> tuple[list[Genome], list[str], bool]:
    """Genomes of the ``extra`` (source, plan) pairs, of the family's start plan and of
    its baselines' plans (the baselines that run on the instance's problem, while
    ``SEEDING_SHARE`` of the budget left lasts: each gets that deadline, and none starts
    after it), the names of their sources, and whether Ctrl-C cut the seeding short
    (then the seeds found so far). A plan the space cannot encode is skipped."""
    genomes: list[Genome] = []
    sources: list[str] = []
    left = options.remaining_s()
    if left is not None:
        options = options.with_budget(SEEDING_SHARE * left)  # <= 0 when the deadline passed: no baseline runs
    try:
        _add_seeds(family, inst, options, space, extra, genomes, sources)
    except KeyboardInterrupt:
        return genomes, sources, True
    return genomes, sources, False


def _add_seeds(family: Any, inst: Any, options: SolveOptions, space: Any, extra: Sequence[tuple[str, Any]],
               genomes: list[Genome], sources: list[str]) -> None:

    def add(plan: Any, source: str) -> None:
        if plan is None:
            return
        try:
            genome = space.from_plan(plan)
            space.check(genome)
        except (KeyError, ValueError, TypeError, AttributeError):
            return
        genomes.append(genome)
        sources.append(source)

    for source, plan in extra:
        add(plan, source)
    add(family.start_plan(inst), "start plan")
    for method in family.methods():
        if options.out_of_time():
            break
        if method.kind != "baseline" or (method.problems is not None and inst.problem not in method.problems):
            continue
        try:
            add(method.run(inst, options).plan, method.name)
        except Exception:  # a baseline that does not apply to this instance seeds nothing
            continue


def best_seed_objective(search: Search, seeds: list[Genome]) -> float | None:
    """The best objective (ms) among the seed plans that meet every limit, read from the
    search's memo (every heuristic judges its seeds first; a seed the budget left
    unjudged does not count); None where none does: what the search started from, so
    that a result shows what the search added."""
    best = None
    for genome in seeds:
        try:
            key = search.space.to_plan(search.space.repair(dict(genome))).key()
        except (KeyError, ValueError, InvalidPlan):
            continue
        metrics, r = search.memo.get(key, (None, ()))
        if metrics is not None and r[0] == 0 and (best is None or r[2] < best):
            best = r[2]
    return best


class HeuristicBackend(Backend):
    """A heuristic as a backend; subclasses name the heuristic class by import path."""

    kind = "heuristic"
    #: "module:Class" of the :class:`splitopt.heuristics.base.Heuristic`
    heuristic: ClassVar[str] = ""

    @classmethod
    def heuristic_class(cls) -> type[Heuristic]:
        module, name = cls.heuristic.split(":")
        return getattr(importlib.import_module(module), name)

    def check_options(self, options: Mapping[str, Any]) -> None:
        self.heuristic_class().configure(options)

    def solve(self, family: Any, inst: Any, options: SolveOptions,
              extra_seeds: Sequence[tuple[str, Any]] = ()) -> BackendOutput:
        """The heuristic's best plan; ``extra_seeds``: (source, plan) pairs seeded beside
        the start plan and the baselines' plans (``auto`` gives its exact probe's plan)."""
        method = self.heuristic_class()
        config = method.configure(options.solver_options)
        t0 = time.perf_counter()
        left = options.remaining_s()
        # importing torch (seconds) would overrun a short limit: judge the seeds, no search
        too_short = left is not None and left < method.import_s and "torch" not in sys.modules
        if not too_short:
            method.import_dependencies()
        # the relaxation bound first, inside the budget (at 10,000 layers the chain's
        # Lagrangian bound takes a second or two: after the search it overran the limit)
        bound = family.lower_bound(inst)
        if progress.current() is not None:  # the bound shown beside the incumbents
            progress.report(bound_ms=bound)
        space = family.space(inst)
        with progress.phase("seeding"):
            seeds, sources, interrupted = seed_genomes(family, inst, options, space, extra_seeds)
        build_s = time.perf_counter() - t0
        search = Search(family, inst, space, options, method.termination(config))
        try:
            with progress.phase("searching"):
                if interrupted or too_short:  # Ctrl-C while seeding, or no time to start: the seeds only
                    search.score(seeds)
                else:
                    method().run(search, random.Random(options.seed), seeds, config)
        except KeyboardInterrupt:
            interrupted = True
        if interrupted:
            search.stop_reason = "interrupted (Ctrl-C)"
        elif too_short:
            search.stop_reason = (f"time limit: {left:.2g} s left, less than the {method.import_s:g} s its "
                                  "dependencies take to import; the seeds judged only")
        else:
            search.done  # noqa: B018 - reading it records the stopping rule that holds (stop_reason)
        extra: dict[str, Any] = {"build_s": build_s, "solve_s": time.perf_counter() - t0 - build_s,
                                 "seeds": sources, "seed_best_ms": best_seed_objective(search, seeds), **search.summary()}
        if interrupted:
            extra["interrupted"] = True
        best = search.best
        message = f"{self.name}: {search.evaluations} evaluations, stopped by {extra['stopped_by']}"
        if best is None:
            return BackendOutput(Status.NO_SOLUTION_FOUND, message=f"{message}; no plan judged", extra=extra)
        status = Status.FEASIBLE if best.feasible else Status.NO_SOLUTION_FOUND
        if not best.feasible:
            message += "; no plan found that meets every limit"
        if bound is not None:
            extra["relaxation_bound_ms"] = bound
        return BackendOutput(status, plan=best.plan, objective=best.objective if best.feasible else None,
                             bound=bound if best.feasible else None, message=message, extra=extra)


class EvolutionaryBackend(HeuristicBackend):
    name = "evolutionary"
    heuristic = "splitopt.heuristics.evolutionary:Evolutionary"
    description = "evolutionary search (genetic algorithm, feasibility first, seeded by the baselines); preset splitnets"


class QLearningBackend(HeuristicBackend):
    name = "q-learning"
    heuristic = "splitopt.heuristics.qlearning:QLearning"
    description = "tabular Q-learning over the genes in order (the RL modularization paper's unit, generalised)"


class ReinforceBackend(HeuristicBackend):
    name = "reinforce"
    heuristic = "splitopt.heuristics.reinforce:Reinforce"
    description = "REINFORCE with an LSTM policy over the genes (the Separable NN paper's controller)"
    requires = ("torch",)
    install_hint = "install the torch extra: pip install 'splitopt[torch]'"
