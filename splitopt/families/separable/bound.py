"""The separable family's lower bound (``formulations/separable_policies.md``, "Lower
bounds"): from the gossip constructions' counting arguments (``gossip.py``), cheap (no
program is built)."""

from __future__ import annotations

import math

from splitopt.families.separable.data import data
from splitopt.families.separable.evaluate import evaluate
from splitopt.families.separable.gossip import bytes_lower_bound, latency_lower_bound
from splitopt.families.separable.plan import silent_plan
from splitopt.families.separable.settings import SeparableInstance


def separable_lower_bound(inst: SeparableInstance) -> float:
    """``latency`` (ms): the silent policy's latency (every message only delays its
    receiver, and the ring plan synchronises every block), raised by the transfers that
    mixing and intensive steps force (:func:`gossip.latency_lower_bound`); ``bytes``: the
    cheapest messages that mixing and intensive steps force
    (:func:`gossip.bytes_lower_bound`), or the ring plan's where it is allowed (0 where
    no plan meets the limits)."""
    d = data(inst)
    if inst.objective == "bytes":
        low = bytes_lower_bound(d)
        return 0.0 if math.isinf(low) else low
    return latency_lower_bound(d, inst, evaluate(inst, silent_plan(d)).latency_ms)
