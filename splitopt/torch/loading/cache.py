"""The page cache around child checkpoint files: warm it, drop a file from it, and check
how much of a file it holds.

* ``warm``: the file is read once, end to end, before a timed load (it is then served
  from memory: the load times are deserialisation and copying, not storage);
* ``cold``: ``fsync`` (so that no page is dirty) and then
  ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` before each timed load, which asks
  the kernel to drop the file's clean pages; this needs no root. Whether it worked is
  checked with ``mincore(2)`` (:func:`resident_fraction`): on Linux the fraction drops to
  0; where the storage has a cache of its own below the kernel (a virtual disk backed by
  the host's page cache) a "cold" read is still faster than a real disk read.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path
from typing import Iterable

CACHE_STATES = ("warm", "cold")
_CHUNK = 16 << 20


def warm_page_cache(paths: Iterable[Path]) -> None:
    """Read every file once, end to end (bytes are discarded)."""
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.read(_CHUNK):
                pass


def drop_page_cache(paths: Iterable[Path]) -> None:
    """``fsync`` then ``POSIX_FADV_DONTNEED`` on every file: the kernel drops its clean
    cached pages (no root needed)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def prepare_cache(paths: Iterable[Path], cache: str) -> None:
    """Put the files in cache state ``cache`` (``warm`` or ``cold``) before a timed load."""
    if cache not in CACHE_STATES:
        raise ValueError(f"cache must be one of {', '.join(CACHE_STATES)}, got {cache!r}")
    (warm_page_cache if cache == "warm" else drop_page_cache)(list(paths))


def resident_fraction(path: Path) -> float | None:
    """The fraction of the file's pages in the page cache now (``mincore(2)``), or None
    where that cannot be asked (not Linux, an empty file)."""
    size = os.path.getsize(path)
    if size == 0 or not hasattr(os, "posix_fadvise"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    except (OSError, AttributeError):
        return None
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                return None
            return sum(b & 1 for b in vec) / pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
