"""Family logic stays in its family: no module outside ``splitopt/families/`` (and outside
the families' torch side, ``splitopt/torch/``) names a registered family or problem to
choose what to do, or imports a family's module. The generic layers ask the family
(``Family`` hooks, ``splitopt.families.registry``) instead.

The names come from the registry (every family's name and problems), and the scan reads
each module's syntax tree (``ast``), not its text, so that docstrings, comments, messages
and longer strings that merely contain a name ("split_bits" in a help text) are not
findings. A finding is:

* an import of ``splitopt.families.<family>`` in any spelling (``import``, ``from ...
  import``, ``from splitopt.families import <family>``, a relative import, or the module
  path as a string for ``importlib``);
* a string constant that *is* a family or problem name, wherever it stands (a comparison,
  a dict key, a subscript, a default, a tuple of names, a constant): a bare name has no
  other meaning in code than choosing by family. The text parts of an f-string are prose,
  not constants, and are not findings.

A value a user types that happens to equal a family name without choosing family logic (a
table column titled "split", a topology called "chain" for a preset) is written once, as
a named constant or an enum member, on a line that says so with ``# not a family: WHY``;
the scan accepts that line (a reason is required), and the code compares the name, so
the exception is visible where it is made and nowhere else.

Modules that others are converting now are in :data:`ALLOWED` with the count found in
each when the list was written: the count may fall (lower it, down to removing the
entry), never rise; every other module must have none.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from splitopt.families.registry import FAMILIES, families

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "splitopt"
#: the folders the scan leaves out: the families, and their torch side
OWN_FOLDERS = ("splitopt/families/", "splitopt/torch/")
#: what marks a constant that equals a family name but chooses no family logic
NOT_A_FAMILY = "# not a family:"

#: modules allowed to name families, with their counts: none (a module that must, while
#: it is being converted, goes here with its count, which may only fall)
ALLOWED: dict[str, int] = {}


def names() -> set[str]:
    """Every registered family's name and problems."""
    return set(FAMILIES) | {p for fam in families() for p in fam.problems}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The absolute module paths an import statement names (relative ones resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _family_module(path: str, family_names: set[str]) -> bool:
    parts = path.split(".")
    return len(parts) >= 3 and parts[:2] == ["splitopt", "families"] and parts[2] in family_names


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def scan(source: str, module: str = "splitopt.x", is_package: bool = False,
         family_names: set[str] | None = None) -> list[tuple[int, str]]:
    """The findings in ``source`` (a module called ``module``): (line, what) each."""
    family_names = names() if family_names is None else family_names
    tree = ast.parse(source)
    lines = source.splitlines()
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # an f-string's text parts are prose
            skip.update(id(v) for v in node.values if isinstance(v, ast.Constant))
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            hits = [m for m in _imported(node, module, is_package) if _family_module(m, family_names)]
            what = f"imports {hits[0]}" if hits else None
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value in family_names:
                what = f"names {node.value!r}"
            elif _family_module(node.value.split(":")[0], family_names):
                what = f"names module {node.value!r}"
        if what is None:
            continue
        line = lines[node.lineno - 1]
        marker = line.partition(NOT_A_FAMILY)[2].strip()
        if marker:
            continue
        found.append((node.lineno, what))
    return sorted(found)


def findings() -> dict[str, list[tuple[int, str]]]:
    """Per module outside the families' folders (path from the repository root), its
    findings."""
    family_names = names()
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(OWN_FOLDERS):
            continue
        hits = scan(path.read_text(), _module(path), path.name == "__init__.py", family_names)
        if hits:
            out[rel] = hits
    return out


def test_no_module_outside_the_families_chooses_by_family():
    over = {}
    for rel, hits in findings().items():
        allowed = ALLOWED.get(rel, 0)
        if len(hits) > allowed:
            over[rel] = (f"{len(hits)} found, {allowed} allowed", hits)
    assert not over, ("family names or imports outside splitopt/families (ask the family: a Family hook or "
                      f"the registry; see this test's docstring): {over}")


def test_the_allowed_counts_are_today_s_counts_or_lower():
    """The allow-list only shrinks: a count above what is found is stale (lower it)."""
    found = {rel: len(hits) for rel, hits in findings().items()}
    stale = {rel: (n, found.get(rel, 0)) for rel, n in ALLOWED.items() if found.get(rel, 0) < n}
    assert not stale, f"lower these allowed counts (allowed, found): {stale}"


def test_the_scan_finds_what_it_should():
    fam = {"chain", "split", "edge_cloud"}
    code = '''
"""Docstring naming chain and split."""
import splitopt.families.chain.plan
from splitopt.families.edge_cloud import evaluate
from splitopt.families import chain
from ..families.chain import examples
from splitopt.families.registry import family
import importlib
importlib.import_module("splitopt.families.chain.examples")
PROBLEMS = ("split", "mesh")
COLUMN = "split"  # not a family: the column of plan descriptions
def f(inst, problem="split"):
    """split"""
    if inst.problem == "chain":
        return {"split": 1}[inst.problem]
    print(f"chain {inst.name}", "problem chain")  # chain
    return family("edge_cloud")
'''
    hits = scan(code, "splitopt.analysis.x", family_names=fam)
    lines = Counter(line for line, _ in hits)
    assert lines == Counter({3: 1, 4: 1, 5: 1, 6: 1, 9: 1, 10: 1, 12: 1, 14: 1, 15: 1, 17: 1}), hits
    assert scan('COLUMN = "split"  # not a family:\n', family_names=fam), "a marker needs a reason"


def test_every_registered_name_is_scanned():
    assert names() >= set(FAMILIES)
    assert {"split", "split_bits", "maxload"} <= names()
