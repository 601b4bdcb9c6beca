"""Communication policies: per transmission step a permutation of the G devices (device
``g`` sends to ``send_to[g]``; a fixed point sends nothing), a sparsification level and a
dtype; or the unseparated model's ring all-reduce after every block (the paper's 100 %
reference). The JSON form (``splitopt-separable-plan/1``)::

    {"format": "splitopt-separable-plan/1", "instance": "sep_resnext56",
     "steps": [{"send_to": [2, 0, 1, 3], "level": 8, "dtype": "float32"},   # or "choice": 12
               ...]}                                                        # one per step
    {"format": "splitopt-separable-plan/1", "ring_allreduce": true}

``send_to`` lists device indices (or names) in device order; ``choice`` is the
permutation's index in lexicographic order, which for G = 4 is the paper's Table 3 id.
``level`` (default the top level, 100 %) indexes ``settings.separable.levels`` (Table 4);
``dtype`` (default the widest allowed) is one of ``settings.separable.dtypes``. A step
where nobody sends has no level or dtype: plans store it at the defaults (canonical form).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from splitopt.core.errors import InvalidInstance, InvalidPlan
from splitopt.core.jsonfile import shown
from splitopt.core.plan import check_plan_header
from splitopt.families.separable.data import SeparableData, data
from splitopt.families.separable.settings import DTYPE_BYTES, PLAN_FORMAT, SeparableInstance

FIELDS = ("format", "instance", "steps", "ring_allreduce", "objective_ms", "note")
STEP_FIELDS = ("send_to", "choice", "level", "dtype")


@dataclass(frozen=True)
class Step:
    """One transmission step: ``send_to[g]`` the device ``g`` sends to (``g``: none), the
    sparsity ``level`` and the ``dtype`` of what is sent."""

    send_to: tuple[int, ...]
    level: int
    dtype: str

    @property
    def senders(self) -> int:
        return sum(1 for g, h in enumerate(self.send_to) if g != h)

    @property
    def intensive(self) -> bool:
        """Every device sends (a derangement: the paper's red choices)."""
        return self.senders == len(self.send_to)


@dataclass(frozen=True)
class SeparablePlan:
    """``steps``: one :class:`Step` per transmission step; ``ring``: the unseparated
    model's ring all-reduce after every block instead (``steps`` empty)."""

    steps: tuple[Step, ...]
    ring: bool = False

    def key(self) -> tuple:
        return (self.ring, self.steps)

    def to_dict(self, inst: SeparableInstance) -> dict[str, Any]:
        if self.ring:
            return {"format": PLAN_FORMAT, "instance": inst.name, "ring_allreduce": True}
        return {"format": PLAN_FORMAT, "instance": inst.name,
                "steps": [{"send_to": list(s.send_to), "level": s.level, "dtype": s.dtype} for s in self.steps]}


def widest_dtype(d: SeparableData) -> str:
    return max(d.dtypes, key=lambda t: DTYPE_BYTES[t])


def make_step(d: SeparableData, send_to: Sequence[int], level: int | None = None, dtype: str | None = None) -> Step:
    """A step in canonical form: a step where nobody sends gets the top level and the
    widest dtype (nothing is sent, so they do not matter)."""
    send_to = tuple(int(h) for h in send_to)
    if all(g == h for g, h in enumerate(send_to)) or level is None:
        level = d.levels - 1
    if all(g == h for g, h in enumerate(send_to)) or dtype is None:
        dtype = widest_dtype(d)
    return Step(send_to, int(level), dtype)


def identity(g: int) -> tuple[int, ...]:
    return tuple(range(g))


def silent_plan(d: SeparableData) -> SeparablePlan:
    """The policy where no step sends."""
    return SeparablePlan(tuple(make_step(d, identity(d.g)) for _ in range(d.steps)))


def permutation_of_choice(choice: int, g: int) -> tuple[int, ...]:
    """The ``choice``-th permutation of ``0 .. g-1`` in lexicographic order (the paper's
    Table 3 numbering for g = 4), without listing the others."""
    items = list(range(g))
    out = []
    for i in range(g, 0, -1):
        block = math.factorial(i - 1)
        out.append(items.pop(choice // block))
        choice %= block
    return tuple(out)


def choice_of_permutation(send_to: Sequence[int]) -> int:
    """The inverse of :func:`permutation_of_choice`."""
    items = sorted(send_to)
    out = 0
    for i, h in enumerate(send_to):
        pos = items.index(h)
        out += pos * math.factorial(len(send_to) - 1 - i)
        items.pop(pos)
    return out


class TooManyPermutations(Exception):
    """More permutations over the links than the caller's cap (see :func:`permutations`)."""


def permutations(d: SeparableData, cap: int | None = None) -> list[tuple[int, ...]]:
    """Every permutation whose moved devices send over an existing link, in lexicographic
    order (the identity first). With ``cap``: TooManyPermutations as soon as more than
    ``cap`` are found or the search visits more than ``64 * cap + 4096`` partial
    assignments, so that G = 16 (16! permutations) never lists them all.

    Depth first over the devices in order, each sending to an unused device it has a link
    to (or keeping its own features): every complete assignment is a permutation over the
    links, found once."""
    targets = [[h for h in range(d.g) if h == g or d.has_link(g, h)] for g in range(d.g)]
    out: list[tuple[int, ...]] = []
    chosen: list[int] = []
    used = [False] * d.g
    visits = 0

    def walk(g: int) -> None:
        nonlocal visits
        if g == d.g:
            out.append(tuple(chosen))
            if cap is not None and len(out) > cap:
                raise TooManyPermutations
            return
        visits += 1
        if cap is not None and visits > 64 * cap + 4096:
            raise TooManyPermutations
        for h in targets[g]:
            if not used[h]:
                used[h] = True
                chosen.append(h)
                walk(g + 1)
                chosen.pop()
                used[h] = False

    walk(0)
    return out


def plan_from_dict(inst: SeparableInstance, raw: Any, where: str = "plan") -> SeparablePlan:
    """Parse and check a separable plan; InvalidPlan names the field."""
    d = data(inst)
    check_plan_header(raw, inst.name, where, PLAN_FORMAT, FIELDS)
    ring = raw.get("ring_allreduce", False)
    if not isinstance(ring, bool):
        raise InvalidPlan(f"{where}.ring_allreduce: must be true or false, got {shown(ring)}")
    if ring:
        if raw.get("steps") is not None:
            raise InvalidPlan(f"{where}.steps: a ring all-reduce plan has no steps")
        plan = SeparablePlan((), ring=True)
        check_plan(inst, plan, where)
        return plan
    steps = raw.get("steps")
    if not isinstance(steps, list):
        raise InvalidPlan(f"{where}.steps: must list one step per transmission step ({d.steps}), got {shown(steps)}")
    plan = SeparablePlan(tuple(step_from_dict(d, s, f"{where}.steps[{j}]") for j, s in enumerate(steps)))
    check_plan(inst, plan, where)
    return plan


def step_from_dict(d: SeparableData, raw: Any, where: str) -> Step:
    """One step from its JSON object, a Table 3 choice id, or ``[choice, level(, dtype)]``."""
    if isinstance(raw, list):
        if not 1 <= len(raw) <= 3:
            raise InvalidPlan(f"{where}: must be [choice, level] or [choice, level, dtype], got {shown(raw)}")
        raw = dict(zip(("choice", "level", "dtype"), raw))
    elif isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"choice": raw}
    if not isinstance(raw, Mapping):
        raise InvalidPlan(f"{where}: must be an object with 'send_to' (or 'choice'), 'level', 'dtype', got {shown(raw)}")
    for key in raw:
        if key not in STEP_FIELDS:
            raise InvalidPlan(f"{where}.{key}: not a field of a step (fields: {', '.join(STEP_FIELDS)})")
    if ("send_to" in raw) == ("choice" in raw):
        raise InvalidPlan(f"{where}: give exactly one of 'send_to' and 'choice'")
    if "choice" in raw:
        c = raw["choice"]
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < math.factorial(d.g):
            raise InvalidPlan(f"{where}.choice: must be an integer in [0, {math.factorial(d.g) - 1}] (G = {d.g}), "
                              f"got {shown(c)}")
        send_to = permutation_of_choice(c, d.g)
    else:
        raw_to = raw["send_to"]
        if not isinstance(raw_to, list) or len(raw_to) != d.g:
            raise InvalidPlan(f"{where}.send_to: must list the receiver of each of the {d.g} devices, "
                              f"got {shown(raw_to)}")
        index = {n: i for i, n in enumerate(d.devices)}
        receivers: list[int] = []
        for g, h in enumerate(raw_to):
            if isinstance(h, str) and h in index:
                h = index[h]
            if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < d.g:
                raise InvalidPlan(f"{where}.send_to[{g}]: must be a device index in [0, {d.g - 1}] or a device "
                                  f"name, got {shown(h)}")
            receivers.append(h)
        if sorted(receivers) != list(range(d.g)):
            raise InvalidPlan(f"{where}.send_to: {shown(raw_to)} is not a permutation of the {d.g} devices (each "
                              f"device receives from one device at most)")
        send_to = tuple(receivers)
    level = raw.get("level")
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < d.levels):
        raise InvalidPlan(f"{where}.level: must be a sparsity level in [0, {d.levels - 1}], got {shown(level)}")
    dtype = raw.get("dtype")
    if dtype is not None and dtype not in d.dtypes:
        raise InvalidPlan(f"{where}.dtype: must be one of {', '.join(d.dtypes)} (settings.separable.dtypes), "
                          f"got {shown(dtype)}")
    return make_step(d, send_to, level, dtype)


def reference_plans(inst: SeparableInstance) -> dict[str, SeparablePlan]:
    """The published policies the instance carries (``settings.separable.reference_policies``),
    each parsed and checked as a plan: InvalidInstance naming the policy's field otherwise
    (a wrong step count, a choice out of range, a level or dtype not allowed, a missing
    link)."""
    d = data(inst)
    out: dict[str, SeparablePlan] = {}
    for name, steps in d.reference_policies.items():
        where = f"instance.settings.separable.reference_policies.{name}"
        try:
            if not isinstance(steps, list) or len(steps) != d.steps:
                raise InvalidPlan(f"{where}: {len(steps) if isinstance(steps, list) else shown(steps)} steps; "
                                  f"the instance has {d.steps} ({len(d.blocks)} blocks, alpha = {d.alpha})")
            plan = SeparablePlan(tuple(step_from_dict(d, s, f"{where}[{j}]") for j, s in enumerate(steps)))
            check_plan(inst, plan, where)
        except InvalidPlan as e:
            raise InvalidInstance(str(e)) from None
        out[name] = plan
    return out


def check_plan(inst: SeparableInstance, plan: SeparablePlan, where: str = "plan") -> None:
    """Raise InvalidPlan unless the plan is well-formed: one step per transmission step,
    each a permutation over existing links with an allowed level and dtype; a ring plan
    needs two devices or more and the ring's links. Limits (mixing, budgets, accuracy) are the evaluator's."""
    d = data(inst)
    if plan.ring:
        if d.g == 1:
            raise InvalidPlan(f"{where}.ring_allreduce: the ring all-reduce needs G > 1 devices; the group is "
                              f"'{d.devices[0]}' alone")
        for g in range(d.g):
            h = (g + 1) % d.g
            if not d.has_link(g, h):
                raise InvalidPlan(f"{where}.ring_allreduce: the ring needs a link {d.devices[g]} -> {d.devices[h]}")
        return
    if len(plan.steps) != d.steps:
        raise InvalidPlan(f"{where}.steps: {len(plan.steps)} steps; the instance has {d.steps} "
                          f"({len(d.blocks)} blocks, alpha = {d.alpha})")
    for j, s in enumerate(plan.steps):
        at = f"{where}.steps[{j}]"
        if len(s.send_to) != d.g or sorted(s.send_to) != list(range(d.g)):
            raise InvalidPlan(f"{at}.send_to: {list(s.send_to)} is not a permutation of the {d.g} devices")
        for g, h in enumerate(s.send_to):
            if g != h and not d.has_link(g, h):
                raise InvalidPlan(f"{at}.send_to[{g}]: no link {d.devices[g]} -> {d.devices[h]}")
        if not 0 <= s.level < d.levels:
            raise InvalidPlan(f"{at}.level: must be in [0, {d.levels - 1}], got {s.level}")
        if s.dtype not in d.dtypes:
            raise InvalidPlan(f"{at}.dtype: must be one of {', '.join(d.dtypes)}, got {shown(s.dtype)}")
