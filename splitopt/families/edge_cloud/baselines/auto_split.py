"""AUTO-SPLIT (Banitalebi-Dehkordi et al., KDD 2021), Algorithm 1: joint split and
per-layer bit-widths, problem ``split_bits``.

1. Potential splits, Eq. 6, on the transmission DAG (the instance's execution order, a
   topological order): split n puts the first n layers on the edge. T_n = bytes of every
   tensor crossing that cut at the lowest transmission precision (layer outputs at
   ``transmit_bits`` if set, else at the lowest candidate bit-width b_min; raw inputs at
   their own bits). Keep n with T_n <= T_0 and
   b_min * (sum of edge weight elements + max edge output elements) / 8 <= M  (bytes).
2. For each potential n >= 1, a grid over k_w, k_a in the candidate bits B (ascending):
   M_wgt = sum of edge weights * B[k_w] / 8 and M_act = max of edge output elements *
   B[k_a] / 8 (bytes, the paper's chain formula); pairs with M_wgt + M_act > M are skipped.
   * Eq. 8 (min summed weight error s.t. weight bytes <= M_wgt, a multiple-choice
     knapsack) by the Lagrangian method: for a multiplier lam >= 0 each layer picks
     argmin_b weight_error[b] + lam * weights * b / 8 (ties: fewer bytes); total bytes
     fall as lam grows, so we bisect over lam for the smallest lam whose choice fits.
     The lam values tried are 0 and one point inside each interval between consecutive
     breakpoints (where some layer changes its choice), so the search is exact over the
     Lagrangian solutions; past the last breakpoint every layer is at b_min, which fits.
   * Eq. 9 (min summed activation error s.t. max activation bytes <= M_act): each layer
     independently takes its lowest-error bit-width whose output fits (ties: fewer bits).
3. Every candidate (plus cloud-only) is evaluated with ``splitopt.evaluate`` and the
   lowest-latency one meeting every budget (edge memory as the evaluator walks it, error
   budget) is returned (ties: lower error, then fewer edge layers). Cloud-only is always
   a candidate, so the result is never worse than it, nor than any edge-only (n = N)
   candidate the grid produced (Remark 5). The paper has no ``settings.edge_required``:
   when no candidate meets it, the least-violating one comes back as NO_SOLUTION_FOUND.

The Lagrangian only reaches choices on the lower convex hull of (bytes, error): layers
with identical trade-offs switch together, so a budget between two hull points is
filled by the cheaper one, as in the paper's method. Errors at or above ``cloud_bits``
are zero, as in the evaluator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from splitopt.families.edge_cloud.baselines.common import finish, fits
from splitopt.families.edge_cloud.evaluate import Metrics, evaluate
from splitopt.core.instance import Layer
from splitopt.core.plan import Plan
from splitopt.core.result import BackendOutput, Status
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.plan import edge_cloud_plan, uniform_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

#: an option of one layer in Eq. 8: (bytes, error, bits)
Option = tuple[float, float, int]


def weight_error(inst: EdgeCloudInstance, layer: Layer, bits: int) -> float:
    if layer.weights == 0 or bits >= inst.settings.cloud_bits:
        return 0.0
    return layer.weight_error[bits]


def activation_error(inst: EdgeCloudInstance, layer: Layer, bits: int) -> float:
    if bits >= inst.settings.cloud_bits:
        return 0.0
    return layer.activation_error[bits]


# ----- Eq. 6 ------------------------------------------------------------------------------
def cut_bytes(inst: EdgeCloudInstance, n: int, layer_bits: int) -> float:
    """T_n (bytes): tensors crossing the cut after the first n layers, layer outputs at
    ``layer_bits`` and raw inputs at their own bits."""
    edge = {layer.name for layer in inst.layers[:n]}
    total = 0.0
    for t in inst.inputs:
        if any(r not in edge for r in inst.consumers[t.name]):
            total += t.elements * t.bits / 8.0
    for layer in inst.layers[:n]:
        if any(r not in edge for r in inst.consumers[layer.name]):
            total += layer.output_elements * layer_bits / 8.0
    return total


def cut_bytes_all(inst: EdgeCloudInstance, layer_bits: int) -> list[float]:
    """``[cut_bytes(inst, n, layer_bits) for n in 0..N]`` in one sweep, O(N + edges): a
    tensor made at position p (a raw input: -1) crosses cut n exactly for p < n <= its
    last reader's position, so its size enters a difference array at p + 1 and leaves it
    after that last reader (a tensor nobody reads never crosses). Sizes are summed in
    bits, integers, so the sums are exact and ties with T_0 stay ties."""
    N = len(inst.layers)
    position = {layer.name: i for i, layer in enumerate(inst.layers)}
    delta = [0] * (N + 2)

    def add(made_at: int, name: str, size_bits: int) -> None:
        readers = inst.consumers[name]
        if readers:
            delta[made_at + 1] += size_bits
            delta[max(position[r] for r in readers) + 1] -= size_bits

    for t in inst.inputs:
        add(-1, t.name, t.elements * t.bits)
    for i, layer in enumerate(inst.layers):
        add(i, layer.name, layer.output_elements * layer_bits)
    out, running = [], 0
    for n in range(N + 1):
        running += delta[n]
        out.append(running / 8.0)
    return out


def potential_splits(inst: EdgeCloudInstance) -> list[int]:
    """Eq. 6: the split points n in 0..N worth exploring."""
    s = inst.settings
    b_min = min(s.bit_widths)
    tx_bits = s.transmit_bits if s.transmit_bits is not None else b_min
    crossing = cut_bytes_all(inst, tx_bits)
    out = []
    weights = max_act = 0.0
    for n in range(len(inst.layers) + 1):
        if n > 0:
            layer = inst.layers[n - 1]
            weights += layer.weights
            max_act = max(max_act, layer.output_elements)
        if crossing[n] <= crossing[0] and fits(b_min * (weights + max_act) / 8.0, s.edge_memory_bytes):
            out.append(n)
    return out


# ----- Eq. 8 and Eq. 9 ----------------------------------------------------------------------
def lagrangian_choice(options: Mapping[str, Sequence[Option]], budget: float) -> dict[str, int]:
    """Multiple-choice knapsack min sum(error) s.t. sum(bytes) <= budget, by the
    Lagrangian method (see module docstring). Returns name -> bits. The budget must admit
    every layer at its fewest bytes."""

    def pick(lam: float) -> dict[str, Option]:
        return {n: min(opts, key=lambda o: (o[1] + lam * o[0], o[0], o[2])) for n, opts in options.items()}

    def fits_at(lam: float) -> bool:
        return fits(sum(o[0] for o in pick(lam).values()), budget)

    breakpoints = sorted(
        {
            (e1 - e2) / (y2 - y1)
            for opts in options.values()
            for y1, e1, _ in opts
            for y2, e2, _ in opts
            if y2 > y1 and e1 > e2
        }
    )
    lams = [0.0] + [(a + b) / 2.0 for a, b in zip(breakpoints, breakpoints[1:])]
    if breakpoints:
        lams.append(2.0 * breakpoints[-1])
    lo, hi = 0, len(lams) - 1  # the first fitting index lies in [lo, hi]; lams[hi] fits
    while lo < hi:
        mid = (lo + hi) // 2
        if fits_at(lams[mid]):
            hi = mid
        else:
            lo = mid + 1
    return {n: o[2] for n, o in pick(lams[lo]).items()}


def weight_bits(inst: EdgeCloudInstance, names: Sequence[str], budget: float) -> dict[str, int]:
    """Eq. 8 for edge layers ``names`` under a weight budget (bytes)."""
    options = {
        n: [
            (inst.layer_by_name[n].weights * b / 8.0, weight_error(inst, inst.layer_by_name[n], b), b)
            for b in inst.settings.bit_widths
        ]
        for n in names
    }
    return lagrangian_choice(options, budget)


def activation_bits(inst: EdgeCloudInstance, names: Sequence[str], budget: float) -> dict[str, int]:
    """Eq. 9 for edge layers ``names`` under a per-layer activation budget (bytes)."""
    out = {}
    for n in names:
        layer = inst.layer_by_name[n]
        fitting = [b for b in inst.settings.bit_widths if fits(layer.output_elements * b / 8.0, budget)]
        out[n] = min(fitting, key=lambda b: (activation_error(inst, layer, b), b))
    return out


# ----- Algorithm 1 ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """One solution of Algorithm 1's list S: split n, the grid point (weight and
    activation budgets in bytes; None for cloud-only), its plan and true metrics."""

    n: int
    weight_budget: float | None
    activation_budget: float | None
    plan: Plan
    metrics: Metrics


def candidates(inst: EdgeCloudInstance) -> list[Candidate]:
    """Algorithm 1's list S (cloud-only first), each plan evaluated; duplicates dropped."""
    return list(iter_candidates(inst))


def iter_candidates(inst: EdgeCloudInstance, splits: Sequence[int] | None = None) -> Iterator[Candidate]:
    """Algorithm 1's list S, one candidate at a time (cloud-only first, then the
    potential splits in order, each over the grid of budgets); ``splits``: the potential
    splits if the caller has them (else computed here)."""
    s = inst.settings
    bits = sorted(s.bit_widths)
    cloud_only = uniform_plan(inst, [])
    yield Candidate(0, None, None, cloud_only, evaluate(inst, cloud_only))
    seen = {cloud_only.key()}
    for n in potential_splits(inst) if splits is None else splits:
        if n == 0:
            continue
        layers = inst.layers[:n]
        names = [layer.name for layer in layers]
        weights = sum(layer.weights for layer in layers)
        max_act = max(layer.output_elements for layer in layers)
        for bw in bits:
            m_wgt = weights * bw / 8.0
            b_w = None
            for ba in bits:
                m_act = max_act * ba / 8.0
                if not fits(m_wgt + m_act, s.edge_memory_bytes):
                    continue
                if b_w is None:
                    b_w = weight_bits(inst, names, m_wgt)
                b_a = activation_bits(inst, names, m_act)
                plan = edge_cloud_plan(inst, {name: (b_w[name], b_a[name]) for name in names})
                if plan.key() in seen:
                    continue
                seen.add(plan.key())
                yield Candidate(n, m_wgt, m_act, plan, evaluate(inst, plan))


def select(cands: Sequence[Candidate]) -> Candidate:
    """The lowest-latency candidate meeting every budget (ties: lower error, smaller n).
    Cloud-only always meets the memory and error budgets; only a constraint outside the
    paper (``settings.edge_required``) can leave none, and then the candidate with the
    fewest violations (ties: lowest latency) is returned, flagged by the caller."""
    feasible = [c for c in cands if c.metrics.feasible]
    if feasible:
        return min(feasible, key=lambda c: (c.metrics.total_ms, c.metrics.error, c.n))
    return min(cands, key=lambda c: (len(c.metrics.violations), c.metrics.total_ms, c.n))


def run(inst: EdgeCloudInstance, options: SolveOptions) -> BackendOutput:
    """AUTO-SPLIT Algorithm 1: potential splits (Eq. 6) x grid of memory budgets (Eq. 8, 9).
    The list is built (and each candidate evaluated) while the time limit lasts; past it,
    the best candidate so far (cloud-only at least) is chosen, and ``extra`` says so (the
    list is quadratic in the layers: minutes at 10,000)."""
    cands: list[Candidate] = []
    stopped = False
    splits = potential_splits(inst)
    for cand in iter_candidates(inst, splits):
        cands.append(cand)
        if options.out_of_time():
            stopped = True
            break
    best = select(cands)
    extra: dict[str, Any] = {"split_n": best.n, "potential_splits": splits, "candidates": len(cands)}
    if stopped:
        extra["stopped_by"] = "time limit"
    # the choice is made on the evaluator's latency; no separate estimate: objective None
    out = finish(inst, best.plan, "auto-split", extra=extra)
    if stopped and out.status is Status.FEASIBLE:
        out = dataclasses.replace(out, message=f"auto-split: the time limit stopped Algorithm 1 after {len(cands)} "
                                               f"candidates; the best of them")
    return out
