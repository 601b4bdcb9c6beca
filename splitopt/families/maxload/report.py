"""The maxload family's report: the objective, each device's nodes and load (compute and
transfers), and the single-sample latency."""

from __future__ import annotations

from splitopt.families.maxload.evaluate import MaxloadMetrics
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement


def report(console, inst: MaxloadInstance, plan: MaxloadPlacement, m: MaxloadMetrics, show_layers: bool = True) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    latency = "undefined (accelerator sets cannot run as one call each)" if m.latency_ms is None \
        else f"{m.latency_ms:.6f} ms"
    console.print(f"[bold]Max-load[/bold] {m.max_load_ms:.6f} ms per sample (pipelined)   "
                  f"[bold]Latency[/bold] {latency}   objective: {m.objective}", highlight=False)
    table = Table(title=f"Devices ({inst.max_fpgas} accelerators, {inst.max_cpus} CPU cores)")
    for col in ("device", "nodes", "load ms", "compute ms", "transfer ms"):
        table.add_column(col, justify="left" if col == "device" else "right")
    on = plan.nodes_on
    for d, load in m.loads_ms.items():
        if not on.get(d):
            continue
        transfer = m.transfer_ms.get(d, 0.0)
        table.add_row(esc(d), str(len(on[d])), f"{load:.6f}", f"{load - transfer:.6f}", f"{transfer:.6f}")
    console.print(table)
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
