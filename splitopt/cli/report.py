"""Printing results for people (rich text). No computation here: everything shown comes
from the SolveResult and the family's own report of its metrics."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape as esc

from splitopt.core.result import SolveResult
from splitopt.families.registry import family_of


def print_result(console: Console, inst: Any, result: SolveResult, show_layers: bool = True) -> None:
    """Status line, message, and the family's report of the plan."""
    console.print(f"[bold]splitopt[/bold] {esc(inst.name)} | problem {result.problem} | solver {result.backend}",
                  highlight=False)
    unit = family_of(inst).objective_unit(inst)
    obj = "-" if result.objective is None else f"{_number(result.objective)} {unit}"
    bound = "-" if result.bound is None else f"{_number(result.bound)} {unit}"
    gap = "-" if result.gap is None else f"{100 * result.gap:.4g} %"
    color = {"OPTIMAL": "green", "FEASIBLE": "yellow"}.get(result.status.value, "red")
    console.print(
        f"[bold]Status[/bold]   [{color}]{result.status.value}[/{color}]  objective {obj}  bound {bound}  gap {gap}  "
        f"solve {result.solve_s:.3f} s (build {result.build_s:.3f} s)"
    )
    if result.message:
        console.print(f"[bold]Message[/bold]  {esc(result.message)}", highlight=False)
    if result.plan is not None and result.metrics is not None:
        print_metrics(console, inst, result.plan, result.metrics, show_layers)


def _number(x: float) -> str:
    """Four decimals, or four significant digits below 0.01 (a tiny objective is not 0)."""
    return f"{x:.4f}" if x == 0 or abs(x) >= 1e-2 else f"{x:.4g}"


def print_metrics(console: Console, inst: Any, plan: Any, metrics: Any, show_layers: bool = True) -> None:
    """The plan's metrics, as its family shows them."""
    family_of(inst).report(console, inst, plan, metrics, show_layers)
