"""What the edge/cloud family derives from an instance and its settings, read by every
module of the family: the two devices, the uplink, the layers pinned to the edge with
their ancestors, the bit-widths a plan may use. Imports nothing heavy (networkx only
when the pinned layers are first asked for)."""

from __future__ import annotations

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Device, Link
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def edge_device(inst: EdgeCloudInstance) -> Device:
    """The edge device."""
    return inst.device_by_name[inst.settings.edge]


def cloud_device(inst: EdgeCloudInstance) -> Device:
    """The cloud device."""
    return inst.device_by_name[inst.settings.cloud]


def uplink(inst: EdgeCloudInstance) -> Link:
    """The link from the edge device to the cloud device; InvalidInstance where there is none."""
    s = inst.settings
    link = inst.link_between.get((s.edge, s.cloud))
    if link is None:
        raise InvalidInstance(f"links: no link from edge device '{s.edge}' to cloud device '{s.cloud}'")
    return link


def required_on_edge(inst: EdgeCloudInstance) -> frozenset[str]:
    """``settings.edge_required`` with all their ancestors (computed once per instance)."""

    def build() -> frozenset[str]:
        required = inst.settings.edge_required
        if not required:
            return frozenset()  # without importing networkx (it costs more than a small solve)
        import networkx as nx

        out: set[str] = set()
        for name in required:
            out.add(name)
            out.update(nx.ancestors(inst.graph, name))
        return frozenset(out)

    return inst.derived(("edge_cloud", "required_on_edge"), build)


def candidate_bits(inst: EdgeCloudInstance) -> tuple[int, ...]:
    """Edge bit-widths a plan may use: the candidate set for ``split_bits``, the reference
    precision alone for ``split``."""
    s = inst.settings
    if inst.problem == "split":
        return (s.cloud_bits,)
    return s.bit_widths
