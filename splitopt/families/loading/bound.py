"""The loading family's relaxation bound (``formulations/loading_balance.md``, "Lower
bound"): cheap, linear in the number of blocks, valid for every plan that meets the
limits."""

from __future__ import annotations

from splitopt.families.loading.data import LoadingData


def loading_lower_bound(d: LoadingData, objective: str) -> float | None:
    """A proven lower bound (ms) on the objective, or None when no plan meets the limits.

    With ``s`` the smallest slowdown over the allowed child counts ``k`` (``F``: the fixed
    cost, ``R``: the summed read time, ``r_max``: the largest block's read, ``R_tail``: the
    tail's read, ``I``: the summed inference time):

    * ``balance``: ``F + s * max(r_max, R_tail, R / k_max)``, the heaviest child;
    * ``latency``: the largest of ``F + s * r_0 + I`` (inference cannot start before the
      first child, holding block 0, is loaded) and ``min over k of (k F + s_k R) / min(T, k)``
      (every load ends before the first response, and the loads fill at most
      ``min(T, k)`` threads)."""
    counts = list(d.child_counts())
    if not counts:
        return None
    s = min(d.slowdown(k) for k in counts)
    total = float(d.read_prefix[-1])
    if objective == "balance":
        return d.fixed_ms + s * max(float(d.read_ms.max()), d.read_sum(d.last_start_max, d.n), total / max(counts))
    first = d.fixed_ms + s * float(d.read_ms[0]) + d.total_infer_ms
    packed = min((k * d.fixed_ms + d.slowdown(k) * total) / min(d.threads, k) for k in counts)
    return max(first, packed)
