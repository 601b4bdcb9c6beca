"""Benchmark of the SplitNets splitting module on the digits CNN: accuracy and bytes sent
per sample for a few compression widths d and the three initialisations.

    python benchmarks/retrain.py [--split block2] [--widths 1,2,4,8,16] [--epochs 10] [--seeds 0,1,2]

The unsplit :func:`splitopt.torch.architectures.digits_cnn` is trained once (seed 0, 20
epochs, Adam 3e-3) on scikit-learn's digits (1,437 train / 360 test). For every
initialisation (split-aware, kaiming, xavier) and width d, a fresh Conv-Reduce /
Conv-Recover is inserted after ``--split`` and the whole split model is retrained by
knowledge distillation from the unsplit model (T = 4, alpha = 0.9, ``--epochs`` epochs,
Adam 3e-3); once per seed in ``--seeds`` (the seed draws the splitting module and shuffles
the batches). Also cross-entropy retraining with the split-aware init. Reported: medians
over the seeds of the test accuracy before and after retraining (float, and with the
split tensor packed at 8 bits), the packed payload bytes per sample, the retraining
seconds. Writes ``benchmarks/results/retrain.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from splitopt.torch.multiview.retrain import retrain_table, train_digits  # noqa: E402

INITS = ("split-aware", "kaiming", "xavier")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", default="block2")
    p.add_argument("--widths", default="1,2,4,8,16")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--base-epochs", type=int, default=20)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "retrain"))
    a = p.parse_args(argv)
    widths = [int(w) for w in a.widths.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]

    t0 = time.perf_counter()
    base = train_digits(seed=0, epochs=a.base_epochs, progress=False)
    runs = []  # one table per (loss, seed)
    for loss, inits in (("kd", INITS), ("ce", ("split-aware",))):
        for seed in seeds:
            print(f"{loss} seed {seed} ...", file=sys.stderr, flush=True)
            runs.append(retrain_table(split=a.split, widths=widths, inits=inits, loss=loss, epochs=a.epochs,
                                      seed=seed, progress=False, base=base))
    first = runs[0]
    rows = []
    for loss, inits in (("kd", INITS), ("ce", ("split-aware",))):
        for init in inits:
            for d in widths:
                rs = [r for t in runs for r in t["rows"] if r["loss"] == loss and r["init"] == init and r["d"] == d]
                med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
                rows.append({"loss": loss, "init": init, "d": d, "seeds": len(rs),
                             "accuracy_unsplit": first["unsplit_accuracy"],
                             "accuracy_before": med("accuracy_before"), "accuracy_after": med("accuracy_after"),
                             "accuracy_after_packed": med("accuracy_after_packed"),
                             "accuracy_after_min": min(r["accuracy_after"] for r in rs),
                             "accuracy_after_max": max(r["accuracy_after"] for r in rs),
                             "payload_bytes": rs[0]["payload_bytes"], "header_bytes": rs[0]["header_bytes"],
                             "train_seconds": med("train_seconds")})
    machine = f"{cpu_name()}, {torch.get_num_threads()} torch threads available, 1 used; torch {torch.__version__}"
    result = {"machine": machine, "cores": len(__import__("os").sched_getaffinity(0)),
              "split": a.split, "channels": first["channels"], "height": first["height"], "width": first["width"],
              "unsplit_accuracy": first["unsplit_accuracy"], "unsplit_accuracy_packed": first["unsplit_accuracy_packed"],
              "unsplit_bytes": first["unsplit_bytes"], "base_train_seconds": first["base_train_seconds"],
              "epochs": a.epochs, "base_epochs": a.base_epochs, "seeds": seeds, "rows": rows,
              "total_seconds": time.perf_counter() - t0, "runs": runs}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")

    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    c, h, w = first["channels"], first["height"], first["width"]
    lines = [
        "# Splitting module (SplitNets Conv-Reduce / Conv-Recover) on the digits CNN",
        "",
        f"Machine: {machine}, {result['cores']} cores (Intel Xeon, 2 cores; shared with other jobs while this ran). "
        f"Produced by `python benchmarks/retrain.py` in {result['total_seconds']:.0f} s.",
        "",
        f"Data: scikit-learn `load_digits` (shipped), 1,437 train / 360 test, stratified, seed 0, pixels / 16. "
        f"Model: `digits_cnn` (14,378 parameters) trained {a.base_epochs} epochs (Adam 3e-3, batch 64, seed 0, "
        f"{first['base_train_seconds']:.1f} s): test accuracy **{pct(first['unsplit_accuracy'])} %** "
        f"({pct(first['unsplit_accuracy_packed'])} % with the uncompressed {c}x{h}x{w} tensor after `{a.split}` "
        f"sent at 8 bits: {first['unsplit_bytes']} B/sample payload).",
        "",
        f"Split after `{a.split}` ({c} channels, {h}x{w}): Conv-Reduce 1x1 {c} -> d on the edge, Conv-Recover 1x1 "
        f"d -> {c} on the cloud, freshly initialised; the whole split model retrained {a.epochs} epochs (Adam 3e-3, "
        f"batch 64): `kd` = distillation from the unsplit model (T = 4, alpha = 0.9), `ce` = cross-entropy. "
        f"Accuracies are medians over seeds {seeds} (the seed draws the splitting module and the batch order); "
        f"[min, max] of the float accuracy after. `sent`: after retraining with the split tensor packed at 8 bits "
        f"by `packing.pack` per sample. Bytes: 8-bit packed payload per sample = d * {h * w}, plus a 22-byte header "
        f"(shape, scale, zero point).",
        "",
        "| loss | init | d | unsplit % | before % | after % [min, max] | sent (8-bit) % | payload B/sample | train s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['loss']} | {r['init']} | {r['d']} | {pct(r['accuracy_unsplit'])} | {pct(r['accuracy_before'])} "
                     f"| {pct(r['accuracy_after'])} [{pct(r['accuracy_after_min'])}, {pct(r['accuracy_after_max'])}] "
                     f"| {pct(r['accuracy_after_packed'])} | {r['payload_bytes']} | {r['train_seconds']:.1f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
