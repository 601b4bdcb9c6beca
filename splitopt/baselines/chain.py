"""Baselines of the chain family (problem ``chain``):

* ``chain-brute-force``: every monotone placement (small instances), the reference the
  exact programs are tested against;
* ``chain-dp``: the exact dynamic program over contiguous segments (DNNPipe /
  PipeDream style) for a layer graph that is a chain, where contiguous segments are
  every valid placement; memory limits included (``formulations/chain_split.md``);
* ``chain-scan``: HiveMind-style linear search: device by device, the split point that
  is best if everything after it ran on the next device (and whose devices decided so far
  fit their memory), kept and never revisited;
* ``best-single-device``: all layers on the one device that is best (the cloud is
  JMSNAS's "cloud computing" baseline).

The last two run on any DAG (segments in file order are valid placements); ``chain-dp``
refuses a graph that is not a chain.
"""

from __future__ import annotations

import math
import time

import numpy as np

from splitopt.baselines.common import check_problem, finish
from splitopt.chain import chain_links, chain_tensors, compute_table, evaluate, plan_from_indices
from splitopt.errors import NotApplicable
from splitopt.instance import Instance
from splitopt.result import BackendOutput, Status
from splitopt.solvers.base import Backend, SolveOptions

#: most placements chain-brute-force enumerates
BRUTE_FORCE_LIMIT = 200_000


class ChainBruteForceBackend(Backend):
    name = "chain-brute-force"
    kind = "exact"
    problems = ("chain",)
    description = "every monotone chain placement, evaluated (small instances)"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        check_problem(self, inst)
        M, N = len(inst.settings.chain), len(inst.layers)
        if M ** N > BRUTE_FORCE_LIMIT:
            raise NotApplicable(f"chain-brute-force: {M}^{N} placements is too many (limit {BRUTE_FORCE_LIMIT:,})")
        t0 = time.perf_counter()
        best, best_ms, count = None, math.inf, 0
        names = [l.name for l in inst.layers]
        inputs = [[src for src in l.inputs if src in inst.layer_by_name] for l in inst.layers]
        pos = inst.position

        def walk(i: int, index: list[int]) -> None:
            nonlocal best, best_ms, count
            if i == N:
                count += 1
                plan = plan_from_indices(inst, dict(zip(names, index)))
                m = evaluate(inst, plan)
                if m.feasible and m.objective_ms < best_ms - 1e-12:
                    best, best_ms = plan, m.objective_ms
                return
            low = max((index[pos[src]] for src in inputs[i]), default=0)
            for m in range(low, M):
                index.append(m)
                walk(i + 1, index)
                index.pop()

        walk(0, [])
        extra = {"placements": count, "solve_s": time.perf_counter() - t0}
        if best is None:
            return BackendOutput(Status.INFEASIBLE, message="chain-brute-force: no placement meets the memory limits",
                                 extra=extra)
        return BackendOutput(Status.OPTIMAL, plan=best, objective=best_ms, bound=best_ms, extra=extra)


# ----- contiguous segments in file order ------------------------------------------------------

def _prefix_compute(inst: Instance) -> np.ndarray:
    """P[m, c]: compute (ms) of the first c layers on device m."""
    table = compute_table(inst)
    M = len(inst.settings.chain)
    P = np.zeros((M, len(inst.layers) + 1))
    for i, layer in enumerate(inst.layers):
        P[:, i + 1] = P[:, i] + np.array(table[layer.name])
    return P


def _cross_ms(inst: Instance) -> np.ndarray:
    """T[m, c]: time (ms) of link m when the first c layers run at positions <= m and
    the rest after: every tensor produced before c and read at or after c."""
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


def _segments_plan(inst: Instance, cuts: list[int]):
    """Plan from cuts c_0 <= ... <= c_{M-2}: device m runs file positions [c_{m-1}, c_m)."""
    bounds = [0] + list(cuts) + [len(inst.layers)]
    index = {}
    for m in range(len(bounds) - 1):
        for i in range(bounds[m], bounds[m + 1]):
            index[inst.layers[i].name] = m
    return plan_from_indices(inst, index)


def is_chain_graph(inst: Instance) -> str | None:
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


class ChainDpBackend(Backend):
    name = "chain-dp"
    kind = "exact"
    problems = ("chain",)
    description = "exact DP over contiguous segments for chain-shaped graphs (DNNPipe/PipeDream style)"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        check_problem(self, inst)
        broken = is_chain_graph(inst)
        if broken is not None:
            raise NotApplicable(
                f"chain-dp: the layer graph is not a chain (at layer '{broken}'); use milp-cbc, milp-highs or cpsat"
            )
        t0 = time.perf_counter()
        s = inst.settings
        M, N = len(s.chain), len(inst.layers)
        P, T = _prefix_compute(inst), _cross_ms(inst)
        tensors = chain_tensors(inst)
        # h[j]: bytes of out(j-1), j = 0..N (j = 0: the raw input); pair[k] = h[k] + h[k+1]
        h = np.array([tensors.held_bytes[inst.inputs[0].name]] + [tensors.held_bytes[l.name] for l in inst.layers])
        pair = h[:-1] + h[1:]
        W = np.concatenate([[0.0], np.cumsum([l.weights * s.cloud_bits / 8.0 for l in inst.layers])])
        limits = [inst.device_by_name[d].memory_bytes * (1 + 1e-9) for d in s.chain]
        throughput = s.objective == "throughput"

        f_prev = np.full(N + 1, np.inf)
        f_prev[0] = 0.0
        choice = np.zeros((M, N + 1), dtype=int)
        for m in range(M):
            f = np.full(N + 1, np.inf)
            last = m == M - 1
            for b in range(N + 1) if not last else [N]:
                a = np.arange(b + 1)
                # memory of segment [a, b) on device m
                if b > 0:
                    peak = np.maximum.accumulate(pair[:b][::-1])[::-1]  # peak[a] = max pair[a..b-1]
                    mem = np.empty(b + 1)
                    mem[:b] = W[b] - W[:b] + peak
                    mem[b] = h[b]  # empty segment: the tensor passing through
                else:
                    mem = np.array([h[0]])
                ok = mem <= limits[m]
                stage = P[m, b] - P[m, a] + (0.0 if last else T[m, b])
                cost = np.maximum(f_prev[a], stage) if throughput else f_prev[a] + stage
                cost = np.where(ok, cost, np.inf)
                j = int(np.argmin(cost))
                f[b], choice[m, b] = cost[j], j
            f_prev = f
        solve_s = time.perf_counter() - t0
        if not np.isfinite(f_prev[N]):
            return BackendOutput(Status.INFEASIBLE, message="chain-dp: no placement meets the memory limits",
                                 extra={"solve_s": solve_s})
        cuts, b = [], N
        for m in range(M - 1, 0, -1):
            b = int(choice[m, b])
            cuts.append(b)
        plan = _segments_plan(inst, cuts[::-1])
        value = float(f_prev[N])
        return BackendOutput(Status.OPTIMAL, plan=plan, objective=value, bound=value, extra={"solve_s": solve_s})


class ChainScanBackend(Backend):
    name = "chain-scan"
    kind = "baseline"
    problems = ("chain",)
    description = "HiveMind-style linear search: one split point per device, greedy along the chain"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        check_problem(self, inst)
        M, N = len(inst.settings.chain), len(inst.layers)
        P, T = _prefix_compute(inst), _cross_ms(inst)
        throughput = inst.settings.objective == "throughput"
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
                loads = evaluate(inst, _segments_plan(inst, cuts + [c] + [N] * (M - 2 - m))).devices
                if all(loads[d].memory_bytes <= loads[d].memory_limit * (1 + 1e-9) for d in decided):
                    chosen = c
                    break
            cuts.append(chosen if chosen is not None else scored[0][1])
        return finish(inst, _segments_plan(inst, cuts), self.name)


class BestSingleDeviceBackend(Backend):
    name = "best-single-device"
    kind = "baseline"
    problems = ("chain",)
    description = "all layers on the one device that is best (the input forwarded to it)"

    def solve(self, inst: Instance, options: SolveOptions) -> BackendOutput:
        check_problem(self, inst)
        M, N = len(inst.settings.chain), len(inst.layers)
        plans = [_segments_plan(inst, [0] * m + [N] * (M - 1 - m)) for m in range(M)]
        scored = [(not evaluate(inst, p).feasible, evaluate(inst, p).objective_ms, i) for i, p in enumerate(plans)]
        best = min(scored)
        return finish(inst, plans[best[2]], self.name)


