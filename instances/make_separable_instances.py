"""Write the separable instances of the digits Sep-ResNeXt (problem ``separable``; the
Separable NN paper): ``instances/separable_digits_host.json`` (G = 4 devices that are
this host: every layer's measured time on one torch thread, links measured between two
gloo processes on 127.0.0.1) and ``instances/separable_digits_pi.json`` (G = 4 devices
of the paper's Sec. 4.6 Raspberry Pi 3B+, 1.7e8 FLOPS = 0.85e8 MAC/s, links of 300
Mbit/s: latency from the MACs).

The network (:mod:`splitopt.torch.separable.model`: 8 paths, per-device widths 16/32/64,
2 blocks per stage, alpha = 2, 9 levels from 50 %, float32 and float16) is trained once
(stage 1, a uniform random policy per mini-batch, seed 0, ``--epochs``) and its accuracy
records (``settings.separable.accuracy``: per policy class the minimum validation
accuracy of ``--samples`` policies drawn in the class) go into both files; so does the
test accuracy of the reference points (``source.test_accuracy``). ``splitopt
run`` rebuilds the network from ``source.separable_model`` (random weights
unless given ``--checkpoint``, which ``--checkpoint`` here writes).

Measured numbers differ from run to run (a shared host); the files are not expected to
be reproduced byte for byte. Run: ``python instances/make_separable_instances.py
[--epochs 25] [--checkpoint FILE] [--load FILE]`` (about three minutes on 2 cores, seconds with
``--load``; needs the torch extra). The committed files were made with ``--load`` of the
checkpoint that ``benchmarks/separable_torch.py --checkpoint`` wrote (same seed, same
recipe), so that the instances and the benchmark describe the same weights.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    import torch

    from splitopt.core.instance_io import instance_json
    from splitopt.torch.separable.model import (SepConfig, accuracy, identity_policy, intensive_policy,
                                                load_digits_split)
    from splitopt.torch.separable.nas import load_models, save_models
    from splitopt.torch.separable.profile import TrainedPair, measured_records, profile_instance, train_pair

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=25, help="stage-1 epochs (default 25, about 45 s)")
    parser.add_argument("--samples", type=int, default=8, help="policies measured per record class")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", type=Path, default=None, help="also write the trained weights here")
    parser.add_argument("--load", type=Path, default=None, help="take the trained networks from this checkpoint "
                        "(e.g. the benchmark's) instead of training")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    config = SepConfig()
    if args.load is not None:
        model, reference, extra = load_models(args.load)
        pair = TrainedPair(model, reference, load_digits_split(args.seed), seed=args.seed)
        config = model.config
        epochs = extra.get("epochs")
        train_s = (extra.get("train") or {}).get("seconds")
    else:
        pair = train_pair(config, seed=args.seed, epochs=args.epochs)
        epochs, train_s = args.epochs, pair.log.seconds
    if args.checkpoint is not None:
        save_models(args.checkpoint, pair.model, pair.reference, {"seed": args.seed, "epochs": epochs})
    records, _ = measured_records(pair.model, pair.data, samples=args.samples, seed=args.seed)
    d = pair.data
    test = {"unseparated": accuracy(pair.reference, d.x_test, d.y_test),
            "no_communication": accuracy(pair.model, d.x_test, d.y_test, identity_policy(config)),
            "all_intensive_100_float32": accuracy(pair.model, d.x_test, d.y_test, intensive_policy(config))}
    source = {"script": "instances/make_separable_instances.py", "seed": args.seed, "epochs": epochs,
              "test_accuracy": test,
              "train_seconds": None if train_s is None else round(train_s, 1)}
    for kind, name in (("host", "separable_digits_host"), ("analytic", "separable_digits_pi")):
        prof = profile_instance(pair.model, name=name, devices=kind, records=records, source=source,
                                prefix="pi" if kind == "analytic" else None,
                                # the unseparated network (the ring all-reduce plan), on the records' split
                                options={"ring_accuracy": accuracy(pair.reference, d.x_val, d.y_val)})
        path = args.out / f"{name}.json"
        path.write_text(instance_json(prof.instance))
        print(f"wrote {path.relative_to(HERE.parent) if path.is_relative_to(HERE.parent) else path}: "
              f"{len(prof.instance.layers)} layers, {len(records)} accuracy records", flush=True)
    print("test accuracy: " + ", ".join(f"{k} {v:.4f}" for k, v in test.items())
          + f"; {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
