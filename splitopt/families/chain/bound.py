"""The chain family's relaxation bounds (``formulations/chain_split.md``, "Lower bound").

* Without memory limits the latency objective (a sum of stage times) is a minimum cut
  (``cut.py``): its value bounds the latency of every plan that meets the limits, and
  where its plan meets them too it is the optimum (``memory_free_optimum_fits``).
* Where the cut does not apply (a layer that reads only empty tensors beside a link with
  a fixed latency), drop the device order, the links and the memories: every layer on
  the chain device where it is fastest, latency >= the sum of those minima.
* Throughput (largest stage time) >= the largest of those minima (a stage holds the whole
  layer), and >= the latency bound divided by the number of devices (the largest stage is
  at least the mean stage).
* Both: the Lagrangian bound of ``lagrange.py`` (cuts with prices on the weights each
  device holds and, for throughput, weights on the stages), where the memory-free
  optimum does not already settle the instance.

Each is solved once per instance and cached.
"""

from __future__ import annotations

import math

from splitopt.families.chain.data import compute_table
from splitopt.families.chain.settings import ChainInstance


def memory_free_latency(inst: ChainInstance):
    """The minimum cut of the latency objective without memory limits (a ``CutSolution``),
    or None where ``chain-cut`` does not apply; cached on the instance."""
    from splitopt.families.chain.cut import cut_refusal, min_weighted_stages

    def solve():
        if cut_refusal(inst) is not None:
            return None
        return min_weighted_stages(inst)

    return inst.derived(("chain", "memory_free_latency"), solve)


def memory_free_optimum_fits(inst: ChainInstance) -> bool:
    """Whether the memory-free latency optimum meets every memory limit, making it the
    optimum (False for the throughput objective)."""
    if inst.objective != "latency":
        return False

    def fits() -> bool:
        from splitopt.families.chain.cut import cut_plan
        from splitopt.families.chain.evaluate import evaluate

        cut = memory_free_latency(inst)
        return cut is not None and evaluate(inst, cut_plan(inst, cut)).feasible

    return inst.derived(("chain", "memory_free_fits"), fits)


def chain_lower_bound(inst: ChainInstance) -> float | None:
    """A lower bound (ms) on every chain plan's objective; None without layers or devices."""
    table = compute_table(inst)
    fastest = [min(times) for times in table.values() if times]
    if not fastest:
        return None
    from splitopt.families.chain.lagrange import lagrange

    latency = math.fsum(fastest)
    cut = memory_free_latency(inst)
    if cut is not None:
        latency = max(latency, cut.bound_ms)
    priced = None if memory_free_optimum_fits(inst) else lagrange(inst)
    if inst.objective == "throughput":
        bound = max(max(fastest), latency / len(inst.settings.chain))
        return bound if priced is None else max(bound, priced.bound_ms)
    return latency if priced is None else max(latency, priced.bound_ms)
