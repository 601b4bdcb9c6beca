"""Multiview plans: fusion point, width, each view's cut point, the bus and aggregator
orders; parsing (``splitopt-multiview-plan/1``) and the well-formedness rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.core.jsonfile import cut, shown
from splitopt.core.plan import check_plan_header
from splitopt.families.multiview.data import data
from splitopt.families.multiview.settings import MultiviewInstance

PLAN_FORMAT = "splitopt-multiview-plan/1"
#: the fields of a plan document
FIELDS = ("format", "instance", "fusion", "width", "cuts", "bus_order", "aggregator_order")


@dataclass(frozen=True)
class MultiviewPlan:
    """``fusion``: the fusion tensor; ``width``: the Conv-Reduce width d (None: none);
    ``cuts[sensor]``: that view's cut point (the raw input name, a cut tensor, or
    ``mv.reduce``); ``bus_order``: the order of the transfers on a serial bus (None on a
    share bus); ``aggregator_order``: the order of the per-view aggregator tasks. Orders
    list every sensor; tasks of zero duration occupy no resource and their place in an
    order is ignored."""

    fusion: str
    width: int | None
    cuts: Mapping[str, str]
    bus_order: tuple[str, ...] | None
    aggregator_order: tuple[str, ...]

    def key(self) -> tuple:
        return (self.fusion, self.width, tuple(sorted(self.cuts.items())), self.bus_order, self.aggregator_order)

    def to_dict(self, inst: MultiviewInstance) -> dict[str, Any]:
        d = data(inst)
        return {"format": PLAN_FORMAT, "instance": inst.name, "fusion": self.fusion, "width": self.width,
                "cuts": {s: self.cuts[s] for s in d.sensors},
                "bus_order": None if self.bus_order is None else list(self.bus_order),
                "aggregator_order": list(self.aggregator_order)}


def uniform_plan(inst: MultiviewInstance, fusion: str, width: int | None, cut: str) -> MultiviewPlan:
    """Every view at cut point ``cut``; orders by sensor index."""
    d = data(inst)
    return MultiviewPlan(fusion, width, {s: cut for s in d.sensors}, d.sensors if d.serial else None, d.sensors)


def plan_from_dict(inst: MultiviewInstance, raw: Any, where: str = "plan") -> MultiviewPlan:
    """Parse and check a multiview plan; raises InvalidPlan naming the field."""
    d = data(inst)
    check_plan_header(raw, inst.name, where, PLAN_FORMAT, FIELDS)
    for key in ("fusion", "cuts", "aggregator_order"):
        if key not in raw:
            raise InvalidPlan(f"{where}.{key}: missing")
    cuts = raw["cuts"]
    if not isinstance(cuts, dict) or not all(isinstance(v, str) for v in cuts.values()):
        raise InvalidPlan(f"{where}.cuts: must map each sensor to its cut point (a tensor name), got {shown(cuts)}")
    if not isinstance(raw["fusion"], str):
        raise InvalidPlan(f"{where}.fusion: must be a tensor name, got {shown(raw['fusion'])}")
    width = raw.get("width")
    if width is not None and (isinstance(width, bool) or not isinstance(width, int)):
        raise InvalidPlan(f"{where}.width: must be an integer number of channels or null, got {shown(width)}")

    def order(key):
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidPlan(f"{where}.{key}: must be a list of sensor names, got {shown(value)}")
        return tuple(value)

    bus = order("bus_order")
    if bus is None and d.serial:
        bus = d.sensors if d.views == 1 else None
    plan = MultiviewPlan(raw["fusion"], width, dict(cuts), bus if d.serial else None,
                         order("aggregator_order") or ())
    if not d.serial and raw.get("bus_order") is not None:
        raise InvalidPlan(f"{where}.bus_order: bus '{d.bus.name}' is in share mode; transfers do not queue (use null)")
    check_plan(inst, plan, where)
    return plan


def check_plan(inst: MultiviewInstance, plan: MultiviewPlan, where: str = "plan") -> None:
    """Raise InvalidPlan unless the plan is well-formed: a fusion candidate, a width offered
    there, every sensor's cut point valid for (fusion, width), and orders that are
    permutations of the sensors (a bus order only on a serial bus). Limits (memory,
    required layers) are not checked here: the evaluator reports them."""
    d = data(inst)
    if plan.fusion not in d.fusions:
        raise InvalidPlan(f"{where}.fusion: '{cut(plan.fusion)}' is not a fusion candidate "
                          f"(candidates: {', '.join(d.fusions)})")
    if plan.width is not None and plan.width not in d.widths_at(plan.fusion):
        raise InvalidPlan(f"{where}.width: {plan.width!r} is not a compression width offered at '{plan.fusion}' "
                          f"({d.channels[plan.fusion]} channels; offered {list(d.widths_at(plan.fusion))})")
    points = d.points(plan.fusion, plan.width)
    for name in plan.cuts:
        if name not in d.sensors:
            raise InvalidPlan(f"{where}.cuts.{cut(name)}: unknown sensor (sensors: {', '.join(d.sensors)})")
    for name in d.sensors:
        if name not in plan.cuts:
            raise InvalidPlan(f"{where}.cuts: sensor '{name}' is missing")
        if plan.cuts[name] not in points:
            raise InvalidPlan(f"{where}.cuts.{name}: {shown(plan.cuts[name])} is not a cut point under fusion "
                              f"'{plan.fusion}' and width {plan.width} (points: {', '.join(points)})")
    for key, value in (("bus_order", plan.bus_order), ("aggregator_order", plan.aggregator_order)):
        if key == "bus_order" and not d.serial:
            if value is not None:
                raise InvalidPlan(f"{where}.bus_order: bus '{d.bus.name}' is in share mode; must be null")
            continue
        if value is None or sorted(value) != sorted(d.sensors):
            raise InvalidPlan(f"{where}.{key}: must list every sensor exactly once, got {shown(value)}")
