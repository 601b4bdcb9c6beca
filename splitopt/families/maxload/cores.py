"""Placements as group -> device maps, and the CPU-core rule, for the latency objective.

The latency programs decide, per colour group (``splitopt.families.maxload.data``),
an accelerator or "the CPU" (a ``where`` map: group -> accelerator index ``0..k-1`` or
:data:`CPU`). The latency ignores which core a CPU node runs on, but
``check_placement`` asks every core's forward nodes to be convex in the forward DAG
(rule 5), so a placement needs cores that keep it. This module says when such cores
exist and picks them (``formulations/maxload_models.md``, "Latency program", rows 7):

* :func:`cpu_labels`: the least core labels (exact when no colour class has two
  forward nodes);
* :func:`cpu_cores`: labels, or a search over core assignments where they fail;
* :func:`cpu_rule`: which of the three forms of rule 5 the programs carry;
* :func:`placement_of`: the placement of a ``where`` map with its cores;
* :func:`canonical_where`, :func:`canonical_cores`, :func:`core_values`: a placement
  read back in the programs' terms (accelerators and cores numbered by first group).
"""

from __future__ import annotations

from typing import Any, Mapping

from splitopt.core.errors import InvalidPlan
from splitopt.families.maxload.evaluate import convexity_witness
from splitopt.families.maxload.data import Groups
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement

#: where a group is in a ``where`` map (group -> accelerator index 0..k-1, or CPU)
CPU = -1
#: core assignments :func:`cpu_cores` tries at most when its search is bounded
SEARCH_BUDGET = 1000


def may_use_accelerator(inst: MaxloadInstance, gr: Groups, g: int) -> bool:
    """Whether group ``g`` may go on an accelerator at all (one exists, every node has
    supportedOnFpga, the group fits maxSizePerFPGA)."""
    return bool(inst.fpgas) and gr.fpga_ok(inst, g) and gr.size(inst, g) <= inst.max_size_per_fpga


def forward_groups(inst: MaxloadInstance, gr: Groups) -> list[int]:
    """The groups with a forward node: the ones rule 5 constrains."""
    fwd = inst.forward_ids
    return [g for g, members in enumerate(gr.members) if any(v in fwd for v in members)]


def cpu_labels(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int], limit: int | None = None,
               same_class: bool = True) -> dict[int, int] | None:
    """Core labels 1.. of the forward CPU nodes (0 for the other forward nodes); None
    when one would exceed ``limit`` (default: maxCPUs; ``-1``: no limit, allowed only
    with ``same_class=False`` or when no colour class has two forward nodes, where the
    labels are longest-path counts and always settle).

    The least solution of: y[v] >= y[u] on every forward edge (u, v), y[v] >= y[u] + 1
    when v is on the CPU and u is not, y[v] >= 1 on the CPU, and equal labels for the
    forward CPU nodes of one colour class. Label j -> ``cpu{j-1}`` always meets rule 5 (a
    path that leaves a core through a non-CPU node comes back only with a larger label).
    When no colour class has two forward nodes, None also proves that no assignment of
    the CPU nodes to maxCPUs cores meets rule 5 (the labels count the CPU runs of a path,
    and two runs of one path cannot share a core); with such classes it proves nothing
    (see :func:`cpu_cores`)."""
    cap = inst.max_cpus if limit is None else limit
    fwd = inst.forward_ids
    order = [v for v in inst.topo_order if v in fwd]
    on_cpu = {v: where[gr.of[v]] == CPU for v in order}
    classes = [[v for v in m if v in fwd] for m in gr.members]
    classes = [ids for ids in classes if len(ids) >= 2 and on_cpu[ids[0]]] if same_class else []
    if cap < 0 and classes:
        raise ValueError("cpu_labels: no limit with colour classes of two forward nodes on the CPU")
    y = {v: 0 for v in order}
    while True:
        changed = False
        for v in order:
            new = 1 if on_cpu[v] else 0
            for u in inst.predecessors[v]:
                if u in fwd:
                    new = max(new, y[u] + (1 if on_cpu[v] and not on_cpu[u] else 0))
            if new > y[v]:
                y[v], changed = new, True
        for ids in classes:
            top = max(y[v] for v in ids)
            for v in ids:
                if y[v] < top:
                    y[v], changed = top, True
        if cap >= 0 and any(label > cap for label in y.values()):
            return None
        if not changed:
            return y


def cores_convex(inst: MaxloadInstance, gr: Groups, cores: Mapping[int, int]) -> bool:
    """Whether every core's forward nodes form a convex set of the forward DAG (rule 5);
    ``cores``: group -> core index."""
    fwd = inst.forward_ids
    on: dict[int, set[int]] = {}
    for g, j in cores.items():
        on.setdefault(j, set()).update(v for v in gr.members[g] if v in fwd)
    return all(convexity_witness(inst, frozenset(ids), fwd) is None for ids in on.values())


def cpu_cores(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int], search: bool = False,
              budget: int | None = None) -> dict[int, int] | None:
    """Core index 0..maxCPUs-1 of every CPU group with a forward node, meeting rule 5, or
    None.

    First the least labels of :func:`cpu_labels` (exact when no colour class has two
    forward nodes). Where they fail and such a class is on the CPU, ``search=True`` tries
    the assignments of the CPU groups to cores (numbered by first use; exponential, for
    brute force on small instances), at most ``budget`` of them when given (then None
    may also mean "not found within the budget"); ``search=False`` gives up (None)."""
    cpu_groups = [g for g in forward_groups(inst, gr) if where[g] == CPU]
    labels = cpu_labels(inst, gr, where)
    fwd = inst.forward_ids
    if labels is not None:
        return {g: labels[next(v for v in gr.members[g] if v in fwd)] - 1 for g in cpu_groups}
    if not search or not any(sum(1 for v in gr.members[g] if v in fwd) >= 2 for g in cpu_groups):
        return None
    cores: dict[int, int] = {}
    left = [budget if budget is not None else -1]

    def walk(i: int, used: int) -> dict[int, int] | None:
        if i == len(cpu_groups):
            left[0] -= 1
            return dict(cores) if cores_convex(inst, gr, cores) else None
        for j in range(min(used + 1, inst.max_cpus)):
            if left[0] == 0:
                return None
            cores[cpu_groups[i]] = j
            found = walk(i + 1, max(used, j + 1))
            if found is not None:
                return found
        return None

    return walk(0, 0)


def capped_cores(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int]) -> dict[int, int]:
    """Core of every CPU group with a forward node by the least labels of its forward DAG
    (colour classes not equalised, so they always settle) capped at maxCPUs: a
    well-formed assignment for a ``where`` map that :func:`cpu_cores` found none for;
    ``check_placement`` judges it (and finds it breaks rule 5 whenever no assignment
    meets it and no colour class has two forward nodes)."""
    fwd = inst.forward_ids
    labels = cpu_labels(inst, gr, where, limit=-1, same_class=False)
    assert labels is not None, "with no limit the labels always settle"
    out = {}
    for g in forward_groups(inst, gr):
        if where[g] == CPU:
            label = labels[next(v for v in gr.members[g] if v in fwd)]
            out[g] = max(0, min(label, inst.max_cpus) - 1)
    return out


def placement_of(inst: MaxloadInstance, gr: Groups, where: Mapping[int, int], cores: Mapping[int, int] | None = None,
                 search: bool = False, budget: int | None = None) -> MaxloadPlacement | None:
    """The placement of a group -> device map: accelerator i is ``fpga{i}``; a CPU group
    with a forward node goes to ``cpu{cores[g]}`` (default: :func:`cpu_cores` with
    ``search`` and ``budget``), a backward-only CPU group to cpu0. None when no core
    assignment was found."""
    if cores is None:
        cores = cpu_cores(inst, gr, where, search, budget)
        if cores is None:
            return None
    device: dict[int, str] = {}
    for g, members in enumerate(gr.members):
        name = f"fpga{where[g]}" if where[g] != CPU else f"cpu{cores.get(g, 0)}"
        for v in members:
            device[v] = name
    return MaxloadPlacement(device)


def cpu_rule(inst: MaxloadInstance, gr: Groups) -> str:
    """How the programs keep rule 5 on the CPU cores: ``"none"`` when it cannot bind (no
    colour class with two forward nodes, and a forward path of m nodes holds at most
    ceil(m / 2) <= maxCPUs CPU runs), ``"labels"`` (no such class: the least labels of
    :func:`cpu_labels` are exact), ``"cores"`` (a class with two forward nodes: one core
    variable per CPU class and convexity rows per core)."""
    if inst.max_cpus == 0:
        return "none"
    fwd = inst.forward_ids
    if any(sum(1 for v in m if v in fwd) >= 2 for m in gr.members):
        return "cores"
    nodes_on_path: dict[int, int] = {}
    for v in inst.topo_order:
        if v in fwd:
            nodes_on_path[v] = 1 + max((nodes_on_path[u] for u in inst.predecessors[v] if u in fwd), default=0)
    longest = max(nodes_on_path.values(), default=0)
    return "labels" if (longest + 1) // 2 > inst.max_cpus else "none"


def canonical_cores(inst: MaxloadInstance, gr: Groups, placement: MaxloadPlacement) -> dict[int, int]:
    """CPU group with a forward node -> its core in ``placement``, cores renumbered by
    their first group (the labelling the symmetry breaking of the cores keeps)."""
    index: dict[str, int] = {}
    out: dict[int, int] = {}
    for g in forward_groups(inst, gr):
        name = placement.device[gr.members[g][0]]
        if name.startswith("cpu"):
            out[g] = index.setdefault(name, len(index))
    return out


def canonical_where(inst: MaxloadInstance, gr: Groups, placement: MaxloadPlacement) -> dict[int, int]:
    """Group -> accelerator index (accelerators renumbered by their first group: the
    labelling the symmetry breaking keeps) or CPU. InvalidPlan if a colour class is split
    (the programs' variables are per group)."""
    dev = placement.device
    name: dict[int, str] = {}
    for g, members in enumerate(gr.members):
        names = {dev[v] for v in members}
        if len(names) != 1:
            raise InvalidPlan(f"colour class of node {members[0]} is on several devices: {sorted(names)}")
        name[g] = names.pop()
    index: dict[str, int] = {}
    where: dict[int, int] = {}
    for g in range(len(gr.members)):
        if name[g].startswith("cpu"):
            where[g] = CPU
            continue
        if name[g] not in index:
            index[name[g]] = len(index)
        where[g] = index[name[g]]
    return where


def core_values(inst: MaxloadInstance, gr: Groups, placement: MaxloadPlacement, kappa: Mapping[tuple[int, int], Any],
                zc: Mapping[tuple[int, int], Any], wc: Mapping[tuple[int, int], Any]) -> dict[Any, int]:
    """Values of the core variables (rule "cores") for ``placement``: kappa from its cores
    renumbered by first group, z[v, j] = 1 iff v is or reaches (in the forward DAG) a
    forward node of core j, wc as the "first" symmetry breaking defines it. Variable ->
    0/1. InvalidPlan when the placement uses more cores than the program has."""
    cores = canonical_cores(inst, gr, placement)
    if any((g, j) not in kappa for g, j in cores.items()):
        raise InvalidPlan(f"the CPU nodes use more cores than maxCPUs={inst.max_cpus}")
    out: dict[Any, int] = {kappa[g, j]: int(cores.get(g) == j) for (g, j) in kappa}
    fwd = inst.forward_ids
    for j in {j for (_, j) in kappa}:
        reach = {v for g, jj in cores.items() if jj == j for v in gr.members[g] if v in fwd}
        stack = list(reach)
        while stack:
            v = stack.pop()
            for u in inst.predecessors[v]:
                if u in fwd and u not in reach:
                    reach.add(u)
                    stack.append(u)
        for (v, jj), var in zc.items():
            if jj == j:
                out[var] = int(v in reach)
    for (g, j), var in wc.items():
        out[var] = int(any(cores.get(h) == j for h in range(g + 1)))
    return out
