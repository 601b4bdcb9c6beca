"""A sweep's tables: per instance and solver, the runs, their statuses, and the medians of
objective, gap, wall and CPU seconds (Markdown for people, CSV for tools); a benchmark's
table (``splitopt bench``) adds the family, problem and size, and splits the time into
building and solving."""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

COLUMNS = ("instance", "solver", "runs", "statuses", "best objective", "median objective", "median gap",
           "median wall s", "median CPU s")
#: the benchmark's table (:func:`bench_rows`)
BENCH_COLUMNS = ("family", "problem", "instance", "size", "solver", "runs", "statuses", "best objective",
                 "median objective", "median gap", "median build s", "median solve s", "median wall s",
                 "median CPU s")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (instance, solver), in the records' order of first appearance."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["instance"], r["solver"]), []).append(r)
    rows = []
    for (inst, solver), rs in groups.items():
        objectives = [r["objective"] for r in rs if r.get("objective") is not None]
        statuses = Counter(r.get("status", "?") for r in rs)
        rows.append({
            "instance": Path(inst).name, "solver": solver, "runs": len(rs),
            "statuses": ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
            "best objective": min(objectives) if objectives else None,
            "median objective": _median(objectives),
            "median gap": _median([r["gap"] for r in rs if r.get("gap") is not None]),
            "median wall s": _median([r["wall_s"] for r in rs if r.get("wall_s") is not None]),
            "median CPU s": _median([r["cpu_s"] for r in rs if r.get("cpu_s") is not None]),
        })
    return rows


def bench_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`summary_rows` with the family, problem and size of each instance (from its
    records; "-" where none says, e.g. every run failed to read it) and the medians of
    build and solve seconds (``SolveResult.build_s``, ``solve_s``)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["instance"], r["solver"]), []).append(r)
    rows = summary_rows(records)
    for row, rs in zip(rows, groups.values()):
        known = next((r for r in rs if r.get("family") is not None), {})
        row.update(family=known.get("family"), problem=known.get("problem"), size=known.get("size"),
                   **{"median build s": _median([r["build_s"] for r in rs if r.get("build_s") is not None]),
                      "median solve s": _median([r["solve_s"] for r in rs if r.get("solve_s") is not None])})
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def to_markdown(rows: Sequence[dict[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: "" if r[c] is None else r[c] for c in columns})
    return out.getvalue()
