"""A schedule: what runs where and when, for every multi-device family's evaluator.

A :class:`Task` occupies one resource (a device computing, or a link/bus transferring)
from ``start_ms`` to ``end_ms``. Evaluators build schedules; the CLI prints them and
``plot_gantt`` draws one row per device and per link.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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


def plot_gantt(tasks: Sequence[Task], path: str | Path, title: str = "", resources: Sequence[str] | None = None) -> None:
    """Draw the schedule (one row per resource, compute in blue, transfers in orange) to
    ``path`` (any format matplotlib writes: .png, .svg, .pdf)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(resources) if resources is not None else list(dict.fromkeys(t.resource for t in tasks))
    height = max(2.0, 0.5 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(10, height))
    colors = {"compute": "tab:blue", "transfer": "tab:orange"}
    span = makespan_ms(tasks) or 1.0
    for t in tasks:
        y = rows.index(t.resource)
        ax.barh(y, t.duration_ms, left=t.start_ms, height=0.6, color=colors.get(t.kind, "tab:gray"),
                edgecolor="black", linewidth=0.3)
        if t.duration_ms > 0.06 * span:
            ax.text(t.start_ms + t.duration_ms / 2, y, t.label[:18], ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"schedule, makespan {span:.3f} ms")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_breakdown(rows: Sequence[tuple[str, float, float]], path: str | Path, title: str = "") -> None:
    """Stacked bars per device: (device, compute ms, communication ms)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 1.0 * len(rows) + 2), 3.5))
    names = [r[0] for r in rows]
    compute = [r[1] for r in rows]
    comm = [r[2] for r in rows]
    ax.bar(names, compute, color="tab:blue", label="compute")
    ax.bar(names, comm, bottom=compute, color="tab:orange", label="send")
    ax.set_ylabel("ms")
    ax.legend()
    ax.set_title(title or "per-device latency")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


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
