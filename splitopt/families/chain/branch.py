"""``chain-bb``: the chain family's exact branch and bound over the Lagrangian bound of
``lagrange.py`` (math in ``formulations/chain_split.md``, "Branch and bound").

Where memory limits bind, the priced cuts' bound can sit far below the optimum: the dual
mixes a plan that holds too much with one that holds little, which no single placement
can do (on a 1,000-layer random DAG x 8 devices: bound 46.1 ms, optimum near 67.7 ms).
Branching removes the mixture. A node is a box of chain positions, per layer a least and
a largest (``lo[l] <= position(l) <= hi[l]``, closed under the DAG: an input's largest
is at most its reader's, a reader's least at least its input's); its bound is the
Lagrangian bound of the placements in the box (each cut solved with the box as label
bounds of the layered graph, ``min_weighted_stages(positions=)``, so every bound is a
valid bound of the box), tuned by Kelley's method from the parent's multipliers. The
node's LP gives a convex combination of its cuts' plans (the duals of the envelope's
rows); the branching variable is the "layer ``l`` at a position ``<= m``" that this
fractional placement splits most evenly, weighted where memory binds by the bytes the
layer brings to a device (:func:`branching_weights`; ties: the median layer in file order,
so a branch roughly halves the layers in doubt); children ``hi[l] = m`` and ``lo[l] = m + 1``
(both shrink the box: the fractional value lies strictly between 0 and 1, so some cut in
the box has ``l <= m`` and another ``l > m``).

A node is closed when its bound reaches the incumbent's value less ``OPTIMAL_RTOL``
(without an incumbent: when it exceeds the horizon, which no plan's objective does); nodes
are taken best bound first, except that after a branching the child that moves
the layer later (which relieves the device that overflows) is taken at once (a dive:
plans that meet the limits come sooner). Every cut's plan that meets the limits is a
candidate incumbent, as is the family's start plan (the best of the single device, the
best contiguous split of the file order and the Lagrangian repair) where the time limit
leaves room for it; the evaluator judges each. OPTIMAL when no
open node is left: the bound returned is the least bound of the closed nodes; INFEASIBLE
when they all closed without a plan. Under a time limit or Ctrl-C: the incumbent, FEASIBLE, with the least bound
of the open and closed nodes.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from splitopt.core import progress
from splitopt.core.errors import NotApplicable
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.chain.lagrange import CONVERGED_RTOL
from splitopt.families.chain.lagrange import MAX_CUTS as ROOT_CUTS  # the root: as many as the priced cuts' bound
from splitopt.families.chain.settings import ChainInstance

if TYPE_CHECKING:
    import numpy as np

    from splitopt.core.plan import Plan
    from splitopt.families.chain.lagrange import CutLine, PricedCuts

#: a node closes when its bound is within this relative distance of the incumbent
OPTIMAL_RTOL = 1e-6
#: cuts at most per node (Kelley's iterations); the bound holds wherever it stops
NODE_CUTS = 30
#: lines a child inherits from its ancestors at most (the most recent that lie in its box)
INHERITED_LINES = 60
#: seconds the time limit must leave for the family's start plan to seed the incumbent
START_PLAN_MIN_S = 5.0


@dataclass(order=True)
class Node:
    """An open node: its box of positions, the bound it inherited (ms), and the parent's
    multipliers and lines to start Kelley's method from."""

    bound: float
    order: int
    lo: np.ndarray = field(compare=False)
    hi: np.ndarray = field(compare=False)
    lines: list[CutLine] = field(compare=False)
    lam: np.ndarray = field(compare=False)
    mu: np.ndarray = field(compare=False)
    steps: list[tuple[int, int]] = field(compare=False)
    nu: np.ndarray = field(compare=False)


class Incumbent:
    """The best plan that meets every limit so far (by the evaluator's objective, ms);
    ``horizon``: no plan's objective exceeds it (ms)."""

    def __init__(self, horizon: float = float("inf")):
        self.value = float("inf")
        self.plan: Plan | None = None
        self.horizon = horizon

    def offer(self, plan: Plan | None, metrics) -> None:
        if plan is not None and metrics.feasible and metrics.objective_ms < self.value:
            self.value, self.plan = metrics.objective_ms, plan
            progress.report(incumbent_ms=self.value)

    def offer_line(self, inst: ChainInstance, line: CutLine) -> None:
        """A cut's plan, judged by the evaluator where the cut's own numbers say it meets
        the limits and beats the incumbent."""
        if line.feasible and line.objective_ms < self.value * (1 + 1e-9):
            self.offer(line.plan(inst), line.metrics(inst))

    def target(self) -> float:
        """The bound at which a node closes: without an incumbent, just above the horizon (a
        box whose bound exceeds every plan's objective holds no plan that meets the limits)."""
        if self.plan is None:
            return self.horizon * (1 + 1e-9) + 1e-9
        return self.value - OPTIMAL_RTOL * abs(self.value)


class Box:
    """Boxes of chain positions closed under the layer DAG."""

    def __init__(self, inst: ChainInstance):
        index = {layer.name: i for i, layer in enumerate(inst.layers)}
        self.inputs = [[index[t] for t in dict.fromkeys(layer.inputs) if t in index] for layer in inst.layers]
        self.readers: list[list[int]] = [[] for _ in inst.layers]
        for reader, inputs in enumerate(self.inputs):
            for p in inputs:
                self.readers[p].append(reader)

    def tighten(self, lo: np.ndarray, hi: np.ndarray, layer: int) -> bool:
        """Close ``lo``/``hi`` under the DAG after ``layer``'s bounds changed (in place):
        a reader sits no earlier than its inputs, so raising a layer's least raises its
        readers', lowering its largest lowers its inputs'. False where the box is empty."""
        stack = [layer]
        while stack:
            u = stack.pop()
            for c in self.readers[u]:
                if lo[c] < lo[u]:
                    lo[c] = lo[u]
                    stack.append(c)
            for p in self.inputs[u]:
                if hi[p] > hi[u]:
                    hi[p] = hi[u]
                    stack.append(p)
            if lo[u] > hi[u]:
                return False
        return True


def chain_branch_and_bound(inst: ChainInstance, options: SolveOptions) -> BackendOutput:
    """exact branch and bound over the priced cuts (the latency objective with memory
    limits; throughput too): see the module docstring."""
    import numpy as np

    from splitopt.families.chain.cut import cut_refusal
    from splitopt.families.chain.lagrange import PricedCuts

    why = cut_refusal(inst)
    if why is not None:
        raise NotApplicable(f"chain-bb: {why}; use cpsat")
    t0 = time.perf_counter()
    cuts = PricedCuts(inst)
    incumbent = Incumbent(cuts.horizon)
    footprint = branching_weights(cuts)
    stats: dict[str, Any] = {"nodes": 0, "cuts": 0, "closed": 0}  # counts, then ctrl_c and solve_s
    closed_bound = float("inf")  # the least bound of the closed nodes
    open_nodes: list[Node] = []
    dive: Node | None = None
    M, n = cuts.M, len(inst.layers)
    box = Box(inst)
    order = itertools.count()
    reported = -float("inf")  # the least bound of the open and closed nodes last reported
    try:
        _seed_incumbent(inst, incumbent, options)
        first = Node(-float("inf"), next(order), np.zeros(n, dtype=np.int64), np.full(n, M - 1, dtype=np.int64),
                     [], np.full(M, 1.0 / M) if cuts.throughput else np.ones(M), np.zeros(M), [], np.zeros(0))
        heapq.heappush(open_nodes, first)
        while open_nodes or dive is not None:
            if options.out_of_time():
                break
            node = dive if dive is not None else heapq.heappop(open_nodes)
            dive = None
            least = min([closed_bound, node.bound] + ([open_nodes[0].bound] if open_nodes else []))
            if reported < least < float("inf"):  # the bound as it rises, for the progress line
                reported = least
                progress.report(bound_ms=least)
            if node.bound >= incumbent.target():
                closed_bound = min(closed_bound, node.bound)
                stats["closed"] += 1
                continue
            stats["nodes"] += 1
            bound, lines, step = _node_bound(cuts, node, incumbent, options)
            bound = max(bound, node.bound)
            if bound >= incumbent.target():
                closed_bound = min(closed_bound, bound)
                stats["closed"] += 1
                continue
            if options.out_of_time():
                heapq.heappush(open_nodes, Node(bound, next(order), node.lo, node.hi, lines, node.lam, node.mu,
                                                node.steps, node.nu))
                break
            if np.array_equal(node.lo, node.hi):  # one placement: its line's plan
                only = lines[-1].metrics(inst)
                incumbent.offer(lines[-1].plan(inst), only)
                closed_bound = min(closed_bound, only.objective_ms if only.feasible else float("inf"))
                stats["closed"] += 1
                continue
            layer, level = _branching(node, lines, step, footprint)
            lam, mu, nu = (node.lam, node.mu, node.nu) if step is None else (step.lam, step.mu, step.nu)
            for later in (True, False):
                lo, hi = node.lo.copy(), node.hi.copy()
                if later:
                    lo[layer] = level + 1
                else:
                    hi[layer] = level
                if not box.tighten(lo, hi, layer):
                    continue
                inside = [ln for ln in lines if np.all(ln.positions >= lo) and np.all(ln.positions <= hi)]
                child = Node(bound, next(order), lo, hi, inside[-INHERITED_LINES:], lam, mu, list(node.steps), nu)
                if later:
                    dive = child
                else:
                    heapq.heappush(open_nodes, child)
    except KeyboardInterrupt:
        stats["ctrl_c"] = True
    stats["cuts"] = cuts.cuts
    stats["solve_s"] = time.perf_counter() - t0
    pending = [node.bound for node in open_nodes] + ([dive.bound] if dive is not None else [])
    bound = min([closed_bound] + pending)
    bound = None if not np.isfinite(bound) else max(bound, 0.0)
    finished = not pending and not stats.get("ctrl_c")
    if incumbent.plan is None:
        if finished:
            return BackendOutput(Status.INFEASIBLE, extra=stats,
                                 message="chain-bb: no placement meets the memory limits")
        return BackendOutput(Status.NO_SOLUTION_FOUND, bound=bound, extra={**stats, "interrupted": True},
                             message="chain-bb: no placement meeting the limits found before the time limit")
    if finished:  # every node closed: by a bound within the tolerance, or empty
        proven = incumbent.value if bound is None else min(bound, incumbent.value)
        return BackendOutput(Status.OPTIMAL, plan=incumbent.plan, bound=proven, extra=stats,
                             message=f"chain-bb: {stats['nodes']} nodes, {stats['cuts']} cuts")
    return BackendOutput(Status.FEASIBLE, plan=incumbent.plan, bound=bound, extra={**stats, "interrupted": True},
                         message=f"chain-bb: stopped after {stats['nodes']} nodes ({stats['cuts']} cuts)")


def _seed_incumbent(inst: ChainInstance, incumbent: Incumbent, options: SolveOptions) -> None:
    """The family's start plan (the best of the single device that fits, the best
    contiguous split of the file order and the Lagrangian repair's plan), where it meets
    the limits and the time limit leaves ``START_PLAN_MIN_S`` for it (the priced cuts of
    the start plan take up to 3 s at 10,000 layers, and the user's limit comes first)."""
    from splitopt.families.chain.evaluate import evaluate
    from splitopt.families.chain.start import start_plan

    left = options.remaining_s()
    if left is not None and left < START_PLAN_MIN_S:
        # too little time for the whole start plan: its cheap part, the contiguous split
        # (0.2 s at 10,000 layers), stopped by the time limit (a 2 s run on a 1,000-layer
        # throughput chain returned 65.9 ms where this split alone gives 49.4 ms)
        from splitopt.families.chain.methods import contiguous_split_plan

        plan = contiguous_split_plan(inst, stop=options.out_of_time)
    else:
        plan = start_plan(inst)
    if plan is not None:
        incumbent.offer(plan, evaluate(inst, plan))


def _node_bound(cuts: PricedCuts, node: Node, incumbent: Incumbent, options: SolveOptions):
    """Kelley's method in the node's box from the parent's multipliers: (the best bound
    found, the lines, the last LP step or None). Stops when the bound closes the node,
    when the envelope (an upper bound on the box's dual) falls below the incumbent (the
    node cannot close: branch; not at the root, whose bound every node inherits, so that
    the bound reported is at least the priced cuts' bound), at convergence, after
    ``NODE_CUTS`` cuts (``ROOT_CUTS`` at the root) or at the time limit. Every plan that
    meets the limits is offered to the incumbent; ``node.steps`` grows by row generation."""
    import numpy as np

    lam, mu, nu = node.lam, node.mu, node.nu
    lines = list(node.lines)
    root = node.bound == -float("inf")
    best = -float("inf")
    step = None
    for _ in range(ROOT_CUTS if root else NODE_CUTS):
        if len(nu) < len(node.steps):  # prices of the rows generated since (0 at first)
            nu = np.concatenate([nu, np.zeros(len(node.steps) - len(nu))])
        bound, line = cuts.solve(lam, mu, node.steps, nu, positions=(node.lo, node.hi))
        best = max(best, bound)
        incumbent.offer_line(cuts.inst, line)
        lines.append(line)
        if best >= incumbent.target() or options.out_of_time():
            return best, lines, None
        step = cuts.kelley(lines, node.steps)
        if step is None:
            break
        lam, mu, nu = (step.lam if cuts.throughput else lam), step.mu, step.nu
        if step.envelope < incumbent.target() and not root:  # the root's bound is every node's
            break
        if step.envelope - best <= CONVERGED_RTOL * max(abs(step.envelope), 1e-9):
            break
    if step is not None and len(step.line_weights) != len(lines):
        step = None
    return best, lines, step


def branching_weights(cuts: PricedCuts) -> np.ndarray:
    """Per layer its weight in the choice of a branching variable: where a memory row can
    bind, ``1 +`` the bytes it brings to its device (its weights and the activations it
    produces) over the mean of these, so that the layers that decide whether a device
    overflows are branched on first (on the 1,000-layer seed-4 random chain, 1,001 -> 497
    nodes with the optimum known); else 1."""
    import numpy as np

    n = len(cuts.weight_bytes)
    if not cuts.priced and not cuts.step_priced:
        return np.ones(n)
    made = cuts.producer >= 0
    brought = cuts.weight_bytes + np.bincount(cuts.producer[made], weights=cuts.held[made], minlength=n)
    mean = float(brought.mean())
    return 1.0 + brought / mean if mean > 0 else np.ones(n)


def _branching(node: Node, lines: list[CutLine], step, footprint: np.ndarray) -> tuple[int, int]:
    """The branching variable "layer l at a position <= m" (see the module docstring):
    the one of the largest ``split x footprint[l]``, where ``split`` is how evenly the LP's
    convex combination of the lines splits it (``min(Y, 1 - Y)``), ties to the median layer
    in file order; without a usable LP, the lines weighted alike; where every line places
    every free layer alike, a free layer of the last line."""
    import numpy as np

    P = np.array([ln.positions for ln in lines])
    weights = None if step is None else step.line_weights
    if weights is None or weights.sum() <= 0:
        weights = np.ones(len(lines))
    weights = weights / weights.sum()
    best = None
    for m in range(int(node.lo.min()), int(node.hi.max())):
        Y = weights @ (P <= m)
        split = np.minimum(Y, 1.0 - Y)
        split[(node.lo > m) | (node.hi <= m)] = 0.0  # decided at this level
        split *= footprint
        top = float(split.max())
        if top > 1e-9 and (best is None or top > best[0] + 1e-9):
            tied = np.flatnonzero(split >= top - 1e-9)
            best = (top, int(tied[len(tied) // 2]), m)
    if best is not None:
        return best[1], best[2]
    free = np.flatnonzero(node.lo < node.hi)
    layer = int(free[len(free) // 2])
    position = int(lines[-1].positions[layer])
    return layer, min(position, int(node.hi[layer]) - 1)
