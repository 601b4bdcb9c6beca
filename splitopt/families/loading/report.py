"""The loading family's report: one row per child model (blocks, bytes, load and
inference times, the thread that loads it and when), the first response against the
monolithic model, and the broken limits."""

from __future__ import annotations

from splitopt.families.loading.evaluate import LoadingMetrics
from splitopt.families.loading.plan import LoadingPlan
from splitopt.families.loading.settings import LoadingInstance


def report(console, inst: LoadingInstance, plan: LoadingPlan, m: LoadingMetrics, show_layers: bool = True) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    table = Table(title=esc(f"{m.k} child models on {m.threads} threads (Case {m.case}), inference on "
                            f"'{inst.settings.edge}'"))
    for col in ("child", "first block", "blocks", "MB", "thread", "load ms", "inference ms"):
        table.add_column(col, justify="left" if col == "first block" else "right")
    for c in m.children:
        table.add_row(str(c.index), esc(c.first) if show_layers else "", str(c.blocks), f"{c.bytes / 1e6:,.2f}",
                      str(c.thread), f"{c.load_start_ms:.1f}-{c.load_end_ms:.1f}",
                      f"{c.infer_start_ms:.1f}-{c.infer_end_ms:.1f}")
    console.print(table)
    console.print(f"[bold]First response[/bold] {m.first_response_ms:.3f} ms (monolithic {m.monolithic_ms:.3f} ms: "
                  f"{m.speedup:.2f}x)   [bold]Heaviest load[/bold] {m.heaviest_load_ms:.3f} ms   "
                  f"[bold]All loaded[/bold] {m.loads_done_ms:.3f} ms   storage slowdown x{m.slowdown:.3f}")
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
