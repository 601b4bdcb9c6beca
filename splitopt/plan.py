"""A plan: where each layer runs and, on the edge, at which weight and activation
bit-widths. Solvers and baselines produce Plans; the evaluator judges them.

JSON form (what ``splitopt solve --json`` prints under ``plan`` and ``splitopt evaluate``
reads)::

    {"format": "splitopt-plan/1", "instance": "resnet50_eyeriss",
     "layers": {"conv1": {"device": "eyeriss", "weight_bits": 8, "activation_bits": 6},
                "fc":    {"device": "tpu"}}}

Bit-widths may be omitted for cloud layers (they run at ``settings.cloud_bits``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from splitopt.errors import InvalidPlan
from splitopt.instance import Instance

FORMAT = "splitopt-plan/1"


@dataclass(frozen=True)
class Plan:
    """``device[layer]`` for every layer; ``weight_bits``/``activation_bits`` for every
    layer (cloud layers carry the cloud precision)."""

    device: Mapping[str, str]
    weight_bits: Mapping[str, int]
    activation_bits: Mapping[str, int]

    # ----- constructors for the two-tier (edge/cloud) problems ------------------------
    @classmethod
    def edge_cloud(cls, inst: Instance, edge_bits: Mapping[str, tuple[int, int]]) -> "Plan":
        """Layers in ``edge_bits`` run on the edge at (weight bits, activation bits);
        every other layer on the cloud at ``cloud_bits``."""
        s = inst.settings
        device, wb, ab = {}, {}, {}
        for layer in inst.layers:
            if layer.name in edge_bits:
                device[layer.name] = s.edge
                wb[layer.name], ab[layer.name] = edge_bits[layer.name]
            else:
                device[layer.name] = s.cloud
                wb[layer.name] = ab[layer.name] = s.cloud_bits
        return cls(device, wb, ab)

    @classmethod
    def uniform(cls, inst: Instance, edge_layers, bits: int | None = None) -> "Plan":
        """Edge layers ``edge_layers`` all at ``bits`` (default: the reference precision)."""
        b = inst.settings.cloud_bits if bits is None else bits
        return cls.edge_cloud(inst, {name: (b, b) for name in edge_layers})

    def edge_layers(self, inst: Instance) -> list[str]:
        """Edge layers in execution order."""
        return [l.name for l in inst.layers if self.device[l.name] == inst.settings.edge]

    def key(self) -> tuple:
        """Hashable identity, for comparing plans."""
        return tuple(sorted((n, self.device[n], self.weight_bits[n], self.activation_bits[n]) for n in self.device))

    # ----- JSON ------------------------------------------------------------------------
    def to_dict(self, inst: Instance) -> dict[str, Any]:
        layers: dict[str, Any] = {}
        for layer in inst.layers:
            n = layer.name
            entry: dict[str, Any] = {"device": self.device[n]}
            if self.device[n] == inst.settings.edge:
                entry["weight_bits"] = self.weight_bits[n]
                entry["activation_bits"] = self.activation_bits[n]
            layers[n] = entry
        return {"format": FORMAT, "instance": inst.name, "layers": layers}


def plan_layers(inst: Instance, data: Any, where: str = "plan", fmt: str = FORMAT) -> dict[str, Any]:
    """The ``layers`` object of a plan in format ``fmt`` (default ``splitopt-plan/1``),
    checked to be an object naming only the instance's layers; raises InvalidPlan naming
    the field."""
    if not isinstance(data, dict):
        raise InvalidPlan(f"{where}: must be a JSON object")
    if data.get("format", fmt) != fmt:
        raise InvalidPlan(f"{where}.format: expected '{fmt}', got {data.get('format')!r}")
    layers = data.get("layers")
    if not isinstance(layers, dict):
        raise InvalidPlan(f"{where}.layers: must be an object mapping layer name to its placement")
    for name in layers:
        if name not in inst.layer_by_name:
            raise InvalidPlan(f"{where}.layers.{name}: unknown layer (instance '{inst.name}' has no such layer)")
    return layers


def plan_from_dict(inst: Instance, data: Any, where: str = "plan") -> Plan:
    """Parse and check a plan against its instance; raises InvalidPlan naming the field."""
    layers = plan_layers(inst, data, where)
    s = inst.settings
    device, wb, ab = {}, {}, {}
    for layer in inst.layers:
        n = layer.name
        if n not in layers:
            raise InvalidPlan(f"{where}.layers: layer '{n}' is missing")
        entry = layers[n]
        if not isinstance(entry, dict) or "device" not in entry:
            raise InvalidPlan(f"{where}.layers.{n}: must be an object with a 'device'")
        dev = entry["device"]
        if dev not in (s.edge, s.cloud):
            raise InvalidPlan(f"{where}.layers.{n}.device: '{dev}' is neither edge '{s.edge}' nor cloud '{s.cloud}'")
        device[n] = dev
        for key, store in (("weight_bits", wb), ("activation_bits", ab)):
            value = entry.get(key, s.cloud_bits if dev == s.cloud else None)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidPlan(f"{where}.layers.{n}.{key}: must be an integer number of bits, got {value!r}")
            store[n] = value
    plan = Plan(device, wb, ab)
    check_plan(inst, plan, where)
    return plan


def check_plan(inst: Instance, plan: Plan, where: str = "plan") -> None:
    """Raise InvalidPlan unless the plan is well-formed for the instance: every layer on
    the edge or cloud device, edge bit-widths among the candidates, cloud layers at the
    cloud precision, and the edge set closed under predecessors (data flows edge -> cloud
    only). Budgets (memory, error) are not checked here: the evaluator reports them."""
    s = inst.settings
    allowed = inst.candidate_bits()
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
            for key, bits in (("weight_bits", plan.weight_bits[n]), ("activation_bits", plan.activation_bits[n])):
                if bits not in allowed:
                    raise InvalidPlan(
                        f"{where}.layers.{n}.{key}: {bits} bits is not a candidate of problem "
                        f"'{s.problem}' (candidates {list(allowed)})"
                    )
        elif dev == s.cloud:
            for key, bits in (("weight_bits", plan.weight_bits[n]), ("activation_bits", plan.activation_bits[n])):
                if bits != s.cloud_bits:
                    raise InvalidPlan(
                        f"{where}.layers.{n}.{key}: {bits} bits, but cloud layers run at cloud_bits={s.cloud_bits}"
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


def load_plan(inst: Instance, path: str | Path) -> Plan:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise InvalidPlan(f"{path}: cannot read file ({e.strerror})") from e
    except json.JSONDecodeError as e:
        raise InvalidPlan(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    from splitopt.families import family

    parse = family(inst.settings.problem).plan_from_dict
    # accept the whole output of `splitopt solve --json` too
    if isinstance(data, dict) and "plan" in data and "layers" not in data:
        return parse(inst, data["plan"], where=f"{path}.plan")
    return parse(inst, data, where=str(path))
