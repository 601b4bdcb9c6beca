"""The paper's Reinforcement Learning Unit (RL modularization paper, Sec. 4.2.1, Eq. 3-5,
Alg. 1 ``P, k = RLU(T_ld, T_in, blocks, s)``): tabular Q-learning that picks the number
of child models and their split positions. A faithful reimplementation, not an improved
algorithm: the reward only asks every child to load in about ``T / C_split``; it knows
nothing of threads, inference or the objective (``latency`` / ``balance``), exactly as in
the paper. :func:`run_rlu` trains and returns the greedy policy's plan.

Interpretation (the paper leaves these open; each choice and why):

* **Episode.** One episode builds one plan. It starts at the root state
  ``(C_split, I_split, n_p, n_r) = (0, 0, 0, N)`` (``C_split = 0``: not chosen yet). The
  root action is the pair ``(C_split, p)`` of Eq. 3 (``A = C_split x I_split``): the split
  count, among ``d.child_counts()``, and the end position ``p`` (exclusive) of child 0.
  Every later state is ``(C, i, n_p, n_r)``: ``C`` the chosen count, ``i`` the index of the
  child being placed, ``n_p`` the blocks already assigned (child ``i`` starts at ``n_p``),
  ``n_r = N - n_p``; its action is ``(C, p)`` with ``C`` fixed, i.e. the end position ``p``
  of child ``i``. The last child (``i = C - 1``) takes the remaining blocks: its only
  action is ``p = N``. So every step produces exactly one child and gets the Eq. 4 reward
  of that child; an episode has ``C`` steps. Why: the state names a split count and a
  current split index, so the count is fixed once (at the start) and the splits are
  placed one at a time; letting the count be part of the first action keeps the count a
  learned decision ("RLU provides the number of splits and the split positions").
* **Tail and limits by action masking.** Child ``i < C - 1`` may end at
  ``p in [n_p + 1, L - (C - 2 - i)]`` with ``L = d.last_start_max``: every child keeps at
  least one block and the last child starts at or before ``L`` (it holds the trainable
  tail, Eq. 2). Only allowed counts are offered. Every plan the agent can build meets the
  limits.
* **Reward (Eq. 4).** ``r = 0`` if ``|tau - T/C| <= e`` else ``-1``, with
  ``tau = d.load_ms(start, end, C)`` (the child's load time among ``C`` children) and
  ``T = T(C) = C * child_fixed_ms + slowdown(C) * R`` (``R``: the summed single-thread read
  time of all blocks), so ``T/C = child_fixed_ms + slowdown(C) * R / C``: the load time of
  "a proportionally equivalent decomposed model" (the paper's words after Eq. 4), a child
  holding ``1/C`` of the weights loaded as one of ``C``. For ``C = 1``, ``T`` is exactly the
  full model's load time ``d.load_ms(0, N, 1)``. Why not the literal ``T = load_ms(0, N, 1)``
  for every ``C``: then ``T/C`` counts the per-child fixed cost only ``1/C`` times and
  ignores the storage contention, so for large ``C`` the target lies below every possible
  child's load time and every action would get ``-1``. Tolerance ``e = 0.1 * T/C``
  (``tolerance``; the paper's ``+- e`` / ``delta`` has no value). The band is two-sided, as
  in Eq. 4: a child much lighter than ``T/C`` is also penalised.
* **Q-learning update (Eq. 5).** ``Q(S_t, A_t) += alpha * (R_{t+1} + gamma * Q(S_{t+1}, A')
  - Q(S_t, A_t))`` with ``A'`` the greedy action at ``S_{t+1}`` (the paper calls the unit
  Q-learning and writes ``A' ~ pi(.|S_t)``; we read ``S_t`` as ``S_{t+1}`` and ``pi`` as the
  greedy target policy, which is Q-learning's max). ``Q = 0`` after the terminal step.
  ``alpha = 1``: the MDP is deterministic (the load model is a fixed function of the
  plan), and for a deterministic MDP a learning rate of 1 makes every update the exact
  Bellman backup of the sampled transition, the standard choice there. With ``alpha < 1``
  the estimates of equally good actions (true value 0) creep towards 0 from below at
  different rates, so they never tie and the count tie rule below never applies: the
  agent would keep the first balanced count it stumbled on. ``gamma = 0.9`` (the paper
  gives none; episodes last at most ``children.max`` steps, so it only weighs an early
  unbalanced child more than a late one).
* **Look-up table.** A dict keyed by state (sparse: ``N`` may be 10,000), each holding a
  dict from action to Q. A pair gets its row when first experienced, with ``q_init = 0``
  before its first update. The max and the argmax at a state run over its rows (the
  experienced actions); a state without rows is worth ``q_init``. Why: with ``N`` in the
  thousands almost every action is never tried, and a zero for an untried action is an
  optimistic guess (rewards are <= 0) that would make the greedy plan place splits at
  untried, arbitrary positions and would keep every bootstrap target at 0.
* **Exploration.** epsilon-greedy: with probability ``epsilon`` a uniformly random allowed
  action (at the root: a uniform allowed count, then a uniform allowed position), else
  the greedy one (a state without rows: a random action); ``epsilon`` decays linearly
  from ``epsilon_start = 1.0`` to ``epsilon_end = 0.05`` over the first
  ``epsilon_decay_fraction = 0.8`` of the planned episodes, then stays at 0.05.
* **Greedy ties** (training and result, deterministic): the larger Q, then the larger
  ``C_split`` (more children: the paper's purpose is parallel loading; otherwise ``C = 1``,
  whose reward is always 0, would win every tie), then the smaller end position.
* **Result.** After training, the greedy policy from the root gives ``(P, k)`` (as Alg. 1's
  RLU returns), ``starts`` being the first block of each child. At least one episode
  always runs (with ``epsilon = epsilon_start = 1``: a random plan), so the greedy policy
  is defined even with a deadline already passed; every state on the greedy path then
  has rows (an episode that took an action went on from the state it led to).
* **Episodes.** ``clamp(60 * N, 2,000, 60,000)`` by default (about 1 s on 1,000 blocks,
  3 s on 10,000 with 8 children, one core), fewer when ``deadline`` (a ``time.monotonic()``
  value, checked before every episode after the first) passes first. The random number
  generator is ``numpy.random.default_rng(seed)``: same seed and same episodes (no
  deadline cut), same plan.

No allowed count (``d.child_counts()`` empty: the limits cannot be met): no training; the
result is ``min(k_min, N)`` children of (nearly) equal block counts, a well-formed plan
that breaks the limits as every plan does.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from splitopt.families.loading.data import LoadingData

ALPHA = 1.0
GAMMA = 0.9
EPSILON_START = 1.0
EPSILON_END = 0.05
EPSILON_DECAY_FRACTION = 0.8
TOLERANCE = 0.1
Q_INIT = 0.0
EPISODES_PER_BLOCK = 60
MIN_EPISODES = 2000
MAX_EPISODES = 60000

State = tuple[int, int, int, int]
Action = tuple[int, int]


@dataclass(frozen=True)
class RluResult:
    """``starts``: the first block of each child (the greedy plan); ``episodes``: episodes
    run; ``hyperparameters``: every choice with its value; ``greedy_return``: the
    discounted return of the greedy plan; ``balanced_children``: its children with reward
    0; ``states``: rows of the Q table (states); ``stopped_by_deadline``: training ended at
    the deadline before the planned episodes."""

    starts: tuple[int, ...]
    episodes: int
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    greedy_return: float | None = None
    balanced_children: int | None = None
    states: int = 0
    stopped_by_deadline: bool = False


def default_episodes(n: int) -> int:
    return int(min(MAX_EPISODES, max(MIN_EPISODES, EPISODES_PER_BLOCK * n)))


class _StateRow:
    """The Q values of one state's experienced actions, and a heap (lazy deletion: an entry
    is stale once its action's value changed) that gives the greedy action in O(log n)."""

    __slots__ = ("q", "heap")

    def __init__(self) -> None:
        self.q: dict[Action, float] = {}
        self.heap: list[tuple[float, int, int]] = []

    def best(self) -> Action | None:
        """The greedy action: the larger Q, then more children, then the earlier end."""
        heap, q = self.heap, self.q
        while heap:
            neg_value, neg_c, p = heap[0]
            if q.get((-neg_c, p)) == -neg_value:
                return -neg_c, p
            heapq.heappop(heap)
        return None

    def value(self) -> float:
        a = self.best()
        return Q_INIT if a is None else self.q[a]

    def set(self, a: Action, value: float) -> None:
        self.q[a] = value
        heapq.heappush(self.heap, (-value, -a[0], a[1]))


class _Env:
    """The splitting MDP of the module docstring."""

    def __init__(self, d: LoadingData, tolerance: float) -> None:
        self.n = d.n
        self.last = d.last_start_max
        self.counts = list(d.child_counts())
        self.fixed = d.fixed_ms
        self.prefix = [float(x) for x in d.read_prefix]
        total = self.prefix[-1]
        self.slow = {c: d.slowdown(c) for c in self.counts}
        #: T(C) / C, the balanced child's load time, and the tolerance e
        self.target = {c: self.fixed + self.slow[c] * total / c for c in self.counts}
        self.tol = {c: tolerance * self.target[c] for c in self.counts}

    def end_range(self, c: int, i: int, n_p: int) -> tuple[int, int]:
        """Allowed end positions (inclusive) of child ``i`` of ``c`` starting at ``n_p``."""
        if i == c - 1:
            return self.n, self.n
        return n_p + 1, self.last - (c - 2 - i)

    def tau(self, c: int, start: int, end: int) -> float:
        return self.fixed + self.slow[c] * (self.prefix[end] - self.prefix[start])

    def reward(self, c: int, start: int, end: int) -> float:
        """Eq. 4: 0 if the child's load time is within e of T/C, else -1."""
        gap = abs(self.tau(c, start, end) - self.target[c])
        return 0.0 if gap <= self.tol[c] * (1 + 1e-12) + 1e-12 else -1.0


def _fallback_starts(d: LoadingData) -> tuple[int, ...]:
    k = max(1, min(d.k_min, d.n))
    return tuple(sorted({(j * d.n) // k for j in range(k)}))


def run_rlu(d: LoadingData, seed: int, deadline: float | None = None, episodes: int | None = None) -> RluResult:
    """Train the paper's Q-learning unit on ``d`` and return the greedy plan (see the
    module docstring); stop early when ``time.monotonic()`` passes ``deadline``."""
    planned = default_episodes(d.n) if episodes is None else max(1, int(episodes))
    hyper: dict[str, Any] = {
        "alpha": ALPHA, "gamma": GAMMA, "epsilon_start": EPSILON_START, "epsilon_end": EPSILON_END,
        "epsilon_decay_fraction": EPSILON_DECAY_FRACTION, "epsilon_schedule": "linear, then constant",
        "tolerance": TOLERANCE, "tolerance_of": "T/C_split",
        "T": "C_split * child_fixed_ms + slowdown(C_split) * total read (T/C_split: a 1/C_split child's load time)",
        "q_init": Q_INIT, "update": "Q-learning (max over experienced actions at S_{t+1})",
        "ties": "larger Q, then larger C_split, then earlier end position",
        "episodes_planned": planned, "episodes_default": f"clamp({EPISODES_PER_BLOCK} * N, {MIN_EPISODES}, "
                                                         f"{MAX_EPISODES})",
        "seed": seed,
    }
    if not d.child_counts():
        return RluResult(_fallback_starts(d), 0, hyper)

    env = _Env(d, TOLERANCE)
    rng = np.random.default_rng(seed)
    table: dict[State, _StateRow] = {}
    root: State = (0, 0, 0, d.n)
    counts = env.counts
    decay_episodes = max(1.0, EPSILON_DECAY_FRACTION * planned)

    def random_action(state: State) -> Action:
        c, i, n_p, _ = state
        if c == 0:
            c = counts[int(rng.integers(len(counts)))]
        lo, hi = env.end_range(c, i, n_p)
        return c, int(rng.integers(lo, hi + 1))

    def greedy(state: State) -> Action | None:
        row = table.get(state)
        return None if row is None else row.best()

    run = 0
    stopped = False
    while run < planned:
        if run and deadline is not None and time.monotonic() >= deadline:
            stopped = True
            break
        epsilon = max(EPSILON_END, EPSILON_START - (EPSILON_START - EPSILON_END) * run / decay_episodes)
        state = root
        while True:
            a = greedy(state)
            if a is None or rng.random() < epsilon:
                a = random_action(state)
            c, p = a
            _, i, n_p, _ = state
            r = env.reward(c, n_p, p)
            if i == c - 1:  # the last child: terminal
                nxt, future = None, 0.0
            else:
                nxt = (c, i + 1, p, d.n - p)
                row = table.get(nxt)
                future = Q_INIT if row is None else row.value()
            row = table.get(state)
            if row is None:
                row = table[state] = _StateRow()
            q = row.q.get(a, Q_INIT)
            row.set(a, q + ALPHA * (r + GAMMA * future - q))
            if nxt is None:
                break
            state = nxt
        run += 1

    # the greedy policy's plan
    starts = [0]
    state = root
    ret, discount, balanced = 0.0, 1.0, 0
    while True:
        a = greedy(state)
        assert a is not None, "the greedy path left the experienced states"
        c, p = a
        _, i, n_p, _ = state
        r = env.reward(c, n_p, p)
        ret += discount * r
        discount *= GAMMA
        balanced += r == 0.0
        if i == c - 1:
            break
        starts.append(p)
        state = (c, i + 1, p, d.n - p)
    return RluResult(tuple(starts), run, hyper, greedy_return=ret, balanced_children=balanced, states=len(table),
                     stopped_by_deadline=stopped)
