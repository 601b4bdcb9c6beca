"""Named benchmark suites (``splitopt bench SUITE``): a suite is a name, a description and
a function that yields the instance sources of its jobs, each source an instance file, its
problem and the solvers the suite runs on it by default (``-s`` replaces them).

* ``shipped``: every instance JSON in the repository's ``instances/`` folder (they are not
  packaged with splitopt: the folder is ``--instances-dir``, by default ``./instances``);
* ``peer``: the peer dnn-partitioning files (``throughput-inputs/*/*.json`` and
  ``latency-inputs/*/*.json`` under ``--peer-dir``), problem ``maxload``, the objective
  from the folder;
* ``scale``: generated instances of growing size (``--sizes``, layers), the kinds the
  families add (``Family.scale_cases``: edge/cloud ``split_bits`` instances, and ``chain``
  instances on 8 devices with the latency objective, over random layer DAGs with long
  skips); instance seed ``SCALE_SEED``, so the same sizes give the same files, written to a
  cache folder beside the JSONL store (a job stays a file path, and a file's content is
  part of its key, so a resumed run finds its records).

Each instance's default solvers are its family's (``Family.default_solvers``): its exact
backends (CBC where it is the family's default, CP-SAT, HiGHS) and its baselines; methods
that apply to some instances only (``chain-dp`` on chain-shaped graphs, ``ideal-dp`` on
some max-load graphs, ``partition-search``, ``reference-plans``, ``reference-policies``)
run when named with ``-s``. An instance of a problem no registered family handles is an
error naming the file and the problem, never skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from splitopt.core.errors import InvalidOption, SplitoptError

#: the seed of every generated instance of the scale suite
SCALE_SEED = 0
#: the scale suite's sizes (layers) by default, and the largest one accepted
DEFAULT_SIZES = (100, 300, 1000, 3000, 10000)
MAX_SIZE = 100_000


@dataclass(frozen=True)
class Source:
    """One instance of a suite: the file its jobs read, its family and problem, and the
    solvers the suite runs on it by default."""

    path: Path
    family: str
    problem: str
    solvers: tuple[str, ...]


@dataclass(frozen=True)
class SuiteOptions:
    """What the suites read from the command line: the folders of the shipped and peer
    instances, the scale suite's sizes, and the folder its generated files go to."""

    instances_dir: Path = Path("instances")
    peer_dir: Path = Path("../shared/peer-instances/dnn-partitioning")
    sizes: tuple[int, ...] = DEFAULT_SIZES
    cache_dir: Path = Path("bench-instances")


@dataclass(frozen=True)
class Suite:
    """A named suite: ``sources(options)`` lists its instances (InvalidOption, one line
    naming the option, when a folder it reads is missing); ``options``: the command-line
    options it reads."""

    name: str
    description: str
    sources: Callable[[SuiteOptions], list[Source]]
    options: tuple[str, ...] = field(default=())


def default_solvers() -> dict[str, tuple[str, ...]]:
    """What the suites run by default, for ``bench --list``: per problem (``PROBLEM`` or,
    where the objectives differ, ``PROBLEM/OBJECTIVE``) its family's default solvers, then
    per scale case (``scale PROBLEM``) its solvers."""
    from splitopt.families.registry import families

    out: dict[str, tuple[str, ...]] = {}
    for fam in families():
        for problem in fam.problems:
            lists = {objective: fam.default_solvers(problem, objective) for objective in fam.objectives}
            if len(set(lists.values())) == 1:
                out[problem] = next(iter(lists.values()))
            else:
                out.update({f"{problem}/{objective}": names for objective, names in lists.items()})
    for fam in families():
        for case in fam.scale_cases():
            out[f"scale {case.problem}"] = case.solvers
    return out


def instance_source(path: Path, data: object, where: str) -> Source | None:
    """The source of an instance file's parsed ``data``: splitopt's format, its problem
    and objective from its settings; a format a family imports (the peer files), that
    family's (the objective from the file's folder); None for JSON that is neither (a
    table, a list). InvalidOption naming ``where``, the file and the problem for a problem
    no registered family handles."""
    from splitopt.families.registry import family_for_problem, readers

    if not isinstance(data, dict):
        return None
    if "format" not in data:
        for fam in readers():
            if fam.reads(data):
                inst = fam.read(data, path)
                return Source(path, fam.name, inst.problem, fam.default_solvers(inst.problem, inst.objective))
        return None
    settings = data.get("settings")
    problem = settings.get("problem") if isinstance(settings, dict) else None
    if not isinstance(settings, dict) or not isinstance(problem, str):
        raise InvalidOption(f"{where}: {path.name}: settings.problem is missing (a splitopt instance names its problem)")
    try:
        fam = family_for_problem(problem)
    except SplitoptError as e:
        raise InvalidOption(f"{where}: {path.name}: {e}") from None
    objective = settings.get("objective", "latency")
    return Source(path, fam.name, problem, fam.default_solvers(problem, str(objective)))


def shipped_sources(options: SuiteOptions) -> list[Source]:
    """Every ``*.json`` instance in ``options.instances_dir`` (sorted by name): splitopt's
    format or one a family imports; other JSON (and unreadable files) are not instances."""
    folder = options.instances_dir
    if not folder.is_dir():
        raise InvalidOption(f"--instances-dir {folder}: no such folder (the shipped instances are the repository's "
                            "instances/ folder, not installed with the package: run from a checkout or name it)")
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        source = instance_source(path, data, f"--instances-dir {folder}")
        if source is not None:
            out.append(source)
    if not out:
        raise InvalidOption(f"--instances-dir {folder}: holds no splitopt instance (*.json)")
    return out


def peer_sources(options: SuiteOptions) -> list[Source]:
    """The peer's input files, throughput then latency, each sorted by path (their family:
    the one that imports them; the objective from the folder)."""
    folder = options.peer_dir
    if not folder.is_dir():
        raise InvalidOption(f"--peer-dir {folder}: no such folder (the peer dnn-partitioning repository, holding "
                            "throughput-inputs/ and latency-inputs/)")
    out = []
    for objective in ("throughput", "latency"):
        for path in sorted((folder / f"{objective}-inputs").glob("*/*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                raise InvalidOption(f"--peer-dir {folder}: {path}: not a JSON file") from None
            source = instance_source(path, data, f"--peer-dir {folder}")
            if source is None:
                raise InvalidOption(f"--peer-dir {folder}: {path}: not a format splitopt imports")
            out.append(source)
    if not out:
        raise InvalidOption(f"--peer-dir {folder}: holds no throughput-inputs/*/*.json or latency-inputs/*/*.json")
    return out


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds it already (atomically: a kill leaves no
    half-written instance)."""
    if path.is_file() and path.read_text() == text:
        return
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def scale_sources(options: SuiteOptions) -> list[Source]:
    """The generated instances, by family (registry order) and case, then size, written to
    ``options.cache_dir``."""
    from splitopt.families.registry import families

    try:
        options.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidOption(f"--out: cannot create the instance cache {options.cache_dir} "
                            f"({e.strerror or type(e).__name__})") from None
    out = []
    for fam in families():
        for case in fam.scale_cases():
            for n in options.sizes:
                path = options.cache_dir / f"{case.stem}_n{n}_s{SCALE_SEED}.json"
                _write_if_changed(path, json.dumps(case.make(n, SCALE_SEED), sort_keys=True) + "\n")
                out.append(Source(path, fam.name, case.problem, case.solvers))
    return out


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("shipped", "every instance JSON of the repository's instances/ folder (--instances-dir), each problem's "
          "exact backends and baselines", shipped_sources, ("--instances-dir",)),
    Suite("peer", "the peer dnn-partitioning files (throughput- and latency-inputs under --peer-dir), problem "
          "maxload: CP-SAT, HiGHS and the max-load baselines", peer_sources, ("--peer-dir",)),
    Suite("scale", f"generated instances of --sizes layers (default {', '.join(map(str, DEFAULT_SIZES))}; seed "
          f"{SCALE_SEED}), the kinds the families add (edge/cloud split_bits; chain, 8 devices, DAGs with skips): "
          "exact methods, CP-SAT, HiGHS, baselines, evolutionary search", scale_sources, ("--sizes",)),
)}


def suite(name: str) -> Suite:
    """The suite called ``name``; InvalidOption (one line) for another name."""
    if name not in SUITES:
        raise InvalidOption(f"SUITE {name!r}: unknown suite (suites: {', '.join(SUITES)})")
    return SUITES[name]


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"100,300,1000"`` -> ``(100, 300, 1000)`` (sorted, each once); InvalidOption naming
    ``--sizes`` and the value for anything but integers in [1, MAX_SIZE]."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(not 1 <= n <= MAX_SIZE for n in sizes):
        raise InvalidOption(f"--sizes {text!r}: must be comma-separated layer counts in [1, {MAX_SIZE}], "
                            f"e.g. 100,300,1000")
    return tuple(sorted(set(sizes)))


def solvers_for(sources: list[Source], chosen: list[str] | None) -> list[tuple[Source, tuple[str, ...]]]:
    """Each source with the solvers it runs: the suite's defaults, or ``chosen`` (``-s``)
    less the family methods of other families (a generic backend runs on every source).
    Sources left with no solver are dropped; InvalidOption if none is left at all."""
    if not chosen:
        return [(s, s.solvers) for s in sources]
    from splitopt.backends.registry import ALIASES, BACKENDS, check_backend
    from splitopt.families.registry import family

    for name in chosen:
        check_backend(name, {})
    out = []
    for s in sources:
        methods = {n for m in family(s.family).methods() for n in (m.name, *m.aliases)}
        mine = tuple(dict.fromkeys(n for n in chosen if ALIASES.get(n, n) in BACKENDS or n in methods))
        if mine:
            out.append((s, mine))
    if not out:
        problems = sorted({s.problem for s in sources})
        raise InvalidOption(f"--solver {', '.join(chosen)}: applies to none of this suite's problems "
                            f"({', '.join(problems)})")
    return out
