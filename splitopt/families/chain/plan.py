"""Chain plans (``splitopt.core.plan.Plan`` with every layer at the reference precision):
construction, parsing, and the rule that data only flows forward along the chain."""

from __future__ import annotations

from typing import Any

from splitopt.core.errors import InvalidPlan
from splitopt.core.jsonfile import cut, shown
from splitopt.core.plan import Plan, check_known_layers, check_plan_fields, plan_layers
from splitopt.families.chain.settings import ChainInstance

#: the fields of a layer's entry (bit-widths optional, equal to cloud_bits if given)
FIELDS = ("device", "weight_bits", "activation_bits")


def plan_on_devices(inst: ChainInstance, device_of: dict[str, str]) -> Plan:
    """A chain plan from ``layer -> device`` (every layer at the reference precision)."""
    b = inst.settings.cloud_bits
    return Plan(dict(device_of), {n: b for n in device_of}, {n: b for n in device_of})


def plan_from_indices(inst: ChainInstance, index: dict[str, int]) -> Plan:
    """A chain plan from ``layer -> chain position`` (0-based)."""
    chain = inst.settings.chain
    return plan_on_devices(inst, {n: chain[m] for n, m in index.items()})


def check_plan(inst: ChainInstance, plan: Plan, where: str = "plan") -> None:
    """Raise InvalidPlan unless every layer runs on a chain device at the reference
    precision and no DAG edge goes back along the chain."""
    s = inst.settings
    index = {name: i for i, name in enumerate(s.chain)}
    for names in (plan.device, plan.weight_bits, plan.activation_bits):
        check_known_layers(inst, names, where)
    for layer in inst.layers:
        n = layer.name
        if n not in plan.device:
            raise InvalidPlan(f"{where}.layers: layer '{n}' is missing")
        dev = plan.device[n]
        if dev not in index:
            raise InvalidPlan(f"{where}.layers.{n}.device: '{cut(dev)}' is not a device of settings.chain {list(s.chain)}")
        for key, bits in (("weight_bits", plan.weight_bits), ("activation_bits", plan.activation_bits)):
            if bits.get(n) != s.cloud_bits:
                raise InvalidPlan(
                    f"{where}.layers.{n}.{key}: {bits.get(n)} bits, but problem 'chain' runs every layer at "
                    f"cloud_bits={s.cloud_bits}"
                )
    for layer in inst.layers:
        for src in layer.inputs:
            if src in plan.device and index[plan.device[src]] > index[plan.device[layer.name]]:
                raise InvalidPlan(
                    f"{where}.layers.{layer.name}: runs on '{plan.device[layer.name]}' but its input '{src}' runs on "
                    f"'{plan.device[src]}', later in the chain (data only flows forward along the chain)"
                )


def plan_from_dict(inst: ChainInstance, data: Any, where: str = "plan") -> Plan:
    """Parse a chain plan (``{"layers": {name: {"device": d}}}``; bit-widths optional and
    equal to ``cloud_bits`` if given)."""
    layers = plan_layers(inst, data, where)
    b = inst.settings.cloud_bits
    device: dict[str, str] = {}
    wb: dict[str, int] = {}
    ab: dict[str, int] = {}
    for layer in inst.layers:
        n = layer.name
        entry = layers[n]
        check_plan_fields(entry, FIELDS, f"{where}.layers.{n}")
        device[n] = entry["device"]
        for key, store in (("weight_bits", wb), ("activation_bits", ab)):
            value = entry.get(key, b)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidPlan(f"{where}.layers.{n}.{key}: must be an integer number of bits, got {shown(value)}")
            store[n] = value
    plan = Plan(device, wb, ab)
    check_plan(inst, plan, where)
    return plan
