"""Why a chain instance has no plan: the memory limit none meets."""

from __future__ import annotations

from splitopt.core.jsonfile import byte_count
from splitopt.families.chain.data import chain_tensors
from splitopt.families.chain.settings import ChainInstance


def diagnose(inst: ChainInstance) -> str:
    """Name the memory limit that no chain plan can meet."""
    tensors = chain_tensors(inst)
    first = inst.settings.chain[0]
    raw = max((tensors.held_bytes[t.name] for t in inst.inputs), default=0.0)
    limit = inst.device_by_name[first].memory_bytes
    if raw > limit:
        return (f"infeasible: the raw input ({byte_count(raw)} B) does not fit the memory of the first chain device "
                f"'{first}' ({byte_count(limit)} B), where it arrives")
    return ("infeasible: no placement meets every device memory limit "
            f"({', '.join(f'{m} {byte_count(inst.device_by_name[m].memory_bytes)} B' for m in inst.settings.chain)})")
