"""The sweep's results: one JSON object per line (JSONL), appended and flushed as each job
ends, so an interrupted sweep resumes by skipping the keys already stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from splitopt.core.errors import InvalidOption


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records stored in ``path`` (none if it does not exist). A last line cut short
    by a kill is skipped (its job runs again); any other bad line is InvalidOption."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise InvalidOption(f"{path}: line {i + 1} is not a JSON record") from None
        if not isinstance(record, dict) or "key" not in record:
            raise InvalidOption(f"{path}: line {i + 1} is not a sweep record (no 'key')")
        out.append(record)
    return out


class Store:
    """Appends records to a JSONL file; ``done`` holds the keys already there."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.records = read_records(self.path)
        self.done = {r["key"] for r in self.records}
        if self.path.exists():
            text = self.path.read_text()
            if text and not text.endswith("\n"):  # drop a line cut short by a kill
                self.path.write_text(text[: text.rfind("\n") + 1])

    def add(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
        self.records.append(record)
        self.done.add(record["key"])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)
