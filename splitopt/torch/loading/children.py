"""Child models on disk: one checkpoint file per child of a loading plan, each loadable
on its own, and the load that rebuilds a runnable child from its file alone.

A child file is written with ``torch.save`` and read with ``torch.load(...,
weights_only=True)`` (no arbitrary pickle: only dicts, lists, strings, numbers and
tensors)::

    {"format": "splitopt-loading-child/1",
     "config": {"model": "resnet152", "width": 1.0, "depth": 1.0, "num_classes": 1000, "image_size": null},
     "index": 2, "children": 6,                        # child i of k
     "blocks": ["layer2.0", ..., "layer2.7"],           # its blocks, in execution order
     "trainable": [],                                  # blocks whose parameters train (the last child's tail)
     "state": {"layer2.0": {"conv1.weight": tensor, ...}, ...}}   # each block's state dict

Loading a child (:func:`load_child`) = reading and deserialising the file, building its
blocks on the meta device from the named builders of
:mod:`splitopt.torch.loading.models` (no random init, no allocation) and assigning the
loaded tensors to them (``load_state_dict(assign=True)``, no copy). The monolithic model
is the one child of the plan with k = 1, loaded the same way, so the comparison is fair.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from splitopt.torch.loading.models import BlockModelConfig, BlockSequence, BlockSpec, block_specs

CHILD_FORMAT = "splitopt-loading-child/1"


class ChildModel(nn.Module):
    """Child ``index`` of ``children``: its blocks run one after another; the blocks named
    in ``trainable`` have ``requires_grad=True`` parameters, every other parameter is
    frozen."""

    def __init__(self, index: int, children: int, names: Sequence[str], blocks: Sequence[nn.Module],
                 trainable: Sequence[str]):
        super().__init__()
        self.index, self.children_count = index, children
        self.block_names = list(names)
        self.blocks = nn.ModuleList(blocks)
        self.trainable = [n for n in names if n in set(trainable)]
        for name, block in zip(self.block_names, self.blocks):
            block.requires_grad_(name in self.trainable)

    def named_blocks(self) -> list[tuple[str, nn.Module]]:
        return list(zip(self.block_names, self.blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@dataclass(frozen=True)
class ChildFile:
    """A written child: its file, blocks and size on disk (bytes)."""

    index: int
    path: Path
    blocks: tuple[str, ...]
    trainable: tuple[str, ...]
    bytes: int


@functools.lru_cache(maxsize=32)
def _specs_by_name(config: BlockModelConfig) -> dict[str, BlockSpec]:
    return {s.name: s for s in block_specs(config)}


def state_elements(module: nn.Module) -> int:
    """Parameter and buffer elements a checkpoint of ``module`` stores."""
    return sum(t.numel() for t in module.state_dict().values())


def save_child(path: Path, config: BlockModelConfig, index: int, children: int,
               blocks: Sequence[tuple[str, nn.Module]], trainable: Sequence[str]) -> ChildFile:
    """Write one child file (see the module docstring) and ``fsync`` it, so that its pages
    are clean and can be dropped from the page cache. A child of no blocks is allowed (it
    measures the per-file fixed cost)."""
    names = [n for n, _ in blocks]
    trainable_names = [n for n in names if n in set(trainable)]
    raw = {"format": CHILD_FORMAT, "config": config.to_dict(), "index": int(index), "children": int(children),
           "blocks": names, "trainable": trainable_names,
           "state": {n: {k: v.detach().clone() for k, v in b.state_dict().items()} for n, b in blocks}}
    with open(path, "wb") as f:
        torch.save(raw, f)
        f.flush()
        os.fsync(f.fileno())
    return ChildFile(index, Path(path), tuple(names), tuple(trainable_names), os.path.getsize(path))


def read_child(path: Path) -> dict[str, Any]:
    """The raw contents of a child file (``torch.load(weights_only=True)``); ValueError
    for a file of another format."""
    raw = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(raw, dict) or raw.get("format") != CHILD_FORMAT:
        raise ValueError(f"{path}: not a splitopt loading child file ({CHILD_FORMAT})")
    return raw


def build_child(raw: Mapping[str, Any]) -> ChildModel:
    """A runnable child from a child file's contents: blocks built on the meta device by
    their named builders, the file's tensors assigned to them (strict: every key)."""
    config = BlockModelConfig.from_dict(raw["config"])
    specs = _specs_by_name(config)
    names = list(raw["blocks"])
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ValueError(f"child {raw['index']}: block '{unknown[0]}' is not a block of {config.model}")
    with torch.device("meta"):
        blocks = [specs[n].build() for n in names]
    for name, block in zip(names, blocks):
        block.load_state_dict(raw["state"][name], strict=True, assign=True)
    child = ChildModel(int(raw["index"]), int(raw["children"]), names, blocks, raw["trainable"])
    return child.eval()


def load_child(path: Path) -> ChildModel:
    """Read a child file and build the child (the timed unit of loading)."""
    return build_child(read_child(path))


def child_ranges(block_names: Sequence[str], starts: Sequence[int]) -> list[list[str]]:
    """The blocks of each child, from the children's first block indices."""
    ends = list(starts[1:]) + [len(block_names)]
    return [list(block_names[a:b]) for a, b in zip(starts, ends)]


def write_children(model: BlockSequence, config: BlockModelConfig, starts: Sequence[int], directory: Path,
                   trainable_tail: int = 0, prefix: str = "child") -> list[ChildFile]:
    """One file per child (``DIR/{prefix}{i}.pt``) of the plan whose children start at
    block indices ``starts`` (``LoadingPlan.starts``); the last ``trainable_tail`` blocks
    are trainable (they belong in the last child: the plan's evaluator checks it), every
    other block frozen."""
    named = model.named_blocks()
    names = [n for n, _ in named]
    if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= len(names):
        raise ValueError(f"child starts {list(starts)} are not increasing block indices from 0 below {len(names)}")
    tail = set(names[len(names) - trainable_tail:]) if trainable_tail else set()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ends = list(starts[1:]) + [len(names)]
    return [save_child(directory / f"{prefix}{i}.pt", config, i, len(starts), named[a:b], sorted(tail))
            for i, (a, b) in enumerate(zip(starts, ends))]
