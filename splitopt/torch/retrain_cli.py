"""``splitopt retrain``: train the digits CNN, insert the SplitNets splitting module
(Conv-Reduce c -> d on the edge, Conv-Recover d -> c on the cloud) after a block, retrain
it for each width d, and print accuracy before/after and the bytes sent per sample.

Register it on the app with ``app.command("retrain")(retrain_command)``.

Exit status: 0 done; 2 bad input (unknown split block, a width that is not an integer in
[1, channels at the split], unknown init or loss, negative epochs), one line on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def parse_widths(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; InvalidModel (one line) for anything else."""
    from splitopt.errors import InvalidModel

    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            out.append(int(item))
        except ValueError:
            raise InvalidModel(f"--widths: '{item}' is not an integer (give a comma-separated list such as 1,2,4,8)") from None
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
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bars on stderr."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the table JSON to this file."),
) -> None:
    """Insert the SplitNets splitting module into a CNN trained here on scikit-learn's
    digits, retrain it for each width d and print accuracy (unsplit, split before and after
    retraining) and bytes sent per sample."""
    from rich.table import Table

    from splitopt.cli import _errors, _print_json, console

    with _errors():
        from splitopt.errors import InvalidModel
        from splitopt.torch.packing import check_bits
        from splitopt.torch.retrain import retrain_table, width_options

        ds = parse_widths(widths)
        if epochs < 0 or base_epochs < 1:
            raise InvalidModel(f"--epochs/--base-epochs: need epochs >= 0 and base epochs >= 1, got {epochs} and {base_epochs}")
        check_bits(bits)
        table = retrain_table(split=split, widths=ds, inits=(init,), loss=loss, epochs=epochs,
                              base_epochs=base_epochs, seed=seed, lr=lr, bits=bits, progress=progress)
        table["width_options"] = width_options(table)
        if output is not None:
            output.write_text(json.dumps(table, indent=1) + "\n")
    if as_json:
        _print_json(table)
        return
    s = table["settings"]
    console.print(f"[bold]digits_cnn[/bold] split after {table['split']} ({table['channels']}x{table['height']}x"
                  f"{table['width']}), unsplit accuracy {table['unsplit_accuracy']:.4f} "
                  f"(trained {s['base_epochs']} epochs in {table['base_train_seconds']:.1f} s); retraining: {s['loss']}, "
                  f"{s['epochs']} epochs, init {init}; uncompressed tensor {table['unsplit_bytes']} B at {bits} bits",
                  highlight=False)
    t = Table(title=f"splitting module after {table['split']}")
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
