"""Sweeps: many solves (instances x solvers x seeds) run as one job each, in separate
processes with a hard kill at their limit, on a local process pool or on Ray, into a
resumable JSONL store, reported as Markdown and CSV tables (``splitopt sweep``)."""
