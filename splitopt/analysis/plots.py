"""Plots of solves and schedules (matplotlib, imported only when a plot is drawn): the
schedule as a Gantt chart, the per-device compute/communication breakdown, and the
Pareto fronts. Each writes the file it is given (.png, .svg, .pdf)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from splitopt.core.schedule import Task, makespan_ms


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


def plot_accuracy_front(inst, front, path: str) -> None:
    """Latency (ms) against measured accuracy, each point labelled with its width d."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    pts = [p for p in front if p.accuracy is not None]
    ax.step([p.accuracy for p in pts], [p.latency_ms for p in pts], where="pre", color="tab:blue", alpha=0.5)
    ax.scatter([p.accuracy for p in pts], [p.latency_ms for p in pts], color="tab:blue", label="latency-optimal plan")
    for p in pts:
        w = p.result.plan.width
        ax.annotate("no compression" if w is None else f"d={w}", (p.accuracy, p.latency_ms),
                    textcoords="offset points", xytext=(4, 4), fontsize=8)
    finish_plot(fig, ax, "measured accuracy", "latency (ms)", f"{inst.name}: latency vs accuracy", path)


def plot_front(inst, front, path: str, baselines: dict[str, tuple[float, float]] | None = None) -> None:
    """Latency (ms) against quantization error, with optional baseline points
    ``{name: (error, latency_ms)}``; written to ``path`` (PNG/SVG/PDF)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p.error for p in front]
    ys = [p.latency_ms for p in front]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    scatter_proven(ax, front, lambda p: p.error)
    for name, (err, lat) in (baselines or {}).items():
        ax.scatter([err], [lat], marker="x")
        ax.annotate(name, (err, lat), textcoords="offset points", xytext=(4, 4), fontsize=8)
    finish_plot(fig, ax, "summed quantization error (relative MSE)", "end-to-end latency (ms)",
                 f"{inst.name}: latency vs error", path)


def scatter_proven(ax, front, x) -> None:
    """A front's points at (``x(point)``, latency): proven ones blue, time-limited orange."""
    proven = [p for p in front if p.result.status.value == "OPTIMAL"]
    ax.scatter([x(p) for p in proven], [p.latency_ms for p in proven], color="tab:blue", label="Pareto-optimal (proven)")
    other = [p for p in front if p.result.status.value != "OPTIMAL"]
    if other:
        ax.scatter([x(p) for p in other], [p.latency_ms for p in other], color="tab:orange", label="time-limited")


def finish_plot(fig, ax, xlabel: str, ylabel: str, title: str, path: str) -> None:
    """Label the axes, add the legend, write ``path`` and close the figure."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_bytes_front(inst, front, path: str) -> None:
    """Latency (ms) against bytes sent (a separable instance's front), each corner marked
    proven or time-limited."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys = [p.bytes for p in front], [p.latency_ms for p in front]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    scatter_proven(ax, front, lambda p: p.bytes)
    finish_plot(fig, ax, "bytes sent", "latency (ms)", f"{inst.name}: latency vs bytes", path)
