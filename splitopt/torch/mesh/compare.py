"""A mesh plan's split against the mesh evaluator's bytes, like with like: (1) per device
pair, the bytes of the (tensor, destination) pairs the evaluator's
``MeshData.destinations`` and ``sent_bytes`` give (:func:`evaluator_mesh_crossings`); (2)
per link, the evaluator charges every hop of a tensor's route, once per link of the
union of its routes (multicast tree): :func:`link_bytes` routes each crossing's tensors
over the instance's routes (``MeshData.route``) the same way and must equal
``metrics.links`` bytes (:func:`evaluator_link_bytes`). A tensor sent two hops thus
counts once in (1) and twice in (2). The shared comparison
(:func:`splitopt.torch.split_compare.compare`) asks for both through the mesh side.
"""

from __future__ import annotations

from splitopt.torch.mesh.partition import as_mesh_plan


def evaluator_mesh_crossings(inst, plan) -> list[tuple[str, str, float]]:
    """Mesh plans: ``(producer device, destination device, bytes per sample)`` for every
    device pair, from the data the mesh evaluator schedules its transfers with
    (``MeshData.destinations``: a tensor's readers' devices and, for final outputs, the
    sink; ``MeshData.sent_bytes``): each (tensor, destination) once, whatever the route;
    pairs sorted by the devices' positions in ``instance.devices``."""
    from splitopt.families.mesh.data import MeshData
    from splitopt.families.mesh.plan import check_plan as check_mesh_plan

    data = MeshData(inst)
    plan = as_mesh_plan(plan)
    check_mesh_plan(inst, plan, data=data)
    pairs: dict[tuple[str, str], float] = {}
    for t in data.tensors:
        a = data.producer_device(plan.device, t)
        for b in data.destinations(plan.device, t):
            pairs[(a, b)] = pairs.get((a, b), 0.0) + data.sent_bytes[t]
    return [(a, b, v) for (a, b), v in sorted(pairs.items(), key=lambda kv: (data.dev_index[kv[0][0]],
                                                                             data.dev_index[kv[0][1]]))]


def evaluator_link_bytes(inst, plan) -> dict[str, float]:
    """Mesh plans: bytes per sample over each link ``"u->v"`` as
    :func:`splitopt.families.mesh.evaluate.evaluate` charges them (``metrics.links``:
    every hop of every tensor's multicast tree)."""
    from splitopt.families.mesh.evaluate import evaluate as mesh_evaluate

    return {l.link: float(l.bytes) for l in mesh_evaluate(inst, as_mesh_plan(plan)).links}


def link_bytes(split) -> dict[str, float]:
    """Bytes per sample over each link ``"u->v"`` of the split's instance when every
    (tensor, destination) of its crossings travels along the instance's route
    (:meth:`splitopt.families.mesh.data.MeshData.route`) and a tensor crosses each link of
    the union of its routes once (multicast), which is what the mesh evaluator charges.
    Links that carry nothing are listed with 0. NotApplicable for a split made without an
    instance."""
    from splitopt.core.errors import NotApplicable

    if split.inst is None:
        raise NotApplicable("partition: link bytes need a mesh plan partitioned with its instance")
    from splitopt.families.mesh.data import MeshData

    data = MeshData(split.inst)
    out = {f"{u}->{v}": 0.0 for u, v in data.pairs}
    trees: dict[str, tuple[float, set[tuple[str, str]]]] = {}
    for c in split.crossings:
        for name, elements, bits in c.tensors:
            links = trees.setdefault(name, (elements * bits / 8.0, set()))[1]
            links.update(data.route(c.source, c.target))
    for size, links in trees.values():
        for u, v in links:
            out[f"{u}->{v}"] += size
    return out


def link_report(split, inst) -> tuple[dict[str, object], bool]:
    """Per link the bytes of :func:`link_bytes` beside the evaluator's (``links``), their
    total (``link_bytes``), and whether every link agrees (relative 1e-9)."""
    from splitopt.torch.split_compare import bytes_close

    ours, theirs = link_bytes(split), evaluator_link_bytes(inst, split.plan)
    keys = list(dict.fromkeys([*theirs, *ours]))
    links = [{"link": k, "bytes": ours.get(k, 0.0), "evaluator_bytes": theirs.get(k, 0.0)} for k in keys]
    ok = all(bytes_close(ours.get(k, 0.0), theirs.get(k, 0.0)) for k in keys)
    return {"links": links, "link_bytes": sum(ours.values())}, ok
