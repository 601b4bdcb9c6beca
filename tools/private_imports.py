"""List uses of another module's private names (a leading underscore) in a package.

usage: python tools/private_imports.py [--package splitopt] [PATH ...]

Scans every ``.py`` file under each PATH (default: the package directory) and reports

* ``from pkg.mod import _name`` (also relative imports) where ``pkg.mod`` is not the
  importing module itself;
* ``import pkg.mod._name`` (a private module; also ``from pkg.mod import _name``);
* ``alias._name`` where ``alias`` is bound in the file to another module of the package
  (``import pkg.mod as alias``, ``from pkg import mod``), and ``pkg.mod._name``
  spelled out in full.

Dunder names (``__version__``) are public; a module's own private names are not
reported. One line per use, ``file:line:column: module._name``; the last line is
``private uses: N``; the exit status is 1 when N > 0.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, package_dir: Path) -> str:
    """Dotted module name of ``path`` inside ``package_dir`` (a file outside it, such as a
    test, gets its file stem)."""
    try:
        rel = path.resolve().relative_to(package_dir.resolve().parent)
    except ValueError:
        return path.stem
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = current.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a name, else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return ".".join(reversed(names))


def scan_file(path: Path, package: str, package_dir: Path, modules: set[str]) -> list[tuple[int, int, str]]:
    """``(line, column, "module._name")`` for every use in ``path`` of another module's
    private name."""
    current = module_name(path, package_dir)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, int, str]] = []
    aliases: dict[str, str] = {}  # local name -> module of the package it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != package:
                    continue
                if any(_private(p) for p in a.name.split(".")[1:]):
                    found.append((node.lineno, node.col_offset, a.name))
                if a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(current, is_package, node)
            if source.split(".")[0] != package:
                continue
            for a in node.names:
                full = f"{source}.{a.name}"
                if full in modules:  # a submodule: later attribute uses are checked
                    aliases[a.asname or a.name] = full
                if _private(a.name) and source != current:
                    found.append((node.lineno, node.col_offset, full))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = _dotted(node.value)
            if base is None:
                continue
            head, _, rest = base.partition(".")
            target = aliases.get(head, head if head == package else None)
            if target is None:
                continue
            target = f"{target}.{rest}" if rest else target
            if target in modules and target != current:
                found.append((node.lineno, node.col_offset, f"{target}.{node.attr}"))
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--package", default="splitopt")
    args = parser.parse_args(argv)
    package_dir = Path(args.package)
    modules = {module_name(f, package_dir) for f in package_dir.rglob("*.py")}
    total = 0
    for root in args.paths or [package_dir]:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for f in files:
            for line, column, name in scan_file(f, args.package, package_dir, modules):
                print(f"{f}:{line}:{column}: {name}")
                total += 1
    print(f"private uses: {total}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
