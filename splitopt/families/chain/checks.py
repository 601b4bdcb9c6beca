"""Checks of a chain instance: the declared line of devices, its links, precision, and
that every layer fits some device."""

from __future__ import annotations

from splitopt.core.errors import InvalidInstance
from splitopt.families.chain.data import compute_table
from splitopt.families.chain.evaluate import MEMORY_RTOL
from splitopt.core.jsonfile import byte_count
from splitopt.families.chain.settings import ChainInstance


def check_chain(inst: ChainInstance) -> None:
    """A declared chain needs a link between consecutive devices, no link back (a cycle),
    the reference precision on every chain device, and every layer must fit somewhere."""
    s = inst.settings
    chain = s.chain
    if len(chain) < 2:
        raise InvalidInstance("instance.settings.chain: problem 'chain' needs at least two devices in chain order")
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
    for name in chain:
        dev = inst.device_by_name[name]
        if s.cloud_bits not in dev.bit_widths:
            raise InvalidInstance(
                f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by chain device '{name}' "
                f"(supports {list(dev.bit_widths)})"
            )
    compute_table(inst)  # every layer's latency on every chain device: a missing measured entry is named here
    for i, layer in enumerate(inst.layers):
        need = (layer.weights + layer.output_elements) * s.cloud_bits / 8.0
        if all(need > inst.device_by_name[m].memory_bytes * (1 + MEMORY_RTOL) for m in chain):
            raise InvalidInstance(
                f"instance.graph.layers[{i}]: layer '{layer.name}' fits on no chain device: its weights and "
                f"output need {byte_count(need)} B, the largest device memory is "
                f"{byte_count(max(inst.device_by_name[m].memory_bytes for m in chain))} B"
            )
