"""The testbed's CPU shares: one cgroup per device with a CFS quota, on cgroup v1 (the
``cpu`` controller's own hierarchy, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) or the
cgroup v2 unified hierarchy (``cpu.max``, "QUOTA PERIOD"), whichever this host has.

A share ``s`` of one core is a quota of ``s x 100 ms`` per 100 ms period (or ``s x P`` per
period ``P``, :attr:`CpuHierarchy.period_us`): the device's processes together run at
most that long per period, on any core (2.0 = two cores' worth). Once a period's quota
is spent they wait for the next one, so work shorter than a period may run at full speed
(a period whose quota is unspent) or wait most of it: a shorter period makes the share
act more like a slower core.
It is a share of a core, not a slower core: caches, memory bandwidth and the instruction
set stay the host's. Every device gets a cgroup (no share: no quota) so that its processes
are known and ended at teardown. A cgroup is ``ROOT/PREFIX-DEVICE``; only the testbed's
own cgroups are made, written or removed: on v2 the root's ``cgroup.subtree_control`` must
already enable ``cpu`` (it is not changed).
"""

from __future__ import annotations

import errno
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Union

#: the CFS period, microseconds, where no device has a share (the kernel's default; it takes 1 ms to 1 s)
PERIOD_US = 100_000
MIN_PERIOD_US, MAX_PERIOD_US = 1_000, 1_000_000
#: the kernel's smallest CFS quota per period, microseconds
MIN_QUOTA_US = 1_000
#: the CFS period where devices have shares (unless a share needs a longer one), microseconds
DEFAULT_PERIOD_US = 5_000


def default_period_us(shares: Iterable[Optional[float]]) -> int:
    """The CFS period (us) the testbed uses unless told: :data:`DEFAULT_PERIOD_US`, or
    longer where the smallest share would get less than the kernel's smallest quota (1
    ms): ``ceil(1000 / smallest share)`` (within 1 s); :data:`PERIOD_US` when no device
    has a share. A shorter period makes a share act more like a slower core on short
    work; a period near the kernel's least quota throttles every millisecond, and in
    some runs on the project's machine that made a part after an idle wait 1.5-2.6
    times slower than back to back, so the default keeps a margin above it.
    ``benchmarks/results/testbed_period.md`` compares the periods on MobileNetV2."""
    given = [s for s in shares if s is not None]
    if not given:
        return PERIOD_US
    return min(MAX_PERIOD_US, max(DEFAULT_PERIOD_US, math.ceil(MIN_QUOTA_US / min(given) - 1e-9)))


#: where cgroup hierarchies are mounted
CGROUP_BASE = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CpuHierarchy:
    """Where the testbed makes its cgroups: ``version`` 1 or 2, ``root`` the directory,
    ``period_us`` the CFS period of their quotas."""

    version: int
    root: Path
    period_us: int = PERIOD_US

    @property
    def label(self) -> str:
        return f"cgroup-v{self.version}"

    def quota_us(self, cpu: Optional[float]) -> Optional[int]:
        """CFS quota of a share (None: no quota); at least the kernel's 1 ms."""
        return None if cpu is None else max(MIN_QUOTA_US, int(round(cpu * self.period_us)))

    def create(self, name: str, cpu: Optional[float]) -> Path:
        """Make cgroup ``name`` with the quota of share ``cpu``; its path."""
        path = self.root / name
        path.mkdir()
        quota = self.quota_us(cpu)
        try:
            if self.version == 1:
                (path / "cpu.cfs_period_us").write_text(str(self.period_us))
                (path / "cpu.cfs_quota_us").write_text("-1" if quota is None else str(quota))
            else:
                (path / "cpu.max").write_text(f"{'max' if quota is None else quota} {self.period_us}")
        except OSError:
            _remove_made(path)
            raise
        return path

    def groups(self, prefix: str) -> list[Path]:
        """This hierarchy's cgroups whose names start with ``prefix``."""
        try:
            return sorted(p for p in self.root.iterdir() if p.is_dir() and p.name.startswith(prefix))
        except OSError:
            return []


def _remove_made(path: Path) -> None:
    """Undo :meth:`CpuHierarchy.create` after a failed write: a real cgroup directory is
    removed with rmdir alone (its files are the kernel's); a plain directory (a test's fake
    hierarchy) also loses the files the write made."""
    try:
        path.rmdir()
    except OSError:
        for f in path.iterdir():
            f.unlink()
        path.rmdir()


def procs_file(path: Path) -> Path:
    """The file a pid is written to to move its process into cgroup ``path`` (v1 and v2)."""
    return path / "cgroup.procs"


def pids(path: Path) -> list[int]:
    """The processes in cgroup ``path`` (none when it is gone)."""
    try:
        return [int(p) for p in procs_file(path).read_text().split()]
    except OSError:
        return []


def remove(path: Path, wait_s: float = 2.0) -> bool:
    """Remove cgroup ``path`` once its processes have gone (they are being ended: waits up
    to ``wait_s``); whether it was removed (False: it was not there)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def find_hierarchy(base: Path = CGROUP_BASE) -> Union[CpuHierarchy, str]:
    """The CPU hierarchy of this host under ``base``: v1's ``cpu`` controller where it is
    mounted, else the v2 unified hierarchy when its root enables ``cpu`` for children;
    otherwise why not (one phrase)."""
    v1 = base / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        return CpuHierarchy(1, v1)
    controllers = base / "cgroup.controllers"
    if controllers.exists():
        try:
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError as e:
            return f"cgroup v2 at {base}: {e.strerror}"
        if "cpu" in enabled:
            return CpuHierarchy(2, base)
        return f"cgroup v2 at {base} does not enable the cpu controller for child groups"
    return f"no cgroup cpu controller under {base}"


def probe(hierarchy: CpuHierarchy, name: str) -> Optional[str]:
    """Why cgroups cannot be made in ``hierarchy`` (one phrase), or None when a throw-away
    cgroup ``name`` took a quota (then removed)."""
    if not os.access(hierarchy.root, os.W_OK):
        return f"{hierarchy.root} is not writable"
    try:
        path = hierarchy.create(name, 0.5)
    except OSError as e:
        return f"cannot make a cgroup in {hierarchy.root} ({e.strerror or e})"
    try:
        remove(path)
    except OSError as e:
        return f"cannot remove {path} ({e.strerror or e})"
    return None
