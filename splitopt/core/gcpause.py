"""Pause Python's cyclic garbage collector while a program is built.

A build allocates millions of small containers (rows, coefficient dicts, names) and frees
none of them, so the collector's generational passes walk an ever larger heap and find
nothing: about a quarter of the CPU time of a 10,000-layer ``split_bits`` build
(``benchmarks/results/build_scale.md``). Reference counting still frees everything that
is not in a cycle; the collector runs again when the block ends.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """Within the block the cyclic collector is off (restored to its previous state after;
    nested blocks leave it off until the outermost ends)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
