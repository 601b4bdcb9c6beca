"""The chain family's Lagrangian bound and plans (``formulations/chain_split.md``, "Pricing
the memory"): minimum cuts (``cut.py``) with prices on the weights each device holds and,
for the throughput objective, weights on the stages, tuned by Kelley's cutting planes.

Relax each device's memory row to its weights, ``W_m(Y) <= memory_m`` (activations are
>= 0, so every plan that meets the limits meets these), and price it: for stage weights
``lam`` on the simplex (latency: all 1) and prices ``mu >= 0`` (ms per byte),

    g(lam, mu) = min_Y [ sum_m lam_m S_m(Y) + sum_m mu_m W_m(Y) ] - sum_m mu_m memory_m

is a lower bound on the objective of every plan that meets the limits (latency
``sum_m S_m``; throughput ``max_m S_m >= sum_m lam_m S_m``), and the minimum over ``Y``
is one cut: the price of a layer's weights is a unary term. Kelley's method keeps the
plans the cuts returned and picks the next ``(lam, mu)`` maximising the lower envelope of
their lines (a small LP, OR-Tools' GLOP: imported in 0.07 s where SciPy's optimize takes 0.56 s); each cut's value is a valid bound whatever the
multipliers, so stopping early only weakens it. The cuts' plans that meet every limit are
candidate plans; where none of them meets every limit (their activations are not priced,
and the dual optimum sits where the weights just fit), the prices of the devices that
overflow are doubled and the cut solved again until a plan fits (a repair: plans only,
no bound).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from splitopt.core.instance import Instance
from splitopt.core.plan import Plan

#: cuts at most (each is one max-flow: about 0.05 s at 1,000 layers x 8 devices)
MAX_CUTS = 40
#: seconds at most per instance; the bound holds whenever it stops
MAX_SECONDS = 2.0
#: relative distance between the envelope and the best bound at which Kelley stops
CONVERGED_RTOL = 1e-7
#: cuts and seconds at most of the repair that raises the prices of overflowing devices
MAX_REPAIR_CUTS = 30
REPAIR_SECONDS = 1.0


@dataclass(frozen=True)
class LagrangeResult:
    """The best bound (ms) found, the best plan among the cuts' plans that meets every
    limit (None: none did), and the cuts solved."""

    bound_ms: float
    plan: Plan | None
    plan_objective_ms: float | None
    cuts: int


def lagrange(inst: Instance) -> LagrangeResult | None:
    """The bound and plans of the module docstring, once per instance (cached); None where
    ``chain-cut``'s graph does not apply or there are no layers."""
    from splitopt.families.chain.cut import cut_refusal

    if not inst.layers or cut_refusal(inst) is not None:
        return None
    return inst.derived(("chain", "lagrange"), lambda: _lagrange(inst))


def _lagrange(inst: Instance) -> LagrangeResult:
    import numpy as np

    from splitopt.families.chain.cut import cut_plan, min_weighted_stages
    from splitopt.families.chain.evaluate import evaluate

    t0 = time.perf_counter()
    s = inst.settings
    M = len(s.chain)
    throughput = s.objective == "throughput"
    weight_bytes = np.array([layer.weights * s.cloud_bits / 8.0 for layer in inst.layers])
    memory = np.array([inst.device_by_name[d].memory_bytes for d in s.chain], dtype=float)
    priced = [m for m in range(M) if weight_bytes.sum() > memory[m]]  # rows that can bind
    lam = np.full(M, 1.0 / M) if throughput else np.ones(M)
    mu = np.zeros(M)
    best_bound, best_plan, best_value = -np.inf, None, None
    lines: list[tuple[np.ndarray, np.ndarray]] = []  # per plan: stage times, weights held - memory
    price_cap = None
    for k in range(MAX_CUTS):
        cut = min_weighted_stages(inst, lam, weight_bytes[:, None] * mu[None, :])
        bound = cut.bound_ms - float(mu @ memory)
        bound -= 1e-12 * abs(bound)  # the subtraction's rounding
        best_bound = max(best_bound, bound)
        positions = np.asarray(cut.labels)
        plan = cut_plan(inst, cut)
        metrics = evaluate(inst, plan)
        if metrics.feasible and (best_value is None or metrics.objective_ms < best_value):
            best_plan, best_value = plan, metrics.objective_ms
        stages = np.array([d.stage_ms for d in metrics.devices])
        held = np.bincount(positions, weights=weight_bytes, minlength=M) - memory
        lines.append((stages, held))
        if price_cap is None:  # prices beyond this make holding any byte cost the whole objective
            price_cap = 10.0 * max(float(stages.sum()), 1e-9) / max(float(weight_bytes[weight_bytes > 0].min(initial=1.0)), 1e-9)
        if not priced and not throughput:
            break  # nothing to price: the first cut is the Lagrangian optimum
        if time.perf_counter() - t0 > MAX_SECONDS:
            break
        # Kelley: max z s.t. z <= lam . S_j + mu . held_j for every plan j
        solved = _kelley_step(lines, throughput, [price_cap if m in priced else 0.0 for m in range(M)])
        if solved is None:
            break
        envelope, new_lam, new_mu = solved
        if envelope - best_bound <= CONVERGED_RTOL * max(abs(envelope), 1e-9):
            break
        if throughput:
            lam = np.clip(new_lam, 0.0, None)
        mu = np.clip(new_mu, 0.0, None)
    # repair: the dual's plans may all break a memory limit (activations are not priced, and
    # the dual optimum sits where the weights just fit); raise the price of every device
    # that overflows and cut again, keeping the best plan that meets every limit
    mu = mu.copy()
    floor = price_cap * 1e-6 if price_cap else 0.0
    for _ in range(MAX_REPAIR_CUTS if best_plan is None else 0):
        if time.perf_counter() - t0 > MAX_SECONDS + REPAIR_SECONDS:
            break
        over = [m for m, d in enumerate(metrics.devices) if d.memory_bytes > d.memory_limit]
        if not over:
            break
        for m in over:
            mu[m] = max(2.0 * mu[m], floor)
        cut = min_weighted_stages(inst, lam, weight_bytes[:, None] * mu[None, :])
        plan = cut_plan(inst, cut)
        metrics = evaluate(inst, plan)
        if metrics.feasible and (best_value is None or metrics.objective_ms < best_value):
            best_plan, best_value = plan, metrics.objective_ms
    return LagrangeResult(max(best_bound, 0.0), best_plan, best_value, len(lines))


def _kelley_step(lines, throughput: bool, price_caps: list[float]):
    """The LP of Kelley's method over the plans' lines: max z s.t. z <= lam . S_j + mu .
    held_j for every plan j (latency: lam = 1, so z <= sum S_j + mu . held_j); lam on the
    simplex, 0 <= mu_m <= price_caps[m]. Returns (z, lam, mu), or None if GLOP fails."""
    from ortools.linear_solver import pywraplp

    M = len(price_caps)
    solver = pywraplp.Solver.CreateSolver("GLOP")
    lam = [solver.NumVar(0.0, 1.0, f"lam{m}") for m in range(M)] if throughput else None
    mu = [solver.NumVar(0.0, cap, f"mu{m}") for m, cap in enumerate(price_caps)]
    z = solver.NumVar(-solver.infinity(), solver.infinity(), "z")
    for stages, held in lines:
        rhs = sum(float(h) * mu[m] for m, h in enumerate(held))
        if throughput:
            rhs += sum(float(st) * lam[m] for m, st in enumerate(stages))
        else:
            rhs += float(sum(stages))
        solver.Add(z <= rhs)
    if throughput:
        solver.Add(sum(lam) == 1.0)
    solver.Maximize(z)
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    return (z.solution_value(), None if lam is None else [v.solution_value() for v in lam],
            [v.solution_value() for v in mu])
