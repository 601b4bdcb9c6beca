"""Methods of the separable family besides the generic programs (baselines; none proves
anything):

* ``ring-allreduce``: the unseparated model, its features all-reduced around the ring
  after every block (the paper's 100 % reference);
* ``no-communication``: every step silent (each device runs on its own paths);
* ``all-intensive``: every device sends its whole stream to the next device (``g ->
  g + 1``) at every step, at the top level and the widest dtype;
* ``reference-policies``: the best of the published policies the instance carries
  (``settings.separable.reference_policies``, e.g. the paper's Table 6);
* ``random-sampling``: the best of ``RANDOM_SAMPLES`` uniformly random policies (the
  paper's random sampler, Sec. 4.5), seeded.
"""

from __future__ import annotations

import random
from typing import Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput
from splitopt.families.base import plan_output
from splitopt.families.separable.data import data
from splitopt.families.separable.evaluate import evaluate
from splitopt.families.separable.plan import SeparablePlan, make_step, reference_plans, silent_plan
from splitopt.families.separable.settings import SeparableInstance

#: how many random policies ``random-sampling`` draws (the paper samples 100 per stage)
RANDOM_SAMPLES = 1000


def best_of(inst: SeparableInstance, plans: Sequence[SeparablePlan]) -> tuple[int, SeparablePlan]:
    """The index and plan of the best of ``plans``: meeting every limit first, then the
    fewest broken limits, then the objective."""
    scored = []
    for i, plan in enumerate(plans):
        m = evaluate(inst, plan)
        scored.append((not m.feasible, len(m.violations), m.objective_ms, i, plan))
    best = min(scored, key=lambda t: t[:4])
    return best[3], best[4]


def shift_plan(inst: SeparableInstance) -> SeparablePlan | None:
    """Every device sends everything to the next one at every step (None: a ring link is missing)."""
    d = data(inst)
    if not d.ring_available:
        return None
    shift = tuple((g + 1) % d.g for g in range(d.g))
    return SeparablePlan(tuple(make_step(d, shift) for _ in range(d.steps)))


def ring_allreduce(inst: SeparableInstance, options: SolveOptions) -> BackendOutput:
    """The unseparated model with ring all-reduce after every block."""
    if not data(inst).ring_available:
        raise NotApplicable("ring-allreduce: needs G > 1 devices and a link from each device to the next")
    return plan_output(SeparablePlan((), ring=True))


def no_communication(inst: SeparableInstance, options: SolveOptions) -> BackendOutput:
    """Every step silent."""
    return plan_output(silent_plan(data(inst)))


def all_intensive(inst: SeparableInstance, options: SolveOptions) -> BackendOutput:
    """Every device sends everything to the next at every step."""
    plan = shift_plan(inst)
    if plan is None:
        raise NotApplicable("all-intensive: needs G > 1 devices and a link from each device to the next")
    return plan_output(plan)


def reference_policies(inst: SeparableInstance, options: SolveOptions) -> BackendOutput:
    """The best of the published policies the instance carries."""
    d = data(inst)
    if not d.reference_policies:
        raise NotApplicable("reference-policies: the instance carries no settings.separable.reference_policies")
    refs = reference_plans(inst)  # checked with the instance (family.check): valid here
    names, plans = list(refs), list(refs.values())
    i, plan = best_of(inst, plans)
    out = plan_output(plan)
    out.extra["reference"] = names[i]
    return out


def random_sampling(inst: SeparableInstance, options: SolveOptions) -> BackendOutput:
    """The best of ``RANDOM_SAMPLES`` uniform random policies (seeded; stops at the time limit)."""
    from splitopt.families.separable.space import separable_space

    space = separable_space(inst)
    rng = random.Random(options.seed)
    plans: list[SeparablePlan] = []
    for _ in range(RANDOM_SAMPLES):
        if plans and options.out_of_time():
            break
        plans.append(space.decode(space.sample(rng)))
    _, plan = best_of(inst, plans)
    return plan_output(plan, samples=len(plans))
