"""``splitopt dnnp-solve``: solve a peer dnn-partitioning throughput instance exactly.

A plain function with typer parameter declarations; ``splitopt/cli.py`` registers it
with ``app.command("dnnp-solve")(dnnp_solve)``. Errors are one line on stderr with the
exit codes of ``splitopt.cli`` (2 bad input or unknown solver, 1 solver failure, 4 no
placement: INFEASIBLE or NO_SOLUTION_FOUND; 0 OPTIMAL or FEASIBLE).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def dnnp_solve(
    file: Path = typer.Argument(..., help="A peer dnn-partitioning input file (throughput-inputs/*/*.json)."),
    solver: str = typer.Option("cpsat", "--solver", "-s", help="cpsat, milp-highs or milp-cbc."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", "-t", help="Seconds; on reaching it the best placement is returned as FEASIBLE with its gap."),
    threads: int = typer.Option(2, "--threads", help="Solver threads."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the solver."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (the placement in the expert-file format)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the placement here, in the format `splitopt dnnp-eval FILE PLACEMENT` reads."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Stream the solver's own log to stderr."),
) -> None:
    """Minimise the max-load (ms per sample, contiguous variant) of a peer dnn-partitioning FILE exactly."""
    from splitopt.cli import EXIT_NO_PLAN, _errors, _print_json  # imported here: cli.py registers this command
    from splitopt.dnnp import load_dnnp
    from splitopt.dnnp_solve import solve_max_load

    with _errors():
        inst = load_dnnp(file)
        result = solve_max_load(inst, solver=solver, time_limit=time_limit, threads=threads, seed=seed,
                                verbose=verbose)
        if output is not None and result.placement is not None:
            output.write_text(json.dumps(result.placement.to_expert_json(), indent=1) + "\n")
        if as_json:
            _print_json(result.to_dict())
        else:
            _print_result(result, output)
    if not result.status.has_plan:
        raise typer.Exit(EXIT_NO_PLAN)


def _fmt(value: float | None, spec: str = ".6f") -> str:
    return "-" if value is None else format(value, spec)


def _print_result(result, output: Optional[Path]) -> None:
    from splitopt.cli import console

    console.print(f"[bold]splitopt[/bold] dnnp-solve {result.instance} | max-load, contiguous | {result.solver}",
                  highlight=False)
    console.print(f"status     {result.status.value} ({result.message})", highlight=False)
    gap = "-" if result.gap is None else f"{100 * result.gap:.4f} %"
    console.print(f"max-load   {_fmt(result.objective_ms)} ms   bound {_fmt(result.bound_ms)} ms   gap {gap}",
                  highlight=False)
    console.print(f"time       build {result.build_s:.2f} s, solve {result.solve_s:.2f} s", highlight=False)
    if result.placement is not None and result.loads_ms is not None:
        on = result.placement.nodes_on
        for d, load in result.loads_ms.items():
            console.print(f"  {d:<7} {len(on.get(d, ())):>5} nodes  {load:12.6f} ms", highlight=False)
    if output is not None and result.placement is not None:
        console.print(f"placement  written to {output}", highlight=False)
