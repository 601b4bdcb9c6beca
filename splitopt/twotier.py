"""The edge/cloud family (problems ``split`` and ``split_bits``): one cut between an edge
device and a cloud device, with per-layer bit-widths on the edge. Its pieces live in
``instance.check_two_tier``, ``plan``, ``evaluator`` and ``solvers/split_program``; this
module names them for ``splitopt.families``."""

from __future__ import annotations

from splitopt.instance import TWO_TIER, check_two_tier
from splitopt.evaluator import evaluate_two_tier as evaluate
from splitopt.plan import check_plan, plan_from_dict
from splitopt.solvers.split_program import build_split_program as build_program
from splitopt.solvers.split_program import decode_split_plan as decode_plan
from splitopt.solvers.split_program import encode_plan, start_plan

PROBLEMS = TWO_TIER


def check_instance(inst) -> None:
    check_two_tier(inst)


def print_metrics(console, inst, plan, metrics, show_layers: bool = True) -> None:
    from splitopt.report import print_two_tier_metrics

    print_two_tier_metrics(console, inst, plan, metrics, show_layers)


__all__ = ["PROBLEMS", "check_instance", "evaluate", "check_plan", "plan_from_dict", "start_plan",
           "build_program", "encode_plan", "decode_plan", "print_metrics"]
