"""Why a mesh instance has no plan: a layer no device holds, routes that no placement
meets, or the memory limits that bind (lifting which one would allow a plan)."""

from __future__ import annotations

from splitopt.core.jsonfile import byte_count
from splitopt.families.mesh.data import MEMORY_RTOL, mesh_data
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.structure import assignment_feasible


def diagnose(inst: MeshInstance) -> str:
    """Name the binding limit of an instance no plan can satisfy (memory is the only
    limit; routes restrict where layers may go)."""
    data = mesh_data(inst)
    for n in data.layers:
        need = data.weight_bytes[n] + data.working_bytes[n]
        fits = [d for d in data.devices if need <= data.limit[d] * (1 + MEMORY_RTOL)]
        if not fits:
            biggest = max(data.devices, key=lambda d: data.limit[d])
            return (
                f"infeasible: layer '{n}' needs {byte_count(need)} B (weights {byte_count(data.weight_bytes[n])} "
                "+ working set "
                f"{byte_count(data.working_bytes[n])}), more than any device's memory limit (largest: '{biggest}', "
                f"{byte_count(data.limit[biggest])} B)"
            )
    if assignment_feasible(data):
        return "feasible: a plan meets every memory limit"
    if not assignment_feasible(data, lifted=frozenset(data.devices)):
        return (
            f"infeasible: even without memory limits no placement lets every tensor reach its readers"
            f"{' and the final outputs reach sink ' + repr(data.sink) if data.options.deliver_outputs else ''} "
            f"with routing '{data.options.routing}' (settings.mesh.routing)"
        )
    alone = [d for d in data.devices if assignment_feasible(data, lifted=frozenset({d}))]
    total = sum(data.weight_bytes.values())
    if alone:
        names = ", ".join(f"'{d}' ({byte_count(data.limit[d])} B)" for d in alone)
        return (
            f"infeasible: device memory limits bind; lifting any one of these alone would allow a plan: {names} "
            f"(the model has {byte_count(total)} B of weights; routes restrict where layers may go)"
        )
    limits = ", ".join(f"'{d}' {byte_count(data.limit[d])} B" for d in data.devices)
    return (
        f"infeasible: the device memory limits together ({limits}) cannot hold the model's "
        f"{byte_count(total)} B of weights plus working sets under the routing constraints; no single limit "
        "lifted helps"
    )
