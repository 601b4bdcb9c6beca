"""The chain family's report: a per-device table, the sums of Eq. 1, the schedule and the
runs of consecutive layers per device."""

from __future__ import annotations

from splitopt.core.plan import Plan
from splitopt.families.chain.evaluate import ChainMetrics
from splitopt.families.chain.settings import ChainInstance


def report(console, inst: ChainInstance, plan: Plan, m: ChainMetrics, show_layers: bool = True) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    table = Table(title=esc(f"Chain {' -> '.join(inst.settings.chain)}"))
    for col in ("device", "layers", "compute ms", "send ms", "stage ms", "sent B", "memory MB", "limit MB"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for d in m.devices:
        table.add_row(esc(d.device), str(d.layers), f"{d.compute_ms:.3f}", f"{d.send_ms:.3f}", f"{d.stage_ms:.3f}",
                      f"{d.sent_bytes:,.0f}", f"{d.memory_bytes / 1e6:,.3f}", f"{d.memory_limit / 1e6:,.3f}")
    console.print(table)
    console.print(f"[bold]Latency[/bold]  {m.latency_ms:.3f} ms (sum of stages, Eq. 1)   "
                  f"[bold]Bottleneck[/bold] {m.bottleneck_ms:.3f} ms on '{esc(m.bottleneck_device)}' "
                  f"({1000.0 / m.bottleneck_ms if m.bottleneck_ms > 0 else float('inf'):.2f} samples/s pipelined)")
    console.print("[bold]Schedule[/bold] " + "; ".join(
        f"{esc(t.resource)} {t.start_ms:.3f}-{t.end_ms:.3f} ms" for t in m.schedule))
    if show_layers:
        runs: list[tuple[str, list[str]]] = []
        for layer in inst.layers:
            dev = plan.device[layer.name]
            if runs and runs[-1][0] == dev:
                runs[-1][1].append(layer.name)
            else:
                runs.append((dev, [layer.name]))
        console.print("[bold]Layers[/bold]   " + " | ".join(
            f"{esc(dev)}: {esc(names[0])}" + (f" .. {esc(names[-1])} ({len(names)})" if len(names) > 1 else "") for dev, names in runs))
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
