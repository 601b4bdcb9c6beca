"""tools/private_imports.py: no module of splitopt (nor a test, benchmark or instance
script) uses another module's private names; the checker finds each kind of use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "private_imports.py"


def check(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_the_project_uses_no_private_names_across_modules():
    proc = check("splitopt", "tests", "benchmarks", "instances", "tools")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().splitlines() == ["private uses: 0"]


def test_the_checker_finds_every_kind_of_use(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.sub.a import _y\n")           # 1: a package re-exporting
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "_private_mod.py").write_text("")
    (pkg / "sub" / "a.py").write_text("_x = 1\n_y = 2\nprint(_x)\n")          # its own name: fine
    (pkg / "sub" / "b.py").write_text(
        "from pkg.sub.a import _x\n"                  # 2: from-import of a private name
        "from .a import _x as y\n"                    # 3: relative
        "import pkg.sub.a as mod\n"
        "from pkg.sub import a\n"
        "import pkg.sub.a\n"
        "print(mod._x, a._x, pkg.sub.a._x)\n"         # 4, 5, 6: attribute uses
        "print(a.__name__, a.public)\n"               # dunder and public: fine
        "import pkg.sub._private_mod\n"               # 7: a private module
        "from pkg.sub import _private_mod\n"          # 8
    )
    proc = check("--package", "pkg", "pkg", cwd=tmp_path)
    assert proc.returncode == 1
    found = proc.stdout.strip().splitlines()
    assert found[-1] == "private uses: 8", found
    assert sum(line.endswith(" pkg.sub.a._x") for line in found) == 5
    assert sum(line.endswith(" pkg.sub._private_mod") for line in found) == 2
    assert found[0] == "pkg/__init__.py:1:0: pkg.sub.a._y", found
