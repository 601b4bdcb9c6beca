"""What a plan's picture shows, as its family describes it (``Family.plan_drawing``) and
``splitopt.analysis.plots.plot_plan`` draws it (``--gantt``): bars one after another
(:class:`Timeline`, an edge/cloud plan), a pipeline in steady state (:class:`Pipeline`, a
throughput plan) or a schedule (:class:`Gantt`). Data only: no matplotlib here."""

from __future__ import annotations

from dataclasses import dataclass

from splitopt.core.schedule import Task


@dataclass(frozen=True)
class Timeline:
    """Bars one after another, one row each: per bar (row label, duration ms, kind
    "compute" or "transfer", the text on it); ``note``: a line under the chart;
    ``title``: the chart's title."""

    bars: tuple[tuple[str, float, str, str], ...]
    note: str
    title: str


@dataclass(frozen=True)
class Pipeline:
    """A throughput plan in steady state: per stage with work, in pipeline order,
    (device, compute ms, transfer ms, what it runs)."""

    stages: tuple[tuple[str, float, float, str], ...]


@dataclass(frozen=True)
class Gantt:
    """A schedule: one row per device and link."""

    tasks: tuple[Task, ...]


#: what a plan's picture may be
Drawing = Timeline | Pipeline | Gantt


def human_bytes(n: float) -> str:
    """A byte count for people: ``12.3 MB``, ``4 kB``, ``512 B``."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:,.0f} B"
