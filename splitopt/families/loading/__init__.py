"""The loading-balance family (problem ``loading``, RL modularization paper)."""
