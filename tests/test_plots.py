"""The plots (``splitopt.analysis.plots``, ``splitopt.sweep.plots``, the bandwidth plots):
each returns a Figure without touching pyplot's state or the caller's backend, and shows
what it claims: the Gantt legend, the pipeline's stages and bottleneck, the edge/cloud
timeline's sizes, a Pareto front's budget and chosen plan, log axes only where values span
decades."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest
from matplotlib.figure import Figure
from typer.testing import CliRunner

from splitopt.analysis import plots
from splitopt.core.drawing import Pipeline
from splitopt.core.front import Front, FrontPoint, Limit
from splitopt.core.schedule import Task
from splitopt.families.registry import family, family_of

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "data" / "toy.json"


@pytest.fixture
def pyplot_untouched():
    """The test's plots leave the backend and pyplot's figures as they were."""
    import matplotlib.pyplot as plt

    backend, figures = matplotlib.get_backend(), plt.get_fignums()
    yield
    assert matplotlib.get_backend() == backend
    assert plt.get_fignums() == figures


def legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def solved(name: str, seed: int, objective: str | None = None):
    from splitopt.solve import solve

    fam = family(name)
    inst = fam.random_instance(seed)
    if objective is not None:
        inst = fam.with_objective(inst, objective)
    return inst, solve(inst, "brute-force").metrics


def pipeline_stages(inst, metrics):
    """The stages of the pipeline the plan's family draws (none where it draws another picture)."""
    drawing = family_of(inst).plan_drawing(inst, metrics)
    return drawing.stages if isinstance(drawing, Pipeline) else ()


# ----- schedules -----------------------------------------------------------------------------

TASKS = [Task("ue", "compute", "stem.conv1, stem.conv2 and a label too long for its bar", 0.0, 0.2),
         Task("ue->sbs", "transfer", "stem.conv2 (4,096 B)", 0.2, 5.0),
         Task("sbs", "compute", "branch1.conv1", 5.0, 9.0)]


def test_gantt_returns_a_figure_with_a_legend_and_full_labels(pyplot_untouched, tmp_path):
    fig = plots.plot_gantt(TASKS, tmp_path / "g.svg")
    assert isinstance(fig, Figure) and (tmp_path / "g.svg").stat().st_size > 0
    assert {"compute", "transfer (link / bus)"} <= set(legend_texts(fig))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ue", "ue->sbs", "sbs"]
    assert "ms" in ax.get_xlabel()
    drawn = " ".join(t.get_text().replace("\n", " ") for t in ax.texts + fig.texts)
    for task in TASKS:  # every label whole: inside its bar, or as a numbered note under the chart
        assert task.label in drawn


def test_gantt_does_not_switch_the_callers_backend(tmp_path):
    import matplotlib.pyplot as plt

    before = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        figures = plt.get_fignums()
        plots.plot_gantt(TASKS, tmp_path / "g.png")
        plots.plot_breakdown([("ue", 1.0, 2.0), ("sbs", 3.0, 0.0)], tmp_path / "b.png")
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == figures
    finally:
        matplotlib.use(before)


def test_breakdown_returns_a_figure(pyplot_untouched):
    fig = plots.plot_breakdown([("ue", 1.0, 2.0), ("sbs", 3.0, 0.0)])
    assert isinstance(fig, Figure) and set(legend_texts(fig)) == {"compute", "send"}


# ----- pipelines and timelines ---------------------------------------------------------------

def test_a_chain_throughput_plan_is_drawn_as_its_pipeline(pyplot_untouched, tmp_path):
    inst, metrics = solved("chain", 2, "throughput")
    stages = pipeline_stages(inst, metrics)
    assert len(stages) >= 2
    fig = plots.plot_plan(inst, metrics, tmp_path / "p.png")
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert len(ticks) == len(stages)  # one row per stage
    assert [t for t in ticks if "BOTTLENECK" in t] == [t for t in ticks if t.startswith(metrics.bottleneck_device)]
    assert f"bottleneck: {metrics.bottleneck_device}" in legend_texts(fig)
    assert "pipeline" in ax.get_title() and "ms" in ax.get_xlabel()
    # 4 samples per stage: a stage's bars (compute, transfer) repeat with the bottleneck's period
    assert len(ax.patches) == 4 * sum((c > 0) + (t > 0) for _, c, t, _ in stages)


def test_a_maxload_throughput_plan_is_a_pipeline_and_a_latency_plan_a_gantt(pyplot_untouched):
    inst, metrics = solved("maxload", 0, "throughput")
    fig = plots.plot_plan(inst, metrics)
    assert len(fig.axes[0].get_yticklabels()) == len(pipeline_stages(inst, metrics))
    assert "pipeline" in fig.axes[0].get_title()
    inst, metrics = solved("chain", 0, "latency")
    assert "makespan" in plots.plot_plan(inst, metrics).axes[0].get_title()


def test_an_edge_cloud_plan_is_a_timeline_with_the_sizes_sent(pyplot_untouched):
    inst, metrics = solved("edge_cloud", 0)
    fig = plots.plot_plan(inst, metrics)
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows[0].startswith("edge") and rows[1].startswith("uplink") and rows[2].startswith("cloud")
    drawn = " ".join(t.get_text() for t in ax.texts + fig.texts)
    assert "B sent" in drawn
    for tensor, _ in metrics.sent_tensors:
        assert tensor in drawn


def test_cli_gantt_draws_an_edge_cloud_timeline(tmp_path):
    from splitopt.cli import app

    out = CliRunner().invoke(app, ["solve", str(TOY), "--no-layers", "--gantt", str(tmp_path / "g.png")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "g.png").stat().st_size > 1000


# ----- Pareto fronts -------------------------------------------------------------------------

def point(measure: float, latency: float, status: str = "OPTIMAL", label: str = ""):
    result = SimpleNamespace(status=SimpleNamespace(value=status))
    return FrontPoint(None, result, latency, measure, label)


def error_front(points, budget=None):
    """A latency / error front as the edge/cloud family marks it: the budget, the chosen plan."""
    fits = [p for p in points if budget is None or p.measure <= budget]
    return Front("latency / error Pareto front", "summed quantization error (relative MSE)", points, None,
                 limits=() if budget is None else (Limit("measure", budget, f"error budget {budget:.4g}"),),
                 chosen=min(fits, key=lambda p: p.latency_ms) if fits else None)


FAKE = SimpleNamespace(name="fake")


def test_pareto_marks_the_budget_and_the_chosen_plan(pyplot_untouched):
    front = error_front([point(0.0, 5.0), point(0.01, 2.0), point(0.05, 1.0)], budget=0.02)
    fig = plots.plot_front(FAKE, front)
    ax = fig.axes[0]
    budget = [line for line in ax.get_lines() if line.get_label().startswith("error budget")]
    assert len(budget) == 1 and list(budget[0].get_xdata()) == [0.02, 0.02]
    chosen = [c for c in ax.collections if c.get_label().startswith("chosen plan")]
    assert len(chosen) == 1
    assert chosen[0].get_offsets().tolist() == [[0.01, 2.0]]  # the least latency within the budget
    assert {"Pareto-optimal (proven)", "error budget 0.02", "chosen plan (solve)"} <= set(legend_texts(fig))


def test_pareto_without_a_budget_marks_the_fastest_plan(pyplot_untouched):
    fig = plots.plot_front(FAKE, error_front([point(0.0, 5.0), point(0.05, 1.0, "FEASIBLE")]))
    ax = fig.axes[0]
    assert not [line for line in ax.get_lines() if line.get_label().startswith("error budget")]
    chosen = [c for c in ax.collections if c.get_label().startswith("chosen plan")]
    assert chosen[0].get_offsets().tolist() == [[0.05, 1.0]]
    assert "time-limited" in legend_texts(fig)


@pytest.mark.parametrize("errors, latencies, xscale, yscale", [
    ([0.01, 0.02, 0.04], [1.0, 2.0, 3.0], "linear", "linear"),
    ([1e-5, 1e-3, 1e-1], [1.0, 50.0, 1000.0], "log", "log"),
    ([0.0, 1e-5, 1e-1], [1.0, 2.0, 3.0], "symlog", "linear"),  # a zero error: linear near 0, log beyond
])
def test_pareto_axes_are_log_only_where_values_span_decades(pyplot_untouched, errors, latencies, xscale, yscale):
    front = error_front([point(e, l) for e, l in zip(errors, latencies)])
    ax = plots.plot_front(FAKE, front).axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == (xscale, yscale)


def test_accuracy_and_bytes_fronts_mark_their_budgets_and_choices(pyplot_untouched, monkeypatch):
    """An accuracy front's limit, labels and chosen plan; the separable family's front
    (``families/separable/pareto.py``) on stand-in corners: the budgets it marks, the plan
    it chooses, its rows."""
    from splitopt.core.front import least_latency
    from splitopt.families.separable import pareto as sep_pareto

    ok = SimpleNamespace(value="OPTIMAL")
    found = [FrontPoint(a, SimpleNamespace(status=ok), lat, a, "no compression" if w is None else f"d={w}")
             for a, lat, w in ((0.90, 1.0, 2), (0.95, 2.0, 4), (0.99, 5.0, None))]
    front = Front("latency / accuracy front", "measured accuracy", found, None,
                  limits=(Limit("measure", 0.93, "accuracy budget 0.93"),), step="pre",
                  chosen=least_latency(found, lambda a: a >= 0.93))
    ax = plots.plot_front(FAKE, front).axes[0]
    assert "accuracy budget 0.93" in [line.get_label() for line in ax.get_lines()]
    assert [c.get_offsets().tolist() for c in ax.collections if c.get_label() == "chosen plan (solve)"] == \
        [[[0.95, 2.0]]]
    assert {"d=2", "d=4", "no compression"} <= {t.get_text() for t in ax.texts}

    metrics = lambda b: SimpleNamespace(ratio_to_ring=b / 1e4, intensive_steps=1)  # noqa: E731
    results = [SimpleNamespace(status=ok, metrics=metrics(b), plan=SimpleNamespace(to_dict=lambda inst: {}), gap=0.0)
               for b in (1e4, 4e3, 1e2)]
    found = [FrontPoint(None, r, lat, b) for r, (b, lat) in zip(results, ((1e4, 1.0), (4e3, 2.0), (1e2, 10.0)))]
    options = {"byte_budget_bytes": 5000.0, "latency_budget_ms": 8.0}
    inst = SimpleNamespace(name="f", objective="latency", settings=SimpleNamespace(separable=options))
    monkeypatch.setattr(sep_pareto, "bytes_front", lambda inst, solve, points: found)
    front = sep_pareto.pareto_front(inst, None, 50)
    ax = plots.plot_front(inst, front).axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "byte budget 5 kB" in labels and "latency budget 8 ms" in labels
    chosen = [c for c in ax.collections if c.get_label().startswith("chosen plan")]
    assert chosen[0].get_offsets().tolist() == [[4e3, 2.0]]
    assert (ax.get_xscale(), ax.get_yscale()) == ("linear", "linear")  # exactly two decades: not more
    assert front.records[1]["bytes"] == 4e3 and front.rows[1][0] == "4,000"


def test_cli_pareto_plot_has_the_budget_and_the_chosen_plan(tmp_path):
    from splitopt.cli import app

    out = CliRunner().invoke(app, ["pareto", str(TOY), "--points", "3", "--plot", str(tmp_path / "front.svg")])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "front.svg").read_text()
    assert "error budget" in text and "chosen plan" in text


# ----- benchmark and bandwidth plots ---------------------------------------------------------

def test_sweep_and_bandwidth_plots_return_figures(pyplot_untouched, tmp_path):
    from splitopt.api import load_instance
    from splitopt.analysis.plots import plot_sweep
    from splitopt.sweep.plots import plot_objective_vs_time, plot_time_vs_size

    records = [{"instance": "a.json", "solver": "evolutionary", "seed": 0, "family": "chain", "problem": "chain",
                "size": n, "size_unit": "layers", "build_s": 0.1 * n, "solve_s": 0.2 * n,
                "anytime": [[0.01, 1, 5.0, True], [0.1, 2, 4.0, True]]} for n in (10, 100)]
    fig = plot_time_vs_size(records)
    assert isinstance(fig, Figure) and fig.axes[0].get_xscale() == "log"
    assert isinstance(plot_objective_vs_time(records, tmp_path / "o.png"), Figure)
    assert (tmp_path / "o.png").stat().st_size > 0
    data = {"link": {"source": "edge", "target": "cloud"},
            "points": [{"bandwidth": b, "objective": o, "moved": m}
                       for b, o, m in ((1e6, 10.0, False), (1e8, 1.0, True), (1e9, 0.9, False))]}
    ax = plot_sweep(load_instance(TOY), data).axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")  # 3 decades of bandwidth, 1 of objective
