"""A scenario sweep in Python: vary the uplink's bandwidth and the edge's memory limit with overrides, solve each, tabulate.

Overrides are the `--set PATH=VALUE` edits of the command line: each one edits the
instance's JSON before it is checked, so a scenario is checked exactly like a file (a
value out of range is one `InvalidInstance` line naming the field). Here the scenarios
are ResNet-50 on Eyeriss/TPU (`instances/resnet50_eyeriss.json`) at five uplink
bandwidths and two edge memory limits (Eyeriss's 4 MB, and 64 MB). Each solve is proven
optimal, and the table shows where the split moves: with 4 MB the edge runs `conv1` and
`maxpool` and sends the pooled map at 4 bits until the uplink is fast enough to send the
raw image; with 64 MB and a slow uplink the whole network runs on the edge.
"""

import json
from pathlib import Path

import splitopt

ROOT = Path(__file__).resolve().parent.parent
DATA = json.loads((ROOT / "instances" / "resnet50_eyeriss.json").read_text())

BANDWIDTHS = [1e5, 1e6, 3e6, 3e7, 3e8]  # bits per second on the link eyeriss -> tpu
EDGE_MEMORIES = [4e6, 64e6]  # bytes the edge may hold: weights and live activations

print(f"{'uplink Mbit/s':>13} {'edge MB':>7} {'status':>8} {'latency ms':>11} {'edge layers':>11} "
      f"{'sent B':>9}  last edge layer")
for memory in EDGE_MEMORIES:
    for bandwidth in BANDWIDTHS:
        inst = splitopt.parse_instance(DATA, overrides=[
            f"links[eyeriss->tpu].bandwidth_bits_per_s={bandwidth}",
            f"settings.edge_memory_bytes={memory}",
        ])
        result = splitopt.solve(inst, time_limit=30, threads=1, seed=0)  # repeatable: one thread
        plan = splitopt.plan_to_dict(inst, result.plan)
        edge = [name for name, layer in plan["layers"].items() if layer["device"] == "eyeriss"]
        print(f"{bandwidth / 1e6:>13g} {memory / 1e6:>7g} {result.status.name:>8} {result.objective:>11.3f} "
              f"{len(edge):>11} {result.metrics.transmitted_bytes:>9,.0f}  {edge[-1] if edge else '-'}")
