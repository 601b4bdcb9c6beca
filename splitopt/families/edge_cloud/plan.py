"""Edge/cloud plans: parsing a ``splitopt-plan/1`` document and the well-formedness rule
(every layer on the edge or the cloud device, edge bit-widths among the candidates, cloud
layers at the reference precision, the edge set closed under predecessors). The plan
type is ``splitopt.core.plan.Plan``."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.core.jsonfile import cut, shown
from splitopt.core.plan import Plan, check_known_layers, check_plan_fields, plan_layers
from splitopt.families.edge_cloud.data import candidate_bits
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

#: the fields of a layer's entry
FIELDS = ("device", "weight_bits", "activation_bits")


def edge_cloud_plan(inst: EdgeCloudInstance, edge_bits: Mapping[str, tuple[int, int]]) -> Plan:
    """Layers in ``edge_bits`` run on the edge at (weight bits, activation bits); every
    other layer on the cloud at ``cloud_bits``."""
    s = inst.settings
    device: dict[str, str] = {}
    wb: dict[str, int] = {}
    ab: dict[str, int] = {}
    for layer in inst.layers:
        if layer.name in edge_bits:
            device[layer.name] = s.edge
            wb[layer.name], ab[layer.name] = edge_bits[layer.name]
        else:
            device[layer.name] = s.cloud
            wb[layer.name] = ab[layer.name] = s.cloud_bits
    return Plan(device, wb, ab)


def uniform_plan(inst: EdgeCloudInstance, edge_layers: Iterable[str], bits: int | None = None) -> Plan:
    """Edge layers ``edge_layers`` all at ``bits`` (default: the reference precision)."""
    b = inst.settings.cloud_bits if bits is None else bits
    return edge_cloud_plan(inst, {name: (b, b) for name in edge_layers})


def edge_layers(inst: EdgeCloudInstance, plan: Plan) -> list[str]:
    """The plan's edge layers, in execution order."""
    return plan.layers_on(inst, inst.settings.edge)


def plan_to_dict(inst: EdgeCloudInstance, plan: Plan) -> dict:
    """The JSON form (``splitopt-plan/1``): the bit-widths of the edge layers written."""
    return plan.to_dict(inst, bits_on=inst.settings.edge)


def plan_from_dict(inst: EdgeCloudInstance, data: Any, where: str = "plan") -> Plan:
    """Parse and check a plan against its instance; raises InvalidPlan naming the field."""
    layers = plan_layers(inst, data, where)
    s = inst.settings
    device: dict[str, str] = {}
    wb: dict[str, int] = {}
    ab: dict[str, int] = {}
    for layer in inst.layers:
        n = layer.name
        entry = layers[n]
        check_plan_fields(entry, FIELDS, f"{where}.layers.{n}")
        dev = entry["device"]
        if dev not in (s.edge, s.cloud):
            raise InvalidPlan(f"{where}.layers.{n}.device: '{cut(dev)}' is neither edge '{s.edge}' nor cloud '{s.cloud}'")
        device[n] = dev
        for key, store in (("weight_bits", wb), ("activation_bits", ab)):
            if key not in entry and dev == s.edge:
                raise InvalidPlan(f"{where}.layers.{n}.{key}: missing (an edge layer gives weight_bits and "
                                  "activation_bits)")
            value = entry.get(key, s.cloud_bits)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidPlan(f"{where}.layers.{n}.{key}: must be an integer number of bits, got {shown(value)}")
            store[n] = value
    plan = Plan(device, wb, ab)
    check_plan(inst, plan, where)
    return plan


def check_plan(inst: EdgeCloudInstance, plan: Plan, where: str = "plan") -> None:
    """Raise InvalidPlan unless the plan is well-formed for the instance: every layer on
    the edge or cloud device, edge bit-widths among the candidates, cloud layers at the
    cloud precision, and the edge set closed under predecessors (data flows edge -> cloud
    only). Budgets (memory, error) are not checked here: the evaluator reports them."""
    s = inst.settings
    allowed = candidate_bits(inst)
    for names in (plan.device, plan.weight_bits, plan.activation_bits):
        check_known_layers(inst, names, where)
    missing = [l.name for l in inst.layers if l.name not in plan.device]
    if missing:
        raise InvalidPlan(f"{where}.layers: layer '{missing[0]}' is missing")
    for layer in inst.layers:
        for key, bits in (("weight_bits", plan.weight_bits), ("activation_bits", plan.activation_bits)):
            if layer.name not in bits:
                raise InvalidPlan(f"{where}.layers.{layer.name}.{key}: missing")
    for layer in inst.layers:
        n = layer.name
        dev = plan.device[n]
        if dev == s.edge:
            for key, width in (("weight_bits", plan.weight_bits[n]), ("activation_bits", plan.activation_bits[n])):
                if width not in allowed:
                    raise InvalidPlan(
                        f"{where}.layers.{n}.{key}: {width} bits is not a candidate of problem "
                        f"'{inst.problem}' (candidates {list(allowed)})"
                    )
        elif dev == s.cloud:
            for key, width in (("weight_bits", plan.weight_bits[n]), ("activation_bits", plan.activation_bits[n])):
                if width != s.cloud_bits:
                    raise InvalidPlan(
                        f"{where}.layers.{n}.{key}: {width} bits, but cloud layers run at cloud_bits={s.cloud_bits}"
                    )
        else:
            raise InvalidPlan(f"{where}.layers.{n}.device: unknown device '{dev}'")
        if dev == s.edge:
            for src in layer.inputs:
                if src in plan.device and plan.device[src] != s.edge:
                    raise InvalidPlan(
                        f"{where}.layers.{n}: runs on the edge but its input '{src}' runs on the cloud "
                        "(the edge set must be closed under predecessors)"
                    )
