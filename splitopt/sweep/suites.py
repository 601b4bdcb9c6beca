"""Named benchmark suites (``splitopt bench SUITE``): a suite is a name, a description and
a function that yields the instance sources of its jobs, each source an instance file, its
problem and the solvers the suite runs on it by default (``-s`` replaces them).

* ``shipped``: every instance JSON in the repository's ``instances/`` folder (they are not
  packaged with splitopt: the folder is ``--instances-dir``, by default ``./instances``);
* ``peer``: the peer dnn-partitioning files (``throughput-inputs/*/*.json`` and
  ``latency-inputs/*/*.json`` under ``--peer-dir``), problem ``maxload``, the objective
  from the folder;
* ``scale``: generated instances of growing size (``--sizes``, layers): edge/cloud
  ``split_bits`` (``random_instance_data``, the generator behind
  ``splitopt.testing.generators.random_instance``) and ``chain`` instances on 8 devices,
  latency objective, over random layer DAGs with long skips (``random_chain_data``, behind
  ``random_chain_instance``); instance seed ``SCALE_SEED``, so the same sizes give the same
  files, written to a cache folder beside the JSONL store (a job stays a file path, and a
  file's content is part of its key, so a resumed run finds its records). The max-load
  generator (``random_maxload_data``) draws small files of its own size, so max-load is not
  in this suite.

Each problem's default solvers (``DEFAULT_SOLVERS``) are its exact backends (CBC where it
is the family's default, CP-SAT, HiGHS) and its baselines; methods that apply to some
instances only (``chain-dp`` on chain-shaped graphs, ``ideal-dp`` on some max-load graphs,
``partition-search``, ``reference-plans``, ``reference-policies``) run when named with
``-s``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from splitopt.core.errors import InvalidOption

#: the seed of every generated instance of the scale suite
SCALE_SEED = 0
#: the scale suite's sizes (layers) by default, and the largest one accepted
DEFAULT_SIZES = (100, 300, 1000, 3000, 10000)
MAX_SIZE = 100_000
#: devices of the scale suite's chain instances
SCALE_CHAIN_DEVICES = 8

#: each problem's default solvers: exact backends first, then baselines
DEFAULT_SOLVERS: dict[str, tuple[str, ...]] = {
    "split": ("milp-cbc", "cpsat", "milp-highs", "neurosurgeon", "qdmp", "cloud-only", "edge-only"),
    "split_bits": ("milp-cbc", "cpsat", "milp-highs", "auto-split", "u8", "cloud-only", "edge-only"),
    "chain": ("cpsat", "milp-highs", "segments-dp", "chain-scan", "best-single-device"),
    "mesh": ("cpsat", "milp-highs", "heft", "best-single-device"),
    "multiview": ("cpsat", "milp-highs", "all-on-aggregator", "all-on-sensor", "common-split"),
    "loading": ("cpsat", "milp-highs", "count-search", "monolithic", "equal-count", "equal-bytes"),
    "separable": ("cpsat", "milp-highs", "ring-allreduce", "no-communication", "all-intensive", "random-sampling"),
    # the peer files: intervals and group-moves are max-load (throughput) methods
    "maxload/throughput": ("cpsat", "milp-highs", "intervals", "group-moves", "all-on-cpu"),
    "maxload/latency": ("cpsat", "milp-highs", "all-on-cpu"),
}

#: the scale suite's solvers: the exact backends that scale, the exact chain DP, the
#: baselines, and the evolutionary search (its anytime curve: the objective-vs-time plot)
SCALE_SOLVERS: dict[str, tuple[str, ...]] = {
    "split_bits": ("cpsat", "milp-highs", "auto-split", "cloud-only", "evolutionary"),
    "chain": ("chain-cut", "cpsat", "milp-highs", "segments-dp", "chain-scan", "evolutionary"),
}


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


def _family_of_problem(problem: str) -> str:
    from splitopt.families.registry import problem_families

    return problem_families().get(problem, "?")


def shipped_sources(options: SuiteOptions) -> list[Source]:
    """Every ``*.json`` splitopt instance in ``options.instances_dir`` (sorted by name)."""
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
        settings = data.get("settings") if isinstance(data, dict) else None
        problem = settings.get("problem") if isinstance(settings, dict) else None
        if not isinstance(problem, str) or problem not in DEFAULT_SOLVERS:
            continue
        out.append(Source(path, _family_of_problem(problem), problem, DEFAULT_SOLVERS[problem]))
    if not out:
        raise InvalidOption(f"--instances-dir {folder}: holds no splitopt instance (*.json)")
    return out


def peer_sources(options: SuiteOptions) -> list[Source]:
    """The peer's input files, throughput then latency, each sorted by path."""
    folder = options.peer_dir
    if not folder.is_dir():
        raise InvalidOption(f"--peer-dir {folder}: no such folder (the peer dnn-partitioning repository, holding "
                            "throughput-inputs/ and latency-inputs/)")
    out = []
    for objective in ("throughput", "latency"):
        for path in sorted((folder / f"{objective}-inputs").glob("*/*.json")):
            out.append(Source(path, "maxload", "maxload", DEFAULT_SOLVERS[f"maxload/{objective}"]))
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
    """The generated instances, by family then size, written to ``options.cache_dir``."""
    from splitopt.families.chain.examples import random_chain_data
    from splitopt.families.edge_cloud.examples import random_instance_data

    generators: list[tuple[str, str, str, Callable[[int], dict]]] = [
        ("edge_cloud", "split_bits", "edge_cloud_split_bits",
         lambda n: random_instance_data(SCALE_SEED, n, problem="split_bits", edge_required=False)),
        ("chain", "chain", f"chain{SCALE_CHAIN_DEVICES}_latency",
         lambda n: random_chain_data(SCALE_SEED, n, SCALE_CHAIN_DEVICES, "latency")),
    ]
    try:
        options.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidOption(f"--out: cannot create the instance cache {options.cache_dir} "
                            f"({e.strerror or type(e).__name__})") from None
    out = []
    for family, problem, stem, make in generators:
        for n in options.sizes:
            path = options.cache_dir / f"{stem}_n{n}_s{SCALE_SEED}.json"
            _write_if_changed(path, json.dumps(make(n), sort_keys=True) + "\n")
            out.append(Source(path, family, problem, SCALE_SOLVERS[problem]))
    return out


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("shipped", "every instance JSON of the repository's instances/ folder (--instances-dir), each problem's "
          "exact backends and baselines", shipped_sources, ("--instances-dir",)),
    Suite("peer", "the peer dnn-partitioning files (throughput- and latency-inputs under --peer-dir), problem "
          "maxload: CP-SAT, HiGHS and the max-load baselines", peer_sources, ("--peer-dir",)),
    Suite("scale", f"generated edge/cloud split_bits and chain instances (8 devices, DAGs with skips) of --sizes layers (default "
          f"{', '.join(map(str, DEFAULT_SIZES))}; seed {SCALE_SEED}): chain-cut, CP-SAT, HiGHS, baselines, "
          "evolutionary search", scale_sources, ("--sizes",)),
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
        methods = set() if s.family == "?" else {n for m in family(s.family).methods() for n in (m.name, *m.aliases)}
        mine = tuple(dict.fromkeys(n for n in chosen if ALIASES.get(n, n) in BACKENDS or n in methods))
        if mine:
            out.append((s, mine))
    if not out:
        problems = sorted({s.problem for s in sources})
        raise InvalidOption(f"--solver {', '.join(chosen)}: applies to none of this suite's problems "
                            f"({', '.join(problems)})")
    return out
