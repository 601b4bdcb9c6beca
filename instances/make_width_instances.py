"""Generate the instances whose compression width d is a solver decision with its
measured accuracy (issue 4; SplitNets Sec. 3.1.3 splitting module).

    python instances/make_width_instances.py [--out instances/]

Steps: train the digits CNN on scikit-learn's shipped digits (20 epochs, seed 0), insert
the splitting module after ``block2`` (Conv-Reduce 32 -> d on the sensor, Conv-Recover
d -> 32 on the aggregator, split-aware init), retrain it by knowledge distillation for
10 epochs per width d in {1, 2, 4, 8, 16} and measure the test accuracy with the split
tensor packed at 8 bits (:func:`splitopt.torch.multiview.retrain.retrain_table`); then write the
one-view ``multiview`` instance of :func:`splitopt.torch.multiview.width_instance.widths_instance`
(wearable -> phone over a 1 Mbit/s link, assumed hardware stated there), with
``min_accuracy`` 0.93: ``digits_cnn_widths.json``. The same as
``splitopt retrain --instance-out F --min-accuracy 0.93``.

Two views (``digits_cnn_widths_2views.json``): two wearables each see a column band of
the digit (columns 0-4 and 3-7); the View-Pool model is trained here (20 epochs), then per
d in {1, 2, 4, 8} Conv-Reduce per view + View-Fuse retrained by distillation
(:func:`splitopt.torch.multiview.retrain_views.multiview_retrain_table`); both wearables share
the 1 Mbit/s serial link; ``min_accuracy`` 0.93. The same as ``splitopt retrain --views 2
--widths 1,2,4,8 --instance-out F --min-accuracy 0.93``.

The accuracies are this machine's (torch's float sums may differ slightly elsewhere); the
shipped file records them, so solving it needs no torch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from splitopt.core.instance_io import save_instance
from splitopt.torch.multiview.retrain_views import multiview_retrain_table
from splitopt.torch.multiview.retrain import retrain_table
from splitopt.torch.multiview.width_instance import widths_instance

NAME = "digits_cnn_widths"
NAME_2VIEWS = "digits_cnn_widths_2views"
MIN_ACCURACY = 0.93


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    table = retrain_table(split="block2", widths=(1, 2, 4, 8, 16), inits=("split-aware",), loss="kd", epochs=10,
                          base_epochs=20, seed=0, progress=False)
    inst = widths_instance(table, MIN_ACCURACY, name=NAME)
    path = args.out / f"{NAME}.json"
    save_instance(inst, path)
    _report(path, table, t0)
    t0 = time.perf_counter()
    table = multiview_retrain_table(views=2, split="block2", widths=(1, 2, 4, 8), init="split-aware", loss="kd",
                                    epochs=10, base_epochs=20, seed=0, progress=False)
    path = args.out / f"{NAME_2VIEWS}.json"
    save_instance(widths_instance(table, MIN_ACCURACY, name=NAME_2VIEWS), path)
    _report(path, table, t0)
    return 0


def _report(path: Path, table: dict, t0: float) -> None:
    accs = ", ".join(f"d={r['d']}: {r['accuracy_after_packed']:.4f}" for r in table["rows"])
    print(f"wrote {path} in {time.perf_counter() - t0:.1f} s (unsplit {table['unsplit_accuracy_packed']:.4f}; {accs})")


if __name__ == "__main__":
    sys.exit(main())
