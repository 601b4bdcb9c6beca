"""The loading family's relaxation bound (``formulations/loading_balance.md``, "Lower
bound"): cheap, linear in the number of blocks, valid for every plan that meets the
limits."""

from __future__ import annotations

from splitopt.families.loading.data import LoadingData


def heaviest_child_bound(d: LoadingData, sigma: float, k: int) -> float:
    """No partition into ``k`` children with slowdown ``sigma`` has a lighter heaviest child
    (ms): ``F + sigma * max(r_max, R_tail, R / k)`` (some child holds the largest block, the
    last holds the tail, and the largest of ``k`` is at least their mean)."""
    reads = max(float(d.read_ms.max()), d.read_sum(d.last_start_max, d.n), float(d.read_prefix[-1]) / k)
    return d.fixed_ms + sigma * reads


def first_child_bound(d: LoadingData, sigma: float) -> float:
    """No first response comes before ``F + sigma * r_0 + I`` (ms): inference cannot start
    before the first child, holding block 0, is loaded."""
    return d.fixed_ms + sigma * float(d.read_ms[0]) + d.total_infer_ms


def packed_bound(d: LoadingData, k: int) -> float:
    """No first response with ``k`` children comes before ``(k F + sigma_k R) / min(T, k)``
    (ms): every load ends before it, and the loads fill at most ``min(T, k)`` threads."""
    return (k * d.fixed_ms + d.slowdown(k) * float(d.read_prefix[-1])) / min(d.threads, k)


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
    if objective == "balance":
        return heaviest_child_bound(d, s, max(counts))
    return max(first_child_bound(d, s), min(packed_bound(d, k) for k in counts))
