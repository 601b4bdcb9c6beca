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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from splitopt.core.plan import Plan
from splitopt.families.chain.settings import ChainInstance

if TYPE_CHECKING:
    import numpy as np

    from splitopt.families.chain.evaluate import ChainMetrics

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


@dataclass
class CutLine:
    """One cut's plan as a line of Kelley's model: its chain positions (layers in file
    order), stage times (ms), per device the weights it holds minus the memory (bytes),
    its tensors' producer and farthest-reader positions (for the step rows, computed when
    a step is priced), whether it meets every memory limit and its objective (ms), all
    computed with numpy from the positions (the evaluator's rules; the evaluator itself
    judges a plan before it is returned: :meth:`metrics`)."""

    positions: np.ndarray
    stages: np.ndarray
    weight_rows: np.ndarray
    src: np.ndarray
    far: np.ndarray
    overflowing: tuple[int, ...]
    objective_ms: float
    _rows: dict[tuple[int, int], float] = field(default_factory=dict)
    _metrics: ChainMetrics | None = None

    @property
    def feasible(self) -> bool:
        return not self.overflowing

    def plan(self, inst: ChainInstance) -> Plan:
        from splitopt.families.chain.plan import plan_from_indices

        return plan_from_indices(inst, {layer.name: int(p) for layer, p in zip(inst.layers, self.positions)})

    def metrics(self, inst: ChainInstance) -> ChainMetrics:
        """The evaluator's metrics of the plan (computed once)."""
        if self._metrics is None:
            from splitopt.families.chain.evaluate import evaluate

            self._metrics = evaluate(inst, self.plan(inst))
        return self._metrics

    def step_row(self, cuts: PricedCuts, device: int, step: int) -> float:
        """The plan's weights plus activations on ``device`` at ``step``, minus its memory
        (bytes): the value of that step row (row 6), cached."""
        key = (device, step)
        if key not in self._rows:
            live = (cuts.first <= step) & (step <= cuts.last) & (self.src <= device) & (device <= self.far)
            self._rows[key] = float(self.weight_rows[device] + cuts.held[live].sum())
        return self._rows[key]


@dataclass(frozen=True)
class KelleyStep:
    """The LP of Kelley's method solved: the envelope's maximum ``z`` (an upper bound on
    the Lagrangian dual over the plans of the lines), the multipliers reaching it, and per
    line its weight in the LP's dual (a convex combination of the lines' plans: the
    fractional placement that ``branch.py`` branches on)."""

    envelope: float
    lam: np.ndarray
    mu: np.ndarray
    nu: np.ndarray
    line_weights: np.ndarray


class PricedCuts:
    """The priced minimum cuts of one instance (module docstring): the data every cut
    needs, computed once."""

    def __init__(self, inst: ChainInstance, price_steps: bool = True):
        import numpy as np

        from splitopt.families.chain.cut import cut_template
        from splitopt.families.chain.data import chain_links, chain_tensors
        from splitopt.families.chain.evaluate import activation_profile

        self.inst = inst
        s = inst.settings
        self.M = M = len(s.chain)
        self.throughput = inst.objective == "throughput"
        tensors = chain_tensors(inst)
        self.weight_bytes = np.array([layer.weights * s.cloud_bits / 8.0 for layer in inst.layers])
        self.memory = np.array([inst.device_by_name[d].memory_bytes for d in s.chain], dtype=float)
        #: devices whose weight row can bind
        self.priced = [m for m in range(M) if self.weight_bytes.sum() > self.memory[m]]
        # step rows that can bind: every activation live at some step on one device with every weight
        live_most = float(activation_profile(inst, {t: 0 for t in tensors.names},
                                             {t: M - 1 for t in tensors.names}).max(initial=0.0))
        self.step_priced = ({m for m in range(M) if self.weight_bytes.sum() + live_most > self.memory[m]}
                            if price_steps else set())
        self.held = np.array([tensors.held_bytes[t] for t in tensors.names])
        self.first = np.array([tensors.first_step[t] for t in tensors.names])
        self.last = np.array([tensors.last_step[t] for t in tensors.names])
        self.producer = np.array([-1 if tensors.producer[t] is None else inst.position[t] for t in tensors.names],
                                 dtype=np.int64)
        readers = [[inst.position[c] for c in tensors.consumers[t]] for t in tensors.names]
        self.reader_tensor = np.array([i for i, r in enumerate(readers) for _ in r], dtype=np.int64)
        self.reader_layer = np.array([c for r in readers for c in r], dtype=np.int64)
        self.sent = np.array([tensors.sent_bytes[t] for t in tensors.names])
        self.links = chain_links(inst)
        self.compute = cut_template(inst).compute  # (layers, M) ms
        #: no plan's objective exceeds this (ms): every layer where it is slowest, every
        #: tensor sent over every link (latency; the throughput's bottleneck is at most that)
        self.horizon = float(self.compute.max(axis=1, initial=0.0).sum()
                             + sum(inst.link_transfer_ms(link, float(self.sent.sum())) for link in self.links))
        #: prices beyond this make holding any byte cost the whole objective (set by the first cut)
        self.price_cap: float | None = None
        self.cuts = 0

    def solve(self, lam, mu, steps: list[tuple[int, int]], nu, positions=None) -> tuple[float, CutLine]:
        """The cut at multipliers (``lam`` stage weights, ``mu`` per device on its weights,
        ``nu`` on the priced step rows ``steps``, (device, step) pairs), within the chain
        positions ``positions`` (per layer least and largest; None: any): its Lagrangian
        bound (ms) and its plan's line. Row generation: the peak step of every device the
        plan overflows joins ``steps`` (in place)."""
        import numpy as np

        from splitopt.families.chain.cut import min_weighted_stages

        M = self.M
        per_device = np.array(mu, dtype=float)  # each step row holds the device's weights too
        occupancy = np.zeros((len(self.held), M))
        for (m, step), price in zip(steps, nu):
            if price > 0:
                per_device[m] += price
                occupancy[:, m] += price * self.held * ((self.first <= step) & (step <= self.last))
        cut = min_weighted_stages(self.inst, lam, self.weight_bytes[:, None] * per_device[None, :],
                                  occupancy if steps else None, positions=positions)
        self.cuts += 1
        bound = cut.bound_ms - float(np.dot(mu, self.memory))
        bound -= float(sum(price * self.memory[m] for (m, _), price in zip(steps, nu)))
        bound -= 1e-12 * abs(bound)  # the subtractions' rounding
        line, profile = self._line_and_profile(np.asarray(cut.labels, dtype=np.int64))
        if self.price_cap is None:
            self.price_cap = (10.0 * max(float(line.stages.sum()), 1e-9)
                              / max(float(self.weight_bytes[self.weight_bytes > 0].min(initial=1.0)), 1e-9))
        held = line.weight_rows + self.memory
        for m in sorted(self.step_priced):
            peak = int(profile[m].argmax())
            if held[m] + profile[m, peak] > self.memory[m] and (m, peak) not in steps:
                steps.append((m, peak))
        return bound, line

    def _line_and_profile(self, P: np.ndarray) -> tuple[CutLine, np.ndarray]:
        """The line of the placement ``P`` (chain positions, layers in file order) and its
        activation profile (bytes per device and step)."""
        import numpy as np

        from splitopt.families.chain.evaluate import MEMORY_RTOL, activation_profile_arrays

        M = self.M
        held = np.bincount(P, weights=self.weight_bytes, minlength=M)
        src = np.where(self.producer < 0, 0, P[np.maximum(self.producer, 0)])
        far = src.copy()
        np.maximum.at(far, self.reader_tensor, P[self.reader_layer])
        # the evaluator's stage times: compute, then the tensors crossing each link (once)
        stages = np.bincount(P, weights=self.compute[np.arange(len(P)), P], minlength=M)
        for m, link in enumerate(self.links):
            stages[m] += self.inst.link_transfer_ms(link, float(self.sent[(src <= m) & (far > m)].sum()))
        profile = activation_profile_arrays(self.inst, src, far)
        used = held + profile.max(axis=1, initial=0.0)
        overflowing = tuple(int(m) for m in np.flatnonzero(used > self.memory * (1 + MEMORY_RTOL)))
        objective = float(stages.max() if self.throughput else stages.sum())
        return CutLine(P, stages, held - self.memory, src, far, overflowing, objective), profile

    def kelley(self, lines: list[CutLine], steps: list[tuple[int, int]]) -> KelleyStep | None:
        """The LP of Kelley's method over the lines: max z s.t. z <= lam . S_j + mu .
        held_j + nu . rows_j for every line j (latency: lam = 1), lam on the simplex, 0 <=
        mu_m <= price_cap (0 where the weight row cannot bind), 0 <= nu <= price_cap.
        None if GLOP fails."""
        import numpy as np
        from ortools.linear_solver import pywraplp

        M = self.M
        cap = self.price_cap or 0.0
        solver = pywraplp.Solver.CreateSolver("GLOP")
        lam = [solver.NumVar(0.0, 1.0, f"lam{m}") for m in range(M)] if self.throughput else None
        mu = [solver.NumVar(0.0, cap if m in self.priced else 0.0, f"mu{m}") for m in range(M)]
        nu = [solver.NumVar(0.0, cap, f"nu{i}") for i in range(len(steps))]
        z = solver.NumVar(-solver.infinity(), solver.infinity(), "z")
        rows = []
        for line in lines:  # z - (the line's terms) <= its constant, coefficient by coefficient
            row = solver.Constraint(-solver.infinity(), 0.0 if lam is not None else float(line.stages.sum()))
            row.SetCoefficient(z, 1.0)
            for m, h in enumerate(line.weight_rows.tolist()):
                if h:
                    row.SetCoefficient(mu[m], -h)
            for i, (m, step) in enumerate(steps):
                value = line.step_row(self, m, step)
                if value:
                    row.SetCoefficient(nu[i], -value)
            if lam is not None:
                for m, st in enumerate(line.stages.tolist()):
                    if st:
                        row.SetCoefficient(lam[m], -st)
            rows.append(row)
        if lam is not None:
            simplex = solver.Constraint(1.0, 1.0)
            for var in lam:
                simplex.SetCoefficient(var, 1.0)
        solver.Maximize(z)
        if solver.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        values = lambda vs: np.clip(np.array([v.solution_value() for v in vs], dtype=float), 0.0, None)  # noqa: E731
        return KelleyStep(z.solution_value(), values(lam) if lam is not None else np.ones(M), values(mu),
                          values(nu), np.clip(np.array([r.dual_value() for r in rows], dtype=float), 0.0, None))


def lagrange(inst: ChainInstance) -> LagrangeResult | None:
    """The bound and plans of the module docstring, once per instance (cached); None where
    ``chain-cut``'s graph does not apply or there are no layers."""
    from splitopt.families.chain.cut import cut_refusal

    if not inst.layers or cut_refusal(inst) is not None:
        return None
    return inst.derived(("chain", "lagrange"), lambda: priced_cuts(inst))


def priced_cuts(inst: ChainInstance, price_steps: bool = True) -> LagrangeResult:
    """The module docstring's method; ``price_steps``: also price the step rows (weights
    and activations) that the cuts' plans overflow (False: the weight rows alone, for
    comparison)."""
    import numpy as np

    t0 = time.perf_counter()
    cuts = PricedCuts(inst, price_steps)
    M = cuts.M
    lam = np.full(M, 1.0 / M) if cuts.throughput else np.ones(M)
    mu = np.zeros(M)
    steps: list[tuple[int, int]] = []  # priced step rows (device, step), in the order they were found
    nu = np.zeros(0)
    best_bound, best_plan, best_value = -np.inf, None, None
    lines: list[CutLine] = []
    line: CutLine | None = None
    for _ in range(MAX_CUTS):
        bound, line = cuts.solve(lam, mu, steps, nu)
        best_bound = max(best_bound, bound)
        if line.feasible and (best_value is None or line.objective_ms < best_value):
            metrics = line.metrics(inst)  # the evaluator's word
            if metrics.feasible and (best_value is None or metrics.objective_ms < best_value):
                best_plan, best_value = line.plan(inst), metrics.objective_ms
        lines.append(line)
        if not cuts.priced and not steps and not cuts.throughput:
            break  # nothing to price: the first cut is the Lagrangian optimum
        if time.perf_counter() - t0 > MAX_SECONDS:
            break
        solved = cuts.kelley(lines, steps)
        if solved is None:
            break
        if solved.envelope - best_bound <= CONVERGED_RTOL * max(abs(solved.envelope), 1e-9):
            break
        if cuts.throughput:
            lam = solved.lam
        mu, nu = solved.mu, solved.nu
    # repair: the dual's plans may all break a memory limit (activations are not priced, and
    # the dual optimum sits where the weights just fit); raise the price of every device
    # that overflows and cut again, keeping the best plan that meets every limit
    mu = mu.copy()
    floor = cuts.price_cap * 1e-6 if cuts.price_cap else 0.0
    if best_plan is None and line is not None:
        for _ in range(MAX_REPAIR_CUTS):
            if time.perf_counter() - t0 > MAX_SECONDS + REPAIR_SECONDS or line.feasible:
                break
            for m in line.overflowing:
                mu[m] = max(2.0 * mu[m], floor)
            _, line = cuts.solve(lam, mu, [], np.zeros(0))
            if line.feasible:
                metrics = line.metrics(inst)
                if metrics.feasible and (best_value is None or metrics.objective_ms < best_value):
                    best_plan, best_value = line.plan(inst), metrics.objective_ms
    return LagrangeResult(max(best_bound, 0.0), best_plan, best_value, len(lines))
