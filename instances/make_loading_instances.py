"""Write the loading instances measured on this host: ``instances/loading_<model>_host.json``
for ResNet-152, Inception-V3, DenseNet-201 and MobileNet-V1 (problem ``loading``, the RL
modularization paper's model set).

Each model is built in code at full size (random init, seed 0; no download:
:mod:`splitopt.torch.loading.models`) and profiled by
:func:`splitopt.torch.loading.profile.profile_loading`: per block its inference time
(one torch intra-op thread), MACs, stored elements and the time to load it from its own
checkpoint file (warm page cache, median of ``--repeats``), the per-file fixed cost, one
thread's rate and the rate ``--threads`` threads get together; the paper's Table 2 cut
positions as ``reference_plans`` where the architecture matches (not MobileNet-V1). The
solver then plans on this machine's numbers; ``splitopt run`` rebuilds the same
model from ``source.block_model`` and measures a plan.

Measured numbers differ from run to run (a shared host); the files are not expected to
be reproduced byte for byte. Run: ``python instances/make_loading_instances.py
[--models ...] [--threads 2] [--repeats 5]`` (a few minutes on 2 cores; needs the torch
extra).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402

from splitopt.core.instance_io import instance_json  # noqa: E402
from splitopt.torch.loading.models import MODEL_NAMES, BlockModelConfig  # noqa: E402
from splitopt.torch.loading.profile import profile_loading  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument("--threads", type=int, default=2, help="T: loading threads (default 2: this host's cores)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (median)")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for model in args.models:
        t0 = time.perf_counter()
        result = profile_loading(BlockModelConfig(model), args.threads, cache="warm", repeats=args.repeats,
                                 name=f"loading_{model}_host")
        path = args.out / f"loading_{model}_host.json"
        path.write_text(instance_json(result.instance))
        m = result.measurements
        print(f"wrote {path.relative_to(HERE.parent) if path.is_relative_to(HERE.parent) else path}: "
              f"{len(result.instance.layers)} blocks, inference {m['inference_ms']:.0f} ms, monolithic load "
              f"{m['monolithic_load_ms']:.0f} ms, {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
