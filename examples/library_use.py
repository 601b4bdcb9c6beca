"""Use splitopt from another planner: load an instance, solve it within a time limit, read the result, evaluate other plans.

The instance is ResNet-50 on an Eyeriss edge accelerator and a TPU cloud over a 3 Mbit/s
uplink (`instances/resnet50_eyeriss.json`, problem `split_bits`: which layers run on the
edge, and at which weight and activation bit-widths). The plan a solver returns is a
plain object; `splitopt.plan_to_dict` turns it into the JSON form that `splitopt
evaluate` reads, which is also the easiest form to edit. Every plan, whoever made it, is
judged by the family's one evaluator (`splitopt.evaluate`).
"""

from pathlib import Path

import splitopt

ROOT = Path(__file__).resolve().parent.parent

inst = splitopt.load_instance(ROOT / "instances" / "resnet50_eyeriss.json")

# Solve with a 30 s wall-clock budget (reading, building and solving included). No
# solver named: `auto`, which proves this instance optimal in well under a second. One
# solver thread and a fixed seed make the run repeatable: CP-SAT's parallel workers race,
# so with more threads an equally good plan may come back from run to run.
result = splitopt.solve(inst, time_limit=30, threads=1, seed=0)
print(f"status    {result.status.name}")
print(f"objective {result.objective:.3f} ms (end-to-end latency)")
print(f"bound     {result.bound:.3f} ms, gap {result.gap:.2e} (relative)")
print(f"backend   {result.backend}: {result.message}")

plan = splitopt.plan_to_dict(inst, result.plan)
edge = {name: layer for name, layer in plan["layers"].items() if layer["device"] == "eyeriss"}
for name, layer in edge.items():
    print(f"edge layer {name}: weights at {layer['weight_bits']} bits, activations at {layer['activation_bits']} bits")

metrics = result.metrics
print(f"sent {metrics.transmitted_bytes:,.0f} B; edge memory {metrics.edge_memory_bytes:,.0f} B "
      f"of {metrics.edge_memory_limit:,.0f} B; error {metrics.error:.4g} of budget {metrics.error_budget:.4g}")


def judge(label: str, plan_dict: dict) -> None:
    """Evaluate an edited plan: the evaluator says its latency and which limits it breaks."""
    m = splitopt.evaluate(inst, splitopt.plan_from_dict(inst, plan_dict))
    verdict = "meets every limit" if m.feasible else "breaks: " + "; ".join(m.violations)
    print(f"{label}: {m.objective_ms:.3f} ms, {verdict}")


# The same cut with the pooled map sent at 8 bits instead of the solver's choice: more
# bytes over the slow uplink.
wider = {**plan, "layers": {**plan["layers"], "maxpool": {**plan["layers"]["maxpool"], "activation_bits": 8}}}
judge("maxpool sent at 8 bits", wider)

# Everything on the cloud: the raw image goes over the uplink.
cloud_only = {**plan, "layers": {name: {"device": "tpu"} for name in plan["layers"]}}
judge("cloud only", cloud_only)

# Every layer on the edge at 8 bits: no upload at all, but the weights do not fit the
# edge's 4 MB.
edge_only = {**plan, "layers": {name: {"device": "eyeriss", "weight_bits": 8, "activation_bits": 8}
                                for name in plan["layers"]}}
judge("edge only, 8 bits", edge_only)

# The optimal plan again, to check it round-trips through its JSON form unchanged.
judge("solver's plan", plan)
assert abs(splitopt.evaluate(inst, result.plan).objective_ms - result.objective) < 1e-9
