"""Tabular Q-learning (backend ``q-learning``): the RL modularization paper's Q-learning
unit (its Eq. 5 update on a look-up table), generalised from its own decisions (split
count and split index) to any family's genes.

* Episode: the decisions of the search space in order (``splitopt.heuristics.decisions``),
  one action per decision, epsilon-greedy on the table.
* State: (decision index, the previous decision's action): the paper's state (split
  count, split index, nodes processed, nodes remaining) says where the agent is and what
  it just decided; a whole prefix would make every state new, so the table keeps the
  last decision only.
* Reward: 0 until the last decision, then minus the plan's cost
  (``decisions.cost``: objective / the best seed's objective for a plan meeting every
  limit, 10 + broken limits otherwise), from the family's evaluator. (The paper's own
  reward, 0 within +-e of T / C_split else -1, is specific to loading balance.)
* Update, after each episode, from the last decision back:
  ``Q(s, a) += alpha (r + gamma max_a' Q(s', a') - Q(s, a))``; the table starts at 0, so
  untried actions look better than tried ones (optimism drives exploration); the seed
  plans (start plan, baselines) are replayed as episodes first (Q-learning learns off
  policy). Epsilon decays linearly from ``epsilon_start`` to ``epsilon_end`` over the
  evaluation budget.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

from splitopt.heuristics.base import Heuristic, Setting
from splitopt.heuristics.decisions import Decisions, cost
from splitopt.heuristics.search import Search
from splitopt.search.space import Genome


class QLearning(Heuristic):
    name = "q-learning"
    description = "tabular Q-learning over the genes in order (the RL modularization paper's unit, generalised)"
    settings = (
        Setting("alpha", float, 0.1, "learning rate", low=1e-6, high=1.0),
        Setting("gamma", float, 1.0, "discount of later rewards", low=0.0, high=1.0),
        Setting("epsilon_start", float, 1.0, "exploration rate at the start", low=0.0, high=1.0),
        Setting("epsilon_end", float, 0.05, "exploration rate at the end of the budget", low=0.0, high=1.0),
        Setting("episodes", int, 32, "episodes per generation", low=1, high=100_000),
    )

    def run(self, search: Search, rng: random.Random, seeds: Sequence[Genome], config: Mapping[str, Any]) -> None:
        dec = Decisions(search.space)
        if not dec.steps:
            search.score([{}])
            search.end_generation()
            return
        table: dict[tuple[int, int], list[float]] = {}
        alpha, gamma = config["alpha"], config["gamma"]

        def row(t: int, prev: int) -> list[float]:
            key = (t, prev)
            if key not in table:
                table[key] = [0.0] * len(dec.steps[t].options)
            return table[key]

        def learn(actions: list[int], reward: float) -> None:
            last = len(actions) - 1
            for t in range(last, -1, -1):
                q = row(t, actions[t - 1] if t else -1)
                if t == last:
                    target = reward
                else:
                    nxt = row(t + 1, actions[t])
                    target = gamma * max(nxt[a] for a in dec.valid(t + 1, actions[:t + 1]))
                q[actions[t]] += alpha * (target - q[actions[t]])

        scored_seeds = [s for s in search.score(seeds) if s is not None]
        feasible = [s.objective for s in scored_seeds if s.feasible]
        reference = min(feasible) if feasible else math.nan
        for s in scored_seeds:
            actions = dec.actions(s.genome)
            if actions is not None:
                learn(actions, -cost(s, reference))
        search.end_generation()

        budget = search.termination.evaluations
        while not search.done:
            progress = min(1.0, search.evaluations / budget) if budget else min(1.0, search.generations / 200)
            epsilon = config["epsilon_start"] + (config["epsilon_end"] - config["epsilon_start"]) * progress
            episodes = [self._episode(dec, row, epsilon, rng) for _ in range(config["episodes"])]
            scored = search.score_each([dec.genome(a) for a in episodes])
            for actions, episode in zip(episodes, scored):
                if episode is None:
                    continue
                if math.isnan(reference) and episode.feasible:
                    reference = episode.objective
                learn(actions, -cost(episode, reference))
            search.end_generation()

    @staticmethod
    def _episode(dec: Decisions, row: Any, epsilon: float, rng: random.Random) -> list[int]:
        actions: list[int] = []
        for t in range(len(dec.steps)):
            valid = dec.valid(t, actions)
            if rng.random() < epsilon:
                actions.append(valid[rng.randrange(len(valid))])
                continue
            q = row(t, actions[-1] if actions else -1)
            best = max(q[a] for a in valid)
            ties = [a for a in valid if q[a] == best]
            actions.append(ties[rng.randrange(len(ties))] if len(ties) > 1 else ties[0])
        return actions
