"""Retrained split-model weights: saved by ``splitopt retrain --save DIR``, loaded by
``splitopt run INSTANCE PLAN --model digits_cnn --weights DIR`` so that the plan the
solver chose runs with the splitting module that was retrained for it, on real test
digits, and its accuracy can be checked against the one the solver was given.

A weights file (``torch.save`` of a dict; loaded with ``weights_only=True``)::

    {"format": "splitopt-split-weights/1",
     "meta": {"model": "digits_cnn", "views": V, "split": "block2", "d": 4 or None,
              "init": ..., "loss": ..., "seed": ..., "bits": 8,
              "accuracy_after_packed": 0.9389},
     "backbone": state dict of the model without the splitting module,
     "reduce": state dict of Conv-Reduce (c -> d) or None,
     "restore": state dict of Conv-Recover (d -> c, one view) or of the fuse conv
                (V*d -> c, V views), or None}

Files in a directory: ``none.pt`` (no compression: the unsplit or View-Pool model) and
``d{d}.pt`` per width (:func:`weights_file`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from splitopt.core.errors import InvalidModel

FORMAT = "splitopt-split-weights/1"


def weights_file(directory: str | Path, width: int | None) -> Path:
    """The file of width ``width`` (None: no compression) in ``directory``."""
    return Path(directory) / ("none.pt" if width is None else f"d{width}.pt")


def save(path: str | Path, backbone: nn.Module, splitting: tuple[nn.Module, nn.Module] | None,
         meta: Mapping[str, Any]) -> None:
    """Write ``backbone`` (and ``splitting`` = (reduce, restore)) with ``meta`` to ``path``."""
    reduce, restore = splitting if splitting is not None else (None, None)
    try:
        torch.save({"format": FORMAT, "meta": dict(meta), "backbone": backbone.state_dict(),
                    "reduce": None if reduce is None else reduce.state_dict(),
                    "restore": None if restore is None else restore.state_dict()}, Path(path))
    except OSError as e:  # e.g. disk full: one line, not a traceback after the training
        raise InvalidModel(f"--save {path}: cannot write the file ({e.strerror or type(e).__name__})") from None


@dataclass
class SplitWeights:
    """A loaded weights file (see the module docstring)."""

    path: Path
    meta: dict
    backbone: dict
    reduce: dict | None
    restore: dict | None

    def load_into(self, module: nn.Module) -> nn.Module:
        """Load the backbone into ``module`` (the model rebuilt from code); InvalidModel
        (one line) if the names or shapes differ."""
        try:
            module.load_state_dict(self.backbone)
        except RuntimeError as e:
            first = str(e).strip().splitlines()[0]
            raise InvalidModel(f"--weights {self.path}: does not fit the model: {first}") from None
        return module.eval()

    def splitting_modules(self, c: int, views: int) -> tuple[nn.Module, nn.Module]:
        """(Conv-Reduce ``c -> d``, restore ``V*d -> c``) with the saved weights."""
        from splitopt.torch.multiview.splitting import ConvRecover, ConvReduce

        d = self.meta["d"]
        if d is None or self.reduce is None or self.restore is None:
            raise InvalidModel(f"--weights {self.path}: holds no splitting module (no compression)")
        reduce, restore = ConvReduce(c, d), ConvRecover(views * d, c)
        try:
            reduce.load_state_dict(self.reduce)
            restore.load_state_dict(self.restore)
        except RuntimeError as e:
            first = str(e).strip().splitlines()[0]
            raise InvalidModel(f"--weights {self.path}: the splitting module does not fit c={c}, V={views}: "
                               f"{first}") from None
        return reduce.eval(), restore.eval()


def load(path: str | Path) -> SplitWeights:
    """Read a weights file; InvalidModel (one line) if it is missing or not one."""
    path = Path(path)
    if not path.is_file():
        raise InvalidModel(f"--weights: no file '{path}' (written by `splitopt retrain --save DIR`)")
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is bad input
        raise InvalidModel(f"--weights: '{path}' is not a torch file: {type(e).__name__}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise InvalidModel(f"--weights: '{path}' is not a splitopt weights file (format {FORMAT})")
    for key, kinds in (("meta", (dict,)), ("backbone", (dict,)), ("reduce", (dict, type(None))),
                       ("restore", (dict, type(None)))):
        if not isinstance(raw.get(key), kinds):
            raise InvalidModel(f"--weights: '{path}': field '{key}' is missing or not a "
                               f"{'dict' if len(kinds) == 1 else 'dict or None'} (file damaged or not written by "
                               "`splitopt retrain --save`)")
    meta = raw["meta"]
    if not isinstance(meta.get("split"), str):
        raise InvalidModel(f"--weights: '{path}': meta.split must name the block the module follows, "
                           f"got {meta.get('split')!r}"[:200])
    d = meta.get("d")
    if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 1):
        raise InvalidModel(f"--weights: '{path}': meta.d must be a positive integer width or None, got {d!r}"[:200])
    return SplitWeights(path, dict(meta), raw["backbone"], raw.get("reduce"), raw.get("restore"))


def packed_accuracy(split, views: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of ``labels`` that a multiview ``split``
    (:class:`splitopt.torch.multiview.partition.MultiviewSplitModel`) predicts on
    ``views`` (n, V, ...), each sent tensor packed and unpacked per sample at its sent
    bits (:func:`splitopt.torch.multiview.splitting.send`, as ``splitopt retrain`` measures; a raw
    view is passed unchanged, as the evaluator counts it exact)."""
    from splitopt.torch.capture import INPUT_NAME
    from splitopt.torch.multiview.splitting import send

    out = split.run(views, lambda name, t, bits: t if name == INPUT_NAME else send(t, bits))
    logits = out if isinstance(out, torch.Tensor) else out[0]
    return float((logits.argmax(dim=-1) == labels).float().mean())
