"""Checks of a chain instance: the declared line of devices, its links, precision, and
that every layer fits some device."""

from __future__ import annotations

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Instance
from splitopt.families.chain.data import compute_table
from splitopt.families.chain.evaluate import MEMORY_RTOL
from splitopt.core.jsonfile import byte_count


def check_chain(inst: Instance) -> None:
    """A declared chain needs a link between consecutive devices, no link back (a cycle),
    the reference precision on every chain device, and every layer must fit somewhere."""
    s = inst.settings
    chain = s.chain
    if len(chain) < 2:
        raise InvalidInstance("instance.settings.chain: problem 'chain' needs at least two devices in chain order")
    if s.mesh or s.multiview:
        raise InvalidInstance(f"instance.settings.{'mesh' if s.mesh else 'multiview'}: not a setting of problem 'chain'")
    index = {name: i for i, name in enumerate(chain)}
    for a, b in zip(chain, chain[1:]):
        if (a, b) not in inst.link_between:
            raise InvalidInstance(
                f"instance.links: no link from '{a}' to '{b}', consecutive devices of settings.chain"
            )
    for i, link in enumerate(inst.links):
        if link.source in index and link.target in index and index[link.target] < index[link.source]:
            raise InvalidInstance(
                f"instance.links[{i}]: link '{link.source}' -> '{link.target}' runs against settings.chain "
                "and closes a cycle in the device graph; a chain is a line"
            )
    if s.edge != chain[0]:
        raise InvalidInstance(f"instance.settings.edge: '{s.edge}' must be the first chain device '{chain[0]}' (where the input arrives)")
    for name in chain:
        dev = inst.device_by_name[name]
        if s.cloud_bits not in dev.bit_widths:
            raise InvalidInstance(
                f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by chain device '{name}' "
                f"(supports {list(dev.bit_widths)})"
            )
    if s.edge_required:
        raise InvalidInstance("instance.settings.edge_required: not defined for problem 'chain'")
    if s.cloud is not None and s.cloud != chain[-1]:
        raise InvalidInstance(f"instance.settings.cloud: '{s.cloud}' is not the last chain device '{chain[-1]}'; "
                              "problem 'chain' reads the line from settings.chain (omit cloud or name the last device)")
    if s.edge_memory_bytes != inst.device_by_name[chain[0]].memory_bytes:
        raise InvalidInstance(f"instance.settings.edge_memory_bytes: {s.edge_memory_bytes:g}: not a setting of problem "
                              "'chain' (each device's memory_bytes limits it)")
    compute_table(inst)  # every layer's latency on every chain device: a missing measured entry is named here
    for i, layer in enumerate(inst.layers):
        need = (layer.weights + layer.output_elements) * s.cloud_bits / 8.0
        if all(need > inst.device_by_name[m].memory_bytes * (1 + MEMORY_RTOL) for m in chain):
            raise InvalidInstance(
                f"instance.graph.layers[{i}]: layer '{layer.name}' fits on no chain device: its weights and "
                f"output need {byte_count(need)} B, the largest device memory is "
                f"{byte_count(max(inst.device_by_name[m].memory_bytes for m in chain))} B"
            )
