"""Methods of the chain family (problem ``chain``) besides the generic programs:

* ``chain-dp``: the exact dynamic program over contiguous segments (DNNPipe /
  PipeDream style) for a layer graph that is a chain, where contiguous segments are
  every valid placement; memory limits included (``formulations/chain_split.md``);
* ``segments-dp``: the same DP on any layer DAG (segments in file order are valid
  placements there too, and the link times count every tensor that crosses a cut), with
  memory left to the evaluator: the best contiguous pipeline split (PipeDream-style), not
  an optimum (a device may hold layers that are not consecutive in file order);
* ``chain-scan``: HiveMind-style linear search: device by device, the split point that
  is best if everything after it ran on the next device (and whose devices decided so far
  fit their memory), kept and never revisited;
* ``best-single-device``: all layers on the one device that is best (the cloud is
  JMSNAS's "cloud computing" baseline).

The last three run on any DAG (segments in file order are valid placements); ``chain-dp``
refuses a graph that is not a chain.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from splitopt.core.errors import NotApplicable
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.chain.data import chain_links, chain_tensors, compute_table
from splitopt.families.chain.evaluate import evaluate
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.chain.settings import ChainInstance

if TYPE_CHECKING:  # numpy is imported where it is used: listing the methods must not load it
    import numpy as np


# ----- contiguous segments in file order ------------------------------------------------------

def _prefix_compute(inst: ChainInstance) -> np.ndarray:
    """P[m, c]: compute (ms) of the first c layers on device m."""
    import numpy as np

    table = compute_table(inst)
    M = len(inst.settings.chain)
    P = np.zeros((M, len(inst.layers) + 1))
    for i, layer in enumerate(inst.layers):
        P[:, i + 1] = P[:, i] + np.array(table[layer.name])
    return P


def _cross_ms(inst: ChainInstance) -> np.ndarray:
    """T[m, c]: time (ms) of link m when the first c layers run at positions <= m and
    the rest after: every tensor produced before c and read at or after c."""
    import numpy as np

    tensors = chain_tensors(inst)
    N = len(inst.layers)
    nbytes = np.zeros(N + 1)
    for t in tensors.names:
        if not tensors.consumers[t]:
            continue
        start = 0 if tensors.producer[t] is None else inst.position[t] + 1
        nbytes[start:tensors.last_step[t] + 1] += tensors.sent_bytes[t]
    links = chain_links(inst)
    M = len(inst.settings.chain)
    T = np.zeros((M, N + 1))
    for m, link in enumerate(links):
        T[m] = [inst.link_transfer_ms(link, b) for b in nbytes]
    return T


def segments_plan(inst: ChainInstance, cuts: list[int]):
    """Plan from cuts c_0 <= ... <= c_{M-2}: device m runs file positions [c_{m-1}, c_m)."""
    bounds = [0] + list(cuts) + [len(inst.layers)]
    index = {}
    for m in range(len(bounds) - 1):
        for i in range(bounds[m], bounds[m + 1]):
            index[inst.layers[i].name] = m
    return plan_from_indices(inst, index)


def is_chain_graph(inst: ChainInstance) -> str | None:
    """None if the layer graph is a chain (one raw input, each layer reads only the
    previous tensor), else the first layer that breaks it."""
    if len(inst.inputs) != 1:
        return inst.layers[0].name
    previous = inst.inputs[0].name
    for layer in inst.layers:
        if set(layer.inputs) != {previous} or len(inst.consumers[previous]) != 1:
            return layer.name
        previous = layer.name
    return None


def bottleneck_step(g: np.ndarray, P: np.ndarray, c: np.ndarray,
                     stop: Callable[[], bool] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """``f[b] = min_{a <= b} max(g[a], c[b] - P[a])`` for every ``b`` and an ``a`` that
    attains it (the throughput DP's step: ``g`` the previous devices' best bottleneck,
    ``P`` this device's prefix compute, non-decreasing, ``c[b] = P[b] + T[b]``; ms).

    For ``a`` with ``key[a] = g[a] + P[a] >= c[b]`` the term is ``g[a]``, else ``c[b] -
    P[a]``, so over any set of ``a`` the minimum is the least ``g`` among keys at or above
    ``c[b]`` or ``c[b]`` less the largest ``P`` (the largest ``a``: ``P`` is
    non-decreasing) among keys below it: one binary search in the set sorted by key, with
    a suffix minimum and a prefix maximum. The ``b`` are taken in blocks of about
    ``sqrt(N)``: the ``a`` before the block are one such sorted set (filtered from one
    global sort), those inside it a small triangle done directly. ``O(N^1.5)`` numpy
    work instead of the ``O(N^2)`` of every pair; ``stop()`` is asked once per block
    (None when it says to stop). Written here: no library offers this min-max
    convolution."""
    import numpy as np

    n = len(g)
    key = g + P
    order = np.argsort(key, kind="stable")
    f = np.full(n, np.inf)
    arg = np.zeros(n, dtype=int)
    block = max(64, int(np.sqrt(n)))
    for b0 in range(0, n, block):
        if stop is not None and stop():
            return None
        b1 = min(n, b0 + block)
        queries = c[b0:b1]
        best = np.full(b1 - b0, np.inf)
        best_a = np.zeros(b1 - b0, dtype=int)
        if b0 > 0:
            old = order[order < b0]  # the a before the block, by key
            keys = key[old]
            at = np.searchsorted(keys, queries, side="left")  # keys[at:] >= query
            # least g over keys[at:] (a suffix minimum) and where it is attained
            rev = g[old][::-1]
            running = np.minimum.accumulate(rev)
            drops = np.flatnonzero(np.concatenate([[True], rev[1:] < running[:-1]]))
            has = at < len(old)
            if has.any():
                r = len(old) - 1 - at[has]  # the suffix from at is the reversed prefix to r
                best[has] = running[r]
                best_a[has] = old[len(old) - 1 - drops[np.searchsorted(drops, r, side="right") - 1]]
            # largest a among keys[:at]: c - P[a] is least there
            prefix_a = np.maximum.accumulate(old)
            low = at > 0
            if low.any():
                a_low = prefix_a[at[low] - 1]
                value = queries[low] - P[a_low]
                better = value < best[low]
                idx = np.flatnonzero(low)[better]
                best[idx] = value[better]
                best_a[idx] = a_low[better]
        # the a inside the block, a <= b
        inner = np.arange(b0, b1)
        terms = np.maximum(g[inner][None, :], queries[:, None] - P[inner][None, :])
        terms[inner[None, :] > inner[:, None]] = np.inf
        j = np.argmin(terms, axis=1)
        value = terms[np.arange(b1 - b0), j]
        better = value < best
        best[better] = value[better]
        best_a[better] = inner[j[better]]
        f[b0:b1], arg[b0:b1] = best, best_a
    return f, arg


def _segments_dp(inst: ChainInstance, memory: bool,
                 stop: Callable[[], bool] | None = None) -> tuple[float, list[int]] | None:
    """The best cuts c_0 <= ... <= c_{M-2} of the file order (device m runs [c_{m-1}, c_m))
    and their objective (ms): ``f_m(b) = min_a f_{m-1}(a) (+ or max) [P_m(b) - P_m(a) +
    T_m(b)]``, ``O(N^2 M)`` with numpy; without memory rows, for the latency objective
    ``O(N M)``: ``f_m(b) = P_m(b) + T_m(b) + min_{a <= b} (f_{m-1}(a) - P_m(a))``, a
    running minimum, and for throughput ``O(N^1.5 M)`` (``bottleneck_step``; the last
    device, one end, directly). ``memory``: only segments that fit their device, by the chain
    formula (weights + the largest adjacent pair of held tensors), exact only on a chain
    graph. None when no cuts fit, or when ``stop()`` (asked once per device and end
    position; in the throughput step once per block of ends) says to stop."""
    import numpy as np

    s = inst.settings
    M, N = len(s.chain), len(inst.layers)
    P, T = _prefix_compute(inst), _cross_ms(inst)
    if memory:
        tensors = chain_tensors(inst)
        # h[j]: bytes of out(j-1), j = 0..N (j = 0: the raw input); pair[k] = h[k] + h[k+1]
        h = np.array([tensors.held_bytes[inst.inputs[0].name]] + [tensors.held_bytes[l.name] for l in inst.layers])
        pair = h[:-1] + h[1:]
        W = np.concatenate([[0.0], np.cumsum([l.weights * s.cloud_bits / 8.0 for l in inst.layers])])
        limits = [inst.device_by_name[d].memory_bytes * (1 + 1e-9) for d in s.chain]
    throughput = inst.objective == "throughput"

    f_prev = np.full(N + 1, np.inf)
    f_prev[0] = 0.0
    choice = np.zeros((M, N + 1), dtype=int)
    for m in range(M):
        f = np.full(N + 1, np.inf)
        last = m == M - 1
        if not memory and not throughput:  # the running minimum (first index on ties, as argmin)
            g = f_prev - P[m]
            running = np.minimum.accumulate(g)
            improved = np.flatnonzero(np.concatenate([[True], running[1:] < running[:-1]]))
            best_a = improved[np.searchsorted(improved, np.arange(N + 1), side="right") - 1]
            f = P[m] + (0.0 if last else T[m]) + running
            if last:
                f[:N] = np.inf
            choice[m] = best_a
            f_prev = f
            if stop is not None and stop():
                return None
            continue
        if not memory and not last:  # throughput: the min-max step in O(N^1.5)
            step = bottleneck_step(f_prev, P[m], P[m] + T[m], stop)
            if step is None:
                return None
            f_prev, choice[m] = step
            continue
        for b in range(N + 1) if not last else [N]:
            if stop is not None and stop():
                return None
            a = np.arange(b + 1)
            stage = P[m, b] - P[m, a] + (0.0 if last else T[m, b])
            cost = np.maximum(f_prev[a], stage) if throughput else f_prev[a] + stage
            if memory:  # memory of segment [a, b) on device m
                if b > 0:
                    peak = np.maximum.accumulate(pair[:b][::-1])[::-1]  # peak[a] = max pair[a..b-1]
                    mem = np.empty(b + 1)
                    mem[:b] = W[b] - W[:b] + peak
                    # empty segment: the tensor passing through; the last layer's output
                    # (read by no layer) occupies its producer's device only
                    mem[b] = h[b] if b < N else 0.0
                else:
                    mem = np.array([h[0]])
                cost = np.where(mem <= limits[m], cost, np.inf)
            j = int(np.argmin(cost))
            f[b], choice[m, b] = cost[j], j
        f_prev = f
    if not np.isfinite(f_prev[N]):
        return None
    cuts, b = [], N
    for m in range(M - 1, 0, -1):
        b = int(choice[m, b])
        cuts.append(b)
    return float(f_prev[N]), cuts[::-1]


def chain_dp(inst: ChainInstance, options: SolveOptions) -> BackendOutput:
    """exact DP over contiguous segments for chain-shaped graphs (DNNPipe/PipeDream style)."""
    broken = is_chain_graph(inst)
    if broken is not None:
        raise NotApplicable(
            f"chain-dp: the layer graph is not a chain (at layer '{broken}'); use milp-cbc, milp-highs or cpsat"
        )
    t0 = time.perf_counter()
    best = _segments_dp(inst, memory=True)
    solve_s = time.perf_counter() - t0
    if best is None:
        return BackendOutput(Status.INFEASIBLE, message="chain-dp: no placement meets the memory limits",
                             extra={"solve_s": solve_s})
    value, cuts = best
    return BackendOutput(Status.OPTIMAL, plan=segments_plan(inst, cuts), objective=value, bound=value,
                         extra={"solve_s": solve_s})


def contiguous_split_plan(inst: ChainInstance, stop: Callable[[], bool] | None = None):
    """The best contiguous split of the file order without memory limits (``segments-dp``'s
    plan); None where ``stop()`` said to stop first."""
    found = _segments_dp(inst, memory=False, stop=stop)  # without memory rows some cuts always exist
    return None if found is None else segments_plan(inst, found[1])


def segments_dp(inst: ChainInstance, options: SolveOptions) -> BackendOutput:
    """best contiguous segments of the file order by DP, on any layer DAG (memory left to the evaluator)."""
    t0 = time.perf_counter()
    best = _segments_dp(inst, memory=False, stop=options.out_of_time)  # some cuts always exist: None is the stop
    if best is None:
        return BackendOutput(Status.NO_SOLUTION_FOUND, message="segments-dp: the time limit stopped the DP",
                             extra={"solve_s": time.perf_counter() - t0, "stopped_by": "time limit"})
    value, cuts = best
    return BackendOutput(Status.FEASIBLE, plan=segments_plan(inst, cuts), objective=value,
                         extra={"solve_s": time.perf_counter() - t0})


def chain_scan(inst: ChainInstance, options: SolveOptions) -> BackendOutput:
    """HiveMind-style linear search: one split point per device, greedy along the chain.
    Past the deadline a device takes its best split point without the memory check (each
    check evaluates a plan: thousands of them on a 3,000-layer graph)."""
    M, N = len(inst.settings.chain), len(inst.layers)
    P, T = _prefix_compute(inst), _cross_ms(inst)
    throughput = inst.objective == "throughput"
    cuts: list[int] = []
    for m in range(M - 1):
        low = cuts[-1] if cuts else 0
        scored = []
        for c in range(low, N + 1):
            trial = cuts + [c] + [N] * (M - 2 - m)
            bounds = [0] + trial + [N]
            stages = [P[d, bounds[d + 1]] - P[d, bounds[d]] + (T[d, bounds[d + 1]] if d < M - 1 else 0.0)
                      for d in range(M)]
            scored.append((max(stages) if throughput else sum(stages), c))
        scored.sort()
        chosen = None
        decided = range(M) if m == M - 2 else range(m + 1)  # the last choice decides every device
        for _, c in scored:  # the best split point whose decided devices fit their memory
            if options.out_of_time():
                break  # past the deadline: the best split point, fitting or not
            loads = evaluate(inst, segments_plan(inst, cuts + [c] + [N] * (M - 2 - m))).devices
            if all(loads[d].memory_bytes <= loads[d].memory_limit * (1 + 1e-9) for d in decided):
                chosen = c
                break
        cuts.append(chosen if chosen is not None else scored[0][1])
    return BackendOutput(Status.FEASIBLE, plan=segments_plan(inst, cuts))


def best_single_device(inst: ChainInstance, options: SolveOptions) -> BackendOutput:
    """all layers on the one device that is best (the input forwarded to it)."""
    M, N = len(inst.settings.chain), len(inst.layers)
    plans = [segments_plan(inst, [0] * m + [N] * (M - 1 - m)) for m in range(M)]
    scored = [(not evaluate(inst, p).feasible, evaluate(inst, p).objective_ms, i) for i, p in enumerate(plans)]
    best = min(scored)
    return BackendOutput(Status.FEASIBLE, plan=plans[best[2]])


def chain_cut(inst: ChainInstance, options: SolveOptions) -> BackendOutput:
    """exact minimum cut for the latency objective on any layer DAG where no memory limit binds (Ishikawa graph)."""
    from splitopt.families.chain.bound import memory_free_latency
    from splitopt.families.chain.cut import cut_plan, cut_refusal

    if inst.objective != "latency":
        raise NotApplicable("chain-cut: solves the 'latency' objective (a sum of stage times is a cut; the "
                            "throughput bottleneck is not); use cpsat")
    why = cut_refusal(inst)
    if why is not None:
        raise NotApplicable(f"chain-cut: {why}")
    t0 = time.perf_counter()
    cut = memory_free_latency(inst)  # solved once per instance (auto's exact_method asked already)
    plan = cut_plan(inst, cut)
    metrics = evaluate(inst, plan)
    extra = {"solve_s": time.perf_counter() - t0}
    if not metrics.feasible:
        return BackendOutput(
            Status.NO_SOLUTION_FOUND, plan=plan, bound=cut.bound_ms, extra=extra,
            message=("chain-cut: the optimum without memory limits breaks one (" + metrics.violations[0] +
                     "); its latency is a lower bound; use cpsat for the memory-limited optimum"))
    return BackendOutput(Status.OPTIMAL, plan=plan, objective=cut.bound_ms + cut.slack_ms, bound=cut.bound_ms,
                         objective_tolerance_ms=cut.slack_ms, one_sided=True, extra=extra)
