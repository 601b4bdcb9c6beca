"""Scenario overrides: ``PATH=VALUE`` edits of an instance's JSON data.

A scenario (a slower link, a smaller memory, another objective) need not be a new file:
``splitopt solve FILE --set 'links[edge->cloud].bandwidth_bits_per_s=5e6'`` (and
``splitopt.load_instance(FILE, overrides=[...])`` in the library) edits the parsed JSON
*before* any check, so an edited value is checked exactly like one written in the file
(schema, consistency, ranges, the family's checks) and is refused with the same one-line
message. The functions here are pure: they take and return JSON data and know nothing of
the command line or of the instance model.

Grammar (one override)::

    OVERRIDE := PATH "=" VALUE          split at the first "=" outside brackets
    PATH     := KEY STEP*
    STEP     := "." KEY | "[" SELECTOR "]"
    KEY      := characters other than . [ ] =      (an object key; on a list, an index)
    SELECTOR := INDEX                    a list item by position: 0, 1, ... (no negatives)
              | NAME                     the one list item whose "name" is NAME
              | SOURCE "->" TARGET       the one list item (a link, a peer edge) with
                                         source/target (or sourceId/destId) SOURCE, TARGET
              | '"' TEXT '"' | "'" TEXT "'"   TEXT taken literally: a name that looks
                                         like an index, or a key with dots
      on an object, [TEXT] is the key TEXT (e.g. latency_ms[jetson.nano])

    VALUE    := JSON if it parses as JSON (5e6, 3, true, null, [4, 8], "a string"),
                else the text itself as a string (throughput); NaN and infinities refused

Examples: ``links[edge->cloud].bandwidth_bits_per_s=5e6``, ``devices[edge].memory_bytes=2e6``,
``settings.objective=throughput``, ``graph.layers[3].weights=100`` (``layers`` and
``inputs`` at the top level are short for ``graph.layers`` and ``graph.inputs``),
``settings.bit_widths=[4,8]``, and on a peer dnn-partitioning file ``maxFPGAs=4`` or
``nodes[node3].cpuLatency=1.5``.

Rules: every step but the last must exist. The last key must exist, or be a key the
instance's JSON Schema names at that place (``properties``, ``patternProperties`` or an
``additionalProperties`` schema), e.g. ``settings.error_budget`` where the file has none;
where no schema is given (the peer files) or the schema leaves an object free-form
(``source``, ``settings.mesh``), only existing keys can be set. List items are never
added. Overrides apply in the order given, each to the result of the ones before.

Every defect is an :class:`~splitopt.core.errors.InvalidOption` whose one-line message
starts with the override's label and text (``--set links[a->b].x=1: ...``) and says what
is wrong: no ``=``, a bad path, a step that does not exist (naming it and listing what
does, cut to a few), a selector that matches no item or several, a step into a value
that is not a list or an object, a non-finite number.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from splitopt.core.errors import InvalidOption
from splitopt.core.jsonfile import cut, json_type

#: pairs of keys by which ``[SOURCE->TARGET]`` selects a list item (splitopt links, peer edges)
PAIR_KEYS = (("source", "target"), ("sourceId", "destId"))
#: keys the top level of a splitopt instance forwards to ``graph`` (``layers[3]``)
GRAPH_SHORTHANDS = ("layers", "inputs")
#: most names or keys a message lists
LISTED = 8
#: longest override text quoted in a message
SHOWN_TEXT = 120


@dataclass(frozen=True)
class Step:
    """One step of a path: ``kind`` "key" (``.KEY``, or the first KEY) or "select"
    (``[SELECTOR]``); ``token`` its text; ``quoted`` for a quoted selector (literal)."""

    kind: str
    token: str
    quoted: bool = False

    def shown(self, first: bool = False) -> str:
        """How the step is written in a path."""
        if self.kind == "key":
            return self.token if first else f".{self.token}"
        return f'["{self.token}"]' if self.quoted else f"[{self.token}]"


@dataclass(frozen=True)
class Override:
    """A parsed ``PATH=VALUE``: ``text`` as given, its ``steps`` and JSON ``value``;
    ``label`` names it in messages ("--set" on the command line)."""

    text: str
    steps: tuple[Step, ...]
    value: Any
    label: str = "override"

    def fail(self, why: str) -> InvalidOption:
        """The error for this override: one line, its label and text, then ``why``."""
        return InvalidOption(f"{self.label} {cut(self.text, SHOWN_TEXT)}: {why}")

    def path_to(self, count: int) -> str:
        """The first ``count`` steps of the path, as written."""
        return "".join(step.shown(i == 0) for i, step in enumerate(self.steps[:count])) or "the top level"


def _listing(items: Iterable[str]) -> str:
    """``a, b, c`` cut after :data:`LISTED` items (``..., 72 in all``)."""
    items = [cut(str(x), 40) for x in items]
    if not items:
        return "none"
    if len(items) <= LISTED:
        return ", ".join(items)
    return ", ".join(items[:LISTED]) + f", ... ({len(items)} in all)"


def _split_assignment(text: str, label: str) -> tuple[str, str]:
    """``PATH``, ``VALUE`` of ``PATH=VALUE``: at the first "=" outside brackets."""
    depth = 0
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif depth and ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "=" and not depth:
            return text[:i], text[i + 1:]
    if depth:
        raise InvalidOption(f"{label} {cut(text, SHOWN_TEXT)}: a '[' in the path is never closed")
    raise InvalidOption(f"{label} {cut(text, SHOWN_TEXT)}: must be PATH=VALUE, e.g. {label} "
                        "'links[edge->cloud].bandwidth_bits_per_s=5e6'")


def parse_path(path: str, label: str = "override", text: str | None = None) -> tuple[Step, ...]:
    """The steps of ``path`` (see the module's grammar); InvalidOption naming ``text``
    (the whole override; default ``path``) on an empty path or key, an unclosed or
    stray bracket, or an empty selector."""
    where = f"{label} {cut(text if text is not None else path, SHOWN_TEXT)}"
    if not path.strip():
        raise InvalidOption(f"{where}: the path before '=' is empty")
    steps: list[Step] = []
    i, n = 0, len(path)
    expect_key = True  # at the start and after ".": a KEY must follow
    while i < n:
        ch = path[i]
        if ch == "[":
            close = _closing_bracket(path, i)
            if close < 0:
                raise InvalidOption(f"{where}: '[' at character {i + 1} of the path is never closed")
            if not steps:
                raise InvalidOption(f"{where}: the path must start with a key, e.g. links[0] or settings.objective")
            inner = path[i + 1:close].strip()
            quoted = len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "\"'"
            if quoted:
                inner = inner[1:-1]
            if not inner:
                raise InvalidOption(f"{where}: empty selector '[]' in the path (give an index, a name or "
                                    "source->target)")
            steps.append(Step("select", inner, quoted))
            i = close + 1
            expect_key = False
            if i < n and path[i] not in ".[":
                raise InvalidOption(f"{where}: expected '.' or '[' after ']' at character {i + 1} of the path")
        elif ch == ".":
            if expect_key:
                raise InvalidOption(f"{where}: empty key in the path (two dots, or a dot at the start)")
            expect_key = True
            i += 1
        elif ch == "]":
            raise InvalidOption(f"{where}: ']' at character {i + 1} of the path has no '['")
        else:
            j = i
            while j < n and path[j] not in ".[]":
                j += 1
            key = path[i:j].strip()
            if not key:
                raise InvalidOption(f"{where}: empty key in the path")
            if not expect_key:
                raise InvalidOption(f"{where}: expected '.' before '{cut(key, 40)}' in the path")
            steps.append(Step("key", key))
            expect_key = False
            i = j
    if expect_key:
        raise InvalidOption(f"{where}: the path ends with '.'")
    return tuple(steps)


def _closing_bracket(path: str, start: int) -> int:
    """Index of the "]" closing the "[" at ``start`` (quotes inside respected), else -1."""
    quote = ""
    for j in range(start + 1, len(path)):
        ch = path[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'" and not path[start + 1:j].strip():
            quote = ch
        elif ch == "]":
            return j
    return -1


def parse_value(raw: str) -> Any:
    """The VALUE of an override: JSON where it parses (numbers, true/false/null, lists,
    objects, quoted strings), else ``raw`` itself as a string. ValueError for a
    non-finite number (NaN, Infinity, 1e999)."""
    def refuse(literal: str) -> Any:
        raise _NonFinite(literal)

    try:
        value = json.loads(raw, parse_constant=refuse)
    except _NonFinite:
        raise ValueError(f"{raw.strip()} is not a finite number") from None
    except ValueError:
        return raw.strip()
    if _has_non_finite(value):
        raise ValueError(f"{cut(raw.strip(), 40)} holds a number beyond a double (infinite)")
    return value


class _NonFinite(ValueError):
    """A NaN/Infinity literal met while parsing a value."""


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    return False


def parse_override(text: str | Override, label: str = "override") -> Override:
    """Parse one ``PATH=VALUE`` (an :class:`Override` is returned as it is);
    InvalidOption (one line, ``label`` and ``text`` first) on a defect of its form."""
    if isinstance(text, Override):
        return text
    if not isinstance(text, str):
        raise InvalidOption(f"{label}: must be a string PATH=VALUE, got {json_type(text)} {cut(repr(text), 60)}")
    path, raw = _split_assignment(text, label)
    steps = parse_path(path, label, text)
    try:
        value = parse_value(raw)
    except ValueError as e:
        raise InvalidOption(f"{label} {cut(text, SHOWN_TEXT)}: the value must be a finite number or other JSON: "
                            f"{e}") from None
    return Override(text=text, steps=steps, value=value, label=label)


def parse_overrides(items: Iterable[str | Override] | None, label: str = "override") -> tuple[Override, ...]:
    """Parse every override of ``items`` (None: none); see :func:`parse_override`. A
    single string is refused (a common slip: it is not a list of overrides)."""
    if items is None:
        return ()
    if isinstance(items, (str, bytes)):
        raise InvalidOption(f"{label}: give a list of PATH=VALUE strings, not one string ({cut(repr(items), 60)})")
    return tuple(parse_override(item, label) for item in items)


def apply_overrides(data: Any, overrides: Iterable[str | Override] | None,
                    schema: Mapping[str, Any] | None = None, label: str = "override") -> Any:
    """A copy of JSON ``data`` with every override applied in order (``data`` itself is
    not changed; with no overrides it is returned as it is). ``schema``: the JSON Schema
    of ``data`` (the instance schema), which says which absent keys may be added; None
    allows existing keys only. Strings are parsed with :func:`parse_override` (``label``
    names them in messages). InvalidOption, one line, on any defect."""
    parsed = parse_overrides(overrides, label)
    if not parsed:
        return data
    out = copy.deepcopy(data)
    for override in parsed:
        set_value(out, override, schema)
    return out


def set_value(data: Any, override: Override, schema: Mapping[str, Any] | None = None) -> None:
    """Apply one override to ``data`` in place (see :func:`apply_overrides`)."""
    node: Any = data
    node_schema: Any = schema
    steps = override.steps
    last = len(steps) - 1
    for i, step in enumerate(steps):
        if i == 0 and step.kind == "key" and isinstance(node, dict) and step.token not in node \
                and step.token in GRAPH_SHORTHANDS and isinstance(node.get("graph"), dict) \
                and step.token in node["graph"]:
            node, node_schema = node["graph"], _child_schema(schema, node_schema, "graph")
        if isinstance(node, dict):
            key = step.token
            if key not in node:
                if i == last:
                    if _child_schema(schema, node_schema, key) is None:
                        raise override.fail(_missing_key(override, i, node, schema is not None))
                    node[key] = override.value
                    return
                raise override.fail(_missing_key(override, i, node, False))
            if i == last:
                node[key] = override.value
                return
            node, node_schema = node[key], _child_schema(schema, node_schema, key)
        elif isinstance(node, list):
            if step.kind == "key" and not re.fullmatch(r"[0-9]+", step.token):
                raise override.fail(f"{override.path_to(i)} is a list: select an item with [index], [name] or "
                                    f"[source->target], not '.{cut(step.token, 40)}'")
            index = _select(override, i, node)
            if i == last:
                node[index] = override.value
                return
            node, node_schema = node[index], _child_schema(schema, node_schema, index)
        else:
            at = override.path_to(i)
            what = f"[{step.token}]" if step.kind == "select" else f"'{step.token}'"
            raise override.fail(f"{at} is {_a(json_type(node))}, not a list or an object: it has no {what}")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _missing_key(override: Override, i: int, node: dict, schema_known: bool) -> str:
    """Why the key of step ``i`` cannot be set or followed: it is not there."""
    key = override.steps[i].token
    at = override.path_to(i)
    where = "at the top level" if i == 0 else f"in {at}"
    because = ""
    if i == len(override.steps) - 1:
        because = (" and the schema allows no such key there" if schema_known
                   else "; only existing keys can be set here")
    return f"no key '{cut(key, 40)}' {where}{because} (keys: {_listing(sorted(map(str, node)))})"


def _select(override: Override, i: int, items: list) -> int:
    """The index in ``items`` that step ``i`` selects (see the module's grammar)."""
    step = override.steps[i]
    token = step.token
    at = override.path_to(i)
    if not step.quoted and re.fullmatch(r"-?[0-9]+", token):
        index = int(token)
        if not 0 <= index < len(items):
            span = f"0..{len(items) - 1}" if items else "none: the list is empty"
            raise override.fail(f"index {index} is out of range for {at} ({len(items)} items; indices {span})")
        return index
    if not step.quoted and "->" in token:
        source, _, target = (part.strip() for part in token.partition("->"))
        matches = [j for j, item in enumerate(items) if isinstance(item, dict)
                   and any(a in item and b in item and str(item[a]) == source and str(item[b]) == target
                           for a, b in PAIR_KEYS)]
        what, available = f"'{cut(source, 40)}->{cut(target, 40)}'", _pairs(items)
        kind = "source->target"
    else:
        matches = [j for j, item in enumerate(items) if isinstance(item, dict) and "name" in item
                   and str(item["name"]) == token]
        what, available = f"named '{cut(token, 40)}'", [str(item["name"]) for item in items
                                                          if isinstance(item, dict) and "name" in item]
        kind = "names"
    if len(matches) == 1:
        return matches[0]
    if not matches:
        if not available:
            return _no_selector(override, i, items)
        return _raise(override.fail(f"no item {what} in {at} ({kind}: {_listing(available)})"))
    shown = ", ".join(map(str, matches[:LISTED])) + (", ..." if len(matches) > LISTED else "")
    return _raise(override.fail(f"{len(matches)} items {what} in {at} (indices {shown}); select one by index"))


def _pairs(items: Sequence[Any]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, dict):
            for a, b in PAIR_KEYS:
                if a in item and b in item:
                    out.append(f"{item[a]}->{item[b]}")
                    break
    return out


def _no_selector(override: Override, i: int, items: list) -> int:
    at = override.path_to(i)
    token = override.steps[i].token
    span = f"indices 0..{len(items) - 1}" if items else "it is empty"
    return _raise(override.fail(f"[{cut(token, 40)}]: the items of {at} have no names (nor source and target); "
                                f"select one by index ({span})"))


def _raise(error: Exception) -> Any:
    raise error


# ----- which keys the schema allows --------------------------------------------------------

def _deref(root: Mapping[str, Any] | None, node: Any) -> Any:
    """``node`` with a local ``$ref`` ("#/$defs/x") followed (a few levels at most)."""
    for _ in range(8):
        if not isinstance(node, Mapping) or "$ref" not in node or root is None:
            return node
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return None
        target: Any = root
        for part in ref[2:].split("/"):
            if not isinstance(target, Mapping) or part not in target:
                return None
            target = target[part]
        node = target
    return node


def _branches(root: Mapping[str, Any] | None, node: Any) -> list[Mapping[str, Any]]:
    """``node`` and its ``oneOf``/``anyOf``/``allOf`` alternatives and their ``then``
    parts (a family's settings: ``if`` the problem is the family's), each dereferenced.
    A key any branch names may be added; the checks of the edited instance then refuse
    one its problem does not have."""
    node = _deref(root, node)
    if not isinstance(node, Mapping):
        return []
    out = [node]
    for key in ("oneOf", "anyOf", "allOf"):
        for alt in node.get(key, ()) or ():
            alt = _deref(root, alt)
            if isinstance(alt, Mapping):
                out.append(alt)
                then = _deref(root, alt.get("then"))
                if isinstance(then, Mapping):
                    out.append(then)
    return out


def _child_schema(root: Mapping[str, Any] | None, node: Any, key: str | int) -> Any:
    """The schema of ``key`` (an object key, or a list index) under schema ``node``;
    None where the schema does not name it (or no schema is known)."""
    if root is None or node is None:
        return None
    for branch in _branches(root, node):
        if isinstance(key, int):
            items = branch.get("items")
            if isinstance(items, Mapping):
                return _deref(root, items)
            continue
        props = branch.get("properties")
        if isinstance(props, Mapping) and key in props:
            return _deref(root, props[key])
        for pattern, sub in (branch.get("patternProperties") or {}).items():
            try:
                if re.search(pattern, key):
                    return _deref(root, sub)
            except re.error:
                continue
        extra = branch.get("additionalProperties")
        if isinstance(extra, Mapping):
            return _deref(root, extra)
    return None


__all__ = ["GRAPH_SHORTHANDS", "Override", "PAIR_KEYS", "Step", "apply_overrides", "parse_override",
           "parse_overrides", "parse_path", "parse_value", "set_value"]
