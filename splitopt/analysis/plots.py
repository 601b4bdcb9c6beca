"""Plots of solves and schedules: a plan as its family describes it (a schedule as a Gantt
chart, a throughput plan as its pipeline, an edge/cloud plan as its timeline), the
per-device compute/communication breakdown, the Pareto fronts, and objective against a
link's bandwidth (a sweep, the exact breakpoints).

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
from typing import Any, Mapping, Sequence

from splitopt.core.drawing import Gantt, Pipeline, Timeline
from splitopt.core.errors import MissingDependency
from splitopt.core.front import Front
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
    for s, (_, compute, transfer, _) in enumerate(stages):
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


def plot_timeline(timeline: Timeline, path: str | Path | None = None, title: str = ""):
    """Bars one after another, one row each (an edge/cloud plan: the edge computes its
    layers, the uplink sends the cut's tensors, the cloud computes the rest), each bar's
    text on it (beside it where it is short), the timeline's note under the chart; time
    in ms."""
    note = textwrap.wrap(timeline.note, 150)
    height = 3.0 + 0.14 * len(note)
    fig, axes = new_figure((10.0, height))
    ax = axes[0, 0]
    total = max(sum(dur for _, dur, _, _ in timeline.bars), 1e-12)
    start = 0.0
    for y, (_, dur, kind, text) in enumerate(timeline.bars):
        ax.barh(y, dur, left=start, height=0.6, color=COLOURS.get(kind, "tab:gray"), edgecolor="black", linewidth=0.3)
        x, ha = (start + dur / 2, "center") if dur > 0.3 * total else (start + dur + 0.01 * total, "left")
        ax.text(x, y, text, ha=ha, va="center", fontsize=7)
        start += dur
    ax.set_xlim(0, total * 1.35)
    ax.set_yticks(range(len(timeline.bars)))
    ax.set_yticklabels([row for row, _, _, _ in timeline.bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or timeline.title)
    ax.legend(handles=legend_patches(["compute", "transfer"]), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    fig.text(0.01, 0.01, "\n".join(note), ha="left", va="bottom", fontsize=6, family="monospace")
    fig.tight_layout(rect=(0, (0.14 * len(note) + 0.15) / height, 1, 1))
    return save_figure(fig, path)


def plot_plan(inst: Any, metrics: Any, path: str | Path | None = None, title: str = ""):
    """The picture of a plan that ``--gantt`` draws, as its family describes it
    (``Family.plan_drawing``): the timeline of an edge/cloud plan, the pipeline of a
    throughput plan (chain, maxload), else the schedule as a Gantt chart (ValueError when
    the plan has nothing to draw)."""
    from splitopt.families.registry import family_of

    drawing = family_of(inst).plan_drawing(inst, metrics)
    if isinstance(drawing, Timeline):
        return plot_timeline(drawing, path, title)
    if isinstance(drawing, Pipeline):
        period = max(c + t for _, c, t, _ in drawing.stages)
        rate = f" ({1000.0 / period:.4g} samples/s)" if period > 0 else ""
        return plot_pipeline(drawing.stages, path, title=title or f"{inst.name}: pipeline in steady state, "
                             f"{period:.4g} ms per sample{rate}")
    if isinstance(drawing, Gantt) and drawing.tasks:
        return plot_gantt(drawing.tasks, path,
                          title=title or f"{inst.name}: makespan {makespan_ms(drawing.tasks):.3f} ms")
    raise ValueError(f"this plan of problem '{inst.problem}' has no schedule to draw")


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

def plot_front(inst: Any, front: Front, path: str | Path | None = None,
               baselines: dict[str, tuple[float, float]] | None = None):
    """Latency (ms) against the front's measure (``splitopt.core.front.Front``: the
    quantization error of an edge/cloud cut, a multiview instance's measured accuracy, a
    separable policy's bytes): proven points blue, time-limited ones orange, each with its
    label; the instance's limits dashed, the plan a solve returns starred, optional
    baseline points ``{name: (measure, latency_ms)}``; log axes where values span
    decades."""
    fig, axes = new_figure((6.5, 4.2))
    ax = axes[0, 0]
    pts = [p for p in front.points if p.measure is not None]
    xs = [p.measure for p in pts if p.measure is not None]  # every point's (filtered above)
    ys = [p.latency_ms for p in pts]
    ax.step(xs, ys, where=front.step, color="tab:blue", alpha=0.5)
    proven = [p for p in pts if p.result.status.value == "OPTIMAL"]
    ax.scatter([p.measure for p in proven], [p.latency_ms for p in proven], color="tab:blue",
               label="Pareto-optimal (proven)")
    other = [p for p in pts if p.result.status.value != "OPTIMAL"]
    if other:
        ax.scatter([p.measure for p in other], [p.latency_ms for p in other], color="tab:orange", label="time-limited")
    for p in pts:
        if p.label:
            ax.annotate(p.label, (p.measure, p.latency_ms), textcoords="offset points", xytext=(4, 4), fontsize=8)
    for name, (x, y) in (baselines or {}).items():
        ax.scatter([x], [y], marker="x")
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        xs, ys = xs + [x], ys + [y]
    for limit, colour in zip(front.limits, ("tab:red", "tab:purple", "tab:green")):
        if limit.axis == "measure":
            ax.axvline(limit.value, color=colour, linestyle="--", linewidth=1, label=limit.label)
            xs = xs + [limit.value]
        else:
            ax.axhline(limit.value, color=colour, linestyle="--", linewidth=1, label=limit.label)
            ys = ys + [limit.value]
    if front.chosen is not None and front.chosen.measure is not None:
        ax.scatter([front.chosen.measure], [front.chosen.latency_ms], marker="*", s=220, color="tab:red",
                   edgecolors="black", zorder=4, label=front.chosen_label)
    scale_axis(ax, "x", xs)
    scale_axis(ax, "y", ys)
    return finish_plot(fig, ax, front.measure, front.latency, f"{inst.name}: {front.title}", path)


# ----- bandwidth -------------------------------------------------------------------------------

def objective_label(inst: Any) -> str:
    """The objective axis' label, in the family's unit."""
    from splitopt.families.registry import family_of

    return f"objective ({family_of(inst).objective_unit(inst)})"


def plot_breakpoints(inst: Any, table: Any, path: str | Path | None = None):
    """Objective against bandwidth (``splitopt.analysis.breakpoints.BreakpointTable``):
    each interval's line (latency = a + b / B) named by its plan, the breakpoints dashed,
    the solves marked; log axes where values span decades. Returns the Figure (written to
    ``path`` if given)."""
    from splitopt.analysis.breakpoints import plan_text

    fig, axes = new_figure((7, 4))
    ax = axes[0, 0]
    colors = [f"C{i}" for i in range(10)]
    ys: list[float] = []
    for i, iv in enumerate(table.intervals):
        n = 40
        ratio = iv.bandwidth_to / iv.bandwidth_from
        xs = [iv.bandwidth_from * ratio ** (k / (n - 1)) for k in range(n)]
        label = plan_text(inst, iv.plan, limit=40)
        ys += [iv.line.at_bandwidth(x) for x in xs]
        ax.plot([x / 1e6 for x in xs], [iv.line.at_bandwidth(x) for x in xs], color=colors[i % len(colors)],
                label=label + ("" if iv.proven else " (unproven)"))
    for b in table.breakpoints:
        ax.axvline(b / 1e6, color="gray", linestyle="--", linewidth=0.8)
    probes = [p for p in table.probes if p.result.objective is not None]
    ax.scatter([p.bandwidth / 1e6 for p in probes], [p.result.objective for p in probes], s=12, color="black",
               zorder=3, label=f"solves ({len(table.probes)})")
    scale_axis(ax, "x", [b / 1e6 for iv in table.intervals for b in (iv.bandwidth_from, iv.bandwidth_to)])
    scale_axis(ax, "y", ys + [p.result.objective for p in probes])
    return finish_plot(fig, ax, f"{table.link[0]}->{table.link[1]} bandwidth (Mbit/s)", objective_label(inst),
                       f"{inst.name}: optimal plan vs bandwidth", path)


def plot_sweep(inst: Any, data: Mapping[str, Any], path: str | Path | None = None):
    """Objective against bandwidth at a sweep's points (its JSON table:
    ``splitopt.analysis.breakpoints.sweep_table``), the points where the plan moved
    marked; log axes where values span decades. Returns the Figure (written to ``path``
    if given)."""
    pts = [r for r in data["points"] if r["objective"] is not None]
    fig, axes = new_figure((7, 4))
    ax = axes[0, 0]
    ax.plot([r["bandwidth"] / 1e6 for r in pts], [r["objective"] for r in pts], marker="o", markersize=4,
            color="tab:blue", label="optimum at each point")
    moved = [r for r in pts if r["moved"]]
    if moved:
        ax.scatter([r["bandwidth"] / 1e6 for r in moved], [r["objective"] for r in moved], s=60, facecolors="none",
                   edgecolors="tab:red", zorder=3, label="plan changed")
    scale_axis(ax, "x", [r["bandwidth"] / 1e6 for r in pts])
    scale_axis(ax, "y", [r["objective"] for r in pts])
    link = data["link"]
    return finish_plot(fig, ax, f"{link['source']}->{link['target']} bandwidth (Mbit/s)", objective_label(inst),
                       f"{inst.name}: bandwidth sweep", path)
