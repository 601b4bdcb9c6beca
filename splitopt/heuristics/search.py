"""The one search loop every heuristic runs in.

A heuristic (evolutionary search, Q-learning, REINFORCE) proposes genomes of a family's
search space (``Family.space``, ``splitopt.search.space``); :class:`Search` turns them into
plans (``space.decode``: repair, then decode), judges each plan once with the family's
own evaluator (memoised by ``plan.key()``: a plan met again costs nothing and does not
count as an evaluation), ranks it feasibility first (:func:`rank`), keeps the best, the
anytime curve (best objective against time and evaluations) and the termination rule:
the user's deadline, an evaluation budget, a generation budget and a stall limit (so
many generations without a better best), whichever comes first.

Evaluation goes through one batch hook, ``batch_evaluate(plans) -> metrics``: by default
the plans are evaluated one after the other in this process (stopping at the deadline);
a later sweep can pass a hook that spreads a batch over workers. The search is
deterministic for a seed: its only randomness is the ``random.Random`` it is given, and
nothing it does depends on hash order.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from splitopt.core import progress
from splitopt.core.errors import InvalidPlan
from splitopt.core.options import SolveOptions
from splitopt.search.space import Genome, SearchSpace

#: plans -> their metrics (same order); may return fewer (a deadline stopped it)
BatchEvaluate = Callable[[Sequence[Any]], Sequence[Any]]

#: the rank of a plan the evaluator refuses as malformed (worse than any judged plan)
MALFORMED = (2, 0, math.inf)
#: a search whose generations bring no plan not met before this many times in a row has
#: exhausted what it can reach (a small space, or a converged population) and stops
BARREN_GENERATIONS = 25


def rank(metrics: Any) -> tuple[int, int, float]:
    """Feasibility first: (0 if every limit is met else 1, the number of broken limits,
    the objective in ms); smaller is better. An undefined objective ranks last."""
    objective = metrics.objective_ms
    if objective is None or not math.isfinite(objective):
        objective = math.inf
    return (0 if metrics.feasible else 1, len(metrics.violations), objective)


@dataclass(frozen=True)
class Termination:
    """When a search stops, besides the user's deadline: after ``evaluations`` distinct
    plans judged, ``generations`` generations (a heuristic's unit of work: an
    evolutionary generation, a batch of RL episodes), or ``stall`` generations without a
    better best (None: no such limit)."""

    evaluations: int | None = 10_000
    generations: int | None = None
    stall: int | None = None


@dataclass
class Scored:
    """A genome judged: the repaired genome, its plan, the plan's key, metrics and rank."""

    genome: Genome
    plan: Any
    key: Hashable
    metrics: Any
    rank: tuple

    @property
    def feasible(self) -> bool:
        return self.rank[0] == 0

    @property
    def objective(self) -> float:
        return self.rank[2]


@dataclass
class Point:
    """One point of the anytime curve: the best plan so far after ``evaluations``
    evaluations and ``seconds`` seconds."""

    seconds: float
    evaluations: int
    objective: float
    feasible: bool


class Search:
    """The state of one search: memo, best, anytime curve, budget (see the module
    docstring). Heuristics call :meth:`score` with the genomes they propose and
    :meth:`end_generation` after each generation, and stop when :attr:`done`."""

    def __init__(self, family: Any, inst: Any, space: SearchSpace, options: SolveOptions,
                 termination: Termination = Termination(), batch_evaluate: BatchEvaluate | None = None):
        self.family, self.inst, self.space = family, inst, space
        self.options, self.termination = options, termination
        self.batch_evaluate = batch_evaluate or self._evaluate_in_turn
        self.memo: dict[Hashable, tuple[Any, tuple]] = {}
        self.evaluations = 0
        self.lookups = 0
        self.generations = 0
        self.best: Scored | None = None
        self.history: list[Point] = []
        self.stop_reason = ""
        self._since_improvement = 0
        self._improved = False
        self._barren = 0
        self._evaluations_at_generation = 0
        self._t0 = time.perf_counter()

    # ----- judging ---------------------------------------------------------------------------
    def _past_deadline(self, started: bool) -> bool:
        """Whether to stop judging for the deadline: once it has passed, except for the
        search's very first plan (none judged before, none ``started`` in this batch), so
        that a search whose seeding used up its budget still answers with a plan."""
        return self.options.out_of_time() and (started or self.evaluations > 0)

    def _evaluate_in_turn(self, plans: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for plan in plans:
            if self._past_deadline(started=bool(out)):
                break
            try:
                out.append(self.family.evaluate(self.inst, plan))
            except InvalidPlan:
                out.append(None)
        return out

    def score(self, genomes: Sequence[Genome]) -> list[Scored]:
        """Judge ``genomes`` (repaired and decoded; plans already met are looked up).
        Unseen plans are judged as one batch, as many as the evaluation budget allows;
        genomes left unjudged (budget or deadline) are left out of the answer."""
        return [s for s in self.score_each(genomes) if s is not None]

    def score_each(self, genomes: Sequence[Genome]) -> list[Scored | None]:
        """As :meth:`score`, one entry per genome in order: None where it was not judged.
        Past the deadline no further genome is decoded (a repair walks every gene: 50 ms
        at 10,000 layers), but the search's very first plan is judged even then, so that
        a search whose seeding used up its budget still answers with its first seed."""
        decoded: list[tuple[Genome, Any, Hashable]] = []
        for genome in genomes:
            if self._past_deadline(started=bool(decoded)):
                break
            repaired = self.space.repair(dict(genome))
            try:
                plan = self.space.to_plan(repaired)
            except (KeyError, ValueError, InvalidPlan):
                # a repair that painted itself into a corner (a mesh layer whose inputs sit
                # on devices no one device can reach from): no plan, nothing to judge
                decoded.append((repaired, None, None))
                continue
            decoded.append((repaired, plan, plan.key()))
        fresh: dict[Hashable, Any] = {}
        for _, plan, key in decoded:
            if plan is not None and key not in self.memo and key not in fresh:
                fresh[key] = plan
        allowed = self._evaluations_left()
        keys = list(fresh)[:allowed]
        if keys and not self._past_deadline(started=False):
            results = list(self.batch_evaluate([fresh[k] for k in keys]))
            for key, metrics in zip(keys, results):
                self.memo[key] = (metrics, MALFORMED if metrics is None else rank(metrics))
                self.evaluations += 1
        out: list[Scored | None] = []
        for genome, plan, key in decoded:
            if plan is None or key not in self.memo:
                out.append(None)
                continue
            metrics, r = self.memo[key]
            self.lookups += 1
            scored = Scored(genome, plan, key, metrics, r)
            out.append(scored)
            if metrics is not None and (self.best is None or r < self.best.rank):
                self.best = scored
                self._improved = True
                self.history.append(Point(self.elapsed_s, self.evaluations, r[2], r[0] == 0))
                if r[0] == 0:
                    progress.report(incumbent_ms=r[2])
        return out + [None] * (len(genomes) - len(decoded))  # those left undecoded at the deadline

    # ----- termination -------------------------------------------------------------------------
    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._t0

    def _evaluations_left(self) -> int:
        cap = self.termination.evaluations
        return max(0, cap - self.evaluations) if cap is not None else 1 << 62

    def end_generation(self) -> None:
        """Count a generation and whether it improved the best (for the stall limit)."""
        self.generations += 1
        self._since_improvement = 0 if self._improved else self._since_improvement + 1
        self._improved = False
        fresh = self.evaluations - self._evaluations_at_generation
        self._barren = 0 if fresh else self._barren + 1
        self._evaluations_at_generation = self.evaluations

    @property
    def done(self) -> bool:
        """Whether any stopping rule holds (and which: :attr:`stop_reason`)."""
        t = self.termination
        if self.options.out_of_time():
            self.stop_reason = "time limit"
        elif t.evaluations is not None and self.evaluations >= t.evaluations:
            self.stop_reason = f"{t.evaluations} evaluations"
        elif t.generations is not None and self.generations >= t.generations:
            self.stop_reason = f"{t.generations} generations"
        elif t.stall is not None and self._since_improvement >= t.stall:
            self.stop_reason = f"no better plan in {t.stall} generations"
        elif self._barren >= BARREN_GENERATIONS:
            self.stop_reason = f"no plan not met before in {BARREN_GENERATIONS} generations"
        else:
            return False
        return True

    def summary(self) -> dict[str, Any]:
        """What the result records: evaluations, lookups, generations, why it stopped, and
        the anytime curve."""
        return {"evaluations": self.evaluations, "lookups": self.lookups, "generations": self.generations,
                "stopped_by": self.stop_reason or "search finished", "search_s": self.elapsed_s,
                "anytime": [(round(p.seconds, 6), p.evaluations, p.objective, p.feasible) for p in self.history]}

