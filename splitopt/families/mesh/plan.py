"""Mesh plans: the device of every layer and, optionally, the order of the tasks on each
resource; parsing (``splitopt-mesh-plan/1``) and the well-formedness rules (known
devices, routes for every tensor, orders naming existing tasks on their resource)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.core.jsonfile import cut, json_type, shown
from splitopt.core.plan import check_known_layers, check_plan_fields, plan_layers
from splitopt.families.mesh.data import MeshData, mesh_data
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.tasks import build_tasks

PLAN_FORMAT = "splitopt-mesh-plan/1"
#: the top-level fields of a mesh plan document
FIELDS = ("format", "instance", "layers", "order")


@dataclass(frozen=True)
class MeshPlan:
    """``device[layer]`` for every layer, and ``order[resource]``: task ids in the order
    they use the resource (a device name: layer names; a link ``"u->v"`` or serial bus
    name: transfer ids ``"tensor@u->v"``). Resources or tasks left out follow the default
    order (see the module docstring)."""

    device: Mapping[str, str]
    order: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def key(self) -> tuple:
        """Hashable identity, for comparing plans."""
        return (tuple(sorted(self.device.items())), tuple(sorted((r, tuple(v)) for r, v in self.order.items())))

    def layers_on(self, inst: MeshInstance, device: str) -> list[str]:
        return [l.name for l in inst.layers if self.device[l.name] == device]

    def to_dict(self, inst: MeshInstance) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "instance": inst.name,
            "layers": {l.name: {"device": self.device[l.name]} for l in inst.layers},
            "order": {r: list(ids) for r, ids in self.order.items()},
        }


def single_device_plan(inst: MeshInstance, device: str) -> MeshPlan:
    """Every layer on ``device``, default order."""
    return MeshPlan({l.name: device for l in inst.layers})


def plan_from_dict(inst: MeshInstance, data: Any, where: str = "plan") -> MeshPlan:
    """Parse and check a mesh plan; raises InvalidPlan naming the field."""
    layers = plan_layers(inst, data, where, fmt=PLAN_FORMAT, fields=FIELDS)
    device = {}
    for layer in inst.layers:
        entry = layers[layer.name]
        check_plan_fields(entry, ("device",), f"{where}.layers.{layer.name}")
        device[layer.name] = entry["device"]
    order_raw = data.get("order", {})
    if not isinstance(order_raw, dict):
        raise InvalidPlan(f"{where}.order: must be an object mapping resource to a list of task ids, "
                          f"got {json_type(order_raw)}")
    order = {}
    for res, ids in order_raw.items():
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            raise InvalidPlan(f"{where}.order.{cut(res)}: must be a list of task ids (strings), got {shown(ids)}")
        order[res] = tuple(ids)
    plan = MeshPlan(device, order)
    check_plan(inst, plan, where)
    return plan


def check_routes(data: MeshData, device_map: Mapping[str, str], where: str) -> None:
    for n in data.layers:
        d = device_map[n]
        for t in data.layer_inputs[n]:
            a = data.producer_device(device_map, t)
            if not data.has_route(a, d):
                what = "raw input" if data.is_raw[t] else "output of layer"
                raise InvalidPlan(
                    f"{where}.layers.{n}.device: '{d}' reads the {what} '{t}' from '{a}', but there is no "
                    f"{'link' if data.options.routing == 'direct' else 'route'} from '{a}' to '{d}'"
                )
        if data.options.deliver_outputs and n in data.final and not data.has_route(d, data.sink):
            raise InvalidPlan(
                f"{where}.layers.{n}.device: final output '{n}' on '{d}' cannot reach sink '{data.sink}' (no route)"
            )


def check_plan(inst: MeshInstance, plan: MeshPlan, where: str = "plan", data: MeshData | None = None) -> None:
    """Raise InvalidPlan unless every layer is on a known device, every tensor can reach
    its readers (and final outputs the sink) over existing links, and the orders name
    known resources and existing tasks, each once. Memory is not checked here: the
    evaluator reports it."""
    data = data or mesh_data(inst)
    check_known_layers(inst, plan.device, where)
    for n in data.layers:
        if n not in plan.device:
            raise InvalidPlan(f"{where}.layers: layer '{n}' is missing")
        if plan.device[n] not in data.dev_index:
            raise InvalidPlan(
                f"{where}.layers.{n}.device: unknown device '{cut(plan.device[n])}' (devices: {', '.join(data.devices)})"
            )
    extra = [n for n in plan.device if n not in data.position]
    if extra:
        raise InvalidPlan(f"{where}.layers.{extra[0]}: unknown layer")
    check_routes(data, plan.device, where)
    tasks = build_tasks(data, plan.device)
    for res, ids in plan.order.items():
        if res not in data.resources:
            raise InvalidPlan(f"{where}.order.{cut(res)}: unknown resource (resources: {', '.join(data.resources)})")
        seen = set()
        for tid in ids:
            if tid in seen:
                raise InvalidPlan(f"{where}.order.{res}: task '{cut(tid)}' listed twice")
            seen.add(tid)
            task = tasks.get(tid)
            if task is None:
                raise InvalidPlan(f"{where}.order.{res}: task '{cut(tid)}' does not exist in this plan")
            if task.resource != res:
                raise InvalidPlan(f"{where}.order.{res}: task '{tid}' runs on '{task.resource}', not '{res}'")
