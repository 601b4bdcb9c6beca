"""Generate the site's pages that come from the code and the repository (run by the
mkdocs-gen-files plugin at every `mkdocs build`, never by hand):

* ``reference/api/``: one page per public module of the package, found by walking
  ``splitopt/`` (a moved or renamed module needs no edit here), rendered from its
  docstrings by mkdocstrings, which reads the source statically (modules that need torch,
  onnx or ray render without them);
* ``reference/cli.md``: every command of the ``splitopt`` command line, its usage,
  arguments and options, read from the typer application itself;
* ``formulations/``: the mathematical reference, the repository's ``formulations/*.md``
  as they are (so their relative links keep working);
* ``benchmarks/results/``: the committed benchmark tables and plots;
* ``guide/shipped-instances.md``: ``instances/README.md``;
* ``examples/``: the gallery, each script of ``examples/`` with its docstring and source.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "splitopt"
sys.path.insert(0, str(ROOT))  # this checkout's package, whatever else is installed


def write(path: str, text: str) -> None:
    with mkdocs_gen_files.open(path, "w") as f:
        f.write(text)


def copy_binary(source: Path, path: str) -> None:
    with mkdocs_gen_files.open(path, "wb") as f:
        f.write(source.read_bytes())


def first_heading(text: str, default: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return default


# --- API reference -------------------------------------------------------------------

def public_modules() -> list[tuple[str, ...]]:
    """Every module and package of the package whose dotted name has no part starting
    with an underscore (``__init__`` stands for its package), in path order."""
    found = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1] == "__main__":
            continue
        if any(p.startswith("_") for p in parts):
            continue
        if not (path.parent / "__init__.py").exists():
            continue  # a script beside the package, not importable as a module
        found.append(parts)
    return found


def api_reference() -> None:
    nav = mkdocs_gen_files.Nav()
    for parts in public_modules():
        name = ".".join(parts)
        is_package = (ROOT.joinpath(*parts) / "__init__.py").exists()
        doc = Path(*parts, "index.md") if is_package else Path(*parts).with_suffix(".md")
        nav[parts] = doc.as_posix()
        write(f"reference/api/{doc.as_posix()}", f"::: {name}\n")
    write("reference/api/SUMMARY.md", "".join(nav.build_literate_nav()))


# --- CLI reference -------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\*_\[\]<>|#])")


def escape(text: str) -> str:
    """``text`` as Markdown that shows it literally, keeping its `code spans`."""
    pieces = text.split("`")
    if len(pieces) % 2 == 0:  # an unpaired backtick: escape everything
        return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("`", "\\`")
    return "`".join(p if i % 2 else _MARKDOWN_SPECIAL.sub(r"\\\1", p) for i, p in enumerate(pieces))


def paragraphs(text: str) -> str:
    """A command's help as Markdown paragraphs (click's help wraps lines inside a paragraph)."""
    blocks = [" ".join(line.strip() for line in block.splitlines()) for block in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(escape(b) for b in blocks if b)


def is_option(param) -> bool:
    # by duck type: typer ships its own copy of click, whose classes are not click's
    return getattr(param, "param_type_name", "") == "option"


def is_argument(param) -> bool:
    return getattr(param, "param_type_name", "") == "argument"


def type_text(param) -> str:
    if is_option(param) and param.is_flag:
        return "flag"
    choices = getattr(param.type, "choices", None)
    if choices:
        return "|".join(str(getattr(c, "value", c)) for c in choices)
    return param.type.name.upper()


def default_text(param) -> str | None:
    default = param.default
    if default is None or (is_option(param) and param.is_flag and not default):
        return None
    if callable(default) or default == () or default == []:
        return None
    if hasattr(default, "value"):  # an Enum choice
        default = default.value
    return repr(default) if isinstance(default, str) else str(default)


def usage(name: str, command) -> str:
    pieces = [f"splitopt {name}"]
    if any(is_option(p) and not p.hidden for p in command.params):
        pieces.append("[OPTIONS]")
    for p in command.params:
        if is_argument(p):
            metavar = p.name.upper() + ("..." if p.nargs == -1 else "")
            pieces.append(metavar if p.required else f"[{metavar}]")
    return " ".join(pieces)


def command_module(command) -> str | None:
    """The module that defines the command's function (its help may point to its docstring)."""
    callback = inspect.unwrap(command.callback) if command.callback is not None else None
    module = getattr(callback, "__module__", None)
    return module if module and module.startswith(PACKAGE + ".") else None


def command_section(name: str, command) -> str:
    lines = [f"## `splitopt {name}`", ""]
    if command.hidden:
        lines += ["*Not listed by `splitopt --help`: an alias kept so that existing command lines work.*", ""]
    lines += ["```text", usage(name, command), "```", "", paragraphs(command.help or ""), ""]
    module = command_module(command)
    if module is not None:
        lines += [f"Defined in [`{module}`][{module}].", ""]
    arguments = [p for p in command.params if is_argument(p)]
    options = [p for p in command.params if is_option(p) and not p.hidden]
    if arguments:
        lines += ["**Arguments**", ""]
        for p in arguments:
            extra = "" if p.required else ", optional"
            text = escape(" ".join((getattr(p, "help", None) or "").split()))
            lines.append(f"- `{p.name.upper()}{'...' if p.nargs == -1 else ''}` ({type_text(p)}{extra}): {text}")
        lines.append("")
    if options:
        lines += ["**Options**", ""]
        for p in options:
            names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            facts = [type_text(p)] + ([f"default {escape(d)}"] if (d := default_text(p)) is not None else [])
            if p.multiple:
                facts.append("repeatable")
            if p.required:
                facts.append("required")
            lines.append(f"- {names} ({', '.join(facts)}): {escape(' '.join((p.help or '').split()))}")
        lines.append("")
    for sub, subcommand in getattr(command, "commands", {}).items():  # a group (`splitopt testbed`): its commands
        lines += [command_section(f"{name} {sub}", subcommand), ""]
    return "\n".join(lines)


def cli_reference() -> None:
    import typer

    from splitopt.cli.app import app

    group = typer.main.get_command(app)
    names = list(group.commands)  # in the order the application defines them
    shown = [n for n in names if not group.commands[n].hidden]
    hidden = [n for n in names if group.commands[n].hidden]
    summary = {n: paragraphs((group.commands[n].help or "").split("\n\n")[0]).replace("\n", " ") for n in shown}
    head = [
        "# CLI reference",
        "",
        "Generated from the command line itself at every build (`splitopt COMMAND --help` prints the same).",
        "",
        paragraphs(group.help or ""),
        "",
        "| command | what it does |",
        "|---|---|",
        *(f"| [`{n}`](#splitopt-{n}) | {summary[n]} |" for n in shown),
        "",
        "Exit codes: 0 a plan (or the command's result), 1 an internal solver failure or a failed check "
        "(`run`, `export`, `run-tcp`, `run-loading`, `run-separable`), 2 bad input (one line naming the field "
        "and value), 3 an optional package missing (the line names the extra to install), 4 no plan "
        "(INFEASIBLE names the limit that cannot be met), 130 Ctrl-C outside a solver run.",
        "",
    ]
    body = [command_section(n, group.commands[n]) for n in shown + hidden]
    write("reference/cli.md", "\n".join(head) + "\n" + "\n".join(body))


# --- instance schema -----------------------------------------------------------------

def schema_type(node: dict, defs: dict) -> tuple[str, dict]:
    """A schema node's type in words and the node with its ``$ref`` resolved."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        target = defs[name]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        kind, resolved = schema_type(merged, defs)
        return kind, resolved
    if "const" in node:
        return f"`{json.dumps(node['const'])}`", node
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"]), node
    kinds = node.get("type")
    if isinstance(kinds, list):
        kind = " or ".join(kinds)
    elif kinds is not None:
        kind = kinds
    elif "oneOf" in node or "anyOf" in node:
        kind = " or ".join(schema_type(n, defs)[0] for n in node.get("oneOf", node.get("anyOf", [])))
    else:
        kind = "any"
    if kind == "array" and isinstance(node.get("items"), dict):
        kind = f"array of {schema_type(node['items'], defs)[0]}"
    return kind, node


def schema_range(node: dict) -> str:
    parts = []
    if "minimum" in node or "maximum" in node:
        parts.append(f"[{node.get('minimum', '-inf')}, {node.get('maximum', 'inf')}]")
    if "exclusiveMinimum" in node:
        parts.append(f"> {node['exclusiveMinimum']}")
    if "minItems" in node or "maxItems" in node:
        parts.append(f"{node.get('minItems', 0)} to {node.get('maxItems', 'any')} items")
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    return "; ".join(parts)


def schema_rows(node: dict, defs: dict, prefix: str, depth: int = 0) -> list[str]:
    rows = []
    required = set(node.get("required", []))
    for name, child in node.get("properties", {}).items():
        kind, resolved = schema_type(child, defs)
        path = f"{prefix}.{name}" if prefix else name
        text = " ".join((resolved.get("description") or child.get("description") or "").split())
        kind = escape(kind) if "`" not in kind else kind
        if name in required:
            kind += ", required"
        rows.append(f"| `{path}` | {kind} | {escape(schema_range(resolved))} | {escape(text)} |")
        item = resolved.get("items") if resolved.get("type") == "array" else None
        if isinstance(item, dict):
            _, item = schema_type(item, defs)
        if depth < 4:
            if "properties" in resolved:
                rows += schema_rows(resolved, defs, path, depth + 1)
            elif isinstance(item, dict) and "properties" in item:
                rows += schema_rows(item, defs, path + "[]", depth + 1)
    return rows


def schema_reference() -> None:
    from splitopt.api import instance_schema

    schema = instance_schema()
    defs = schema.get("$defs", {})
    lines = [
        "---", "hide:", "  - toc", "---", "",  # the table needs the page's width
        "# Instance schema",
        "",
        "Generated at every build from the schema splitopt checks instances against "
        "(`splitopt schema` prints it as JSON). A path `a.b[]` is a field of each item of the "
        "array `a.b`. Ranges are inclusive; see [Instances](../guide/instances.md) for the "
        "format, overrides and why each range holds.",
        "",
        escape(" ".join((schema.get("description") or "").split())),
        "",
        "| field | type | range | meaning |",
        "|---|---|---|---|",
        *schema_rows(schema, defs, ""),
        "",
    ]
    write("reference/schema.md", "\n".join(lines))


# --- files brought in from the repository ----------------------------------------------

def formulations() -> None:
    summary = []
    for path in sorted((ROOT / "formulations").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        write(f"formulations/{path.name}", text)
        summary.append(f"* [{first_heading(text, path.stem)}]({path.name})\n")
    write("formulations/SUMMARY.md", "".join(summary))


def benchmark_results() -> None:
    results = ROOT / "benchmarks" / "results"
    summary = []
    for path in sorted(results.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        write(f"benchmarks/results/{path.name}", text)
        summary.append(f"* [{first_heading(text, path.stem)}]({path.name})\n")
    plots = ["# Plots", "", "The plots the benchmark scripts write, as committed.", ""]
    for path in sorted(results.glob("*.png")):
        copy_binary(path, f"benchmarks/results/{path.name}")
        plots += [f"## {path.stem.replace('_', ' ')}", "", f"![{path.stem}]({path.name})", ""]
    write("benchmarks/results/plots.md", "\n".join(plots))
    summary.append("* [Plots](plots.md)\n")
    write("benchmarks/results/SUMMARY.md", "".join(summary))


def shipped_instances() -> None:
    write("guide/shipped-instances.md", (ROOT / "instances" / "README.md").read_text(encoding="utf-8"))


def examples() -> None:
    scripts = sorted((ROOT / "examples").glob("*.py"))
    index = ["# Examples", "",
             "Short scripts that use splitopt as a library. Each runs as it is from the repository root "
             "(`python examples/NAME.py`) and is run by the test suite (`tests/test_examples.py`).", "",
             "| example | what it shows |", "|---|---|"]
    summary = ["* [Overview](index.md)\n"]
    for path in scripts:
        source = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(source)) or ""
        title, _, rest = doc.partition("\n")
        index.append(f"| [`{path.name}`]({path.stem}.md) | {escape(title.strip())} |")
        summary.append(f"* [{path.stem.replace('_', ' ')}]({path.stem}.md)\n")
        page = [f"# `{path.name}`", "", escape(title.strip()), "", rest.strip(), "",
                f"Run it from the repository root: `python examples/{path.name}`", "",
                "```python", source.rstrip(), "```", ""]
        write(f"examples/{path.stem}.md", "\n".join(page))
    write("examples/index.md", "\n".join(index) + "\n")
    write("examples/SUMMARY.md", "".join(summary))


api_reference()
cli_reference()
schema_reference()
formulations()
benchmark_results()
shipped_instances()
examples()
