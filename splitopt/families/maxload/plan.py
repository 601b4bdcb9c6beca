"""Placements of the peer benchmark's nodes: node id -> device (``fpga<i>`` or ``cpu<i>``).

The plan file is the experts' layout (``human-experts/*.json``: node ids per
accelerator and per CPU core, group i is device i) with an optional ``format``
(``splitopt-maxload-plan/1``) and ``instance`` name; on a training graph, nodes an
expert file leaves out follow their colour class (the peer evaluator's rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.core.jsonfile import cut, json_type, read_json, shown
from splitopt.core.plan import check_plan_fields, check_plan_header
from splitopt.families.maxload.instance import MaxloadInstance

PLAN_FORMAT = "splitopt-maxload-plan/1"
#: the top-level fields of a plan file (``maxLoad``, as ``load`` in a group, is in the
#: experts' files and ignored: -1 there)
FIELDS = ("format", "instance", "fpgas", "cpus", "maxLoad")
#: the fields of one device group
GROUP_FIELDS = ("nodes", "load")
_DEVICE = re.compile(r"^(fpga|cpu)(0|[1-9][0-9]*)$")


def device_kind(device: str) -> tuple[str, int]:
    """("fpga" or "cpu", index) of a device name; InvalidPlan for another name."""
    m = _DEVICE.match(device)
    if not m:
        raise InvalidPlan(f"device '{device}': must be named fpga<i> or cpu<i>")
    return m.group(1), int(m.group(2))


def device_key(device: str) -> tuple[int, int]:
    """Sort key: accelerators first, then by index."""
    kind, i = device_kind(device)
    return (0 if kind == "fpga" else 1, i)


@dataclass(frozen=True)
class MaxloadPlacement:
    """Node id -> device (``fpga<i>`` or ``cpu<i>``)."""

    device: Mapping[int, str]
    source: str = ""

    @classmethod
    def from_groups(
        cls, fpgas: Iterable[Iterable[int]] = (), cpus: Iterable[Iterable[int]] = (), source: str = ""
    ) -> "MaxloadPlacement":
        """Group i of ``fpgas`` goes to ``fpga<i>``, group j of ``cpus`` to ``cpu<j>``; a
        node listed twice is an InvalidPlan."""
        device: dict[int, str] = {}
        for kind, groups in (("fpga", fpgas), ("cpu", cpus)):
            for i, group in enumerate(groups):
                for nid in group:
                    if nid in device:
                        raise InvalidPlan(
                            f"{source or 'placement'}: node {nid} is listed twice ({device[nid]} and {kind}{i})"
                        )
                    device[nid] = f"{kind}{i}"
        return cls(device, source)

    @cached_property
    def nodes_on(self) -> dict[str, frozenset[int]]:
        """Device -> its node ids (only devices that hold a node)."""
        out: dict[str, set[int]] = {}
        for nid, dev in self.device.items():
            out.setdefault(dev, set()).add(nid)
        return {d: frozenset(s) for d, s in sorted(out.items(), key=lambda kv: device_key(kv[0]))}

    def key(self) -> tuple:
        """Hashable identity, for comparing placements."""
        return tuple(sorted(self.device.items()))

    def to_dict(self, inst: "MaxloadInstance") -> dict[str, Any]:
        """The plan file: the expert layout plus ``format`` and ``instance``."""
        return {"format": PLAN_FORMAT, "instance": inst.name, **self.to_expert_json()}

    def to_expert_json(self) -> dict[str, list[dict[str, list[int]]]]:
        """The expert-file layout, ``{"fpgas": [{"nodes": [...]}, ...], "cpus": [...]}``
        (group i is device i; unused devices below the highest index are empty groups);
        :func:`parse_expert` reads it back."""
        out: dict[str, list[dict[str, list[int]]]] = {"fpgas": [], "cpus": []}
        for dev, ids in self.nodes_on.items():
            kind, i = device_kind(dev)
            lst = out[kind + "s"]
            while len(lst) <= i:
                lst.append({"nodes": []})
            lst[i] = {"nodes": sorted(ids)}
        return out


def validate_placement(inst: MaxloadInstance, placement: MaxloadPlacement) -> None:
    """Structure only: every node placed once, no unknown node, device names well formed.
    Rule violations (memory, colours, ...) are check_placement's business."""
    where = placement.source or "placement"
    unknown = sorted(set(placement.device) - set(inst.node_by_id))
    if unknown:
        raise InvalidPlan(f"{where}: unknown node id {unknown[0]} ({len(unknown)} unknown) for {inst.name}")
    missing = sorted(set(inst.node_by_id) - set(placement.device))
    if missing:
        raise InvalidPlan(
            f"{where}: node {missing[0]} is not placed ({len(missing)} missing, e.g. {missing[:5]}) for {inst.name}"
        )
    for dev in set(placement.device.values()):
        device_kind(dev)


def derive_from_colour_classes(inst: MaxloadInstance, partial: Mapping[int, str], source: str = "") -> MaxloadPlacement:
    """Complete a placement that lists only some nodes (e.g. an inference split applied to
    a training graph): an unlisted node goes to the device of the listed nodes of its
    colour class. That device must exist and be unique, else InvalidPlan naming the node.
    This is the rule of the paper's own evaluator (dp.cpp, "augment human expert to
    training with colocations"); on the four layer-granularity training graphs every
    backward node ``<name>grad`` shares its class with exactly one forward node
    ``<name>``, so the derivation is total there."""
    where = source or "placement"
    device = dict(partial)
    for n in inst.nodes:
        if n.id in device:
            continue
        if n.color_class is None:
            raise InvalidPlan(f"{where}: node {n.id} ({n.name}) is not placed and has no colour class to follow")
        devs = {partial[m] for m in inst.colour_classes[n.color_class] if m in partial}
        if not devs:
            raise InvalidPlan(
                f"{where}: node {n.id} ({n.name}) is not placed and no node of its colour class "
                f"{n.color_class} is placed"
            )
        if len(devs) > 1:
            raise InvalidPlan(
                f"{where}: node {n.id} ({n.name}) is not placed and its colour class {n.color_class} "
                f"is on several devices {sorted(devs, key=device_key)}"
            )
        device[n.id] = devs.pop()
    return MaxloadPlacement(device, source)


def parse_expert(inst: MaxloadInstance, data: Any, source: str = "") -> MaxloadPlacement:
    """Placement from expert-file data ``{"cpus": [{"nodes": [...]}, ...], "fpgas": [...]}``
    (``load`` and ``maxLoad`` are ignored: -1 in the shipped files). Nodes not listed are
    derived from their colour class (:func:`derive_from_colour_classes`); if that fails
    the file is an InvalidPlan. Unknown or repeated ids are InvalidPlan too."""
    where = source or "expert"
    check_plan_header(data, inst.name, where, PLAN_FORMAT, FIELDS)
    groups: dict[str, list[list[int]]] = {}
    for kind in ("fpgas", "cpus"):
        if kind not in data:
            raise InvalidPlan(f"{where}: missing key '{kind}'")
        if not isinstance(data[kind], list):
            raise InvalidPlan(f"{where}.{kind}: must be a list, got {json_type(data[kind])}")
        groups[kind] = []
        for i, g in enumerate(data[kind]):
            if not isinstance(g, dict) or not isinstance(g.get("nodes"), list):
                raise InvalidPlan(f"{where}.{kind}[{i}]: must be an object with a 'nodes' list, got {shown(g)}")
            check_plan_fields(g, GROUP_FIELDS, f"{where}.{kind}[{i}]")
            ids = g["nodes"]
            for j, nid in enumerate(ids):
                if isinstance(nid, bool) or not isinstance(nid, int):
                    raise InvalidPlan(f"{where}.{kind}[{i}].nodes[{j}]: must be an integer id, got {shown(nid)}")
                if nid not in inst.node_by_id:
                    raise InvalidPlan(f"{where}.{kind}[{i}].nodes[{j}]: unknown node id {cut(str(nid))} for {inst.name}")
            groups[kind].append(ids)
    partial = MaxloadPlacement.from_groups(groups["fpgas"], groups["cpus"], source=where).device
    return derive_from_colour_classes(inst, partial, where)


def load_expert(inst: MaxloadInstance, path: str | Path) -> MaxloadPlacement:
    """Read a ``human-experts/*.json`` file (or a plan file) for ``inst``. Hand-formatted
    files (tabs, blank lines, a byte-order mark) are read as they are; a file that is not
    JSON is an InvalidPlan giving line and column."""
    path = Path(path)
    return parse_expert(inst, read_json(path, InvalidPlan), source=str(path))
