"""A benchmark's plots (``splitopt bench --plot``), from its records alone. Each returns a
``matplotlib.figure.Figure`` built without pyplot (``splitopt.analysis.plots.new_figure``:
matplotlib imported only when a plot is drawn, the caller's backend untouched) and, given
a path, also writes it there (.png, .svg, .pdf).

* time vs size (log-log): one line per family and solver, the median over the records of
  each size (seeds, and instances of the same size); solve seconds solid and build
  seconds dashed (``SolveResult.build_s`` and ``solve_s``, which every record of a
  finished solve carries), or wall seconds for records with neither (a killed job);
* objective vs time: the anytime curve of every record that carries one (``anytime``:
  the searches, evolutionary, q-learning, reinforce, and ``auto``, record the best
  objective at each improvement; seconds from the start of the search), one panel per
  instance, one step line per solver and seed, held level from its last improvement to
  the end of the run (``solve_s``). Exact backends and baselines record no
  curve, so without a search among the solvers there is nothing to draw:
  :func:`plot_objective_vs_time` then writes nothing and returns None.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Sequence

from splitopt.analysis.plots import new_figure, save_figure


def _label(r: dict[str, Any]) -> str:
    return f"{r.get('family') or '?'}/{r.get('problem') or '?'}"


def time_series(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
    """``(family/problem, solver, "solve"|"build"|"wall") -> [(size, median seconds)]`` by
    size; only records with a size and a positive time count (log axes)."""
    values: dict[tuple[str, str, str], dict[float, list[float]]] = {}
    for r in records:
        size = r.get("size")
        if not size:
            continue
        kinds = ("solve", "build") if r.get("solve_s") is not None else ("wall",)
        for kind in kinds:
            t = r.get(f"{kind}_s")
            if t is not None and t > 0:
                values.setdefault((_label(r), r["solver"], kind), {}).setdefault(float(size), []).append(float(t))
    return {key: sorted((size, statistics.median(ts)) for size, ts in by_size.items())
            for key, by_size in values.items()}


def plot_time_vs_size(records: Sequence[dict[str, Any]], path: str | Path | None = None, title: str = ""):
    """Seconds against instance size, log-log, one panel per family/problem (see the
    module docstring); returns the Figure."""
    series = time_series(records)
    panels = sorted({label for label, _, _ in series}) or ["no record with a size and a time"]
    cols = min(2, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = new_figure((6.5 * cols, 4.5 * rows), rows, cols)
    styles = {"solve": ("-", "o"), "build": ("--", "x"), "wall": (":", "s")}
    unit = next((r.get("size_unit") for r in records if r.get("size_unit")), "layers")
    for ax, panel in zip(axes.flat, panels):
        colours: dict[str, str] = {}
        for (label, solver, kind), points in sorted(series.items()):
            if label != panel:
                continue
            colours.setdefault(solver, f"C{len(colours) % 10}")
            line, marker = styles[kind]
            xs, ys = zip(*points)
            ax.plot(xs, ys, linestyle=line, marker=marker, color=colours[solver], label=f"{solver} ({kind})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"instance size ({unit})")
        ax.set_ylabel("seconds (median over seeds)")
        ax.set_title(panel, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if colours:
            ax.legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title or "time vs size", fontsize=10)
    fig.text(0.5, 0.005, "solve seconds solid, build seconds dashed, wall seconds (jobs with neither) dotted",
             ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return save_figure(fig, path)


def plot_objective_vs_time(records: Sequence[dict[str, Any]], path: str | Path | None = None, title: str = ""):
    """The anytime curves (best feasible objective against seconds), one panel per
    instance, as a Figure; None, and no file, when no record carries one (see the module
    docstring)."""
    curves: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if any(p[3] for p in r.get("anytime") or ()):
            curves.setdefault(r["instance"], []).append(r)
    if not curves:
        return None
    n = len(curves)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = new_figure((4.5 * cols, 3.2 * rows), rows, cols)
    for ax, (instance, rs) in zip(axes.flat, curves.items()):
        for r in rs:
            points = [(p[0], p[2]) for p in r["anytime"] if p[3]]
            found = len(points)
            end = r.get("solve_s")
            if end is not None and end > points[-1][0]:  # the best stays the best to the end of the run
                points.append((end, points[-1][1]))
            xs, ys = zip(*points)
            ax.step(xs, ys, where="post", marker=".", markevery=list(range(found)),
                    label=f"{r['solver']} seed {r['seed']}")
        if all(x > 0 for r in rs for x in (p[0] for p in r["anytime"])):
            ax.set_xscale("log")
        unit = rs[0].get("objective_unit") or "ms"
        ax.set_title(f"{Path(instance).stem} ({rs[0].get('size') or '?'} {rs[0].get('size_unit') or ''})",
                     fontsize=8)
        ax.set_xlabel("seconds")
        ax.set_ylabel(f"best objective ({unit})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
