"""What a testbed is asked to emulate: devices (CPU share, threads) and links (rate per
direction, the latency the senders pace), parsed from the command line's short forms and
checked; and the ``tbf`` parameters the kernel shapes a link with. Pure: no system calls.

Short forms (``splitopt testbed up``):

- a device: ``NAME[:cpu=SHARE][:threads=N]``, e.g. ``edge:cpu=0.3:threads=1``; SHARE is the
  fraction of one core the device may use (0.3 = 30 % of one core, 2 = two cores' worth);
  no ``cpu=``: no quota. Several devices: comma-separated.
- a link: ``A-B:RATE[/RATE_BA][:LATENCY]``, e.g. ``edge-server:10mbit`` (both directions),
  ``edge-server:10mbit/2mbit`` (10 Mbit/s A->B, 2 Mbit/s B->A), ``edge-server:10mbit:5ms``.
  RATE: a number of bits/s (``8e6``) or with a unit ``bit``, ``kbit``, ``mbit``, ``gbit``
  (powers of 1000, bits). ``bps``-style units are refused: tc reads them as bytes/s.
  LATENCY (ms, ``5ms`` or ``5``) is recorded for the senders to pace; the kernel here
  does not delay packets (no ``netem``).

``tbf`` parameters of a link direction at ``rate`` bits/s (:func:`tbf_parameters`):

- burst (bucket) = max(4 frames of 1514 bytes, rate/8 x 4 ms) bytes: at least a few
  full-size frames (a bucket smaller than one frame stalls the link) and at least what the
  rate sends in 4 ms (a kernel timer tick at HZ=250), so the rate holds at any tick rate;
- limit (queue) = burst + rate/8 x 50 ms bytes: at most 50 ms of traffic waits in the
  queue before tbf drops, enough for TCP to fill the link without a bufferbloat delay;
- peakrate = 1.02 x rate with a peak bucket (``mtu``) of 2 frames: without it a message
  that fits in the bucket leaves at the veth's speed (8 KB over 20 Mbit/s took 0.06 of
  size/rate), with it every message leaves at about the rate (8, 31 and 150 KB took 0.71,
  0.91 and 0.98 of size/rate at 20 Mbit/s, 0.91, 0.95 and 0.99 at 60 Mbit/s). The peak
  bucket holds 2 frames, not 1, because tc rounds it to timer units, and a frame larger
  than the peak bucket would be dropped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from splitopt.core.errors import InvalidOption

#: the port every device's agent listens at in its namespace (the agent's own default)
DEFAULT_PORT = 7431
#: a device name: letters, digits and underscores (it becomes part of namespace and cgroup names)
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,19}")
#: bits/s accepted for a link direction
MIN_RATE_BPS, MAX_RATE_BPS = 8_000, 10_000_000_000
#: CPU share bounds: the kernel's smallest CFS quota is 1 ms of a 100 ms period
MIN_CPU, MAX_CPU = 0.01, 1024.0
#: threads a device may be given
MAX_THREADS = 1024
#: latency recorded for a link, ms
MAX_LATENCY_MS = 60_000.0
#: the most devices and links of one testbed (each takes a /30 of its /24 block)
MAX_DEVICES, MAX_LINKS = 32, 32
#: an Ethernet frame at MTU 1500, bytes (tbf counts link-layer bytes)
FRAME_BYTES = 1514
#: the bucket holds at least this many full frames
BURST_FRAMES = 4
#: and at least this long at the rate, seconds (a timer tick at HZ=250)
BURST_S = 0.004
#: the queue holds at most this long at the rate beyond the bucket, seconds
QUEUE_S = 0.050
#: the bucket drains at most this many times the rate (tbf peakrate)
PEAK_FACTOR = 1.02
#: the peak bucket (tbf mtu), frames
PEAK_FRAMES = 2

_UNITS = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}


@dataclass(frozen=True)
class DeviceSpec:
    """One emulated device: ``cpu`` the fraction of one core it may use (None: no quota),
    ``threads`` the threads its programs are told to use (OMP/MKL/OpenBLAS environment and
    the command's ``{threads}``; default: the CPU share rounded up, at least 1)."""

    name: str
    cpu: Optional[float] = None
    threads: Optional[int] = None

    def __post_init__(self) -> None:
        check_device_name(self.name)
        if self.cpu is not None:
            check_cpu(self.cpu, f"device {self.name}: cpu")
        if self.threads is not None:
            if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 1 <= self.threads <= MAX_THREADS:
                raise InvalidOption(f"device {self.name}: threads must be an integer in [1, {MAX_THREADS}], "
                                    f"got {self.threads!r}")

    @property
    def thread_count(self) -> int:
        """The threads the device's programs use: as given, else ceil(cpu) (1 without a quota)."""
        if self.threads is not None:
            return self.threads
        return 1 if self.cpu is None else max(1, math.ceil(self.cpu))


@dataclass(frozen=True)
class LinkSpec:
    """A link between devices ``a`` and ``b``: ``rate_ab_bps`` bits/s from a to b,
    ``rate_ba_bps`` from b to a (None: the same as a to b), ``latency_ms`` the one-way
    latency the senders pace (recorded, not emulated by the kernel)."""

    a: str
    b: str
    rate_ab_bps: float
    rate_ba_bps: Optional[float] = None
    latency_ms: float = 0.0

    def __post_init__(self) -> None:
        check_device_name(self.a)
        check_device_name(self.b)
        if self.a == self.b:
            raise InvalidOption(f"link {self.a}-{self.b}: a link joins two different devices")
        check_rate(self.rate_ab_bps, f"link {self.a}-{self.b}: rate")
        if self.rate_ba_bps is not None:
            check_rate(self.rate_ba_bps, f"link {self.a}-{self.b}: rate {self.b}->{self.a}")
        if (isinstance(self.latency_ms, bool) or not isinstance(self.latency_ms, (int, float))
                or not math.isfinite(self.latency_ms) or not 0 <= self.latency_ms <= MAX_LATENCY_MS):
            raise InvalidOption(f"link {self.a}-{self.b}: latency must be a number of ms in [0, {MAX_LATENCY_MS:g}], "
                                f"got {self.latency_ms!r}")

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    def rate_from(self, device: str) -> float:
        """Bits/s of the direction that leaves ``device``."""
        if device == self.a:
            return float(self.rate_ab_bps)
        if device == self.b:
            return float(self.rate_ab_bps if self.rate_ba_bps is None else self.rate_ba_bps)
        raise ValueError(f"{device} is not an end of link {self.name}")

    def other(self, device: str) -> str:
        return self.b if device == self.a else self.a


@dataclass(frozen=True)
class TbfParameters:
    """tbf's settings for one direction: ``rate_bps`` bits/s, ``burst_bytes`` the bucket,
    ``limit_bytes`` the queue (bytes waiting for tokens), ``peakrate_bps`` the fastest the
    bucket drains (bits/s) through a peak bucket of ``peak_bucket_bytes``."""

    rate_bps: int
    burst_bytes: int
    limit_bytes: int
    peakrate_bps: int
    peak_bucket_bytes: int

    def tc_args(self) -> list[str]:
        """The arguments after ``tc qdisc add dev DEV root tbf``."""
        return ["rate", f"{self.rate_bps}bit", "burst", str(self.burst_bytes), "limit", str(self.limit_bytes),
                "peakrate", f"{self.peakrate_bps}bit", "mtu", str(self.peak_bucket_bytes)]

    def as_dict(self) -> dict[str, int]:
        return {"rate_bps": self.rate_bps, "burst_bytes": self.burst_bytes, "limit_bytes": self.limit_bytes,
                "peakrate_bps": self.peakrate_bps, "peak_bucket_bytes": self.peak_bucket_bytes}


def tbf_parameters(rate_bps: float) -> TbfParameters:
    """The tbf bucket, queue and peak rate for ``rate_bps`` (module docstring: burst =
    max(4 x 1514, rate/8 x 4 ms) bytes, limit = burst + rate/8 x 50 ms bytes, peakrate
    1.02 x rate through a 2-frame peak bucket)."""
    rate = int(round(rate_bps))
    burst = max(BURST_FRAMES * FRAME_BYTES, math.ceil(rate / 8 * BURST_S))
    return TbfParameters(rate, burst, burst + math.ceil(rate / 8 * QUEUE_S), math.ceil(rate * PEAK_FACTOR),
                         PEAK_FRAMES * FRAME_BYTES)


def check_device_name(name: Any) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidOption(f"device name {name!r}: must be a letter then up to 19 letters, digits or underscores")


def check_cpu(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not MIN_CPU <= value <= MAX_CPU:
        raise InvalidOption(f"{what} must be a share of one core in [{MIN_CPU:g}, {MAX_CPU:g}], got {value!r}")
    return float(value)


def check_rate(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not MIN_RATE_BPS <= value <= MAX_RATE_BPS:
        raise InvalidOption(f"{what} must be bits/s in [{MIN_RATE_BPS:g}, {MAX_RATE_BPS:g}], got {value!r}")
    return float(value)


def parse_rate(text: str, what: str) -> float:
    """``10mbit``, ``500kbit``, ``8e6`` (bits/s) -> bits/s; one line naming ``what`` and the text otherwise."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or (unit and unit not in _UNITS):
        hint = " (bits: write kbit/mbit/gbit; tc reads bps-style units as bytes/s)" if "bps" in text.lower() else ""
        raise InvalidOption(f"{what}: {text!r} is not a rate such as 10mbit, 500kbit or 8e6 (bits/s){hint}")
    return check_rate(float(m.group(1)) * _UNITS.get(unit, 1), what)


def parse_device(text: str) -> DeviceSpec:
    """``NAME[:cpu=SHARE][:threads=N]`` -> DeviceSpec."""
    name, *fields = text.strip().split(":")
    values: dict[str, Any] = {}
    for field in fields:
        key, sep, value = field.partition("=")
        key = key.strip()
        if not sep or key not in ("cpu", "threads") or key in values:
            raise InvalidOption(f"--devices {text!r}: {field!r} is not cpu=SHARE or threads=N (each at most once)")
        try:
            values[key] = float(value) if key == "cpu" else int(value)
        except ValueError:
            raise InvalidOption(f"--devices {text!r}: {key}={value!r} is not a number") from None
    return DeviceSpec(name.strip(), values.get("cpu"), values.get("threads"))


def parse_devices(text: str) -> list[DeviceSpec]:
    """Comma-separated device forms -> DeviceSpecs (names distinct)."""
    devices = [parse_device(item) for item in text.split(",") if item.strip()]
    if not devices:
        raise InvalidOption(f"--devices {text!r}: give at least one device, e.g. edge:cpu=0.3,cloud:cpu=2")
    return devices


def parse_link(text: str) -> LinkSpec:
    """``A-B:RATE[/RATE_BA][:LATENCY]`` -> LinkSpec."""
    ends, sep, rest = text.strip().partition(":")
    a, dash, b = ends.partition("-")
    if not sep or not dash:
        raise InvalidOption(f"--link {text!r}: expected A-B:RATE such as edge-server:10mbit")
    rate_text, _, latency_text = rest.partition(":")
    ab, slash, ba = rate_text.partition("/")
    where = f"--link {text!r}"
    latency = 0.0
    if latency_text:
        try:
            latency = float(latency_text.strip().removesuffix("ms"))
        except ValueError:
            raise InvalidOption(f"{where}: latency {latency_text!r} is not a number of ms such as 5ms") from None
    return LinkSpec(a.strip(), b.strip(), parse_rate(ab, where), parse_rate(ba, where) if slash else None, latency)


def check_topology(devices: list[DeviceSpec], links: list[LinkSpec]) -> None:
    """Device names distinct, link ends among them, at most one link per pair, within the
    testbed's limits."""
    names = [d.name for d in devices]
    if not devices:
        raise InvalidOption("devices: a testbed needs at least one device")
    if len(devices) > MAX_DEVICES or len(links) > MAX_LINKS:
        raise InvalidOption(f"testbed: at most {MAX_DEVICES} devices and {MAX_LINKS} links, "
                            f"got {len(devices)} and {len(links)}")
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise InvalidOption(f"devices: {n} is named twice")
        seen.add(n)
    pairs: set[frozenset[str]] = set()
    for link in links:
        for end in (link.a, link.b):
            if end not in seen:
                raise InvalidOption(f"link {link.name}: {end} is not a device (devices: {', '.join(names)})")
        pair = frozenset((link.a, link.b))
        if pair in pairs:
            raise InvalidOption(f"link {link.name}: these two devices are already linked")
        pairs.add(pair)
