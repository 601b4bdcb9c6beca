"""What a run over TCP runs (:mod:`splitopt.netrun.runner`): its options, the plan or the
breakpoint table's plans, the devices and the links between them (as the family's torch
side orders them: :meth:`splitopt.torch.layer_graph.LayerGraphSide.tcp_devices`), and the
bandwidth schedule; checked before any process starts (one line per bad input)."""

from __future__ import annotations

import json
import math
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.input_text import check_input_options
from splitopt.core.options import MAX_SAMPLES, check_count, check_number
from splitopt.netrun.frames import DEFAULT_MAX_FRAME_BYTES
from splitopt.netrun.pacing import DEFAULT_CHUNK_BYTES
from splitopt.netrun.service import DEFAULT_TIMEOUT_S

#: the format of the breakpoint tables ``splitopt bandwidth --exact -o`` writes
TABLE_FORMAT = "splitopt-bandwidth-breakpoints/1"
#: default deadline of a whole run (seconds): building the model in every process included
DEFAULT_RUN_TIMEOUT_S = 1800.0


def check_host(host: str) -> None:
    """InvalidOption (one line) unless ``host`` resolves and this host can listen there
    (the device processes bind to it: an address of another machine fails now, not after
    start-up)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        raise InvalidOption(f"--host {host}: not an address or a name this host can resolve") from None
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as e:
        raise InvalidOption(f"--host {host}: this host cannot listen there ({e.strerror or e})") from None


@dataclass(frozen=True)
class TcpOptions:
    """``splitopt run --transport tcp``: the model every device process rebuilds (needed),
    measured samples after ``warmup`` ones, its seed, the address the devices listen on,
    the seconds a peer may stay silent (``timeout``) and the whole run may take
    (``run_timeout``), the largest frame payload, the bytes the pacer writes at a time,
    torch threads per process (None: torch's default), whether to check the outputs
    against the single-process split, a user model's inputs, and, in place of a plan, a
    breakpoint table with the bandwidth schedule that switches its plans."""

    model: str
    samples: int = 5
    warmup: int = 1
    seed: int = 0
    host: str = "127.0.0.1"
    timeout: float = DEFAULT_TIMEOUT_S
    run_timeout: float = DEFAULT_RUN_TIMEOUT_S
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    threads: int | None = None
    check: bool = True
    input_shape: str | None = None
    input_dtype: str | None = None
    input_high: int | None = None
    breakpoints: Path | None = None
    bandwidth_schedule: str | None = None

    def __post_init__(self) -> None:
        check_count(self.samples, "--samples", high=MAX_SAMPLES)
        check_count(self.warmup, "--warmup", low=0, high=MAX_SAMPLES)
        check_input_options(self.seed, self.input_high, self.input_shape, self.input_dtype)
        check_number(self.timeout, "--timeout", 0.0, 86400.0, low_open=True)
        check_number(self.run_timeout, "--run-timeout", 0.0, 7 * 86400.0, low_open=True)
        check_count(self.max_frame_bytes, "--max-frame-bytes", high=2**40)
        check_count(self.chunk_bytes, "--chunk-bytes", high=2**30)
        if self.threads is not None:
            check_count(self.threads, "--threads", high=1024)
        check_host(self.host)

    def schedule(self) -> list[tuple[int, float]]:
        """The parsed ``--bandwidth-schedule`` (:func:`parse_schedule`); InvalidOption
        when it is given without ``--breakpoints``."""
        steps = parse_schedule(self.bandwidth_schedule)
        if steps and self.breakpoints is None:
            raise InvalidOption("--bandwidth-schedule: needs --breakpoints TABLE (the plan for each bandwidth)")
        return steps


@dataclass
class RunSetup:
    """What :func:`splitopt.netrun.runner.run_tcp` runs: the instance, its device order and
    links, the plans (one, or one per interval of a breakpoint table), the plan and
    bandwidth of the table's link at each measured sample."""

    inst: Any
    devices: list[str]
    links: list[Any]  # splitopt Link per pair (devices[m], devices[m+1])
    plans: list[Any]
    plan_dicts: list[dict]
    intervals: list[tuple[float, float]] | None = None
    table_link: int | None = None  # index into links of the link the table varies
    initial_plan: int = 0
    initial_bandwidth: float | None = None
    schedule: list[tuple[int, int, float]] = field(default_factory=list)  # (sample, plan, bits/s)


def tcp_side(inst, verb: str = "run-tcp"):
    """The torch side of ``inst``'s family when its plans run over TCP; NotApplicable
    (one line naming ``verb`` and the problems that do) otherwise."""
    from splitopt.families.registry import family_of
    from splitopt.torch.side import problems_with, torch_side

    side = torch_side(family_of(inst))
    if side is None or side.tcp_options is None:
        raise NotApplicable(f"{verb}: problem '{inst.problem}' is not supported (problems: "
                            f"{', '.join(problems_with(lambda s: s.tcp_options is not None))})")
    return side


def device_links(inst) -> tuple[list[str], list[Any]]:
    """The devices in run order and the link between each consecutive pair, as the
    family's torch side orders them."""
    return tcp_side(inst).tcp_devices(inst)


def parse_schedule(text: str | None, option: str = "--bandwidth-schedule") -> list[tuple[int, float]]:
    """``"0:20e6,5:5e6"`` -> ``[(0, 2e7), (5, 5e6)]``: (measured sample index, bits/s),
    indices strictly increasing. InvalidOption (one line) otherwise."""
    if text is None or not text.strip():
        return []
    out: list[tuple[int, float]] = []
    for item in text.split(","):
        idx, sep, bw = item.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            i, b = int(idx), float(bw)
        except ValueError:
            raise InvalidOption(f"{option}: '{item.strip()}' is not SAMPLE:BITS_PER_S (e.g. 0:20e6,5:5e6)") from None
        if i < 0 or not (math.isfinite(b) and b > 0):
            raise InvalidOption(f"{option}: '{item.strip()}': the sample index must be >= 0 and the bandwidth a "
                                "positive number of bits/s")
        if out and i <= out[-1][0]:
            raise InvalidOption(f"{option}: sample indices must increase, got {out[-1][0]} then {i}")
        out.append((i, b))
    return out


def read_table(inst, path: Path) -> dict:
    """The JSON of a breakpoint table for ``inst``; InvalidOption (one line) for a file
    that is not one, or one of another instance."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidOption(f"--breakpoints {path}: cannot read a JSON table ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or data.get("format") != TABLE_FORMAT:
        raise InvalidOption(f"--breakpoints {path}: format is not '{TABLE_FORMAT}' (written by "
                            "`splitopt bandwidth INSTANCE --exact -o TABLE`)")
    if data.get("instance") != inst.name:
        raise InvalidOption(f"--breakpoints {path}: the table is for instance '{data.get('instance')}', "
                            f"not '{inst.name}'")
    if not isinstance(data.get("intervals"), list) or not data["intervals"]:
        raise InvalidOption(f"--breakpoints {path}: the table has no intervals ({data.get('message') or 'empty'})")
    return data


def prepare(inst, plan_dict: dict | None = None, table: dict | None = None,
            schedule: Sequence[tuple[int, float]] = (), samples: int = 1) -> RunSetup:
    """Check and collect what a run needs (see :class:`RunSetup`): exactly one of
    ``plan_dict`` and ``table``; ``schedule`` needs the table, its indices must be below
    ``samples`` and its bandwidths inside the table's range."""
    from splitopt.api import plan_from_dict

    devices, links = device_links(inst)
    if (plan_dict is None) == (table is None):
        raise InvalidOption("run-tcp: give a PLAN or --breakpoints TABLE (one of them)")
    if table is None:
        if schedule:
            raise InvalidOption("--bandwidth-schedule: needs --breakpoints TABLE (the plan for each bandwidth)")
        assert plan_dict is not None  # exactly one of plan_dict and table (checked above)
        plan = plan_from_dict(inst, plan_dict)
        return RunSetup(inst, devices, links, [plan], [plan_dict])
    src, dst = table["link"]["source"], table["link"]["target"]
    pairs = [(l.source, l.target) for l in links]
    if (src, dst) not in pairs:
        raise InvalidOption(f"--breakpoints: the table's link {src}->{dst} is not a link of the run ({pairs})")
    k = pairs.index((src, dst))
    plan_dicts = [iv["plan"] for iv in table["intervals"]]
    plans = [plan_from_dict(inst, d, where=f"--breakpoints intervals[{i}].plan") for i, d in enumerate(plan_dicts)]
    intervals = [(float(iv["bandwidth_from"]), float(iv["bandwidth_to"])) for iv in table["intervals"]]
    low, high = intervals[0][0], intervals[-1][1]

    def lookup(bw: float, where: str) -> int:
        if not low <= bw <= high:
            raise InvalidOption(f"{where}: bandwidth {bw:g} bits/s is outside the table's range [{low:g}, {high:g}]")
        for i in reversed(range(len(intervals))):
            if bw >= intervals[i][0]:
                return i
        return 0

    for i, _ in schedule:
        if i >= samples:
            raise InvalidOption(f"--bandwidth-schedule: sample index {i} is not below --samples {samples}")
    first = schedule[0][1] if schedule and schedule[0][0] == 0 else links[k].bandwidth_bits_per_s
    where = "--bandwidth-schedule" if schedule and schedule[0][0] == 0 else f"link {src}->{dst} of the instance"
    initial = lookup(first, where)
    steps = [(i, lookup(b, "--bandwidth-schedule"), b) for i, b in schedule]
    return RunSetup(inst, devices, links, plans, plan_dicts, intervals, k, initial, first, steps)
