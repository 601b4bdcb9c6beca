"""The getting-started page, followed as a newcomer would: every ``$ splitopt ...`` command its
text blocks show runs, in the page's order, in an empty folder that holds only the shipped
instances and the page's own ``my_net.py``; each exits as the page shows (2 where it shows an
``error:`` line, 0 otherwise), and the lines of its output that carry no measured time
(``wrote ...``, the cut, the bytes sent, ``OK``, the error) are printed as the page prints
them. The page's model is profiled, solved and run split, so a renamed option, a changed
message or a broken step fails here. Needs the ``torch`` and ``onnx`` extras (the page's
profile, run and export); without them the test is skipped with that reason.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting-started.md"

#: output lines the page shows that hold no measured time: compared as they are
STABLE = re.compile(r"^(wrote |Cut |Sent |OK$|error: |  eyeriss -> tpu: )")


def blocks(page: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``page``: (language, text)."""
    return re.findall(r"```(\w*)\n(.*?)```", page, flags=re.S)


def steps(page: str) -> list[tuple[list[str], list[str]]]:
    """Each ``$ splitopt ...`` command of the page's text blocks with the output lines shown
    after it."""
    out: list[tuple[list[str], list[str]]] = []
    for lang, text in blocks(page):
        if lang != "text":
            continue
        command: list[str] | None = None
        shown: list[str] = []
        for line in text.splitlines():
            if line.startswith("$ splitopt "):
                if command is not None:
                    out.append((command, shown))
                command, shown = shlex.split(line[2:]), []
            elif command is not None:
                shown.append(line)
        if command is not None:
            out.append((command, shown))
    return out


def the_model_file(page: str) -> str:
    """The page's ``my_net.py``: its one Python block that defines ``build``."""
    found = [text for lang, text in blocks(page) if lang == "python" and "def build(" in text]
    assert len(found) == 1, "the page shows one my_net.py"
    return found[0]


def test_the_page_shows_profile_solve_and_run_of_a_user_model():
    verbs = [command[1] for command, _ in steps(PAGE.read_text(encoding="utf-8"))]
    for verb in ("profile", "solve", "run", "export"):
        assert verb in verbs, verb
    assert verbs.index("profile") < verbs.index("run")


def test_a_newcomer_following_the_page_gets_what_it_shows(tmp_path):
    pytest.importorskip("torch", reason="the torch extra is not installed: pip install -e '.[torch]'")
    pytest.importorskip("onnx", reason="the onnx extra is not installed (the page's export): pip install -e '.[onnx]'")
    page = PAGE.read_text(encoding="utf-8")
    (tmp_path / "my_net.py").write_text(the_model_file(page), encoding="utf-8")
    (tmp_path / "instances").symlink_to(ROOT / "instances")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    for command, shown in steps(page):
        done = subprocess.run([sys.executable, "-m", "splitopt", *command[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        said = done.stdout + done.stderr
        expected_rc = 2 if any(line.startswith("error: ") for line in shown) else 0
        assert done.returncode == expected_rc, f"{shlex.join(command)} exited {done.returncode}:\n{said[-3000:]}"
        printed = {line.rstrip() for line in said.splitlines()}
        for line in shown:
            if STABLE.match(line):
                assert line.rstrip() in printed, f"{shlex.join(command)} did not print {line!r}:\n{said[-3000:]}"
