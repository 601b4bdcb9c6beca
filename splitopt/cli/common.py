"""What every command shares: the console, one-line errors and exit codes, JSON output,
solver options from ``--option key=value``, and checks of output paths before any work.

Exit codes: 0 a plan was found (OPTIMAL or FEASIBLE) or the command succeeded;
1 internal solver failure (a bug: please report); 2 bad input (instance, plan, option,
path, unknown solver; also an output file that cannot be written after the work, e.g. a
full disk); 3 an optional package is not installed (a solver, the torch
extra); 4 no plan (INFEASIBLE or NO_SOLUTION_FOUND); 130 Ctrl-C outside a solver run
(during a solver run Ctrl-C stops the solver, and its incumbent is reported as usual).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any, Iterable, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup
from typer.exceptions import TyperException

from splitopt.core.options import check_count
from splitopt.core.errors import (
    InvalidInstance,
    InvalidOption,
    InvalidPlan,
    MissingDependency,
    NotApplicable,
    SolverFailure,
    SplitoptError,
    UnknownSolver,
)

EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_NO_PLAN = 1, 2, 3, 4
#: Ctrl-C outside a solver run (128 + SIGINT, as shells report it)
EXIT_INTERRUPTED = 130
#: optional packages and the extra that installs them (pyproject.toml)
EXTRA_OF = {"torch": "torch", "transformers": "torch", "sklearn": "torch", "hypothesis": "test", "ray": "ray"}

console = Console(soft_wrap=True)


def error_line(text: str) -> None:
    """One line on stderr, never wrapped, whatever the terminal width."""
    sys.stderr.write(" ".join(text.split()) + "\n")


@contextmanager
def errors():
    """Turn package errors into one line on stderr and an exit code; no traceback."""
    try:
        yield
    except (InvalidInstance, InvalidPlan, InvalidOption, UnknownSolver, NotApplicable) as e:
        error_line(f"error: {e}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except MissingDependency as e:
        error_line(f"error: {e}")
        raise typer.Exit(EXIT_UNAVAILABLE) from None
    except SolverFailure as e:
        error_line(f"solver failure (a bug in splitopt): {e}")
        raise typer.Exit(EXIT_FAILURE) from None
    except SplitoptError as e:
        error_line(f"error: {e}")
        raise typer.Exit(EXIT_FAILURE) from None
    except KeyboardInterrupt:
        # outside a solver run (loading, building, evaluating): nothing to report
        error_line("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except RecursionError:
        error_line("error: input nested too deeply to process")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ModuleNotFoundError as e:
        package = (e.name or "").split(".")[0]
        extra = EXTRA_OF.get(package)
        if extra is None:
            raise
        error_line(f"error: {package} is not installed; install the {extra} extra: pip install 'splitopt[{extra}]' "
                   f"(from a checkout: pip install -e '.[{extra}]')")
        raise typer.Exit(EXIT_UNAVAILABLE) from None
    except OSError as e:  # a file the command reads or writes outside the checked paths
        where = f"{e.filename}: " if e.filename else ""
        error_line(f"error: {where}{e.strerror or type(e).__name__}")
        raise typer.Exit(EXIT_BAD_INPUT) from None


def is_usage_error(error: BaseException) -> bool:
    """Whether ``error`` is the command-line parser's usage error (an option value of the
    wrong type, a missing argument, an unknown option or command): typer's exceptions
    with a message and exit status 2, except the help shown for no arguments at all."""
    return (isinstance(error, TyperException) and hasattr(error, "format_message")
            and getattr(error, "exit_code", None) == EXIT_BAD_INPUT and type(error).__name__ != "NoArgsIsHelpError")


@contextmanager
def one_line_usage_errors():
    """Usage errors (:func:`is_usage_error`) as one line on stderr, exit 2."""
    try:
        yield
    except TyperException as e:
        if not is_usage_error(e):
            raise
        error_line(f"error: {e.format_message()}")
        raise typer.Exit(EXIT_BAD_INPUT) from None


class OneLineErrorsGroup(TyperGroup):
    """The command group: usage errors of the group and of every command are one line."""

    def make_context(self, *args: Any, **kwargs: Any):
        with one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with one_line_usage_errors():
            return super().invoke(ctx)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def given_options(**values: Any) -> dict[str, Any]:
    """The options the user gave to a command whose options default to None (not given),
    enums as their values: what a family's options are built from
    (:func:`splitopt.torch.side.build_options`)."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in values.items() if v is not None}


def require_torch(command: str) -> None:
    """MissingDependency (exit 3, one line) unless torch is installed: the torch bridge's
    commands need the extra."""
    if importlib.util.find_spec("torch") is None:
        raise MissingDependency(f"splitopt {command}: needs torch, which is not installed; install the torch extra: "
                                "pip install 'splitopt[torch]' (from a checkout: pip install -e '.[torch]')")


#: write ends of the output FIFOs probed for a reader (see check_output_path)
_PROBED_FIFOS: list[int] = []


def check_solve_options(time_limit: float | None, threads: int, seed: int) -> None:
    """The solve options of a command, each checked as ``SolveOptions`` checks it, the
    message naming the command-line option (``--time-limit``, not ``time_limit``)."""
    from splitopt.core.options import MAX_SEED, MAX_THREADS, check_int, check_time_limit

    check_time_limit(time_limit, "--time-limit")
    check_int(threads, "--threads", 1, MAX_THREADS)
    check_int(seed, "--seed", 0, MAX_SEED)


def check_distinct_outputs(outputs: Iterable[tuple[str, Optional[Path]]]) -> None:
    """Refuse two options of one command that name the same output file (one would
    overwrite the other: a sweep's ``--table`` over its ``--out`` store destroyed the store):
    InvalidOption naming both."""
    seen: dict[str, str] = {}
    for option, path in outputs:
        if path is None:
            continue
        where = os.path.abspath(path)
        if where in seen:
            raise InvalidOption(f"{option} {path}: is also the file of {seen[where]}; one would overwrite the other")
        seen[where] = option


def check_output_path(path: Optional[Path], option: str, suffixes: Iterable[str] | None = None,
                      inputs: Iterable[Path] = ()) -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, a
    missing or unwritable parent directory, (``suffixes``) a suffix the writer does not
    know, or one of the command's ``inputs`` (it would be overwritten). InvalidOption
    naming the option and the path."""
    if path is None:
        return
    for given in inputs:
        if given is not None and given.exists() and path.exists() and os.path.samefile(given, path):
            raise InvalidOption(f"{option} {path}: is the input {given} of this command; writing it would destroy it")
    if suffixes is not None:
        allowed = tuple(suffixes)
        if not path.name.lower().endswith(allowed):
            raise InvalidOption(f"{option} {path}: the file name must end in one of {', '.join(allowed)}")
    if path.exists() and path.is_dir():
        raise InvalidOption(f"{option} {path}: is a directory, not a file")
    if path.is_fifo():  # writing a FIFO waits for a reader: refuse one with none (a pipe to jq is fine)
        try:
            # kept open to the end of the command: closing it would send the reader an end of file
            _PROBED_FIFOS.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            raise InvalidOption(f"{option} {path}: a FIFO that no process reads (writing it would wait "
                                "forever)") from None
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise InvalidOption(f"{option} {path}: the directory {parent} does not exist")
    if not parent.is_dir():
        raise InvalidOption(f"{option} {path}: {parent} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise InvalidOption(f"{option} {path}: the file is not writable")
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidOption(f"{option} {path}: the directory {parent} is not writable")
    if not path.exists():  # the permission bits can say yes where a write fails (/proc, /sys, a full disk)
        try:
            path.open("x").close()
        except OSError as e:
            raise InvalidOption(f"{option} {path}: cannot write the file ({e.strerror or type(e).__name__})") from None
        path.unlink()


@contextmanager
def writing(path: Path, option: str):
    """Around writing an output file (its path checked by :func:`check_output_path` before
    the work): a failure now (disk full, the directory removed meanwhile) is one line
    naming the option and the path, exit 2, not a traceback."""
    try:
        yield
    except OSError as e:
        raise InvalidOption(f"{option} {path}: cannot write the file ({e.strerror or type(e).__name__})") from None


def write_output(path: Path, option: str, text: str) -> None:
    """Write ``text`` to the output file ``path`` (see :func:`writing`)."""
    with writing(path, option):
        path.write_text(text)


def check_output_dir(path: Optional[Path], option: str) -> None:
    """Refuse, before any work, a directory that cannot be created or written."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise InvalidOption(f"{option} {path}: exists and is not a directory")
    probe = path if path.exists() else path.parent if str(path.parent) else Path(".")
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise InvalidOption(f"{option} {path}: {probe} is not a writable directory")


#: the image formats the plots are written in
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def parse_solver_options(items: Optional[list[str]]) -> dict[str, Any]:
    """``["mip_gap=0.01", "presolve=off"]`` -> ``{"mip_gap": 0.01, "presolve": "off"}``:
    values are JSON (numbers, true/false) or else strings. InvalidOption for an item
    without ``=``, an empty name or a name given twice."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise InvalidOption(f"--option {item!r}: must be NAME=VALUE, e.g. --option mip_gap=0.01")
        name, _, raw = item.partition("=")
        name = name.strip()
        if not name:
            raise InvalidOption(f"--option {item!r}: the option name is empty")
        if name in out:
            raise InvalidOption(f"--option {name}: given twice")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidOption(f"--option {name}: must be a finite number, got {raw}")
        out[name] = value
    return out


#: the help of ``--set`` (``splitopt.core.overrides`` has the grammar); rich would read
#: "[...]" as markup, so the brackets are escaped
SET_HELP = ("Change the instance's JSON before it is checked, PATH=VALUE (repeatable, applied in order): dotted keys, "
            "[index], [name] (devices, layers), [source->target] (links); `layers`/`inputs` stand for graph.layers/"
            "graph.inputs; VALUE is JSON if it parses, else a string. E.g. --set 'links[edge->cloud]."
            "bandwidth_bits_per_s=5e6' --set devices[edge].memory_bytes=2e6 --set settings.objective=throughput. "
            "Only existing keys, or keys the schema allows there, can be set; the result is checked like the file."
            ).replace("[", "\\[")


def set_option() -> Any:
    """The ``--set PATH=VALUE`` option (repeatable) of the commands that read an instance;
    parse its values with :func:`parse_set_options`."""
    return typer.Option(None, "--set", metavar="PATH=VALUE", help=SET_HELP)


def parse_set_options(items: Optional[list[str]]) -> tuple[Any, ...]:
    """The ``--set`` values as parsed overrides (``splitopt.core.overrides.Override``),
    before the instance is read; InvalidOption (one line naming ``--set`` and the value)
    for one without ``=``, with a malformed path or a non-finite number. Whether each
    path exists is checked on the instance's data (``splitopt.api.load_instance``)."""
    from splitopt.core.overrides import parse_overrides

    return parse_overrides(items or (), label="--set")


def check_positive_count(value: int, option: str, low: int = 1, high: int = 10**6) -> None:
    """InvalidOption unless ``low <= value <= high`` (:func:`splitopt.core.options.check_count`)."""
    check_count(value, option, low, high)

