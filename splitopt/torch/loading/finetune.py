"""On-device fine-tuning of the last child model (the RL modularization paper, Sec. 4.2.3):
the trainable layers sit in the last child with ``requires_grad=True``, everything else
is frozen, so a personalisation step loads nothing more and back-propagates through the
tail only.

:func:`fine_tune_last_child`: the earlier children (and the last child's frozen blocks)
run without gradient in eval mode (their batch-norm statistics do not move); the
trainable blocks run in train mode; ``steps`` SGD steps on a cross-entropy loss against
the given labels (synthetic labels in the tests and the CLI: no data set is available).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import torch
from torch import nn

from splitopt.torch.loading.children import ChildModel


def synthetic_labels(n: int, classes: int, seed: int = 7) -> torch.Tensor:
    """``n`` seeded random class labels in ``0 .. classes-1``."""
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))


def fine_tune_last_child(children: Sequence[ChildModel], x: torch.Tensor, labels: torch.Tensor, steps: int = 3,
                         lr: float = 1e-4) -> dict[str, Any]:
    """``steps`` SGD steps (learning rate ``lr``) on the last child's trainable parameters
    with inputs ``x`` (model inputs, batch N) and ``labels`` (N class indices). Returns
    the loss before each step, the trainable parameter count and the seconds taken.
    ValueError when the last child has no trainable block or another child has one."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    last = children[-1]
    elsewhere = [n for c in children[:-1] for n in c.trainable]
    if elsewhere:
        raise ValueError(f"block '{elsewhere[0]}' is trainable but not in the last child")
    params = [p for p in last.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the last child has no trainable block (trainable_tail 0?)")
    t0 = time.perf_counter()
    with torch.no_grad():
        for child in children[:-1]:
            x = child.eval()(x)
    frozen: list[tuple[str, nn.Module]] = []
    trainable: list[tuple[str, nn.Module]] = []
    for name, block in last.named_blocks():
        (trainable if name in last.trainable else frozen).append((name, block))
    optimizer = torch.optim.SGD(params, lr=lr)
    losses = []
    for _ in range(steps):
        y = x
        for name, block in last.named_blocks():
            if name in last.trainable:
                y = block.train()(y)
            else:
                with torch.no_grad():
                    y = block.eval()(y)
        loss = nn.functional.cross_entropy(y, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    last.eval()
    return {"steps": steps, "lr": lr, "losses": losses, "trainable_blocks": [n for n, _ in trainable],
            "trainable_parameters": sum(p.numel() for p in params), "seconds": time.perf_counter() - t0}
