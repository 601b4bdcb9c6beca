"""Profile a model of your own, solve its split, and run the split model (needs the torch extra).

The model is the small CNN `build()` below: a cheap stem that shrinks the image, then a
heavier tail. This script is also the model's file: `splitopt profile PATH.py:FACTORY`
imports it and calls `build()`. The steps:

1. `splitopt profile examples/profile_solve_run.py:build --input-shape 1,3,32,32`
   captures the module with `torch.export` (batch-norm folded, activations fused) and
   writes an edge/cloud instance: per layer its MACs, weights, shapes and
   quantization-error tables, on the Eyeriss/TPU preset over a 3 Mbit/s uplink;
2. the instance is loaded with an override that makes the edge a slow device (1e8 MAC/s),
   so that neither the edge nor the cloud alone is best, and solved;
3. `splitopt run` cuts the module by the plan into one runnable part per device, runs the
   parts one after the other on inputs, and checks that the output matches the unsplit
   module and that the bytes crossing the cut equal the evaluator's count (exit 1 if
   not).
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import splitopt


def build():
    """The user's model (random weights, seeded)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),  # 8 x 16 x 16
        nn.MaxPool2d(2),                                                          # 8 x 8 x 8: 512 values
        nn.Conv2d(8, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    )


def splitopt_command(*args: str) -> str:
    """Run `splitopt ARGS` with this Python; print and return its output, fail on a non-zero exit."""
    done = subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True)
    print(f"$ splitopt {' '.join(args)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        sys.exit(f"splitopt {args[0]} exited {done.returncode}")
    return done.stdout


def main() -> None:
    model = f"{Path(__file__).resolve()}:build"
    with tempfile.TemporaryDirectory() as tmp:
        profiled, instance, plan = Path(tmp, "profiled.json"), Path(tmp, "instance.json"), Path(tmp, "plan.json")
        splitopt_command("profile", model, "--input-shape", "1,3,32,32", "-o", str(profiled))

        inst = splitopt.parse_instance(json.loads(profiled.read_text()),
                                       overrides=["devices[eyeriss].mac_per_s=1e8"])
        splitopt.save_instance(inst, instance)
        result = splitopt.solve(inst, time_limit=30, threads=1, seed=0)
        edge = [name for name, layer in splitopt.plan_to_dict(inst, result.plan)["layers"].items()
                if layer["device"] == "eyeriss"]
        print(f"solve: {result.status.name}, {result.objective:.3f} ms, edge layers {edge}, "
              f"sent {result.metrics.transmitted_bytes:,.0f} B")
        for name, other in [("cloud only", {"device": "tpu"}),
                            ("edge only", {"device": "eyeriss", "weight_bits": 8, "activation_bits": 8})]:
            data = splitopt.plan_to_dict(inst, result.plan)
            data["layers"] = {layer: dict(other) for layer in data["layers"]}
            print(f"  {name}: {splitopt.evaluate(inst, splitopt.plan_from_dict(inst, data)).objective_ms:.3f} ms")
        splitopt.save_plan(inst, result.plan, plan)

        out = splitopt_command("run", str(instance), str(plan), "--model", model, "--samples", "4")
        assert out.rstrip().endswith("OK"), "the split run did not match the unsplit model"


if __name__ == "__main__":
    main()
