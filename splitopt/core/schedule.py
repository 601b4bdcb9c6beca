"""A schedule: what runs where and when, for every multi-device family's evaluator.

A :class:`Task` occupies one resource (a device computing, or a link/bus transferring)
from ``start_ms`` to ``end_ms``. Evaluators build schedules; the CLI prints them and
``splitopt.analysis.plots.plot_gantt`` draws one row per device and per link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class Task:
    """``kind`` is "compute" (``resource`` a device) or "transfer" (``resource`` a link
    "a->b" or a bus name); ``label`` says what (a layer, or the tensors sent). Times in ms."""

    resource: str
    kind: str
    label: str
    start_ms: float
    end_ms: float

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms

    def to_dict(self) -> dict:
        return {"resource": self.resource, "kind": self.kind, "label": self.label,
                "start_ms": self.start_ms, "end_ms": self.end_ms}


def makespan_ms(tasks: Iterable[Task]) -> float:
    return max((t.end_ms for t in tasks), default=0.0)


def overlaps(tasks: Sequence[Task], tol_ms: float = 1e-9) -> list[tuple[Task, Task]]:
    """Pairs of tasks on the same resource whose time spans overlap (a serial resource
    must have none)."""
    by_resource: dict[str, list[Task]] = {}
    for t in tasks:
        if t.duration_ms > tol_ms:
            by_resource.setdefault(t.resource, []).append(t)
    out = []
    for items in by_resource.values():
        items.sort(key=lambda t: (t.start_ms, t.end_ms))
        for a, b in zip(items, items[1:]):
            if b.start_ms < a.end_ms - tol_ms:
                out.append((a, b))
    return out


def breakdown(tasks: Sequence[Task]) -> list[tuple[str, float, float]]:
    """Per device: (device, compute ms, send ms), a transfer on link "a->b" counted for
    its sender a and one on a bus for the bus; in order of first appearance."""
    rows: dict[str, list[float]] = {}
    for t in tasks:
        if t.kind == "compute":
            rows.setdefault(t.resource, [0.0, 0.0])[0] += t.duration_ms
        else:
            sender = t.resource.split("->")[0] if "->" in t.resource else t.resource
            rows.setdefault(sender, [0.0, 0.0])[1] += t.duration_ms
    return [(name, c, s) for name, (c, s) in rows.items()]
