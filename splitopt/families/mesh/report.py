"""The mesh family's report: devices, links and the schedule."""

from __future__ import annotations

from splitopt.families.mesh.data import mesh_data
from splitopt.families.mesh.evaluate import MeshMetrics
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.settings import MeshInstance


def report(console, inst: MeshInstance, plan: MeshPlan, metrics: MeshMetrics, show_layers: bool = True) -> None:
    """Per-device table, per-link table and (``show_layers``) the schedule."""
    from rich.markup import escape as esc
    from rich.table import Table

    data = mesh_data(inst)
    console.print(
        f"[bold]Makespan[/bold] [bold]{metrics.makespan_ms:.4f} ms[/bold]  (source '{esc(data.source)}', sink "
        f"'{esc(data.sink)}', routing {data.options.routing}, outputs {'delivered' if data.options.deliver_outputs else 'stay'})"
    )
    table = Table(title="Devices")
    for col in ("device", "layers", "compute ms", "weights MB", "working set MB", "memory MB", "limit MB", "use %"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for d in metrics.devices:
        share = 100.0 * d.memory_bytes / d.memory_limit if d.memory_limit else 0.0
        table.add_row(esc(d.device), str(d.layers), f"{d.compute_ms:.4f}", f"{d.weight_bytes / 1e6:,.3f}",
                      f"{d.working_bytes / 1e6:,.3f}", f"{d.memory_bytes / 1e6:,.3f}", f"{d.memory_limit / 1e6:,.3f}",
                      f"{share:.1f}")
    console.print(table)
    table = Table(title="Links")
    for col in ("link", "resource", "transfers", "bytes", "busy ms"):
        table.add_column(col, justify="left" if col in ("link", "resource") else "right")
    for l in metrics.links:
        table.add_row(esc(l.link), esc(l.resource), str(l.transfers), f"{l.bytes:,.0f}", f"{l.transfer_ms:.4f}")
    console.print(table)
    for v in metrics.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
    if show_layers:
        table = Table(title="Schedule")
        for col in ("start ms", "end ms", "resource", "kind", "what"):
            table.add_column(col, justify="right" if col.endswith("ms") else "left")
        for t in metrics.schedule:
            table.add_row(f"{t.start_ms:.4f}", f"{t.end_ms:.4f}", esc(t.resource), t.kind, esc(t.label))
        console.print(table)
