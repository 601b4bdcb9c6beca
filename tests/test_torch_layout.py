"""The torch bridge's layout says what its import graph does: shared code at
``splitopt/torch/`` top level, each family's torch side in the subpackage named like the
family's folder in ``splitopt/families/``; shared code never imports a family's side (it
asks the instance's family, ``splitopt.torch.side``); a family's side imports shared
code and its own family only. The command line and the shared code find a family's side
through the registry and never branch on a family's or a problem's name. Every side
imports without torch (the command line checks options against it first)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from splitopt.families.base import Family
from splitopt.families.registry import FAMILIES, family, problem_families

ROOT = Path(__file__).resolve().parent.parent
TORCH = ROOT / "splitopt" / "torch"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (at the top or inside functions), absolute names."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def side_packages() -> dict[str, Path]:
    """Family name -> the folder of its torch side (those that have one)."""
    return {name: TORCH / name for name in FAMILIES if (TORCH / name).is_dir()}


def test_every_family_with_a_torch_side_names_it_and_its_folder_is_the_familys():
    sides = side_packages()
    for name in FAMILIES:
        path = family(name).torch_side
        if path is None:
            assert name not in sides, f"splitopt/torch/{name}/ exists but family '{name}' names no torch side"
            continue
        module = path.split(":")[0]
        assert module.startswith(f"splitopt.torch.{name}."), (name, path)
        from splitopt.torch.side import torch_side

        side = torch_side(family(name))
        assert side.family == name
    assert set(sides) <= set(FAMILIES)
    # the torch folder holds shared modules and the families' subpackages, nothing else
    others = [p.name for p in TORCH.iterdir() if p.is_dir() and p.name != "__pycache__" and p.name not in sides]
    assert others == [], others


def test_shared_torch_code_never_imports_a_familys_side_or_a_family():
    family_modules = {f"splitopt.torch.{name}" for name in side_packages()} | {f"splitopt.families.{n}" for n in FAMILIES}
    for path in sorted(TORCH.glob("*.py")):
        bad = sorted(m for m in imported_modules(path) for f in family_modules if m == f or m.startswith(f + "."))
        assert bad == [], (path.name, bad)


def test_a_familys_side_imports_shared_code_and_its_own_family_only():
    sides = side_packages()
    for name, folder in sides.items():
        others = ({f"splitopt.torch.{n}" for n in sides if n != name}
                  | {f"splitopt.families.{n}" for n in FAMILIES if n != name})
        for path in sorted(folder.glob("*.py")):
            bad = sorted(m for m in imported_modules(path) for f in others if m == f or m.startswith(f + "."))
            assert bad == [], (f"{name}/{path.name}", bad)


#: the problem and family names (from the registry)
def names() -> set[str]:
    return set(FAMILIES) | set(problem_families())


#: where the command line and the shared code must not name a family to choose what to do
GUARDED = (sorted((ROOT / "splitopt" / "torch").glob("*.py"))
           + sorted((ROOT / "splitopt" / "netrun").glob("*.py"))
           + sorted((ROOT / "splitopt" / "onnx").glob("*.py"))
           + [ROOT / "splitopt" / "core" / "presets.py"]
           + [ROOT / "splitopt" / "cli" / f for f in ("run.py", "profile.py", "export.py", "netrun.py", "loading.py",
                                                       "separable.py", "former.py", "model_options.py")])
#: string literals equal to a family's or a problem's name that are not a choice of family
#: logic, and why: (file, literal) -> reason
ALLOWED = {
    ("capture.py", "split"): "an aten op's name (torch.split), fused as a view",
    ("export_manifest.py", "mesh"): "a value of the export manifest's format: the kind of a split run by stages",
    ("profile.py", "chain"): "a value of --topology the user types (a test checks it is the registry's)",
    ("profile.py", "mesh"): "a value of --topology the user types (a test checks it is the registry's)",
}


def family_literals(path: Path) -> list[tuple[int, str]]:
    """(line, literal) of every string constant equal to a family's or a problem's name,
    and every import of a family's package (``splitopt.families.NAME``) or of its torch
    side (``splitopt.torch.NAME``)."""
    packages = [f"splitopt.families.{n}" for n in FAMILIES] + [f"splitopt.torch.{n}" for n in FAMILIES]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names():
            found.append((node.lineno, node.value))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for m in imported_modules_of(node):
                if any(m == p or m.startswith(p + ".") for p in packages):
                    found.append((node.lineno, m))
    return found


def imported_modules_of(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module] if node.module and node.level == 0 else []


@pytest.mark.parametrize("path", GUARDED, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_command_line_and_shared_code_name_no_family(path):
    found = [(line, value) for line, value in family_literals(path) if (path.name, value) not in ALLOWED]
    assert found == [], found


def test_the_topologies_of_profile_are_the_registered_families():
    from splitopt.cli.profile import Topology
    from splitopt.families.topologies import topology_names

    assert [t.value for t in Topology] == topology_names()


def test_every_family_has_the_torch_and_preset_hooks():
    from splitopt.families.base import PROTOCOL_MEMBERS

    for name in ("torch_side", "topology", "topology_links", "topology_settings", "complete_profiled",
                 "host_as_edge"):
        assert name in PROTOCOL_MEMBERS
        assert hasattr(Family, name)


def test_every_side_imports_without_torch():
    program = ("import sys\nfor n in ('torch', 'transformers', 'sklearn'):\n    sys.modules[n] = None\n"
               "from splitopt.torch.side import sides\nimport splitopt.torch.profile_model, splitopt.netrun.setup\n"
               "print(','.join(type(s).__name__ for s in sides()))\n"
               "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'sklearn')"
               " and sys.modules[m] is not None)))\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    built, loaded = proc.stdout.splitlines()[:2] if proc.stdout.count("\n") >= 2 else (proc.stdout.strip(), "")
    assert built.split(",") == [type(s).__name__ for s in _sides()]
    assert loaded == ""


def _sides():
    from splitopt.torch.side import sides

    return sides()
