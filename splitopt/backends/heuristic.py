"""Heuristic search methods as backends (``evolutionary``, ``q-learning``, ``reinforce``):
one adapter for all of them. It builds the family's search space, seeds the search with
the family's start plan and its baselines' plans (each run only while the budget lasts),
runs the heuristic (``splitopt.heuristics``) under the user's deadline and its own
termination rule, and returns the best plan found: FEASIBLE when it meets every limit
(never OPTIMAL: a heuristic proves nothing), NO_SOLUTION_FOUND otherwise, with the
evaluations done and the anytime curve in ``extra``. The result carries no bound of its
own; the ``auto`` backend pairs a heuristic with an exact one for that.
"""

from __future__ import annotations

import importlib
import random
import time
from typing import Any, ClassVar, Mapping

from splitopt.backends.base import Backend
from splitopt.core.errors import InvalidPlan
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.heuristics.base import Heuristic
from splitopt.heuristics.search import Search
from splitopt.search.space import Genome


def seed_genomes(family: Any, inst: Any, options: SolveOptions, space: Any) -> tuple[list[Genome], list[str]]:
    """Genomes of the family's start plan and of its baselines' plans (the baselines that
    run on the instance's problem, while the budget lasts), and the names of their
    sources. A plan the space cannot encode is skipped."""
    genomes, sources = [], []

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

    add(family.start_plan(inst), "start plan")
    for method in family.methods():
        left = options.remaining_s()
        if left is not None and left <= 0:
            break
        if method.kind != "baseline" or (method.problems is not None and inst.problem not in method.problems):
            continue
        try:
            add(method.run(inst, options).plan, method.name)
        except Exception:  # a baseline that does not apply to this instance seeds nothing
            continue
    return genomes, sources


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
        metrics, r = search.memo.get(key, (None, None))
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

    def solve(self, family: Any, inst: Any, options: SolveOptions) -> BackendOutput:
        method = self.heuristic_class()
        config = method.configure(options.solver_options)
        t0 = time.perf_counter()
        space = family.space(inst)
        seeds, sources = seed_genomes(family, inst, options, space)
        build_s = time.perf_counter() - t0
        search = Search(family, inst, space, options, method.termination(config))
        interrupted = False
        try:
            method().run(search, random.Random(options.seed), seeds, config)
        except KeyboardInterrupt:
            interrupted = True
            search.stop_reason = "interrupted (Ctrl-C)"
        search.done  # records why it stopped
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
        return BackendOutput(status, plan=best.plan, objective=best.objective if best.feasible else None,
                             message=message, extra=extra)


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
