"""Heuristic search over the families' search spaces (genes, and later the search loops)."""
