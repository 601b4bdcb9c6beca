"""Reading JSON files as untrusted input: every defect is one line naming the file.

Instances, plans and the peer formats are all read here, so that a file that is not
UTF-8 (UTF-16 and UTF-32 are named as such), not JSON, nested beyond what the parser can
walk, a directory or empty gives the same kind of message (the caller's error class:
InvalidInstance or InvalidPlan) instead of a traceback. A UTF-8 byte-order mark is
tolerated. Beyond what ``json.loads`` refuses, a key given twice in one object is
refused (JSON parsers disagree on which one wins, so a silent choice could read another
document than the author meant), and so is an integer literal of more than
``MAX_INT_DIGITS`` digits (beyond a double; Python's own limit is 4300 digits). The literals
``NaN``/``Infinity`` and numbers beyond a double (``1e400`` reads as infinity) are
parsed, so that the format's own checks refuse them naming the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: deepest nesting of arrays/objects accepted; the formats need fewer than 10 levels,
#: and a deeper document is refused before the parser's recursion limit is reached
MAX_DEPTH = 64
#: longest integer literal accepted: every such integer converts to a finite double (a
#: longer one exceeds every range the formats allow, which are checked after parsing)
MAX_INT_DIGITS = 308
#: longest text of a field name or value quoted in a message
SHOWN_CHARS = 60


class _Refused(ValueError):
    """A defect found by the parser hooks (a duplicate key, an overlong integer)."""


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in ((dict, "object"), (list, "array"), (str, "string"), ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` (a field name, a path) on one line, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """A parsed JSON value for a one-line message (its Python repr: strings quoted), cut
    to ``limit`` characters."""
    return cut(repr(value), limit)


def byte_count(n: float) -> str:
    """A byte count for a message, with thousands separators: whole where it is whole,
    else to 3 decimals (so that a need of 1.5 B does not read "2 B" beside a limit of
    "2 B"; sizes at odd bit-widths are fractional bytes)."""
    if n == round(n):
        return f"{n:,.0f}"
    return f"{n:,.3f}".rstrip("0").rstrip(".")


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


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"key {shown(key)} given twice in one object")
        out[key] = value
    return out


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"integer literal of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def parse_json_text(text: str, where: str, error: type[Exception]) -> Any:
    """Parse ``text``; raise ``error`` with one line naming ``where`` on any defect."""
    if not text.strip():
        raise error(f"{where}: empty file (expected a JSON object)")
    if nesting_depth_exceeds(text):
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=_object, parse_int=_int)
    except _Refused as e:
        raise error(f"{where}: {e}") from None
    except json.JSONDecodeError as e:
        raise error(f"{where}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (RecursionError, ValueError) as e:
        raise error(f"{where}: not parseable as JSON ({cut(str(e), 120)})") from None


def check_path_argument(path: Any, error: type[Exception], what: str = "the file path") -> None:
    """``error`` (one line) unless ``path`` is a ``str`` or a path-like object: a library
    caller passing None or a number gets this, not ``TypeError`` from ``pathlib``."""
    if not isinstance(path, (str, os.PathLike)):
        raise error(f"{what} must be a str or a path, got {type(path).__name__} {cut(repr(path))}")


def read_json(path: str | Path, error: type[Exception]) -> Any:
    """Read and parse the JSON file ``path``; raise ``error`` (an exception class taking
    one message) naming the file and the defect: unreadable, not UTF-8, malformed, too
    deeply nested (see the module docstring); ``path`` not a path (None, a number)."""
    check_path_argument(path, error)
    path = Path(path)
    if path.is_dir():
        raise error(f"{path}: is a directory, not a JSON file")
    if path.exists() and not path.is_file():  # a FIFO would block, a device never end
        raise error(f"{path}: is not a regular file (a FIFO, device or socket); give a JSON file")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read file ({e.strerror or type(e).__name__})") from None
    encoding = json.detect_encoding(raw)  # UTF-16/32 show in the first bytes (BOM or zero bytes)
    if not encoding.startswith("utf-8"):
        raise error(f"{path}: the file is {encoding.upper()} text; save it as UTF-8")
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
