"""The peer benchmark's shipped data: where it is, its input files, and the human
experts' placements evaluated on the graphs they fit (for tests and benchmarks)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from splitopt.core.errors import InvalidPlan
from splitopt.families.maxload.evaluate import check_placement, latency, max_load
from splitopt.families.maxload.instance import read_peer_instance
from splitopt.families.maxload.plan import load_expert


def data_root() -> Path:
    """The peer data folder: ``$SPLITOPT_DNNP_DATA``, else ``../shared/peer-instances/
    dnn-partitioning`` beside the repository."""
    env = os.environ.get("SPLITOPT_DNNP_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[4] / "shared" / "peer-instances" / "dnn-partitioning"


def shipped_inputs(root: str | Path | None = None) -> list[Path]:
    root = data_root() if root is None else Path(root)
    return sorted(root.glob("throughput-inputs/*/*.json")) + sorted(root.glob("latency-inputs/*/*.json"))


def expert_rows(root: str | Path | None = None) -> list[dict[str, Any]]:
    """Every expert placement on the graphs it fits, evaluated: one row per (instance,
    model, placement source) with the value in ms and the broken rules.

    Throughput rows use ``throughput-inputs/LayerGraphs``: the inference graph with the
    inference split; the training graph with the split derived from the inference
    split, and also with the training split file where one ships. Latency rows use
    ``latency-inputs/LayerGraphs`` with the inference split (value None when the
    latency is undefined for it)."""
    root = data_root() if root is None else Path(root)
    rows: list[dict[str, Any]] = []
    for f in sorted((root / "human-experts").glob("*_inference_expert.json")):
        model = f.name.removesuffix("_inference_expert.json")
        plans = [("throughput", f"{model}_inference", f, "inference expert")]
        if (root / f"throughput-inputs/LayerGraphs/{model}_training.json").exists():
            plans.append(("throughput", f"{model}_training", f, "derived from inference expert"))
            tr = root / f"human-experts/{model}_training_expert.json"
            if tr.exists():
                plans.append(("throughput", f"{model}_training", tr, "training expert"))
        plans.append(("latency", f"{model}_inference", f, "inference expert"))
        for objective, graph, plan_file, how in plans:
            inst = read_peer_instance(root / f"{objective}-inputs/LayerGraphs/{graph}.json")
            placement = load_expert(inst, plan_file)
            violations = check_placement(inst, placement)
            if objective == "throughput":
                value: float | None = max_load(inst, placement)[0]
            else:
                try:
                    value = latency(inst, placement)
                except InvalidPlan as e:
                    value, violations = None, violations + [str(e)]
            rows.append({
                "instance": f"{objective}-inputs/LayerGraphs/{graph}",
                "model": "max-load" if objective == "throughput" else "latency",
                "placement": how,
                "value_ms": value,
                "violations": violations,
            })
    return rows


def expert_table(root: str | Path | None = None) -> str:
    """:func:`expert_rows` as a Markdown table (instance, model, placement, value, rules
    broken)."""
    lines = [
        "| instance | model | placement | value (ms) | rules broken |",
        "|---|---|---|---:|---|",
    ]
    for r in expert_rows(root):
        value = "undefined" if r["value_ms"] is None else f"{r['value_ms']:.4f}"
        broken = "none" if not r["violations"] else f"{len(r['violations'])}: " + " / ".join(r["violations"][:3])
        lines.append(f"| {r['instance']} | {r['model']} | {r['placement']} | {value} | {broken} |")
    return "\n".join(lines)
