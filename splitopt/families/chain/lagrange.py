"""The chain family's Lagrangian bound and plans (``formulations/chain_split.md``, "Pricing
the memory"): minimum cuts (``cut.py``) with prices on the weights each device holds, on
the steps where the cuts' plans overflow a device (its weights plus the activations held
there) and, for the throughput objective, weights on the stages, tuned by Kelley's
cutting planes.

Relax each device's memory row to its weights, ``W_m(Y) <= memory_m`` (activations are
>= 0, so every plan that meets the limits meets these), and keep the rows of some steps
whole, ``W_m(Y) + A_{m,k}(Y) <= memory_m``; price them: for stage weights ``lam`` on the
simplex (latency: all 1) and prices ``mu, nu >= 0`` (ms per byte),

    g(lam, mu, nu) = min_Y [ sum_m lam_m S_m(Y) + sum_m mu_m (W_m(Y) - memory_m)
                             + sum_{(m,k)} nu_{m,k} (W_m(Y) + A_{m,k}(Y) - memory_m) ]

is a lower bound on the objective of every plan that meets the limits (latency
``sum_m S_m``; throughput ``max_m S_m >= sum_m lam_m S_m``), and the minimum over ``Y``
is one cut: the price of a layer's weights is a unary term, a tensor's activations held
on a device a span term (``cut.min_weighted_stages``' occupancy). The priced steps are
generated: after each cut, the peak step of every device its plan overflows. Kelley's
method keeps the plans the cuts returned and picks the next multipliers maximising the
lower envelope of their lines (a small LP, OR-Tools' GLOP: imported in 0.07 s where
SciPy's optimize takes 0.56 s); each cut's value is a valid bound whatever the
multipliers, so stopping early only weakens it. The cuts' plans that meet every limit are
candidate plans; where none of them meets every limit, the prices of the devices that
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
    return inst.derived(("chain", "lagrange"), lambda: priced_cuts(inst))


def priced_cuts(inst: Instance, price_steps: bool = True) -> LagrangeResult:
    """The module docstring's method; ``price_steps``: also price the step rows (weights
    and activations) that the cuts' plans overflow (False: the weight rows alone, for
    comparison)."""
    import numpy as np

    from splitopt.families.chain.cut import cut_plan, min_weighted_stages
    from splitopt.families.chain.data import chain_tensors
    from splitopt.families.chain.evaluate import activation_profile, evaluate

    t0 = time.perf_counter()
    s = inst.settings
    M = len(s.chain)
    throughput = s.objective == "throughput"
    tensors = chain_tensors(inst)
    weight_bytes = np.array([layer.weights * s.cloud_bits / 8.0 for layer in inst.layers])
    memory = np.array([inst.device_by_name[d].memory_bytes for d in s.chain], dtype=float)
    priced = [m for m in range(M) if weight_bytes.sum() > memory[m]]  # weight rows that can bind
    # step rows that can bind: every activation live at some step on one device with every weight
    live_most = float(activation_profile(inst, {t: 0 for t in tensors.names},
                                         {t: M - 1 for t in tensors.names}).max(initial=0.0))
    step_priced = {m for m in range(M) if weight_bytes.sum() + live_most > memory[m]} if price_steps else set()
    held = np.array([tensors.held_bytes[t] for t in tensors.names])
    first = np.array([tensors.first_step[t] for t in tensors.names])
    last = np.array([tensors.last_step[t] for t in tensors.names])
    lam = np.full(M, 1.0 / M) if throughput else np.ones(M)
    mu = np.zeros(M)
    steps: list[tuple[int, int]] = []  # priced step rows (device, step), in the order they were found
    nu = np.zeros(0)
    best_bound, best_plan, best_value = -np.inf, None, None
    lines: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per plan: stages, weights - memory, its profile
    price_cap = None
    for k in range(MAX_CUTS):
        per_device = mu.copy()  # each step row holds the device's weights too
        occupancy = np.zeros((len(held), M))
        for (m, step), price in zip(steps, nu):
            if price > 0:
                per_device[m] += price
                occupancy[:, m] += price * held * ((first <= step) & (step <= last))
        cut = min_weighted_stages(inst, lam, weight_bytes[:, None] * per_device[None, :],
                                  occupancy if steps else None)
        bound = cut.bound_ms - float(mu @ memory) - float(sum(price * memory[m] for (m, _), price in zip(steps, nu)))
        bound -= 1e-12 * abs(bound)  # the subtractions' rounding
        best_bound = max(best_bound, bound)
        positions = np.asarray(cut.labels)
        plan = cut_plan(inst, cut)
        metrics = evaluate(inst, plan)
        if metrics.feasible and (best_value is None or metrics.objective_ms < best_value):
            best_plan, best_value = plan, metrics.objective_ms
        stages = np.array([d.stage_ms for d in metrics.devices])
        weights_held = np.bincount(positions, weights=weight_bytes, minlength=M)
        src = {t: 0 if tensors.producer[t] is None else int(positions[inst.position[t]]) for t in tensors.names}
        far = {t: max([int(positions[inst.position[c]]) for c in tensors.consumers[t]], default=src[t])
               for t in tensors.names}
        profile = activation_profile(inst, src, far)
        lines.append((stages, weights_held - memory, weights_held[:, None] + profile - memory[:, None]))
        if price_cap is None:  # prices beyond this make holding any byte cost the whole objective
            price_cap = 10.0 * max(float(stages.sum()), 1e-9) / max(float(weight_bytes[weight_bytes > 0].min(initial=1.0)), 1e-9)
        # row generation: the peak step of every device this plan overflows, priced from now on
        for m in sorted(step_priced):
            if weights_held[m] + profile[m].max(initial=0.0) > memory[m] and (m, int(profile[m].argmax())) not in steps:
                steps.append((m, int(profile[m].argmax())))
        if not priced and not steps and not throughput:
            break  # nothing to price: the first cut is the Lagrangian optimum
        if time.perf_counter() - t0 > MAX_SECONDS:
            break
        # Kelley: max z s.t. z <= lam . S_j + mu . held_j + nu . step_rows_j for every plan j
        solved = _kelley_step(lines, steps, throughput, [price_cap if m in priced else 0.0 for m in range(M)],
                              price_cap)
        if solved is None:
            break
        envelope, new_lam, new_mu, new_nu = solved
        if envelope - best_bound <= CONVERGED_RTOL * max(abs(envelope), 1e-9):
            break
        if throughput:
            lam = np.clip(new_lam, 0.0, None)
        mu = np.clip(new_mu, 0.0, None)
        nu = np.clip(new_nu, 0.0, None)
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


def _kelley_step(lines, steps: list[tuple[int, int]], throughput: bool, price_caps: list[float], step_cap: float):
    """The LP of Kelley's method over the plans' lines: max z s.t. z <= lam . S_j + mu .
    held_j + nu . rows_j for every plan j (latency: lam = 1, so z <= sum S_j + ...), where
    ``rows_j`` are plan j's values of the priced step rows ``steps`` (device, step): its
    weights plus activations there minus the device's memory; lam on the simplex, 0 <= mu_m
    <= price_caps[m], 0 <= nu <= step_cap. Returns (z, lam, mu, nu), or None if GLOP
    fails."""
    from ortools.linear_solver import pywraplp

    M = len(price_caps)
    solver = pywraplp.Solver.CreateSolver("GLOP")
    lam = [solver.NumVar(0.0, 1.0, f"lam{m}") for m in range(M)] if throughput else None
    mu = [solver.NumVar(0.0, cap, f"mu{m}") for m, cap in enumerate(price_caps)]
    nu = [solver.NumVar(0.0, step_cap, f"nu{i}") for i in range(len(steps))]
    z = solver.NumVar(-solver.infinity(), solver.infinity(), "z")
    for stages, held, rows in lines:
        rhs = sum(float(h) * mu[m] for m, h in enumerate(held))
        rhs += sum(float(rows[m, step]) * nu[i] for i, (m, step) in enumerate(steps))
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
            [v.solution_value() for v in mu], [v.solution_value() for v in nu])
