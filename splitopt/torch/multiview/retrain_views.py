"""Multi-view splitting measured on the digits (SplitNets Sec. 3.1.3, Fig. 5): ``V``
sensors each see part of a digit, run the head of one CNN on it, and an aggregator fuses
the views and classifies.

* Views (:func:`view_masks`): view ``v`` of an 8x8 digit keeps the column band
  ``[floor(8v/V) - 1, ceil(8(v+1)/V) + 1)`` (clipped to the image) and zeroes the rest, so
  neighbouring views overlap by two columns and no single view sees the whole digit
  (V = 2: columns 0-4 and 3-7). Data (:func:`multiview_data`): the digits split of
  :func:`splitopt.torch.architectures.digits_data` with ``x`` of shape (n, V, 1, 8, 8).
* Unsplit multi-view model (:class:`ViewPoolNet`, the reference and the teacher): one
  shared head (the digits CNN up to the split block) per view, View-Pool (element-wise
  max over the views, MVCNN; the ``multiview`` family's fusion without compression) and
  the rest of the CNN. Trained here from scratch.
* Split model (:class:`MultiViewDigits`): the trained head + Conv-Reduce ``c -> d``,
  shared by every view as in the ``multiview`` family (one backbone on every sensor;
  :class:`~splitopt.torch.multiview.splitting.MultiViewSplitNet` with ``shared=True``), View-Fuse (interlaced
  concatenation, ``V*d`` channels), then a 1x1 conv ``V*d -> c`` and the trained rest of
  the CNN: exactly the ``mv.reduce`` / ``mv.fuse`` layers of ``formulations/multiview_bus.md``.
  Reduce and the fuse conv are drawn with the chosen initialisation, then the whole split
  model is retrained by distillation from the View-Pool model (or cross-entropy).

:func:`multiview_retrain_table` returns a table with the keys of
:func:`splitopt.torch.multiview.retrain.retrain_table` plus ``views``, so that
:func:`splitopt.torch.multiview.width_instance.widths_instance` turns it into a V-sensor instance.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from typing import Sequence

import torch
from torch import nn

from splitopt.core.errors import InvalidModel
from splitopt.torch.multiview.retrain import (LOSSES, TRANSMIT_BITS, Data, TrainLog, accuracy, check_widths, retrain_row,
                                    save_weights, train)

MAX_VIEWS = 4


def view_masks(views: int, size: int = 8) -> torch.Tensor:
    """(V, 1, size, size) 0/1 masks: view ``v`` keeps columns
    ``[floor(size*v/V) - 1, ceil(size*(v+1)/V) + 1)``, clipped."""
    if isinstance(views, bool) or not isinstance(views, int) or not 1 <= views <= MAX_VIEWS:
        raise InvalidModel(f"views: must be an integer in [1, {MAX_VIEWS}], got {views!r}")
    masks = torch.zeros(views, 1, size, size)
    for v in range(views):
        lo = max(0, math.floor(size * v / views) - 1)
        hi = min(size, math.ceil(size * (v + 1) / views) + 1)
        masks[v, :, :, lo:hi] = 1.0
    return masks


def multiview_data(views: int, seed: int = 0) -> Data:
    """The digits split with every image turned into ``views`` masked copies:
    ``x`` of shape (n, V, 1, 8, 8)."""
    base = Data.digits(seed)
    masks = view_masks(views)
    as_views = lambda x: (x[:, None] * masks[None]).contiguous()  # noqa: E731
    return Data(as_views(base.x_train), base.y_train, as_views(base.x_test), base.y_test)


def _send(z: torch.Tensor, bits: int | None) -> torch.Tensor:
    from splitopt.torch.multiview.splitting import send

    return send(z, bits)


class ViewPoolNet(nn.Module):
    """One shared ``head`` per view, element-wise max over the views (View-Pool), ``tail``.
    ``forward(x, bits=None)``: ``x`` (n, V, ...); with ``bits`` each view's head output is
    sent packed at that width before the max (what the sensors send)."""

    def __init__(self, head: nn.Module, tail: nn.Module):
        super().__init__()
        self.head, self.tail = head, tail

    def forward(self, x: torch.Tensor, bits: int | None = None) -> torch.Tensor:
        z = torch.stack([_send(self.head(x[:, v]), bits) for v in range(x.shape[1])]).amax(dim=0)
        return self.tail(z)

    def backbone(self) -> nn.Sequential:
        """The single-view network (head then tail) under the blocks' original names."""
        return nn.Sequential(OrderedDict([*self.head.named_children(), *self.tail.named_children()]))


class MultiViewDigits(nn.Module):
    """The split multi-view model: :class:`~splitopt.torch.multiview.splitting.MultiViewSplitNet`
    (one head + Conv-Reduce shared by the views, View-Fuse) with a tail that starts with
    the 1x1 fuse conv ``V*d -> c``. ``forward(x, bits=None)`` with ``x`` (n, V, ...)."""

    def __init__(self, pool: ViewPoolNet, views: int, c: int, d: int, init: str = "split-aware", seed: int = 0):
        super().__init__()
        from splitopt.torch.multiview.splitting import ConvRecover, MultiViewSplitNet

        g = torch.Generator().manual_seed(seed + 1)  # the heads' Reduce convs draw from seed
        tail = nn.Sequential(OrderedDict([("fuse_conv", ConvRecover(views * d, c, init, g)),
                                          *copy.deepcopy(pool.tail).named_children()]))
        self.net = MultiViewSplitNet([pool.head] * views, c, d, tail, init=init, seed=seed, shared=True)

    def forward(self, x: torch.Tensor, bits: int | None = None) -> torch.Tensor:
        return self.net([x[:, v] for v in range(x.shape[1])], bits=bits)

    def backbone(self) -> nn.Sequential:
        """The shared head and the tail without the splitting modules, under the blocks'
        original names."""
        return nn.Sequential(OrderedDict([*self.net.head(0)[0].named_children(),
                                          *list(self.net.tail.named_children())[1:]]))

    @property
    def splitting_module(self) -> tuple[nn.Module, nn.Module]:
        """(Conv-Reduce, the fuse conv ``V*d -> c``)."""
        tail = self.net.tail
        assert isinstance(tail, nn.Sequential)  # built in __init__: the fuse conv, then the pool's tail
        return self.net.head(0)[1], tail[0]

    def transmitted(self, example_view: torch.Tensor, bits: int = TRANSMIT_BITS) -> dict[str, int]:
        """Per view and sample: the packed Conv-Reduce output of view 0's head on
        ``example_view`` (1, ...) (:func:`splitopt.torch.packing.pack`)."""
        from splitopt.torch.multiview.splitting import packed_sizes

        with torch.no_grad():
            z = self.net.head(0).eval()(example_view)[0]
        return packed_sizes(z, bits)


def split_sequential(model: nn.Sequential, split: str) -> tuple[nn.Sequential, nn.Sequential]:
    """``model`` cut after its child ``split`` (one of
    :func:`splitopt.torch.multiview.splitting.block_names`): (head, tail), sharing the children's
    modules; raises InvalidModel for an unknown block."""
    from splitopt.torch.multiview.splitting import block_names

    names = block_names(model)
    if split not in names:
        raise InvalidModel(f"split: unknown block '{split}' (choose from {', '.join(names)})")
    children = list(model.named_children())
    cut = names.index(split) + 1
    return nn.Sequential(OrderedDict(children[:cut])), nn.Sequential(OrderedDict(children[cut:]))


def multiview_retrain_table(views: int = 2, split: str = "block2", widths: Sequence[int] = (1, 2, 4, 8),
                            init: str = "split-aware", loss: str = "kd", epochs: int = 10, base_epochs: int = 20,
                            seed: int = 0, lr: float = 3e-3, temperature: float = 4.0, alpha: float = 0.9,
                            bits: int = TRANSMIT_BITS, progress: bool = True, save_dir: str | None = None) -> dict:
    """Train the View-Pool model on ``views`` views of the digits, then per width ``d`` a
    split model with fresh Conv-Reduce / fuse conv: accuracy before and after retraining
    (float and with each view's tensor packed at ``bits``) and bytes per view and sample.

    Returns the keys of :func:`splitopt.torch.multiview.retrain.retrain_table` (``unsplit_*`` are
    the View-Pool model's; ``unsplit_bytes`` per view) plus ``views``. ``save_dir``: also
    write the weights (:mod:`splitopt.torch.multiview.weights`) as ``retrain_table`` does."""
    from splitopt.torch.architectures import digits_cnn
    from splitopt.torch.multiview.splitting import INITS

    if loss not in LOSSES:
        raise InvalidModel(f"loss: unknown loss '{loss}' (choose from {', '.join(LOSSES)})")
    if init not in INITS:
        raise InvalidModel(f"init: unknown initialisation '{init}' (choose from {', '.join(INITS)})")
    view_masks(views)  # checks V
    head, tail = split_sequential(digits_cnn(seed), split)
    with torch.no_grad():
        c, h, w = (int(s) for s in head.eval()(torch.zeros(1, 1, 8, 8)).shape[1:])
    widths = check_widths(widths, c, split)
    data = multiview_data(views)
    pool = ViewPoolNet(head, tail)
    base_log: TrainLog = train(pool, data, base_epochs, lr=lr, seed=seed, progress=progress)
    unsplit_acc, unsplit_packed = accuracy(pool, data), accuracy(pool, data, bits=bits)
    example_view = data.x_test[:1, 0]
    rows = []
    for d in widths:
        net = MultiViewDigits(pool, views, c, d, init=init, seed=seed)
        row = retrain_row(net, pool, data, loss, epochs, seed=seed, lr=lr, temperature=temperature, alpha=alpha,
                          bits=bits, progress=progress, sent=lambda: net.transmitted(example_view, bits))
        rows.append({"d": d, "init": init, "loss": loss, "accuracy_unsplit": unsplit_acc, **row})
        if save_dir is not None:
            rows[-1]["weights_file"] = save_weights(save_dir, net.backbone(), net.splitting_module, {
                "model": "digits_cnn", "views": views, "split": split, "d": d, "init": init, "loss": loss,
                "seed": seed, "bits": bits, "accuracy_after_packed": row["accuracy_after_packed"]})
    bands = [torch.nonzero(m[0, 0]).flatten().tolist() for m in view_masks(views)]
    unsplit_file = None if save_dir is None else save_weights(save_dir, pool.backbone(), None, {
        "model": "digits_cnn", "views": views, "split": split, "d": None, "init": None, "loss": None, "seed": seed,
        "bits": bits, "accuracy_after_packed": unsplit_packed})
    return {"unsplit_weights_file": unsplit_file,"model": "digits_cnn", "views": views,
            "data": f"sklearn load_digits, 1437 train / 360 test (stratified, seed 0), {views} views: columns "
                    + ", ".join(f"{b[0]}-{b[-1]}" for b in bands),
            "split": split, "channels": c, "height": h, "width": w, "bits": bits,
            "unsplit_accuracy": unsplit_acc, "unsplit_accuracy_packed": unsplit_packed,
            "unsplit_bytes": -(-c * h * w * bits // 8), "base_train_seconds": base_log.seconds,
            "settings": {"loss": loss, "epochs": epochs, "base_epochs": base_epochs, "seed": seed, "lr": lr,
                         "temperature": temperature, "alpha": alpha, "inits": [init]},
            "rows": rows}
