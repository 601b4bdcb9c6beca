"""The multiview family's report: fusion and width, accuracy, makespan, per-device table,
schedule."""

from __future__ import annotations

from splitopt.families.multiview.data import MEMORY_RTOL, data
from splitopt.families.multiview.evaluate import MultiviewMetrics
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance


def report(console, inst: MultiviewInstance, plan: MultiviewPlan, metrics: MultiviewMetrics,
                  show_layers: bool = True) -> None:
    """Per-device table (compute, bytes sent, memory), the schedule, violations."""
    from rich.markup import escape as esc
    from rich.table import Table

    d = data(inst)
    width = "no compression" if plan.width is None else f"Conv-Reduce to d={plan.width}"
    console.print(f"[bold]Fusion[/bold]   at '{esc(plan.fusion)}' ({width}); {d.views} view(s); bus '{esc(d.bus.name)}' "
                  f"{d.bus.mode} mode, {d.bus.bandwidth_bits_per_s / 1e6:,.1f} Mb/s")
    if metrics.accuracy is not None or d.min_accuracy is not None:
        measured = "not measured" if metrics.accuracy is None else f"{metrics.accuracy:.4f}"
        limit = "" if d.min_accuracy is None else f" (min_accuracy {d.min_accuracy:g})"
        console.print(f"[bold]Accuracy[/bold] {measured}{limit}", highlight=False)
    console.print(f"[bold]Makespan[/bold] [bold]{metrics.makespan_ms:.4f} ms[/bold]  (aggregator busy "
                  f"{metrics.aggregator_compute_ms:.4f} ms, bus busy {metrics.bus_busy_ms:.4f} ms)")
    table = Table(title="Devices")
    for col in ("device", "cut", "compute ms", "sent B", "transfer ms", "memory MB", "limit MB"):
        table.add_column(col, justify="left" if col in ("device", "cut") else "right")
    for c in metrics.views:
        color = "red" if c.memory_bytes > c.memory_limit * (1 + MEMORY_RTOL) else "green"
        table.add_row(esc(c.sensor), esc(c.cut), f"{c.sensor_ms:.4f}", f"{c.sent_bytes:,.0f}", f"{c.transfer_ms:.4f}",
                      f"[{color}]{c.memory_bytes / 1e6:,.3f}[/{color}]", f"{c.memory_limit / 1e6:,.1f}")
    table.add_row(esc(d.aggregator), "-", f"{metrics.aggregator_compute_ms:.4f}", "0", "-", "-", "-")
    console.print(table)
    if show_layers:
        sched = Table(title="Schedule (ms)")
        for col in ("resource", "kind", "task", "start", "end"):
            sched.add_column(col, justify="right" if col in ("start", "end") else "left")
        for t in sorted(metrics.schedule, key=lambda t: (t.start_ms, t.resource)):
            sched.add_row(esc(t.resource), t.kind, esc(t.label), f"{t.start_ms:.4f}", f"{t.end_ms:.4f}")
        console.print(sched)
    for v in metrics.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
