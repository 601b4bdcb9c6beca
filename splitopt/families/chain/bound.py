"""The chain family's relaxation bound (``formulations/chain_split.md``, "Lower bound"):
drop the device order, the links and the memories, and let every layer run on the chain
device where it is fastest.

* latency (sum of stage times) >= sum over layers of min over devices of the layer's
  compute (transfers are >= 0);
* throughput (largest stage time) >= the largest of those minima (a stage holds the whole
  layer) and >= their sum divided by the number of devices (the largest stage is at least
  the mean stage).

Linear in layers x devices; no program is built.
"""

from __future__ import annotations

import math

from splitopt.core.instance import Instance
from splitopt.families.chain.data import compute_table


def chain_lower_bound(inst: Instance) -> float | None:
    """A lower bound (ms) on every chain plan's objective; None without layers or devices."""
    table = compute_table(inst)
    fastest = [min(times) for times in table.values() if times]
    if not fastest:
        return None
    total = math.fsum(fastest)
    if inst.settings.objective == "throughput":
        return max(max(fastest), total / len(inst.settings.chain))
    return total
