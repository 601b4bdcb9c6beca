"""Every multiview plan that can be optimal, for the brute-force backend: every
architecture (fusion, width) allowed by ``min_accuracy``, every cut point per view whose
sensor part runs the required layers and fits the sensor memory (others break a limit
and are never optimal), every bus order (serial bus) and every aggregator order."""

from __future__ import annotations

import itertools
import math
from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.families.multiview.data import data
from splitopt.families.multiview.plan import MultiviewPlan
from splitopt.families.multiview.settings import MultiviewInstance
from splitopt.families.multiview.start import allowed_cut


def count_plans(inst: MultiviewInstance) -> int:
    """An upper bound on the number of plans enumerated."""
    d = data(inst)
    orders = math.factorial(d.views) ** (2 if d.serial else 1)
    return sum(len(d.points(f, w)) ** d.views for f, w in d.archs) * orders


def enumerate_plans(inst: MultiviewInstance, limit: int) -> Iterator[MultiviewPlan]:
    """The plans of the module docstring; NotApplicable above ``limit``."""
    count = count_plans(inst)
    if count > limit:
        raise NotApplicable(f"brute-force: instance '{inst.name}' has {count:,} multiview plans, more than "
                            f"{limit:,}; use cpsat or a MILP backend")
    d = data(inst)
    perms = list(itertools.permutations(d.sensors))

    def plans() -> Iterator[MultiviewPlan]:
        for f, w in d.allowed_archs:
            options = [[c for c in d.points(f, w) if allowed_cut(inst, f, w, s, c)] for s in d.sensors]
            for cuts in itertools.product(*options):
                for bus in (perms if d.serial else [None]):
                    for agg in perms:
                        yield MultiviewPlan(f, w, dict(zip(d.sensors, cuts)), bus, agg)

    return plans()
