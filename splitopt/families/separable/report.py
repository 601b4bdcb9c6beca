"""The separable family's report: one row per transmission step (blocks, who sends to whom,
level, dtype, bytes), then latency, bytes against the ring all-reduce reference, and the
broken limits."""

from __future__ import annotations

from splitopt.families.separable.data import data
from splitopt.families.separable.evaluate import SeparableMetrics
from splitopt.families.separable.plan import SeparablePlan, choice_of_permutation
from splitopt.families.separable.settings import SeparableInstance


def report(console, inst: SeparableInstance, plan: SeparablePlan, m: SeparableMetrics, show_layers: bool = True) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    d = data(inst)
    if plan.ring:
        console.print(f"Ring all-reduce of every block's features over {d.g} devices (the unseparated model)")
    else:
        table = Table(title=f"{d.steps} transmission steps over {d.g} devices (alpha = {d.alpha})")
        for col in ("step", "blocks", "send_to", "choice", "senders", "level", "dtype", "bytes"):
            table.add_column(col, justify="left" if col in ("blocks", "send_to", "dtype") else "right")
        for s in m.steps:
            table.add_row(str(s.index), esc(f"{s.blocks[0]}..{s.blocks[1]}") if show_layers else "",
                          str(list(s.send_to)), str(choice_of_permutation(s.send_to)),
                          str(sum(1 for g, h in enumerate(s.send_to) if g != h)), f"{s.level} ({s.percent:g} %)",
                          s.dtype, f"{s.bytes:,}")
        console.print(table)
    acc = "-" if m.accuracy is None else f"{m.accuracy:.4f}"
    console.print(f"[bold]Latency[/bold] {m.latency_ms:.3f} ms (one device {m.single_device_ms:.3f} ms: "
                  f"{m.speedup:.2f}x)   [bold]Bytes[/bold] {m.total_bytes:,.0f} ({100 * m.ratio_to_ring:.2f} % of ring "
                  f"all-reduce)   intensive steps {m.intensive_steps}, mixing {'yes' if m.mixing else 'no'}, "
                  f"accuracy {acc}")
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
