"""The ``splitopt`` command line (``splitopt.cli.app``); nothing in the library imports it."""

from splitopt.cli.app import app, main

__all__ = ["app", "main"]
