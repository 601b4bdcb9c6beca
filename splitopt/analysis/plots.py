"""Plots of solves and schedules: the schedule as a Gantt chart, a throughput plan as its
pipeline, an edge/cloud plan as its timeline, the per-device compute/communication
breakdown, and the Pareto fronts.

Every function returns a ``matplotlib.figure.Figure`` built with the object API
(:func:`new_figure`): matplotlib is imported only when a plot is drawn, the caller's
backend is never switched and no figure is left in pyplot's state (show one in a notebook
with ``display(fig)``). Given a ``path`` (any format matplotlib writes: .png, .svg,
.pdf), the function also writes the figure it returns there.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

from splitopt.core.errors import MissingDependency
from splitopt.core.schedule import Task, makespan_ms

#: colours of the kinds of bars, the same in every plot
COLOURS = {"compute": "tab:blue", "transfer": "tab:orange"}
#: values whose largest positive one is more than this many times the smallest get a log axis
DECADES = 2.0
#: most numbered footnotes under a Gantt chart (labels too long for their bars)
MAX_NOTES = 40


# ----- figures ----------------------------------------------------------------------------------

def new_figure(figsize: tuple[float, float], rows: int = 1, cols: int = 1):
    """A Figure with an Agg canvas (no pyplot, no backend switch) and its ``rows x cols``
    Axes (a 2-D array)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependency("plots need matplotlib (a dependency of splitopt): pip install matplotlib") from None
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False)


def save_figure(fig, path: str | Path | None, dpi: int = 150):
    """Write ``fig`` to ``path`` (nothing when None) and return it."""
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig


def spans_decades(values: Sequence[float], decades: float = DECADES) -> bool:
    """Whether the positive ``values`` span more than ``decades`` powers of ten."""
    pos = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return len(pos) >= 2 and max(pos) > min(pos) * 10 ** decades


def scale_axis(ax, which: str, values: Sequence[float]) -> str:
    """Set ``ax``'s ``which`` ("x"/"y") axis to log where ``values`` span more than
    :data:`DECADES` decades (symlog, linear below the least positive value, when a value is
    zero), else leave it linear; returns the scale set."""
    if not spans_decades(values):
        return "linear"
    setter = ax.set_xscale if which == "x" else ax.set_yscale
    if all(v > 0 for v in values):
        setter("log")
        return "log"
    setter("symlog", linthresh=min(v for v in values if v > 0))
    return "symlog"


def finish_plot(fig, ax, xlabel: str, ylabel: str, title: str, path: str | Path | None = None):
    """Label the axes, add the legend, lay out, write ``path`` (if given); returns ``fig``."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def legend_patches(kinds: Sequence[str]) -> list:
    """Legend entries (filled patches) for bars of ``kinds``."""
    from matplotlib.patches import Patch

    names = {"compute": "compute", "transfer": "transfer (link / bus)"}
    return [Patch(facecolor=COLOURS.get(k, "tab:gray"), edgecolor="black", label=names.get(k, k)) for k in kinds]


# ----- schedules --------------------------------------------------------------------------------

def plot_gantt(tasks: Sequence[Task], path: str | Path | None = None, title: str = "",
               resources: Sequence[str] | None = None):
    """The schedule, one row per resource (device or link), compute bars blue and transfer
    bars orange (the legend says which), time in ms. Each bar carries its full label,
    wrapped inside it where it fits, else a number keyed to a note under the chart."""
    rows = list(resources) if resources is not None else list(dict.fromkeys(t.resource for t in tasks))
    span = makespan_ms(tasks) or 1.0
    width_in = 11.0
    notes: list[str] = []
    inside: list[tuple[Task, str]] = []
    for t in tasks:
        if not t.label:
            continue
        chars = int(t.duration_ms / span * width_in * 0.8 * 12)  # ~12 characters per inch at 6 pt, less margins
        if chars >= 6:
            lines = textwrap.wrap(t.label, chars, break_long_words=False)
            if len(lines) <= 3 and max(map(len, lines)) <= chars:
                inside.append((t, "\n".join(lines)))
                continue
        notes.append(t.label)
    shown = notes[:MAX_NOTES]
    note_lines = [f"[{i + 1}] {text}" for i, text in enumerate(shown)]
    if len(notes) > len(shown):
        note_lines.append(f"... and {len(notes) - len(shown)} more bars too narrow to label (see the schedule table "
                          "that `splitopt solve` prints)")
    wrapped = note_columns(note_lines, 150)
    height = max(2.4, 0.55 * len(rows) + 1.6) + 0.11 * len(wrapped)
    fig, axes = new_figure((width_in, height))
    ax = axes[0, 0]
    labelled = {id(t) for t, _ in inside}
    numbered = [t for t in tasks if t.label and id(t) not in labelled][:len(shown)]
    number = {id(t): k + 1 for k, t in enumerate(numbered)}
    for t in tasks:
        y = rows.index(t.resource)
        ax.barh(y, t.duration_ms, left=t.start_ms, height=0.6, color=COLOURS.get(t.kind, "tab:gray"),
                edgecolor="black", linewidth=0.3)
    for t, text in inside:
        ax.text(t.start_ms + t.duration_ms / 2, rows.index(t.resource), text, ha="center", va="center", fontsize=6)
    for t in tasks:
        if id(t) in number:  # above the bar, every other one below it, so that neighbours do not overlap
            below = number[id(t)] % 2 == 0
            ax.text(t.start_ms + t.duration_ms / 2, rows.index(t.resource) + (0.32 if below else -0.32),
                    str(number[id(t)]), ha="center", va="top" if below else "bottom", fontsize=5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.3, -0.7)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("device / link")
    ax.set_title(title or f"schedule, makespan {span:.3f} ms")
    kinds = list(dict.fromkeys(["compute", "transfer"] + [t.kind for t in tasks]))
    ax.legend(handles=legend_patches(kinds), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    if wrapped:
        fig.text(0.01, 0.01, "\n".join(wrapped), ha="left", va="bottom", fontsize=6, family="monospace")
    bottom = min(0.6, (0.11 * len(wrapped) + 0.1) / height) if wrapped else 0.0
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return save_figure(fig, path)


def note_columns(lines: Sequence[str], width: int) -> list[str]:
    """``lines`` set in as many columns as fit ``width`` characters (column-major), each
    line wrapped to the width first."""
    lines = [w for line in lines for w in textwrap.wrap(line, width)]
    if not lines:
        return []
    col = max(map(len, lines)) + 3
    cols = max(1, min(len(lines), width // col))
    height = -(-len(lines) // cols)
    return ["".join(lines[c * height + r].ljust(col) for c in range(cols) if c * height + r < len(lines)).rstrip()
            for r in range(height)]


def pipeline_stages(metrics: Any) -> list[tuple[str, float, float, str]]:
    """The stages of a pipelined plan, ``(device, compute ms, transfer ms, what)`` per
    device with work, in pipeline order: a chain plan's devices (compute, then the send to
    the next device), a maxload placement's loaded devices (its load less its transfers,
    then its transfers). Empty for metrics of any other kind."""
    if hasattr(metrics, "devices") and hasattr(metrics, "bottleneck_ms"):  # chain
        return [(d.device, d.compute_ms, d.send_ms, f"{d.layers} layers") for d in metrics.devices if d.stage_ms > 0]
    if hasattr(metrics, "loads_ms"):  # maxload
        transfers = getattr(metrics, "transfer_ms", {}) or {}
        return [(d, load - transfers.get(d, 0.0), transfers.get(d, 0.0), "") for d, load in metrics.loads_ms.items()
                if load > 0]
    return []


def plot_pipeline(stages: Sequence[tuple[str, float, float, str]], path: str | Path | None = None,
                  title: str = "", samples: int = 4):
    """A throughput plan in steady state: one row per stage (device), ``samples``
    successive samples as bars, each stage starting sample k in period k (the period is the
    bottleneck stage's time, so the bottleneck's row has no gap); compute and transfer
    bars as in the Gantt chart, the bottleneck stage outlined in red and named."""
    if not stages:
        raise ValueError("a pipeline needs at least one stage with work")
    period = max(c + t for _, c, t, _ in stages)
    slow = max(range(len(stages)), key=lambda i: stages[i][1] + stages[i][2])
    fig, axes = new_figure((11.0, max(2.6, 0.6 * len(stages) + 1.8)))
    ax = axes[0, 0]
    for s, (name, compute, transfer, _) in enumerate(stages):
        edge = "tab:red" if s == slow else "black"
        lw = 1.4 if s == slow else 0.3
        for k in range(samples):
            start = (s + k) * period
            if compute > 0:
                ax.barh(s, compute, left=start, height=0.6, color=COLOURS["compute"], edgecolor=edge, linewidth=lw)
            if transfer > 0:
                ax.barh(s, transfer, left=start + compute, height=0.6, color=COLOURS["transfer"], edgecolor=edge,
                        linewidth=lw)
            if (compute + transfer) / (period * (samples + len(stages) - 1)) > 0.02:
                ax.text(start + (compute + transfer) / 2, s, f"#{k + 1}", ha="center", va="center", fontsize=6)
    labels = []
    for s, (name, compute, transfer, what) in enumerate(stages):
        text = f"{name}{' (' + what + ')' if what else ''}\n{compute + transfer:.3g} ms"
        labels.append(text + ("  BOTTLENECK" if s == slow else ""))
    ax.set_yticks(range(len(stages)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.get_yticklabels()[slow].set_color("tab:red")
    ax.set_ylim(len(stages) - 0.5, -0.5)
    for k in range(samples + len(stages)):
        ax.axvline(k * period, color="gray", linewidth=0.5, linestyle=":")
    ax.set_xlabel(f"time (ms); one period = the bottleneck stage, {period:.4g} ms; bars #k: sample k")
    ax.set_ylabel("pipeline stage")
    rate = 1000.0 / period if period > 0 else math.inf
    ax.set_title(title or f"pipeline, steady state: {period:.4g} ms per sample ({rate:.4g} samples/s)")
    from matplotlib.patches import Patch

    handles = legend_patches(["compute", "transfer"])
    handles.append(Patch(facecolor="white", edgecolor="tab:red", linewidth=1.4,
                         label=f"bottleneck: {stages[slow][0]}"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return save_figure(fig, path)


def has_timeline(inst: Any) -> bool:
    """Whether ``inst``'s plans are drawn as an edge/cloud timeline (problems split and
    split_bits)."""
    return getattr(inst, "problem", None) in ("split", "split_bits")


def human_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:,.0f} B"


def plot_edge_cloud(inst: Any, metrics: Any, path: str | Path | None = None, title: str = ""):
    """An edge/cloud plan as a timeline: the edge computes its layers, the uplink sends the
    cut's tensors (their sizes written on and under the bar), the cloud computes the
    rest; one row each, time in ms."""
    edge, cloud = inst.settings.edge, inst.settings.cloud
    e, t, c = metrics.edge_compute_ms, metrics.transmit_ms, metrics.cloud_compute_ms
    rows = [f"edge ({edge})", f"uplink {edge}->{cloud}", f"cloud ({cloud})"]
    bars = [(0, e, "compute", f"{metrics.edge_layer_count} edge layers, {e:.4g} ms"),
            (1, t, "transfer", f"{human_bytes(metrics.transmitted_bytes)} sent, {t:.4g} ms"),
            (2, c, "compute", f"{len(inst.layers) - metrics.edge_layer_count} cloud layers, {c:.4g} ms")]
    sent = [f"{name} ({human_bytes(size)})" for name, size in metrics.sent_tensors]
    note = textwrap.wrap("sent: " + (", ".join(sent) if sent else "nothing (the plan runs on one side)"), 150)
    height = 3.0 + 0.14 * len(note)
    fig, axes = new_figure((10.0, height))
    ax = axes[0, 0]
    total = max(e + t + c, 1e-12)
    start = 0.0
    for y, dur, kind, text in bars:
        ax.barh(y, dur, left=start, height=0.6, color=COLOURS[kind], edgecolor="black", linewidth=0.3)
        x, ha = (start + dur / 2, "center") if dur > 0.3 * total else (start + dur + 0.01 * total, "left")
        ax.text(x, y, text, ha=ha, va="center", fontsize=7)
        start += dur
    ax.set_xlim(0, total * 1.35)
    ax.set_yticks(range(3))
    ax.set_yticklabels(rows, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"{inst.name}: {inst.problem} plan, latency {metrics.total_ms:.4g} ms")
    ax.legend(handles=legend_patches(["compute", "transfer"]), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    fig.text(0.01, 0.01, "\n".join(note), ha="left", va="bottom", fontsize=6, family="monospace")
    fig.tight_layout(rect=(0, (0.14 * len(note) + 0.15) / height, 1, 1))
    return save_figure(fig, path)


def plot_plan(inst: Any, metrics: Any, path: str | Path | None = None, title: str = ""):
    """The picture of a plan that ``--gantt`` draws: the timeline of an edge/cloud plan,
    the pipeline of a throughput plan (chain, maxload), else the schedule as a Gantt
    chart (ValueError when the plan has no schedule to draw)."""
    if has_timeline(inst):
        return plot_edge_cloud(inst, metrics, path, title)
    stages = pipeline_stages(metrics)
    if getattr(metrics, "objective", None) == "throughput" and stages:
        period = max(c + t for _, c, t, _ in stages)
        rate = f" ({1000.0 / period:.4g} samples/s)" if period > 0 else ""
        return plot_pipeline(stages, path, title=title or f"{inst.name}: pipeline in steady state, {period:.4g} ms "
                             f"per sample{rate}")
    from splitopt.families.registry import family_of

    tasks = family_of(inst).schedule(metrics)
    if not tasks:
        raise ValueError(f"this plan of problem '{inst.problem}' has no schedule to draw")
    return plot_gantt(tasks, path, title=title or f"{inst.name}: makespan {makespan_ms(tasks):.3f} ms")


def plot_breakdown(rows: Sequence[tuple[str, float, float]], path: str | Path | None = None, title: str = ""):
    """Stacked bars per device: (device, compute ms, communication ms)."""
    fig, axes = new_figure((max(4.0, 1.0 * len(rows) + 2), 3.5))
    ax = axes[0, 0]
    names = [r[0] for r in rows]
    compute = [r[1] for r in rows]
    comm = [r[2] for r in rows]
    ax.bar(names, compute, color=COLOURS["compute"], label="compute")
    ax.bar(names, comm, bottom=compute, color=COLOURS["transfer"], label="send")
    ax.set_ylabel("time (ms)")
    ax.set_xlabel("device")
    if max((len(n) for n in names), default=0) * len(names) > 40:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    ax.legend()
    ax.set_title(title or "per-device latency")
    fig.tight_layout()
    return save_figure(fig, path)


# ----- Pareto fronts ----------------------------------------------------------------------------

def mark_choice(ax, x: float, y: float, label: str) -> None:
    """The plan a solve of the instance returns, as a red star on the front."""
    ax.scatter([x], [y], marker="*", s=220, color="tab:red", edgecolors="black", zorder=4, label=label)


def chosen_point(front: Sequence[Any], x: Callable[[Any], float | None], fits: Callable[[float], bool]):
    """The point a solve under the instance's budget picks: the least latency among the
    points whose ``x`` meets it (``fits``); None when none does."""
    ok = [p for p in front if x(p) is not None and fits(x(p))]
    return min(ok, key=lambda p: p.latency_ms) if ok else None


def plot_accuracy_front(inst, front, path: str | Path | None = None):
    """Latency (ms) against measured accuracy, each point labelled with its width d; the
    instance's least accuracy (``min_accuracy``) dashed and the plan a solve returns
    starred."""
    fig, axes = new_figure((6.5, 4.2))
    ax = axes[0, 0]
    pts = [p for p in front if p.accuracy is not None]
    ax.step([p.accuracy for p in pts], [p.latency_ms for p in pts], where="pre", color="tab:blue", alpha=0.5)
    ax.scatter([p.accuracy for p in pts], [p.latency_ms for p in pts], color="tab:blue", label="latency-optimal plan")
    for p in pts:
        w = p.result.plan.width
        ax.annotate("no compression" if w is None else f"d={w}", (p.accuracy, p.latency_ms),
                    textcoords="offset points", xytext=(4, 4), fontsize=8)
    least = (getattr(inst.settings, "multiview", None) or {}).get("min_accuracy")
    if least is not None:
        ax.axvline(least, color="tab:red", linestyle="--", linewidth=1, label=f"accuracy budget {least:.4g}")
    chosen = chosen_point(pts, lambda p: p.accuracy, lambda a: least is None or a >= least - 1e-12)
    if chosen is not None:
        mark_choice(ax, chosen.accuracy, chosen.latency_ms, "chosen plan (solve)")
    scale_axis(ax, "y", [p.latency_ms for p in pts])
    return finish_plot(fig, ax, "measured accuracy", "latency (ms)", f"{inst.name}: latency vs accuracy", path)


def plot_front(inst, front, path: str | Path | None = None, baselines: dict[str, tuple[float, float]] | None = None):
    """Latency (ms) against quantization error, with optional baseline points
    ``{name: (error, latency_ms)}``; the instance's error budget dashed and the plan a
    solve returns (the least latency within it) starred; log axes where values span
    decades."""
    fig, axes = new_figure((6.5, 4.2))
    ax = axes[0, 0]
    xs = [p.error for p in front]
    ys = [p.latency_ms for p in front]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    scatter_proven(ax, front, lambda p: p.error)
    for name, (err, lat) in (baselines or {}).items():
        ax.scatter([err], [lat], marker="x")
        ax.annotate(name, (err, lat), textcoords="offset points", xytext=(4, 4), fontsize=8)
        xs, ys = xs + [err], ys + [lat]
    budget = inst.settings.error_budget
    if budget is not None:
        ax.axvline(budget, color="tab:red", linestyle="--", linewidth=1, label=f"error budget {budget:.4g}")
        xs = xs + [budget]
    chosen = chosen_point(front, lambda p: p.error, lambda e: budget is None or e <= budget * (1 + 1e-6))
    if chosen is not None:
        mark_choice(ax, chosen.error, chosen.latency_ms,
                    "chosen plan (solve)" if budget is not None else "chosen plan (solve, no error budget)")
    scale_axis(ax, "x", xs)
    scale_axis(ax, "y", ys)
    return finish_plot(fig, ax, "summed quantization error (relative MSE)", "end-to-end latency (ms)",
                       f"{inst.name}: latency vs error", path)


def scatter_proven(ax, front, x) -> None:
    """A front's points at (``x(point)``, latency): proven ones blue, time-limited orange."""
    proven = [p for p in front if p.result.status.value == "OPTIMAL"]
    ax.scatter([x(p) for p in proven], [p.latency_ms for p in proven], color="tab:blue", label="Pareto-optimal (proven)")
    other = [p for p in front if p.result.status.value != "OPTIMAL"]
    if other:
        ax.scatter([x(p) for p in other], [p.latency_ms for p in other], color="tab:orange", label="time-limited")


def plot_bytes_front(inst, front, path: str | Path | None = None):
    """Latency (ms) against bytes sent (a separable instance's front), each corner marked
    proven or time-limited; the instance's byte and latency budgets dashed and the plan a
    solve returns starred; log axes where values span decades."""

    fig, axes = new_figure((6.5, 4.2))
    ax = axes[0, 0]
    xs, ys = [p.bytes for p in front], [p.latency_ms for p in front]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    scatter_proven(ax, front, lambda p: p.bytes)
    opts = inst.settings.separable
    byte_budget, latency_budget = opts.get("byte_budget_bytes"), opts.get("latency_budget_ms")
    if byte_budget is not None:
        ax.axvline(byte_budget, color="tab:red", linestyle="--", linewidth=1,
                   label=f"byte budget {human_bytes(byte_budget)}")
        xs = xs + [byte_budget]
    if latency_budget is not None:
        ax.axhline(latency_budget, color="tab:purple", linestyle="--", linewidth=1,
                   label=f"latency budget {latency_budget:.4g} ms")
        ys = ys + [latency_budget]
    ok = [p for p in front if (byte_budget is None or p.bytes <= byte_budget)
          and (latency_budget is None or p.latency_ms <= latency_budget * (1 + 1e-9))]
    if ok:
        key = (lambda p: (p.bytes, p.latency_ms)) if inst.objective == "bytes" else \
            (lambda p: (p.latency_ms, p.bytes))
        chosen = min(ok, key=key)
        mark_choice(ax, chosen.bytes, chosen.latency_ms, f"chosen plan (solve, objective {inst.objective})")
    scale_axis(ax, "x", xs)
    scale_axis(ax, "y", ys)
    return finish_plot(fig, ax, "bytes sent", "latency (ms)", f"{inst.name}: latency vs bytes", path)
