"""The latency / quantization-error Pareto front of ResNet-50 on Eyeriss/TPU, solved exactly and plotted to a PNG.

`splitopt.analysis.pareto.pareto_front` runs the epsilon-constraint method: it solves
for the least latency with no error budget, then again with the budget just below the
error of the last plan, and so on down to the cloud-only plan (no quantization, error
0). Every point is a proven optimum for its budget, so consecutive points are the
front's corners. `splitopt.analysis.plots.plot_front` draws the front as a matplotlib
figure (built without pyplot, so it never touches the caller's backend) with the
instance's error budget dashed and the plan `solve` returns starred; given a path it
also writes the file. The command line does the same: `splitopt pareto INSTANCE --plot
FILE`.

Usage: `python examples/pareto_plot.py [OUT.png]` (default `pareto_resnet50.png` in the
current directory).
"""

import sys
from pathlib import Path

import splitopt
from splitopt.analysis.pareto import pareto_front
from splitopt.analysis.plots import plot_front

ROOT = Path(__file__).resolve().parent.parent
out = Path(sys.argv[1] if len(sys.argv) > 1 else "pareto_resnet50.png")

inst = splitopt.load_instance(ROOT / "instances" / "resnet50_eyeriss.json")
front = pareto_front(inst, solver="cpsat", mode="exact", points=50, time_limit=30, threads=1)

print(front.title, "-", front.measure)
print(f"{'error budget':>12} {'error':>10} {'latency ms':>11} {'status':>8}  edge layers")
for point in front.points:  # each: the budget solved under, its plan's error (the measure) and latency
    budget = "none" if point.budget is None else f"{point.budget:.4g}"
    edge = point.result.metrics.edge_layer_count
    print(f"{budget:>12} {point.measure:>10.4g} {point.latency_ms:>11.3f} {point.result.status.name:>8}  {edge}")

figure = plot_front(inst, front, out)
print(f"wrote {out} ({out.stat().st_size:,} B): {len(front.points)} points")
