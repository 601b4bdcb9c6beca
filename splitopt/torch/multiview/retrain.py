"""Train a model, retrain a split model (knowledge distillation or cross-entropy), and
measure the accuracy / transmitted-bytes table of the SplitNets splitting module.

* :func:`train`: Adam on the cross-entropy loss, mini-batches shuffled by a seeded
  generator;
* :func:`distill`: Adam on the knowledge-distillation loss (Hinton et al. 2015)
  ``alpha * T^2 * KL(softmax(t / T) || softmax(s / T)) + (1 - alpha) * CE(s, y)``
  with ``s`` the student's and ``t`` the frozen teacher's logits, ``T`` the temperature;
* :func:`accuracy`: fraction of correct test predictions, optionally with the split
  tensor sent at ``bits`` bits (packed and unpacked per sample);
* :func:`retrain_table`: the digits CNN trained once, then for each width ``d`` (and
  initialisation) a fresh splitting module, accuracy before and after retraining, and
  the bytes sent per sample.

Progress bars (``rich.progress``) go to stderr. Runs are deterministic for a given seed
on a given machine and thread count: the global torch seed, the shuffling generator and
the splitting module's draw are all seeded, and ``torch.use_deterministic_algorithms``
is on while training (restored afterwards).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from splitopt.core.errors import InvalidModel

#: losses :func:`retrain_table` knows: knowledge distillation from the unsplit model, or
#: plain cross-entropy on the labels
LOSSES = ("kd", "ce")
DEFAULT_SPLIT = "block2"
DEFAULT_WIDTHS = (1, 2, 4, 8, 16)
#: bits per element of the transmitted tensor for the bytes column (packing.pack)
TRANSMIT_BITS = 8


@dataclass(frozen=True)
class Data:
    """A train/test split: ``x`` float32 (n, 1, 8, 8) in [0, 1], ``y`` int64 labels."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor

    @classmethod
    def digits(cls, seed: int = 0) -> "Data":
        """scikit-learn's digits, 1,437 train / 360 test
        (:func:`splitopt.torch.architectures.digits_data`)."""
        from splitopt.torch.architectures import digits_data

        return cls(*digits_data(seed))


@dataclass
class TrainLog:
    """One training run: mean training loss per epoch, test accuracy after each epoch
    (when tracked), wall seconds of the whole run (tracking included)."""

    epochs: int
    losses: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0


#: torch threads while training and evaluating: these models are so small that one
#: thread is the fastest (thread hand-off costs more than the work, and a loaded 2-core
#: host made 2 threads 30x slower), and one thread makes the float sums independent of
#: the host's core count
THREADS = 1


@contextlib.contextmanager
def deterministic(threads: int = THREADS) -> Iterator[None]:
    """Inside: ``torch.use_deterministic_algorithms(True)`` and ``threads`` intra-op
    threads; the previous settings after."""
    before, before_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
        torch.set_num_threads(before_threads)


@contextlib.contextmanager
def _bar(progress: bool, description: str, total: int) -> Iterator[Callable[[], None]]:
    """A rich progress bar on stderr of ``total`` steps; yields ``advance()``. A no-op
    when ``progress`` is False."""
    if not progress:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)


def _check_run(epochs: int, lr: float, batch_size: int) -> None:
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise InvalidModel(f"epochs: must be a non-negative integer, got {epochs!r}")
    if not lr > 0:
        raise InvalidModel(f"lr: must be positive, got {lr!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidModel(f"batch size: must be a positive integer, got {batch_size!r}")


def _fit(model: nn.Module, data: Data, epochs: int, lr: float, seed: int, batch_size: int,
         loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], progress: bool, description: str,
         track: bool) -> TrainLog:
    """The shared loop: Adam(lr) on ``loss_fn(logits, batch indices)``, ``epochs`` passes
    over the training set in mini-batches of ``batch_size`` shuffled by a generator seeded
    with ``seed``; the model is left in eval mode."""
    _check_run(epochs, lr, batch_size)
    log = TrainLog(epochs)
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = data.x_train.shape[0]
    steps = -(-n // batch_size)
    with deterministic(), _bar(progress, description, epochs * steps) as advance:
        for _ in range(epochs):
            model.train()
            perm = torch.randperm(n, generator=g)
            total = 0.0
            for i in range(0, n, batch_size):
                idx = perm[i:i + batch_size]
                loss = loss_fn(model(data.x_train[idx]), idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * idx.numel()
                advance()
            log.losses.append(total / n)
            if track:
                log.test_accuracy.append(accuracy(model, data))
    model.eval()
    log.seconds = time.perf_counter() - t0
    return log


def train(model: nn.Module, data: Data, epochs: int, lr: float = 1e-3, seed: int = 0, batch_size: int = 64,
          progress: bool = True, track: bool = False) -> TrainLog:
    """Train ``model`` in place with Adam (learning rate ``lr``) on the cross-entropy of
    its logits against ``data.y_train``; ``track``: record the test accuracy after every
    epoch. Returns the :class:`TrainLog`."""
    y = data.y_train
    return _fit(model, data, epochs, lr, seed, batch_size, lambda out, idx: F.cross_entropy(out, y[idx]),
                progress, "train (CE)", track)


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
            temperature: float, alpha: float) -> torch.Tensor:
    """Knowledge-distillation loss, mean over the batch:
    ``alpha * T^2 * KL(p_t || p_s) + (1 - alpha) * CE(student_logits, labels)`` with
    ``p = softmax(logits / T)``; the ``T^2`` keeps the soft term's gradient scale
    independent of ``T``."""
    t = temperature
    soft = F.kl_div(F.log_softmax(student_logits / t, dim=1), F.log_softmax(teacher_logits / t, dim=1),
                    reduction="batchmean", log_target=True)
    return alpha * t * t * soft + (1.0 - alpha) * F.cross_entropy(student_logits, labels)


def distill(student: nn.Module, teacher: nn.Module, data: Data, epochs: int, temperature: float = 4.0,
            alpha: float = 0.9, seed: int = 0, lr: float = 1e-3, batch_size: int = 64, progress: bool = True,
            track: bool = False) -> TrainLog:
    """Train ``student`` in place with Adam on :func:`kd_loss` against the frozen
    ``teacher`` (eval mode, no gradient; its logits on the training set are computed once).
    ``temperature`` > 0, ``alpha`` in [0, 1]. Returns the :class:`TrainLog`."""
    if not temperature > 0:
        raise InvalidModel(f"temperature: must be positive, got {temperature!r}")
    if not 0.0 <= alpha <= 1.0:
        raise InvalidModel(f"alpha: must be in [0, 1], got {alpha!r}")
    teacher.eval()
    with torch.no_grad(), deterministic():
        soft_targets = teacher(data.x_train)
    y = data.y_train
    return _fit(student, data, epochs, lr, seed, batch_size,
                lambda out, idx: kd_loss(out, soft_targets[idx], y[idx], temperature, alpha),
                progress, f"distill (KD, T={temperature:g})", track)


def accuracy(model: nn.Module, data: Data, bits: int | None = None, train_set: bool = False) -> float:
    """Fraction (0..1) of ``data``'s test samples (training samples with ``train_set``)
    that ``model`` classifies correctly, in eval mode without gradients. ``bits``: for a
    :class:`~splitopt.torch.multiview.splitting.SplitNet`, send the split tensor at that bit-width
    (packed and unpacked per sample); None runs in float."""
    x, y = (data.x_train, data.y_train) if train_set else (data.x_test, data.y_test)
    was_training = model.training
    model.eval()
    with torch.no_grad(), deterministic():
        out = model(x) if bits is None else model(x, bits=bits)
    model.train(was_training)
    return float((out.argmax(dim=1) == y).float().mean())


# ----- the table ---------------------------------------------------------------------------

def check_widths(widths: Sequence[int], channels: int, split: str) -> list[int]:
    """``widths`` as a list, each an integer in [1, channels]; InvalidModel otherwise."""
    out = []
    for d in widths:
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= channels:
            raise InvalidModel(f"width: d must be an integer in [1, {channels}] (the channels after "
                               f"'{split}'), got {d!r}")
        out.append(d)
    if not out:
        raise InvalidModel("widths: give at least one width d")
    return out


def train_digits(seed: int = 0, epochs: int = 20, lr: float = 3e-3, data: Data | None = None,
                 progress: bool = True) -> tuple[nn.Sequential, Data, TrainLog]:
    """The unsplit :func:`~splitopt.torch.architectures.digits_cnn` (init seed ``seed``)
    trained with :func:`train` on the digits; returns ``(model, data, log)``."""
    from splitopt.torch.architectures import digits_cnn

    data = Data.digits() if data is None else data
    model = digits_cnn(seed)
    log = train(model, data, epochs, lr=lr, seed=seed, progress=progress)
    return model, data, log


def retrain_row(net: nn.Module, teacher: nn.Module, data: Data, loss: str, epochs: int, *, seed: int, lr: float,
                temperature: float, alpha: float, bits: int, progress: bool,
                sent: Callable[[], dict[str, int]]) -> dict:
    """Retrain the split model ``net`` in place (``loss`` "kd": :func:`distill` from
    ``teacher``; "ce": :func:`train`) and measure it: ``accuracy_before``,
    ``accuracy_after``, ``accuracy_after_packed`` (split tensor at ``bits``), the
    ``elements``/``payload_bytes``/``header_bytes`` of ``sent()`` (after retraining),
    ``train_seconds`` and ``losses``."""
    before = accuracy(net, data)
    if loss == "kd":
        log = distill(net, teacher, data, epochs, temperature=temperature, alpha=alpha, seed=seed, lr=lr,
                      progress=progress)
    else:
        log = train(net, data, epochs, lr=lr, seed=seed, progress=progress)
    packet = sent()
    return {"accuracy_before": before, "accuracy_after": accuracy(net, data),
            "accuracy_after_packed": accuracy(net, data, bits=bits), "elements": packet["elements"],
            "payload_bytes": packet["payload_bytes"], "header_bytes": packet["header_bytes"],
            "train_seconds": log.seconds, "losses": log.losses}


def save_weights(save_dir: str, backbone: nn.Module, splitting, meta: dict) -> str:
    """Write one weights file into ``save_dir`` (created if needed) named by ``meta["d"]``
    (:func:`splitopt.torch.multiview.weights.weights_file`); returns its name."""
    from splitopt.torch.multiview import weights as split_weights

    path = split_weights.weights_file(save_dir, meta["d"])
    path.parent.mkdir(parents=True, exist_ok=True)
    split_weights.save(path, backbone, splitting, meta)
    return path.name


def retrain_table(split: str = DEFAULT_SPLIT, widths: Sequence[int] = DEFAULT_WIDTHS,
                  inits: Sequence[str] = ("split-aware",), loss: str = "kd", epochs: int = 10,
                  base_epochs: int = 20, seed: int = 0, lr: float = 3e-3, temperature: float = 4.0,
                  alpha: float = 0.9, bits: int = TRANSMIT_BITS, progress: bool = True,
                  base: tuple[nn.Sequential, Data, TrainLog] | None = None, save_dir: str | None = None) -> dict:
    """The accuracy / bytes table of the splitting module on the digits CNN.

    The unsplit model is trained once (``base_epochs`` epochs, seed ``seed``; or given as
    ``base`` = :func:`train_digits`'s result). Then for each ``init`` and width ``d``: a
    :class:`~splitopt.torch.multiview.splitting.SplitNet` from the trained weights with a fresh
    Reduce/Recover (drawn with ``seed``), its test accuracy before retraining, ``epochs``
    epochs of retraining of the whole split model (``loss`` "kd": :func:`distill` from the
    unsplit model; "ce": :func:`train`), its accuracy after (float, and with the split
    tensor packed at ``bits`` bits), and the bytes sent per sample.

    Returns a dict: ``split``, ``channels``/``height``/``width`` at the split,
    ``unsplit_accuracy``, ``unsplit_bytes`` (the uncompressed split tensor at ``bits``),
    ``base_train_seconds``, ``settings`` and ``rows``, one per (init, d): ``d``, ``init``,
    ``loss``, ``accuracy_unsplit``, ``accuracy_before``, ``accuracy_after``,
    ``accuracy_after_packed`` (at ``bits``), ``elements`` (d*h*w), ``payload_bytes``,
    ``header_bytes``, ``train_seconds``, ``losses`` (per epoch).

    ``save_dir`` (one init only): also write the weights of the unsplit model and of each
    retrained split model there (:mod:`splitopt.torch.multiview.weights`: ``none.pt``,
    ``d{d}.pt``); each row then names its ``weights_file``."""
    from splitopt.torch.multiview.splitting import INITS, SplitNet, block_names, send

    if loss not in LOSSES:
        raise InvalidModel(f"loss: unknown loss '{loss}' (choose from {', '.join(LOSSES)})")
    if save_dir is not None and len(inits) != 1:
        raise InvalidModel("save: weights are saved for one initialisation at a time")
    for init in inits:
        if init not in INITS:
            raise InvalidModel(f"init: unknown initialisation '{init}' (choose from {', '.join(INITS)})")
    # check the split and the widths on the untrained model before spending time training
    from splitopt.torch.architectures import digits_cnn

    untrained = base[0] if base is not None else digits_cnn(seed)
    if split not in block_names(untrained):
        raise InvalidModel(f"split: unknown block '{split}' (choose from {', '.join(block_names(untrained))})")
    example = torch.zeros(1, 1, 8, 8)
    probe = SplitNet(untrained, split, 1, example)
    widths = check_widths(widths, probe.channels, split)
    model, data, base_log = base if base is not None else train_digits(seed, base_epochs, progress=progress)
    example = data.x_test[:1]
    unsplit_acc = accuracy(model, data)
    rows = []
    for init in inits:
        for d in widths:
            net = SplitNet(model, split, d, example, init=init, seed=seed)
            row = retrain_row(net, model, data, loss, epochs, seed=seed, lr=lr, temperature=temperature, alpha=alpha,
                              bits=bits, progress=progress, sent=lambda: net.transmitted(bits))
            rows.append({"d": d, "init": init, "loss": loss, "accuracy_unsplit": unsplit_acc, **row})
            if save_dir is not None:
                rows[-1]["weights_file"] = save_weights(save_dir, net.backbone(), net.splitting_module, {
                    "model": "digits_cnn", "views": 1, "split": split, "d": d, "init": init, "loss": loss,
                    "seed": seed, "bits": bits, "accuracy_after_packed": row["accuracy_after_packed"]})
    c, h, w = probe.channels, probe.height, probe.width
    full = nn.Sequential(*list(model.children())[:block_names(model).index(split) + 1])
    with torch.no_grad(), deterministic():
        unsplit_packed_acc = float((model[len(full):](send(full(data.x_test), bits)).argmax(1)
                                    == data.y_test).float().mean())
    unsplit_file = None
    if save_dir is not None:
        unsplit_file = save_weights(save_dir, model, None, {
            "model": "digits_cnn", "views": 1, "split": split, "d": None, "init": None, "loss": None, "seed": seed,
            "bits": bits, "accuracy_after_packed": unsplit_packed_acc})
    return {"model": "digits_cnn", "data": "sklearn load_digits, 1437 train / 360 test (stratified, seed 0)",
            "unsplit_weights_file": unsplit_file,
            "split": split, "channels": c, "height": h, "width": w, "bits": bits,
            "unsplit_accuracy": unsplit_acc, "unsplit_accuracy_packed": unsplit_packed_acc,
            "unsplit_bytes": -(-c * h * w * bits // 8), "base_train_seconds": base_log.seconds,
            "settings": {"loss": loss, "epochs": epochs, "base_epochs": base_log.epochs, "seed": seed, "lr": lr,
                         "temperature": temperature, "alpha": alpha, "inits": list(inits)},
            "rows": rows}


def width_options(table: dict) -> list[dict]:
    """The compression widths of a :func:`retrain_table` result as decisions for a
    solver: per row ``d``, ``init``, ``bytes_per_sample`` (payload at the table's bits)
    and ``accuracy`` (after retraining, split tensor packed), plus the uncompressed
    option (d = channels, no splitting module, the unsplit model's packed accuracy)."""
    opts = [{"d": table["channels"], "init": None, "bytes_per_sample": table["unsplit_bytes"],
             "accuracy": table["unsplit_accuracy_packed"], "splitting_module": False}]
    for r in table["rows"]:
        opts.append({"d": r["d"], "init": r["init"], "bytes_per_sample": r["payload_bytes"],
                     "accuracy": r["accuracy_after_packed"], "splitting_module": True})
    return opts

