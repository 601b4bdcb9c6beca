"""Neurosurgeon (Kang et al., ASPLOS 2017), float, as AUTO-SPLIT runs it on DAGs (Sec. 5.3):
a linear scan over the topologically sorted layers (the instance's execution order).

Split k (k = 0..N) puts the first k layers on the edge at the reference precision. The
method's own cost model treats the network as a chain:

* latency (ms) = sum of edge ms of layers 1..k + transfer of layer k's output only (the
  raw inputs at k = 0, nothing at k = N) + sum of cloud ms of layers k+1..N;
* edge memory (bytes) = weight bytes of layers 1..k + max over i <= k of (input + output)
  activation bytes of layer i, where the input of layer i is layer i-1's output (the raw
  inputs for the first layer).

It keeps the k whose chain memory fits ``edge_memory_bytes`` and picks the one with the
lowest chain latency (ties: the smaller k). On a DAG whose skip connections cross the
cut, the chain model misses tensors that are also sent or held live, so the truthfully
evaluated plan can be worse than its estimate, or break the memory limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from splitopt.families.edge_cloud.baselines.common import finish, fits, float_latencies, raw_input_bytes, sent_bytes
from splitopt.families.edge_cloud.evaluate import transfer_ms
from splitopt.core.result import BackendOutput
from splitopt.core.options import SolveOptions
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


@dataclass(frozen=True)
class ChainSplit:
    """Neurosurgeon's view of split k: its latency estimate (ms) and memory estimate (bytes)."""

    k: int
    estimate_ms: float
    memory_bytes: float


def chain_scan(inst: EdgeCloudInstance) -> list[ChainSplit]:
    """The chain estimates of every split k = 0..N, in order."""
    bits = inst.settings.cloud_bits
    lat = float_latencies(inst)
    layers = inst.layers
    n_layers = len(layers)
    act = [layer.output_elements * bits / 8.0 for layer in layers]
    raw = raw_input_bytes(inst)
    # the edge and cloud sums of every split from exact prefix sums (Fractions: linear, where
    # re-summing the slices was quadratic, and equal estimates stay exactly equal, so ties
    # still go to the smaller k)
    edge_prefix, cloud_prefix = [Fraction(0)], [Fraction(0)]
    for l in layers:
        edge_prefix.append(edge_prefix[-1] + Fraction(lat[l.name][0]))
        cloud_prefix.append(cloud_prefix[-1] + Fraction(lat[l.name][1]))
    out: list[ChainSplit] = []
    weights = peak = 0.0
    for k in range(n_layers + 1):
        if k > 0:
            i = k - 1
            weights += layers[i].weights * bits / 8.0
            peak = max(peak, (raw if i == 0 else act[i - 1]) + act[i])
        if k == 0:
            sent = raw
        elif k == n_layers:
            sent = 0.0
        else:
            sent = sent_bytes(inst, layers[k - 1].name, bits)
        estimate = edge_prefix[k] + Fraction(transfer_ms(inst, sent)) + cloud_prefix[n_layers] - cloud_prefix[k]
        out.append(ChainSplit(k, float(estimate), weights + peak))
    return out


def choose_split(inst: EdgeCloudInstance) -> ChainSplit:
    """The split Neurosurgeon picks: lowest chain latency among those whose chain memory
    fits (k = 0 always fits: it uses no edge memory)."""
    limit = inst.settings.edge_memory_bytes
    allowed = [c for c in chain_scan(inst) if c.k == 0 or fits(c.memory_bytes, limit)]
    return min(allowed, key=lambda c: (c.estimate_ms, c.k))


def run(inst: EdgeCloudInstance, options: SolveOptions) -> BackendOutput:
    """Neurosurgeon: linear scan over the topological order with a chain cost model (float)."""
    best = choose_split(inst)
    plan = uniform_plan(inst, [layer.name for layer in inst.layers[: best.k]])
    # the chain estimate is not the true latency on a DAG: objective stays None
    extra = {"split_k": best.k, "estimate_ms": best.estimate_ms, "estimate_memory_bytes": best.memory_bytes}
    return finish(inst, plan, "neurosurgeon", extra=extra)
