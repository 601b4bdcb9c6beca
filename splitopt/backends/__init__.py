"""Backends: the exact program runners (CBC, HiGHS, CP-SAT), brute force, and the adapter for the families' own methods; ``registry`` names them."""
