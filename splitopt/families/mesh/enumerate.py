"""Every mesh plan that can be optimal, for the brute-force backend (tiny instances):
every route-valid assignment of layers to devices that meets the memory limits (an
assignment that breaks one is never optimal) and, for each, every order of the tasks
on every resource that keeps each task after its own data ancestors on that resource
(the others deadlock). Every optimal schedule is semi-active for some orders, so the
best plan enumerated is optimal."""

from __future__ import annotations

import itertools
from typing import Iterator

from splitopt.core.errors import InvalidPlan, NotApplicable
from splitopt.families.mesh.data import MeshData, mesh_data
from splitopt.families.mesh.evaluate import memory_violations
from splitopt.families.mesh.plan import MeshPlan, check_routes
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.tasks import build_tasks

#: brute force refuses instances with more layers than this
MAX_LAYERS = 8


def _assignments(data: MeshData):
    """Every route-valid assignment (device per layer, layers in file order)."""
    for combo in itertools.product(data.devices, repeat=len(data.layers)):
        device_map = dict(zip(data.layers, combo))
        try:
            check_routes(data, device_map, "plan")
        except InvalidPlan:
            continue
        yield device_map


def _resource_orders(tasks) -> list[list[tuple[str, tuple[str, ...]]]]:
    """Per resource with two or more positive-duration tasks: every order of them that
    keeps each task after its own data ancestors on that resource."""
    ancestors: dict[str, set[str]] = {}

    def anc(tid: str) -> set[str]:
        if tid not in ancestors:
            out: set[str] = set()
            for p in tasks[tid].preds:
                out.add(p)
                out |= anc(p)
            ancestors[tid] = out
        return ancestors[tid]

    by_res: dict[str, list[str]] = {}
    for tid, t in tasks.items():
        if t.duration > 0:
            by_res.setdefault(t.resource, []).append(tid)
    choices = []
    for res, ids in sorted(by_res.items()):
        if len(ids) < 2:
            continue
        perms = []
        for perm in itertools.permutations(sorted(ids)):
            pos = {tid: k for k, tid in enumerate(perm)}
            if all(pos[a] < pos[b] for b in perm for a in anc(b) if a in pos):
                perms.append((res, perm))
        choices.append(perms)
    return choices


def count_schedules(data: MeshData, stop_above: int | None = None) -> int:
    total = 0
    for device_map in _assignments(data):
        n = 1
        for perms in _resource_orders(build_tasks(data, device_map)):
            n *= len(perms)
        total += n
        if stop_above is not None and total > stop_above:
            break
    return total


def enumerate_plans(inst: MeshInstance, limit: int) -> Iterator[MeshPlan]:
    """The plans of the module docstring; NotApplicable above ``limit`` schedules."""
    data = mesh_data(inst)
    if len(data.devices) ** len(data.layers) > 50 * limit or len(data.layers) > MAX_LAYERS:
        raise NotApplicable(f"brute-force: instance '{inst.name}' is too big ({len(data.layers)} layers, "
                            f"{len(data.devices)} devices); use cpsat")
    count = count_schedules(data, stop_above=limit)
    if count > limit:
        raise NotApplicable(f"brute-force: instance '{inst.name}' has more than {limit:,} schedules; use cpsat")

    def plans() -> Iterator[MeshPlan]:
        for device_map in _assignments(data):
            if memory_violations(data, device_map):
                continue
            for combo in itertools.product(*_resource_orders(build_tasks(data, device_map))):
                yield MeshPlan(dict(device_map), dict(combo))

    return plans()
