"""The edge/cloud family's report for people: the cut, what is sent, the latency
breakdown, memory and error, and a table of the edge layers with their bit-widths."""

from __future__ import annotations

from splitopt.core.latency import layer_latency_ms
from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.evaluate import Metrics
from splitopt.core.jsonfile import byte_count
from splitopt.families.edge_cloud.data import edge_device
from splitopt.families.edge_cloud.plan import edge_layers
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def _fmt_bytes(b: float) -> str:
    return f"{byte_count(b)} B"


def report(console, inst: EdgeCloudInstance, plan: Plan, m: Metrics, show_layers: bool = True) -> None:
    from rich.markup import escape as esc

    s = inst.settings
    on_edge = edge_layers(inst, plan)
    n = len(inst.layers)
    if not on_edge:
        where = f"cloud-only: all {n} layers on '{s.cloud}'"
    elif len(on_edge) == n:
        where = f"edge-only: all {n} layers on '{s.edge}'"
    else:
        where = f"split: {len(on_edge)} of {n} layers on edge '{s.edge}', {n - len(on_edge)} on cloud '{s.cloud}'"
    console.print(f"[bold]Cut[/bold]      {esc(where)}")
    if m.sent_tensors:
        sent = ", ".join(f"{esc(t)} ({byte_count(b)} B)" for t, b in m.sent_tensors[:8])
        more = f" and {len(m.sent_tensors) - 8} more" if len(m.sent_tensors) > 8 else ""
        console.print(f"[bold]Sent[/bold]     {sent}{more}; total {_fmt_bytes(m.transmitted_bytes)}")
    console.print(
        f"[bold]Latency[/bold]  edge {m.edge_compute_ms:.3f} ms + transmit {m.transmit_ms:.3f} ms + "
        f"cloud {m.cloud_compute_ms:.3f} ms = [bold]{m.total_ms:.3f} ms[/bold]"
    )
    share = 100.0 * m.edge_memory_bytes / m.edge_memory_limit if m.edge_memory_limit else 0.0
    peak = f" (peak at {esc(m.peak_layer)})" if m.peak_layer else ""
    console.print(
        f"[bold]Memory[/bold]   weights {_fmt_bytes(m.edge_weight_bytes)} + activations "
        f"{_fmt_bytes(m.edge_peak_activation_bytes)}{peak} = {_fmt_bytes(m.edge_memory_bytes)} "
        f"of limit {_fmt_bytes(m.edge_memory_limit)} ({share:.1f} %)"
    )
    budget = "no budget" if m.error_budget is None else f"budget {m.error_budget:.6g}"
    console.print(f"[bold]Error[/bold]    {m.error:.6g} ({budget})")
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
    if show_layers and on_edge:
        from rich.table import Table

        table = Table(title=esc(f"Edge layers on '{s.edge}'"), show_lines=False)
        for col in ("#", "layer", "op", "W bits", "A bits", "latency ms", "weights B", "output B"):
            table.add_column(col, justify="right" if col not in ("layer", "op") else "left")
        edge = edge_device(inst)
        for name in on_edge:
            layer = inst.layer_by_name[name]
            wb, ab = plan.weight_bits[name], plan.activation_bits[name]
            table.add_row(
                str(inst.position[name]),
                esc(name),
                esc(layer.op),
                str(wb) if layer.weights else "-",
                str(ab),
                f"{layer_latency_ms(inst, layer, edge, wb, ab):.3f}",
                f"{layer.weights * wb / 8:,.0f}",
                f"{layer.output_elements * ab / 8:,.0f}",
            )
        console.print(table)
