"""The sweep's results: one JSON object per line (JSONL), appended and flushed as each job
ends, so an interrupted sweep resumes by skipping the keys already stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from splitopt.core.errors import InvalidOption
from splitopt.core.jsonfile import cut


#: the fields every record has, and their JSON types (what a sweep's records are)
RECORD_FIELDS = {"key": str, "instance": str, "solver": str, "seed": int, "status": str}


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records stored in ``path`` (none if it does not exist). A last line cut short
    by a kill is skipped (its job runs again); any other line that is not a record (bad
    JSON, not an object, a field of :data:`RECORD_FIELDS` missing or of another type: a
    file that is not a sweep's store) is InvalidOption naming the line."""
    if not path.exists():
        return []
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise InvalidOption(f"{path}: not a sweep store (not UTF-8 text: byte {e.start})") from None
    except OSError as e:
        raise InvalidOption(f"{path}: cannot read the store ({e.strerror or type(e).__name__})") from None
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if i == last:
                break
            raise InvalidOption(f"{path}: line {i + 1} is not a JSON record") from None
        if not isinstance(record, dict):
            raise InvalidOption(f"{path}: line {i + 1} is not a sweep record (a JSON object)")
        for name, kind in RECORD_FIELDS.items():
            value = record.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise InvalidOption(f"{path}: line {i + 1} is not a sweep record ('{name}' must be a JSON "
                                    f"{'string' if kind is str else 'integer'}, got {cut(repr(value))})")
        out.append(record)
    return out


class Store:
    """Appends records to a JSONL file; ``done`` holds the keys already there."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.records = read_records(self.path)
        self.done = {r["key"] for r in self.records}
        if self.path.exists():  # drop a last line cut short by a kill (newline or not) before appending
            text = self.path.read_text()
            stored = sum(1 for line in text.splitlines() if line.strip())
            if stored != len(self.records) or (text and not text.endswith("\n")):
                self.path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in self.records))

    def add(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
        self.records.append(record)
        self.done.add(record["key"])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)
