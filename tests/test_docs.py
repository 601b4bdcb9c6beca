"""The documentation: the site builds with MkDocs in strict mode (warnings are errors), from
the pages in ``docs/`` and what ``docs/gen_pages.py`` generates from the code; a dead link
or a reference to a function that does not exist fails the build; every command, every
public module and every example has its page; the README is short and its two commands
are what CI runs; no page cites issue numbers.

Needs the ``docs`` extra (the README's install command includes it); without it the build
tests are skipped with that reason.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S = 600

#: a project issue or work-step number ("issue 13", "issue #13", "#13", "stop 4"); upstream
#: projects' bug numbers are cited with the project's name before them ("or-tools #5293")
UPSTREAM = r"(?<!or-tools )(?<!or-tools issue )(?<!highs )(?<!cpython )(?<!cpython issue )"
ISSUE_NUMBER = re.compile(UPSTREAM + r"(?:\b(?:issues?|stop)\s+#?\d+\b|(?<![\w/&.-])#\d+\b)", re.IGNORECASE)
#: words of development history, which only the changelog and the benchmark records keep
HISTORY = re.compile(r"\b(previous run|last session|this session|what moved since|the issue's)\b", re.IGNORECASE)


def mkdocs_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], cwd=root, env=mkdocs_env(), capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)


def text_of(page: Path) -> str:
    """A built page's visible text (tags dropped, entities decoded)."""
    raw = page.read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)\b.*?</\1>", " ", raw, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", raw)))


def built_site(out: Path) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed")
    done = build(ROOT, out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    return out


def test_the_site_builds_in_strict_mode_with_every_page(tmp_path):
    """One build (a few seconds of the suite), then what it must hold."""
    site = built_site(tmp_path / "site")
    for page in ("index.html", "getting-started/index.html", "guide/backends/index.html",
                 "reference/cli/index.html", "reference/schema/index.html", "examples/index.html",
                 "benchmarks/results/plots/index.html"):
        assert (site / page).is_file(), page
    check_cli_reference(site)
    check_api_reference(site)
    check_brought_in_pages(site)
    check_no_issue_numbers(site)


def check_cli_reference(site: Path) -> None:
    """Every command, and every option it lists in --help, has its place in the CLI reference."""
    import typer

    from splitopt.cli.app import app

    text = text_of(site / "reference" / "cli" / "index.html")
    commands = typer.main.get_command(app).commands
    assert len(commands) >= 10
    for name, command in commands.items():
        assert f"splitopt {name}" in text, name
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and not getattr(param, "hidden", False):
                    assert opt in text, f"{name} {opt}"


def check_api_reference(site: Path) -> None:
    """Every public module of the package has its API page, found without a hand-kept list."""
    for path in (ROOT / "splitopt").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts, page = parts[:-1], Path(*parts[:-1], "index.html")
        else:
            page = Path(*parts, "index.html")
        if any(p.startswith("_") for p in parts):
            continue
        built = site / "reference" / "api" / page
        assert built.is_file(), f"no API page for {'.'.join(parts)}"
        assert ".".join(parts) in text_of(built)


def check_brought_in_pages(site: Path) -> None:
    """Each example (with its source), formulation, benchmark result and plot is in the site."""
    for script in (ROOT / "examples").glob("*.py"):
        page = site / "examples" / script.stem / "index.html"
        assert page.is_file(), script.name
        assert "splitopt" in text_of(page) and "import" in text_of(page)
    for md in (ROOT / "formulations").glob("*.md"):
        assert (site / "formulations" / md.stem / "index.html").is_file(), md.name
    for result in (ROOT / "benchmarks" / "results").iterdir():
        if result.suffix == ".md":
            assert (site / "benchmarks" / "results" / result.stem / "index.html").is_file(), result.name
        elif result.suffix == ".png":
            assert (site / "benchmarks" / "results" / result.name).is_file(), result.name


def check_no_issue_numbers(site: Path) -> None:
    found = []
    for page in site.rglob("*.html"):
        for match in ISSUE_NUMBER.finditer(text_of(page)):
            found.append(f"{page.relative_to(site)}: {match.group(0)!r}")
    assert not found, "issue numbers in the documentation:\n" + "\n".join(found[:20])


def test_the_written_pages_and_readme_tell_no_history():
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "formulations").glob("*.md")]
    found = []
    for page in pages:
        if page.name == "changelog.md":
            continue
        text = page.read_text(encoding="utf-8")
        for pattern in (ISSUE_NUMBER, HISTORY):
            for match in pattern.finditer(text):
                found.append(f"{page.relative_to(ROOT)}: {match.group(0)!r}")
    assert not found, "\n".join(found)


def test_a_dead_link_or_a_missing_function_fails_the_build(tmp_path):
    """The strict build is what catches a broken page: a copy of the site's sources with one
    page linking to a page that does not exist and naming a function that does not exist
    (as after a rename) must not build, and the output must say which."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed")
    copy = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "cache")
    for name in ("docs", "splitopt", "formulations", "examples", "benchmarks/results"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    (copy / "instances").mkdir()
    shutil.copy(ROOT / "instances" / "README.md", copy / "instances" / "README.md")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    library = copy / "docs" / "guide" / "library.md"
    library.write_text(library.read_text(encoding="utf-8")
                       + "\nSee [the old page](no-such-page.md) and "
                         "[`solve_instance`][splitopt.api.solve_instance].\n", encoding="utf-8")
    done = build(copy, tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-4000:]
    assert "no-such-page.md" in output, output[-4000:]
    assert "splitopt.api.solve_instance" in output, output[-4000:]


#: a command line as the pages show one: in a code span, or a line of a code block ("$ " optional)
CODE_SPAN_COMMAND = re.compile(r"`(splitopt [a-z][^`]*)`")
OUTPUT_HEADER = re.compile(r"^splitopt \S+ \| ")  # the first line that `solve` prints


def command_lines(text: str) -> list[str]:
    """The ``splitopt VERB ...`` command lines of a Markdown page: code spans, and the lines of
    fenced or indented code blocks (output lines such as ``splitopt NAME | problem ...`` left out)."""
    found = CODE_SPAN_COMMAND.findall(text)
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            body = line.strip()
            body = body[2:] if body.startswith("$ ") else body
            if body.startswith("splitopt ") and not OUTPUT_HEADER.match(body):
                found.append(body)
    return found


def test_every_command_line_in_the_pages_names_a_real_command_and_options():
    """The pages show command lines as they are: each verb is a command of the CLI and each
    option one that command takes (the CLI reference is generated; the guides are written)."""
    import typer

    from splitopt.cli.app import app

    commands = typer.main.get_command(app).commands
    known = {name: {o for p in c.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
             | {"--help"} for name, c in commands.items()}
    groups = {name: c.commands for name, c in commands.items() if hasattr(c, "commands")}  # `splitopt testbed up`
    for name, subs in groups.items():
        for sub, c in subs.items():
            known[f"{name} {sub}"] = {o for p in c.params for o in [*getattr(p, "opts", []),
                                                                   *getattr(p, "secondary_opts", [])]} | {"--help"}
    wrong, seen = [], 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for line in command_lines(page.read_text(encoding="utf-8")):
            seen += 1
            line = line.split(" # ")[0]
            verb = line.split()[1]
            if verb.startswith("-"):
                continue  # `splitopt --help`
            if verb in groups and len(line.split()) > 2 and line.split()[2] in groups[verb]:
                verb = f"{verb} {line.split()[2]}"
            if verb not in known:
                wrong.append(f"{page.relative_to(ROOT)}: no command {verb!r}: {line}")
                continue
            for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line):
                if option not in known[verb]:
                    wrong.append(f"{page.relative_to(ROOT)}: splitopt {verb} has no option {option}: {line}")
    assert seen >= 30, seen
    assert not wrong, "\n".join(wrong)


def readme_commands() -> list[str]:
    """The README's two commands: the indented lines under its heading "Two commands"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ") and line.strip()]


def test_the_readme_is_short_and_ci_runs_its_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    commands = readme_commands()
    assert len(commands) == 2, commands
    install, tests = commands
    assert "splitopt solve instances/resnet50_eyeriss.json" in install
    assert "docs" in install.split("[", 1)[1].split("]", 1)[0], "the install command must bring the docs extra"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert install in ci and tests in ci, "the README's two commands must be what .ci/run runs"
    assert "mkdocs build --strict" in readme
