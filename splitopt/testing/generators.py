"""Random instances of every registered family, for the contract suites, tests and
benchmarks.

Each family ships its own examples (``splitopt/families/<family>/examples.py``, reached
through ``Family.random_instance(seed)``), so that registering a family puts it under the
contract suites. Generators with sizes and options of a family's own (layers, devices,
bit-widths) are in its examples module, e.g.
``splitopt.families.edge_cloud.examples.random_instance``.
"""

from __future__ import annotations

from typing import Any

from splitopt.families.registry import family


def random_family_instance(name: str, seed: int) -> Any:
    """A small random instance of the family registered as ``name`` (small enough for
    brute force)."""
    return family(name).random_instance(seed)

