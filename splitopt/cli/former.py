"""The former command names (``profile-loading``, ``profile-separable``, ``run-loading``,
``run-separable``, ``run-tcp``, ``dnnp-solve``, ``dnnp-eval``): hidden aliases that work
as they always did (same options, output and exit codes) and, run from a terminal, say
in one line on stderr which command replaces them. Scripts that read their output (a
pipe, a file) see it unchanged: the notice goes only to a terminal."""

from __future__ import annotations

import sys


def former_name_notice(name: str, replacement: str) -> None:
    """One line on stderr, when it is a terminal: ``splitopt NAME: use `splitopt
    REPLACEMENT` (this name still works)``."""
    if sys.stderr.isatty():
        sys.stderr.write(f"splitopt {name}: use `splitopt {replacement}` (this name still works)\n")
