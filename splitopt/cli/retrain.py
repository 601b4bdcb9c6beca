"""``splitopt retrain``: train the digits CNN, insert the SplitNets splitting module
(Conv-Reduce c -> d on the edge, Conv-Recover d -> c on the cloud) after a block, retrain
it for each width d, and print accuracy before/after and the bytes sent per sample.
``--views V`` (V > 1): V sensors see column bands of each digit; the unsplit model fuses
by View-Pool, the split model by Conv-Reduce per view and View-Fuse.

``--instance-out F`` also writes a one-view ``multiview`` instance whose compression
widths carry the measured accuracies (``splitopt/torch/multiview/width_instance.py``), so that
``splitopt solve F`` chooses the width d under ``--min-accuracy``.

Exit status: 0 done; 2 bad input (unknown split block, a width that is not an integer in
[1, channels at the split], unknown init or loss, epochs outside [0, 10,000], a learning
rate outside (0, 10], a seed outside [0, 2**32 - 1], a --min-accuracy outside [0, 1] or
without --instance-out, an output path that cannot be written), one line on stderr; all
but the split block, the widths' upper bound, init and loss are checked before torch is
imported.
"""

import json
from pathlib import Path
from typing import Optional

import typer


#: the most training epochs asked for (each a pass over the 1,437 training digits)
MAX_EPOCHS = 10_000


def parse_widths(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; InvalidModel (one line) for anything else."""
    from splitopt.core.errors import InvalidModel

    out = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or len(item) > 6:
            raise InvalidModel(f"--widths: '{item[:20]}' is not an integer in [1, 999999] (give a comma-separated list such "
                               "as 1,2,4,8)")
        out.append(int(item))
    return out


def retrain_command(
    split: str = typer.Option("block2", "--split", help="Block of the digits CNN after which the splitting module goes: block1 (16x8x8), block2 (32x4x4), block3 (32x4x4)."),
    widths: str = typer.Option("1,2,4,8,16", "--widths", help="Comma-separated compression widths d (channels sent), each in [1, channels at the split]."),
    epochs: int = typer.Option(10, "--epochs", help="Retraining epochs per width."),
    base_epochs: int = typer.Option(20, "--base-epochs", help="Training epochs of the unsplit model."),
    init: str = typer.Option("split-aware", "--init", help="Initialisation of Conv-Reduce/Recover: split-aware, kaiming or xavier."),
    loss: str = typer.Option("kd", "--loss", help="kd: distil from the unsplit model; ce: cross-entropy on the labels."),
    lr: float = typer.Option(3e-3, "--lr", help="Adam learning rate of the retraining."),
    bits: int = typer.Option(8, "--bits", help="Bits per transmitted element (packing.pack) for the bytes and the packed accuracy."),
    seed: int = typer.Option(0, "--seed", help="Seed of the model init, the shuffling and the splitting module."),
    views: int = typer.Option(1, "--views", help="Views V (1-4): with V > 1 each sensor sees a column band of the digit; the unsplit model fuses the views by View-Pool (max), the split model by Conv-Reduce per view (one module shared by the views) + View-Fuse (splitopt/torch/multiview/retrain_views.py)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bars on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the table JSON to this file."),
    save: Optional[Path] = typer.Option(None, "--save", help="Also save the weights (unsplit none.pt, retrained d{d}.pt) into this directory, for `splitopt run INSTANCE PLAN --model digits_cnn --weights DIR`."),
    instance_out: Optional[Path] = typer.Option(None, "--instance-out", help="Also write a one-view multiview instance (wearable -> phone over 1 Mbit/s, assumed hardware) whose compression widths carry the measured accuracies: the solver then chooses d (splitopt/torch/multiview/width_instance.py)."),
    min_accuracy: Optional[float] = typer.Option(None, "--min-accuracy", help="With --instance-out: the least test accuracy (fraction) a plan may have (settings.multiview.min_accuracy)."),
) -> None:
    """Insert the SplitNets splitting module into a CNN trained here on scikit-learn's
    digits, retrain it for each width d and print accuracy (unsplit, split before and after
    retraining) and bytes sent per sample."""
    from rich.table import Table

    from splitopt.cli.common import (check_distinct_outputs, check_output_dir, check_output_path,
                                     check_positive_count, console, errors, print_json, require_torch, write_output)
    from splitopt.core.options import check_number, check_seed

    with errors():
        # every option and output path before torch is imported (seconds) and training starts
        check_output_path(output, "--output")
        check_output_path(instance_out, "--instance-out")
        check_distinct_outputs((("--output", output), ("--instance-out", instance_out)))
        check_output_dir(save, "--save")
        from splitopt.core.errors import InvalidModel, InvalidOption, InvalidPlan

        ds = parse_widths(widths)
        check_positive_count(epochs, "--epochs", low=0, high=MAX_EPOCHS)
        check_positive_count(base_epochs, "--base-epochs", high=MAX_EPOCHS)
        check_positive_count(views, "--views", high=4)
        check_number(lr, "--lr", 0.0, 10.0, low_open=True)
        check_seed(seed)
        if min_accuracy is not None and instance_out is None:
            raise InvalidModel("--min-accuracy: needs --instance-out (it is a setting of the written instance)")
        if min_accuracy is not None and not 0.0 <= min_accuracy <= 1.0:  # nan too
            raise InvalidModel(f"--min-accuracy: must be a fraction in [0, 1], got {min_accuracy}")
        require_torch("retrain")
        from splitopt.torch.packing import check_bits
        from splitopt.torch.multiview.retrain import retrain_table, width_options

        try:
            check_bits(bits)
        except InvalidPlan as e:
            raise InvalidOption(f"--bits {bits}: {e}") from None
        if views == 1:
            table = retrain_table(split=split, widths=ds, inits=(init,), loss=loss, epochs=epochs,
                                  base_epochs=base_epochs, seed=seed, lr=lr, bits=bits, progress=progress,
                                  save_dir=None if save is None else str(save))
        else:
            from splitopt.torch.multiview.retrain_views import multiview_retrain_table

            table = multiview_retrain_table(views=views, split=split, widths=ds, init=init, loss=loss, epochs=epochs,
                                            base_epochs=base_epochs, seed=seed, lr=lr, bits=bits, progress=progress,
                                            save_dir=None if save is None else str(save))
        table["width_options"] = width_options(table)
        if output is not None:
            write_output(output, "--output", json.dumps(table, indent=1) + "\n")
        if instance_out is not None:
            from splitopt.core.instance_io import instance_json
            from splitopt.torch.multiview.width_instance import widths_instance

            write_output(instance_out, "--instance-out", instance_json(widths_instance(table, min_accuracy)))
    if as_json:
        print_json(table)
        return
    s = table["settings"]
    split_after = table["split"]  # not a family: the retrain table's layer the model is split after
    if views > 1:
        console.print(f"{views} views ({table['data'].split(' views: ')[-1]}); unsplit = View-Pool (max over views), "
                      f"split = Conv-Reduce per view + View-Fuse + 1x1 conv {views}*d -> {table['channels']}; "
                      "bytes are per view", highlight=False)
    console.print(f"[bold]digits_cnn[/bold] split after {split_after} ({table['channels']}x{table['height']}x"
                  f"{table['width']}), unsplit accuracy {table['unsplit_accuracy']:.4f} "
                  f"(trained {s['base_epochs']} epochs in {table['base_train_seconds']:.1f} s); retraining: {s['loss']}, "
                  f"{s['epochs']} epochs, init {init}; uncompressed tensor {table['unsplit_bytes']} B at {bits} bits",
                  highlight=False)
    t = Table(title=f"splitting module after {split_after}")
    console.print("acc: test accuracy (360 digits); before/after: the split model before and after retraining; "
                  f"sent: after, with the split tensor packed at {bits} bits; B/sample: packed payload bytes per "
                  "sample (+ header); s: retraining seconds", highlight=False)
    for col in ("d", "init", "unsplit", "before", "after", "sent", "B/sample", "header", "s"):
        t.add_column(col, justify="right")
    for r in table["rows"]:
        t.add_row(str(r["d"]), r["init"], f"{r['accuracy_unsplit']:.4f}", f"{r['accuracy_before']:.4f}",
                  f"{r['accuracy_after']:.4f}", f"{r['accuracy_after_packed']:.4f}", str(r["payload_bytes"]),
                  str(r["header_bytes"]), f"{r['train_seconds']:.1f}")
    console.print(t)
    if output is not None:
        console.print(f"table written to {output}")
    if save is not None:
        console.print(f"weights written to {save}/ (none.pt, d<d>.pt)")
    if instance_out is not None:
        console.print(f"instance written to {instance_out}: `splitopt solve {instance_out}` chooses the cut and d"
                      f"{'' if min_accuracy is None else f' with accuracy >= {min_accuracy:g}'}", highlight=False)
