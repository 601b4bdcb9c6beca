"""Why a separable instance has no policy, in one line naming the limit: each limit in turn
is lifted and the instance re-solved; the first whose removal leaves a plan binds."""

from __future__ import annotations

from typing import Callable

from splitopt.families.separable.data import data, options
from splitopt.families.separable.settings import SeparableInstance

#: the limits, in the order they are tried, with the value that lifts each
LIFTS = (("min_accuracy", None), ("latency_budget_ms", None), ("byte_budget_bytes", None),
         ("min_intensive_steps", 0), ("mixing", False))


def without(inst: SeparableInstance, key: str, value) -> SeparableInstance:
    return inst.with_settings(separable={**options(inst), key: value})


def diagnose(inst: SeparableInstance, resolve: Callable[[SeparableInstance], bool]) -> str:
    d = data(inst)
    ring_ok = d.ring_available and d.ring_accuracy is not None and d.ring_accuracy >= (d.min_accuracy or 0) - 1e-12
    if d.min_accuracy is not None and not ring_ok and not any(r.accuracy >= d.min_accuracy - 1e-12
                                                              for r in d.records):
        best = max((r.accuracy for r in d.records), default=None)
        return (f"infeasible: min_accuracy = {d.min_accuracy:g} is above every accuracy record "
                f"({'none given' if best is None else f'best {best:g}'}) (limit: min_accuracy)")
    if d.mixing and d.g > 1 and (1 << d.steps) < d.g and not d.ring_available:
        return (f"infeasible: mixing needs at least {(d.g - 1).bit_length()} steps for {d.g} devices (each step at "
                f"most doubles what a device holds); the instance has {d.steps} (limit: mixing)")
    present = [key for key, lifted in LIFTS if not unset(options(inst).get(key), lifted)]
    for key, lifted in LIFTS:
        if key in present and resolve(without(inst, key, lifted)):
            return f"infeasible: no policy meets {key} = {options(inst)[key]} with the other limits (limit: {key})"
    return f"infeasible: no policy meets the limits together ({', '.join(present) or 'none is set'})"


def unset(value, lifted) -> bool:
    """Whether a limit's value leaves it out: absent, or equal to the value that lifts it (a
    budget of 0 is a limit, a minimum of 0 intensive steps is not)."""
    return value is None or (lifted is not None and value == lifted)
