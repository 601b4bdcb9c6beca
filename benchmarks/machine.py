"""The machine a benchmark ran on, in one line for its report: the CPU model (from
/proc/cpuinfo where there is one), the core count and the Python version."""

from __future__ import annotations

import os
import platform


def machine(shared: bool = False) -> str:
    """E.g. "AMD EPYC 7B13, 2 cores, Python 3.11.7"; ``shared`` adds "(shared)" after the
    cores, for runs on a machine other jobs use too."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores{' (shared)' if shared else ''}, Python {platform.python_version()}"
