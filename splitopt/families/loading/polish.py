"""Local search that lowers a loading plan's first response (``count-search``'s plans,
``formulations/loading_balance.md``, "Exact search over child counts": "Plans").

A heuristic: it only proposes plans. Whoever uses them re-evaluates them with
:func:`evaluate.first_response_ms`, so it cannot make a bound wrong.

Moves, for a fixed child count ``k``: shift one cut by ``+-1, 2, 4, ..., 64`` blocks (the
limits kept: starts increasing, the last child holding the tail), or move one child to
another thread; when none of these improves, shift two cuts at once by up to ``PAIR_REACH``
blocks each (single shifts cannot trade one child's response against another's when both
sit on the plateau of the largest). Every thread loads its children in index order (never worse:
"Load order on a thread"). A move is taken when it lowers the children's responses
``C_j + I[N] - I[s_j]`` (ms) sorted from the largest, compared lexicographically (the first
response, then the next ones: this walks along plateaus of the maximum)."""

from __future__ import annotations

from typing import Callable

from splitopt.families.loading.data import LoadingData
from splitopt.families.loading.plan import LoadingPlan, canonical_threads

#: cut shifts tried, in blocks
SHIFTS = (1, -1, 2, -2, 4, -4, 8, -8, 16, -16, 32, -32, 64, -64)
#: when no single move improves: shift two cuts at once, each by up to this many blocks
PAIR_REACH = 4


def polish(d: LoadingData, plan: LoadingPlan, max_evals: int = 10_000,
           out_of_time: Callable[[], bool] = lambda: False, pairs: bool = False) -> LoadingPlan:
    """A plan with the same child count responding no later than ``plan`` by the sorted
    responses above (first improvement, until no move improves, ``max_evals`` move
    evaluations are spent or the time is out); ``pairs``: the two-cut moves too (slower:
    ``count-search`` uses them on the incumbent only)."""
    k, T, N, F = plan.k, d.threads, d.n, d.fixed_ms
    sigma = d.slowdown(k)
    SR = [sigma * float(v) for v in d.read_prefix]
    I = [float(v) for v in d.infer_prefix]
    IN = I[-1]
    last = d.last_start_max
    s = list(plan.starts) + [N]
    th = [0] * k
    for t, kids in enumerate(plan.threads):
        for j in kids:
            th[j] = t
    lanes = max(T, len(plan.threads))

    def score(s: list[int], th: list[int]) -> list[float]:
        free = [0.0] * lanes
        out = []
        for j in range(k):
            free[th[j]] += F + SR[s[j + 1]] - SR[s[j]]
            out.append(free[th[j]] + IN - I[s[j]])
        out.sort(reverse=True)
        return out

    def valid(s: list[int]) -> bool:
        return all(a < b for a, b in zip(s, s[1:])) and s[k - 1] <= last

    best = score(s, th)
    evals = 0

    def pair_move() -> bool:
        """Shift two cuts at once (each by up to ``PAIR_REACH`` blocks), first improvement."""
        nonlocal best, evals
        shifts = [x for r in range(1, PAIR_REACH + 1) for x in (r, -r)]
        for j1 in range(1, k):
            for j2 in range(j1 + 1, k):
                o1, o2 = s[j1], s[j2]
                for d1 in shifts:
                    s[j1] = o1 + d1
                    for d2 in shifts:
                        s[j2] = o2 + d2
                        if not valid(s):
                            continue
                        sc = score(s, th)
                        evals += 1
                        if sc < best:
                            best = sc
                            return True
                    s[j2] = o2
                s[j1] = o1
                if evals >= max_evals or out_of_time():
                    return False
        return False

    improved = True
    while improved and evals < max_evals and not out_of_time():
        improved = False
        for j in range(1, k):
            for delta in SHIFTS:
                x = s[j] + delta
                if not s[j - 1] < x < s[j + 1] or (j == k - 1 and x > last):
                    continue
                old, s[j] = s[j], x
                sc = score(s, th)
                evals += 1
                if sc < best:
                    best, improved = sc, True
                    break
                s[j] = old
        for j in range(k):
            for t in range(min(T, lanes)):
                if t == th[j]:
                    continue
                old, th[j] = th[j], t
                sc = score(s, th)
                evals += 1
                if sc < best:
                    best, improved = sc, True
                else:
                    th[j] = old
        if not improved and pairs and PAIR_REACH:
            improved = pair_move()
    return LoadingPlan(tuple(s[:k]), canonical_threads([[j for j in range(k) if th[j] == t] for t in range(lanes)]))
