"""Lower bounds that information mixing and intensive steps force on every separable policy
(``formulations/separable_policies.md``, "Lower bounds"), and a gossip construction the
programs are hinted with.

* :func:`min_mixing_messages`: messages every mixing policy sends (permutation steps: a
  device that sends also receives at that step);
* :func:`bytes_lower_bound`: bytes (the cheapest messages that many, per step at most one
  per device);
* :func:`latency_lower_bound` (ms): the silent times, delayed by the cheapest transfer
  into the head (mixing: the head receives at least once) and, at every intensive step,
  by the cheapest transfer into every device.

Each bound is taken over the alternatives the limits leave (the accuracy records that
reach ``min_accuracy``, the ring plan where allowed): valid for every feasible plan.
"""

from __future__ import annotations

import heapq
import itertools
import math

from splitopt.families.separable.data import SeparableData
from splitopt.families.separable.evaluate import evaluate
from splitopt.families.separable.plan import SeparablePlan, Step, identity, make_step

#: records whose accuracy is within this of ``min_accuracy`` count as reaching it (as the program)
ACCURACY_EPS = 1e-12


def min_mixing_messages(g: int) -> int:
    """A lower bound on the messages of any policy of ``g`` devices that mixes (every
    device's features reach every other device), whatever the steps: 0 for ``g <= 1``,
    2 for ``g = 2``, ``2 g`` for ``g >= 3`` (proof in the formulation: every device is
    active, i.e. sends and receives, at least twice except at most one device, which is
    active once, and then its only sender is active three times)."""
    if g <= 1:
        return 0
    if g == 2:
        return 2
    return 2 * g


def fewest_mixing_messages(g: int) -> int:
    """The exact fewest messages of a mixing policy of ``g`` devices over any number of
    permutation steps (Dijkstra over the devices' knowledge, up to relabeling); for checks
    on small ``g`` only (exponential)."""
    if g <= 1:
        return 0
    full = (1 << g) - 1
    relabel = list(itertools.permutations(range(g)))
    moves = [(p, sum(1 for a in range(g) if p[a] != a)) for p in itertools.permutations(range(g))
             if any(p[a] != a for a in range(g))]

    def canon(state: tuple[int, ...]) -> tuple[int, ...]:
        best = None
        for q in relabel:
            new = [0] * g
            for a in range(g):
                bits = 0
                for b in range(g):
                    if state[a] >> b & 1:
                        bits |= 1 << q[b]
                new[q[a]] = bits
            key = tuple(new)
            if best is None or key < best:
                best = key
        assert best is not None
        return best

    start = canon(tuple(1 << a for a in range(g)))
    dist = {start: 0}
    queue = [(0, start)]
    while queue:
        cost, state = heapq.heappop(queue)
        if cost > dist[state]:
            continue
        if all(k == full for k in state):
            return cost
        for p, m in moves:
            new = list(state)
            for a in range(g):
                if p[a] != a:
                    new[p[a]] |= state[a]
            key = canon(tuple(new))
            if key != state and dist.get(key, math.inf) > cost + m:
                dist[key] = cost + m
                heapq.heappush(queue, (cost + m, key))
    raise AssertionError("mixing is always reachable")


def alternatives(d: SeparableData) -> tuple[list[tuple[bool, int]], bool]:
    """What a feasible plan meets: ``([(mixing, intensive steps), ...], ring)``: a plan that
    is not the ring plan meets one of the listed requirement pairs (one per accuracy
    record that reaches ``min_accuracy``, or the limits alone), and ``ring`` says whether
    the ring plan may be feasible."""
    ring = d.ring_available and (d.min_accuracy is None or (d.ring_accuracy is not None and
                                                           d.ring_accuracy >= d.min_accuracy - ACCURACY_EPS))
    if d.min_accuracy is None:
        return [(d.mixing, d.min_intensive_steps)], ring
    records = [r for r in d.records if r.accuracy >= d.min_accuracy - ACCURACY_EPS]
    return [(d.mixing or r.mixing, max(d.min_intensive_steps, r.min_intensive_steps)) for r in records], ring


def cheapest_message_bytes(d: SeparableData, step: int) -> int:
    """The fewest bytes one message at ``step`` can carry (any level and dtype)."""
    return min(d.message_bytes(step, level, dtype) for level in range(d.levels) for dtype in d.dtypes)


def policy_bytes_bound(d: SeparableData, mixing: bool, intensive: int) -> float:
    """Bytes (lower bound) of a policy (not the ring plan) that mixes (if ``mixing``) and
    has at least ``intensive`` intensive steps: at least ``max(min_mixing_messages,
    G intensive)`` messages, at most G per step, each costing at least its step's cheapest
    message; ``inf`` when no policy has that many."""
    need = max(min_mixing_messages(d.g) if mixing else 0, d.g * intensive)
    costs = sorted(cheapest_message_bytes(d, j) for j in range(d.steps))
    total = 0.0
    for c in costs:
        if need <= 0:
            break
        take = min(need, d.g)
        total += take * c
        need -= take
    return math.inf if need > 0 else total


def cheapest_transfer_ms(d: SeparableData, step: int, g: int, h: int) -> float:
    """The shortest transfer (ms) of a message ``g -> h`` at ``step`` (any level and dtype:
    a transfer takes the link's latency plus the bytes at its rate, so the fewest bytes;
    nothing takes no time)."""
    return d.transfer_ms(g, h, cheapest_message_bytes(d, step))


def policy_latency_bound(d: SeparableData, mixing: bool, intensive: int) -> float:
    """Latency (ms, lower bound) of a policy (not the ring plan) that mixes (if ``mixing``:
    the head receives at some step) with at least ``intensive`` intensive steps (every
    device receives). A dynamic program over the steps whose states are (intensive steps
    so far, capped; whether the head has received) and whose values are lower bounds on
    every device's ready time: a step is silent (compute only), or the head receives
    (its ready time at least the earliest arrival: a sender's snapshot at its own lower
    bound plus the cheapest transfer), or every device receives. Merging two paths into a
    state keeps the elementwise minimum, a lower bound on both. ``inf`` when impossible."""
    G, head = d.g, d.head
    k = intensive
    start = [float(t) for t in d.stem_ms]
    states: dict[tuple[int, bool], list[float]] = {(0, False): start}

    def merge(into: dict[tuple[int, bool], list[float]], key: tuple[int, bool], times: list[float]) -> None:
        old = into.get(key)
        into[key] = times if old is None else [min(a, b) for a, b in zip(old, times)]

    fewest = [cheapest_message_bytes(d, j) for j in range(d.steps)]
    tau = [[[d.transfer_ms(g, h, fewest[j]) if g != h and d.has_link(g, h) else math.inf for h in range(G)]
            for g in range(G)] for j in range(d.steps)]  # the cheapest transfers (cheapest_transfer_ms)
    for j in range(d.steps):
        new: dict[tuple[int, bool], list[float]] = {}
        for (c, heard), ready in states.items():
            snap, done = [], []
            for g in range(G):
                first_ms, rest_ms = d.step_compute_ms(g, j)
                snap.append(ready[g] + first_ms)
                done.append(snap[-1] + rest_ms)

            def arrival(h: int) -> float:
                return min(snap[g] + tau[j][g][h] for g in range(G))

            merge(new, (c, heard), list(done))
            if G > 1:
                got = list(done)
                got[head] = max(done[head], arrival(head))
                merge(new, (c, True), got)
                if k:
                    every = [max(done[h], arrival(h)) for h in range(G)]
                    merge(new, (min(c + 1, k), True), every)
        states = new
    ends = [ready[head] for (c, heard), ready in states.items() if c >= k and (heard or not mixing or G < 2)]
    return min(ends, default=math.inf) + d.head_ms


def ring_latency_ms(d: SeparableData, inst) -> float:
    """The ring plan's latency (ms)."""
    return evaluate(inst, SeparablePlan((), ring=True)).latency_ms


def bytes_lower_bound(d: SeparableData) -> float:
    """Bytes no feasible plan goes below (0 where nothing is forced; ``inf`` when no plan
    can be feasible)."""
    alts, ring = alternatives(d)
    values = [policy_bytes_bound(d, mixing, k) for mixing, k in alts]
    if ring:
        values.append(d.ring_bytes)
    return min(values, default=math.inf)


def latency_lower_bound(d: SeparableData, inst, silent_ms: float) -> float:
    """Latency (ms) no feasible plan goes below, at least ``silent_ms`` (the silent
    policy's latency: every message only delays its receiver, and the ring plan
    synchronises every block); ``silent_ms`` where no plan can be feasible."""
    alts, ring = alternatives(d)
    values = [policy_latency_bound(d, mixing, k) for mixing, k in alts]
    if ring:
        values.append(ring_latency_ms(d, inst))
    best = min(values, default=math.inf)
    return silent_ms if math.isinf(best) else max(silent_ms, best)


def star_spread_plans(d: SeparableData) -> list[SeparablePlan]:
    """Mixing policies that delay the head little: the head swaps with every other device
    in turn (each of them has not received before, so its message is not delayed), then
    the last of them, who knows everything, spreads it among the others by swaps that
    avoid the head; placed at every offset of the steps, at the cheapest option. Empty
    where a needed link is missing or the steps are too few."""
    G, head = d.g, d.head
    if G < 2:
        return []
    others = [g for g in range(G) if g != head]
    if not all(d.has_link(head, g) and d.has_link(g, head) for g in others):
        return []
    level, dtype = min(((lv, t) for lv in range(d.levels) for t in d.dtypes),
                       key=lambda o: (d.message_bytes(0, o[0], o[1]), o))
    rounds: list[list[tuple[int, int]]] = [[(head, g)] for g in others]
    knows: dict[int, set[int]] = {g: set() for g in others}
    told: set[int] = set()
    for g in others:  # what each knows after the star phase: the head's and the earlier ones'
        told.add(g)
        knows[g] = set(told)
    done = {g for g in others if len(knows[g]) == len(others)}
    while len(done) < len(others):
        free = [g for g in others if g not in done]
        pairs = []
        for a in sorted(done):
            b = next((x for x in free if d.has_link(a, x) and d.has_link(x, a)), None)
            if b is None:
                continue
            free.remove(b)
            pairs.append((a, b))
        if not pairs:
            return []
        rounds.append(pairs)
        done |= {b for _, b in pairs}
    if len(rounds) > d.steps:
        return []
    out = []
    for offset in range(d.steps - len(rounds) + 1):
        steps: list[Step] = [make_step(d, identity(G)) for _ in range(d.steps)]
        for r, pairs in enumerate(rounds):
            p = list(identity(G))
            for a, b in pairs:
                p[a], p[b] = b, a
            steps[offset + r] = make_step(d, p, level, dtype)
        out.append(SeparablePlan(tuple(steps)))
    return out


def cycle_gossip_rounds(g: int) -> list[list[tuple[int, int]]]:
    """The rounds (each a list of arcs ``sender -> receiver`` forming disjoint cycles) of a
    mixing policy of ``g >= 6`` devices with ``4 g - 9`` messages, one fewer than two-way
    gossip's ``4 g - 8`` (``formulations/separable_policies.md``, Theorem 1's remark). Six
    devices: a triangle ``t1, t2, t3`` with partners ``p1, p2, p3``: swaps ``t_i <-> p_i``,
    the 3-cycle ``t1 -> t2 -> t3 -> t1``, swaps ``t1 <-> p2``, ``t2 <-> p3``, ``t3 <-> p1``
    (6 + 3 + 6 = 15 messages; after them all six know everything). Every further device
    first swaps with one of the six (up to six in a round) and at the end with one of them
    again (4 messages each). Empty below six devices."""
    if g < 6:
        return []
    t, p = (0, 1, 2), (3, 4, 5)
    extras = list(range(6, g))
    swap = lambda a, b: [(a, b), (b, a)]  # noqa: E731
    batches = [extras[i:i + 6] for i in range(0, len(extras), 6)]
    rounds = [[arc for x, a in zip(batch, range(6)) for arc in swap(x, a)] for batch in batches]
    rounds.append([arc for i in range(3) for arc in swap(t[i], p[i])])
    rounds.append([(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
    rounds.append([arc for i in range(3) for arc in swap(t[i], p[(i + 1) % 3])])
    rounds += [[arc for x, a in zip(batch, range(6)) for arc in swap(x, a)] for batch in batches]
    return rounds


def cycle_gossip_plans(d: SeparableData) -> list[SeparablePlan]:
    """The policy of :func:`cycle_gossip_rounds` on the cheapest steps (its rounds in order
    on the least message bytes, each at its cheapest level and dtype), for the bytes
    objective under mixing; empty where a needed link is missing or the steps are too
    few."""
    rounds = cycle_gossip_rounds(d.g)
    if not rounds or len(rounds) > d.steps:
        return []
    if not all(d.has_link(a, b) for arcs in rounds for a, b in arcs):
        return []
    options = [(lv, t) for lv in range(d.levels) for t in d.dtypes]
    cost = [min(d.message_bytes(j, lv, t) for lv, t in options) for j in range(d.steps)]
    chosen = sorted(sorted(range(d.steps), key=lambda j: (cost[j], j))[:len(rounds)])
    steps: list[Step] = [make_step(d, identity(d.g)) for _ in range(d.steps)]
    for j, arcs in zip(chosen, rounds):
        send_to = list(identity(d.g))
        for a, b in arcs:
            send_to[a] = b
        level, dtype = min(options, key=lambda o: (d.message_bytes(j, o[0], o[1]), o))
        steps[j] = make_step(d, send_to, level, dtype)
    return [SeparablePlan(tuple(steps))]
