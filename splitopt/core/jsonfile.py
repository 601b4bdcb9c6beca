"""Reading JSON files as untrusted input: every defect is one line naming the file.

Instances, plans and the peer formats are all read here, so that a file that is not
UTF-8, not JSON, or nested beyond what the parser can walk gives the same kind of
message (the caller's error class: InvalidInstance or InvalidPlan) instead of a
traceback. A UTF-8 byte-order mark is tolerated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: deepest nesting of arrays/objects accepted; the formats need fewer than 10 levels,
#: and a deeper document is refused before the parser's recursion limit is reached
MAX_DEPTH = 64


def nesting_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets of JSON ``text`` nest deeper than ``limit`` (strings skipped)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def parse_json_text(text: str, where: str, error: type[Exception]) -> Any:
    """Parse ``text``; raise ``error`` with one line naming ``where`` on any defect."""
    if nesting_depth_exceeds(text):
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (RecursionError, ValueError) as e:  # ValueError: e.g. an integer literal too long to convert
        raise error(f"{where}: not parseable as JSON ({str(e).splitlines()[0][:120]})") from None


def read_json(path: str | Path, error: type[Exception]) -> Any:
    """Read and parse the JSON file ``path``; raise ``error`` (an exception class taking
    one message) naming the file and the defect: unreadable, not UTF-8, malformed, too
    deeply nested."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read file ({e.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (invalid byte 0x{raw[e.start]:02x} at offset {e.start})") from None
    return parse_json_text(text, str(path), error)


def looks_like_json_object_with(path: str | Path, keys: set[str]) -> bool:
    """Whether ``path`` holds a JSON object with all of ``keys`` at the top level (False
    if it cannot be read or parsed): how importers recognise a format."""
    try:
        data = read_json(path, ValueError)
    except ValueError:
        return False
    return isinstance(data, dict) and keys <= set(data)
