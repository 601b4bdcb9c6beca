"""The edge/cloud family's own methods, offered as backends: the published baselines, one
module each in ``baselines/`` (``splitopt solvers`` lists them)."""

from __future__ import annotations

from splitopt.families.base import Method
from splitopt.families.edge_cloud.baselines import auto_split, cloud_only, edge_only, neurosurgeon, qdmp, u8

METHODS = (
    Method("cloud-only", "CLOUD16: all layers on the cloud, raw input sent (AUTO-SPLIT Sec. 5.3)", cloud_only.run,
           hint=True),
    Method("edge-only", "EDGE-ONLY: all layers on the edge (split_bits: best uniform bit-width)", edge_only.run,
           hint=True),
    Method("u8", "U8: all layers on the edge at 8-bit weights and activations (AUTO-SPLIT Sec. 5.3)", u8.run,
           problems=("split_bits",), hint=True),
    Method("neurosurgeon", "Neurosurgeon: linear scan over the execution order with a chain cost model (float)",
           neurosurgeon.run, problems=("split",), fallback_problem="split", hint=True),
    Method("qdmp", "DADS/QDMP: s-t min-cut on the layer DAG with fan-out nodes (float; ignores edge memory)",
           qdmp.run, problems=("split",), fallback_problem="split", hint=True),
    Method("auto-split", "AUTO-SPLIT Algorithm 1: potential splits (Eq. 6) x grid of memory budgets (Eq. 8, 9)",
           auto_split.run, problems=("split_bits",)),
)
