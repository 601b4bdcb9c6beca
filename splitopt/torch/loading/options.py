"""What ``splitopt profile`` and ``splitopt run`` take for the loading family: the block
models, the loading modes and page-cache states, and the options, each checked when
built (one line naming the option), without torch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from splitopt.core.errors import InvalidOption
from splitopt.core.options import check_count, check_number, check_seed
from splitopt.torch.loading.cache import CACHE_STATES

#: the block models by name (built in code, random init: :mod:`splitopt.torch.loading.models`)
MODEL_NAMES = ("resnet152", "inception_v3", "densenet201", "mobilenet_v1")
#: how a run loads the children: threads of this process, or warm loader processes
MODES = ("threads", "processes")
#: the objectives a profiled instance may have
OBJECTIVES = ("latency", "balance")


def check_block_model(model: str, option: str) -> None:
    """InvalidOption unless ``model`` is one of :data:`MODEL_NAMES`."""
    if model not in MODEL_NAMES:
        raise InvalidOption(f"{option}: unknown block model '{model}' (choose from {', '.join(MODEL_NAMES)})")


def check_choice(value: str, option: str, choices: tuple[str, ...]) -> None:
    """InvalidOption unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise InvalidOption(f"{option}: must be one of {', '.join(choices)}, got {value!r}")


@dataclass(frozen=True)
class LoadingProfileOptions:
    """``splitopt profile MODEL`` of a block model: ``threads`` loading threads (needed),
    the page cache before each timed load, timed runs per measurement, the model's width
    and depth multipliers and input side, the most children a plan may have, the
    objective, torch's intra-op threads, the weights' seed and the instance's name."""

    threads: int
    cache: str = "warm"
    repeats: int = 5
    width: float = 1.0
    depth: float = 1.0
    image_size: int | None = None
    children_max: int | None = None
    objective: str = "latency"
    torch_threads: int = 1
    seed: int = 0
    name: str | None = None

    def __post_init__(self) -> None:
        check_count(self.threads, "--threads", high=64)
        check_count(self.repeats, "--repeats", high=1000)
        check_count(self.torch_threads, "--torch-threads", high=256)
        check_number(self.width, "--width", 0.0, 4.0, low_open=True)
        check_number(self.depth, "--depth", 0.0, 4.0, low_open=True)
        if self.image_size is not None:
            check_count(self.image_size, "--image-size", low=32, high=1024)
        if self.children_max is not None:
            check_count(self.children_max, "--children-max", high=1024)
        check_seed(self.seed)
        check_choice(self.cache, "--cache", CACHE_STATES)
        check_choice(self.objective, "--objective", OBJECTIVES)


@dataclass(frozen=True)
class LoadingRunOptions:
    """``splitopt run`` of a loading plan: the instance's block model (needed; its width,
    depth and seed come from the instance), threads or processes, the page cache, timed
    runs, torch's intra-op threads (None: those the instance was profiled with), SGD
    steps on the last child afterwards, and where the child files go (None: a temporary
    directory)."""

    model: str
    mode: str = "threads"
    cache: str = "warm"
    repeats: int = 3
    torch_threads: int | None = None
    fine_tune: int = 0
    workdir: Path | None = None

    def __post_init__(self) -> None:
        check_block_model(self.model, "--model")
        check_count(self.repeats, "--repeats", high=1000)
        check_count(self.fine_tune, "--fine-tune", low=0, high=10_000)
        if self.torch_threads is not None:
            check_count(self.torch_threads, "--torch-threads", high=256)
        if self.workdir is not None:
            if not Path(self.workdir).is_dir():
                raise InvalidOption(f"--workdir {self.workdir}: not a directory")
            if not os.access(self.workdir, os.W_OK | os.X_OK):
                raise InvalidOption(f"--workdir {self.workdir}: {self.workdir} is not a writable directory")
        check_choice(self.mode, "--mode", MODES)
        check_choice(self.cache, "--cache", CACHE_STATES)
