"""Analyses over solves: Pareto fronts and plots."""
