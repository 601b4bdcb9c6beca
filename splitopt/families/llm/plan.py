"""llm plans: the devices in pipeline order, each with a contiguous range of the model's
parts and the bit-width of its weights; the JSON form (``splitopt-llm-plan/1``) and the
layer assignment runtimes take.

A plan document::

    {"format": "splitopt-llm-plan/1", "instance": "llama31_8b_3dev",
     "stages": [{"device": "laptop", "layers": ["embedding", "block_13"], "weight_bits": 8},
                {"device": "desktop", "layers": ["block_14", "head"], "weight_bits": 16}],
     "runtime": [...]}

``stages`` lists the devices in order: the first runs the embedding (the prompt arrives
there), each next one the parts after its predecessor's, the last the head. ``runtime``
(written by splitopt, optional when read; if given it must be what the stages imply) is
the same plan as runtimes of this kind take it: per device its part range ``[start, end)``
and decoder-block range ``[first_block, end_block)`` (exo's start_layer / end_layer),
whether it holds the embedding and the head, its weight and KV cache bits and the KV cache
it allocates (tokens: context limit x streams).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from splitopt.core.errors import InvalidPlan
from splitopt.core.instance import Instance
from splitopt.core.jsonfile import cut, shown
from splitopt.core.plan import check_plan_fields, check_plan_header
from splitopt.families.llm.data import BLOCK, EMBEDDING, HEAD
from splitopt.families.llm.settings import PLAN_FORMAT, LlmSettings

FIELDS = ("format", "instance", "stages", "runtime", "objective_ms", "note")
STAGE_FIELDS = ("device", "layers", "weight_bits")


@dataclass(frozen=True)
class Stage:
    """One device's share: parts ``start .. end - 1`` (indices in execution order) at
    ``bits``-bit weights."""

    device: str
    start: int
    end: int
    bits: int


@dataclass(frozen=True)
class LlmPlan:
    """The stages in pipeline order (the first runs the first part)."""

    stages: tuple[Stage, ...]

    def key(self) -> tuple:
        return tuple((s.device, s.start, s.end, s.bits) for s in self.stages)

    def to_dict(self, inst: Instance[LlmSettings]) -> dict[str, Any]:
        names = [layer.name for layer in inst.layers]
        return {"format": PLAN_FORMAT, "instance": inst.name,
                "stages": [{"device": s.device, "layers": [names[s.start], names[s.end - 1]], "weight_bits": s.bits}
                           for s in self.stages],
                "runtime": runtime_assignment(inst, self)}


def plan_of(stages: list[tuple[str, int, int, int]]) -> LlmPlan:
    """A plan from ``(device, start, end, bits)`` tuples in order."""
    return LlmPlan(tuple(Stage(d, int(a), int(b), int(w)) for d, a, b, w in stages))


def runtime_assignment(inst: Instance[LlmSettings], plan: LlmPlan) -> list[dict[str, Any]]:
    """The plan as runtimes take it (module docstring), one entry per device in order."""
    s = inst.settings
    ops = [layer.op for layer in inst.layers]
    block_index = [sum(1 for op in ops[:i] if op == BLOCK) for i in range(len(ops) + 1)]
    out = []
    for st in plan.stages:
        out.append({"device": st.device, "start": st.start, "end": st.end,
                    "first_block": block_index[st.start], "end_block": block_index[st.end],
                    "embedding": EMBEDDING in ops[st.start:st.end], "head": HEAD in ops[st.start:st.end],
                    "weight_bits": st.bits, "kv_bits": s.kv_bits,
                    "kv_cache_tokens": s.context_limit * s.streams if block_index[st.end] > block_index[st.start]
                    else 0})
    return out


def check_plan(inst: Instance[LlmSettings], plan: LlmPlan, where: str = "plan") -> None:
    """InvalidPlan (one line naming the field) unless the plan is well-formed: usable
    devices, each once, at a bit-width it runs among ``settings.bit_widths``, whose ranges
    cover the parts in order. Limits (memory, links, pins, the error budget) are the
    evaluator's to report."""
    s = inst.settings
    n = len(inst.layers)
    if not isinstance(plan, LlmPlan) or not isinstance(plan.stages, tuple) or not plan.stages:
        raise InvalidPlan(f"{where}.stages: a plan needs at least one stage")
    seen: set[str] = set()
    at = 0
    for k, st in enumerate(plan.stages):
        here = f"{where}.stages[{k}]"
        if not isinstance(st, Stage):
            raise InvalidPlan(f"{here}: must be a Stage, got {type(st).__name__}")
        device = inst.device_by_name.get(st.device) if isinstance(st.device, str) else None
        if device is None:
            raise InvalidPlan(f"{here}.device: unknown device {shown(st.device)}")
        if st.device in s.exclude:
            raise InvalidPlan(f"{here}.device: '{cut(st.device)}' is excluded (settings.exclude)")
        if st.device in seen:
            raise InvalidPlan(f"{here}.device: '{cut(st.device)}' runs two stages (a device runs one contiguous "
                              "range)")
        seen.add(st.device)
        if st.bits not in s.bit_widths or st.bits not in device.bit_widths:
            raise InvalidPlan(f"{here}.weight_bits: {shown(st.bits)} bits, but device '{cut(st.device)}' runs "
                              f"{sorted(set(device.bit_widths) & set(s.bit_widths))} of settings.bit_widths "
                              f"{list(s.bit_widths)}")
        if st.start != at or not at < st.end <= n:
            raise InvalidPlan(f"{here}.layers: must start at part {at} ('{inst.layers[min(at, n - 1)].name}') and "
                              f"end after it within the {n} parts, got [{st.start}, {st.end})")
        at = st.end
    if at != n:
        raise InvalidPlan(f"{where}.stages: the stages end before the last part '{inst.layers[-1].name}'")


def plan_from_dict(inst: Instance[LlmSettings], raw: Any, where: str = "plan") -> LlmPlan:
    """Parse and check a plan document (module docstring); InvalidPlan names the field."""
    check_plan_header(raw, inst.name, where, PLAN_FORMAT, FIELDS)
    entries = raw.get("stages")
    if not isinstance(entries, list) or not entries:
        raise InvalidPlan(f"{where}.stages: must list the stages (device, layers, weight_bits), got {shown(entries)}")
    position = {layer.name: i for i, layer in enumerate(inst.layers)}
    stages = []
    for k, entry in enumerate(entries):
        here = f"{where}.stages[{k}]"
        if not isinstance(entry, dict):
            raise InvalidPlan(f"{here}: must be an object (device, layers, weight_bits), got {shown(entry)}")
        check_plan_fields(entry, STAGE_FIELDS, here)
        device, layers, bits = entry.get("device"), entry.get("layers"), entry.get("weight_bits")
        if not isinstance(device, str):
            raise InvalidPlan(f"{here}.device: must be a device name, got {shown(device)}")
        if not (isinstance(layers, list) and len(layers) == 2 and all(isinstance(x, str) for x in layers)):
            raise InvalidPlan(f"{here}.layers: must be [first layer, last layer], got {shown(layers)}")
        for x in layers:
            if x not in position:
                raise InvalidPlan(f"{here}.layers: unknown layer {shown(x)}")
        if isinstance(bits, bool) or not isinstance(bits, int):
            raise InvalidPlan(f"{here}.weight_bits: must be an integer number of bits, got {shown(bits)}")
        stages.append(Stage(device, position[layers[0]], position[layers[1]] + 1, bits))
    plan = LlmPlan(tuple(stages))
    check_plan(inst, plan, where)
    runtime = raw.get("runtime")
    if runtime is not None and runtime != runtime_assignment(inst, plan):
        raise InvalidPlan(f"{where}.runtime: does not match {where}.stages (it is derived from them: remove it or "
                          "write both from one plan)")
    return plan
