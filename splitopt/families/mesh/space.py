"""The mesh search space: one device gene per layer (in execution order) and one
priority permutation of the layers.

Repair: the priority becomes a topological order (Kahn's algorithm taking, among the
layers whose inputs are placed, the one earliest in the priority), and each layer, in
that order, keeps its device if its inputs can reach it over the routes (and, for a
final output, it can reach the sink), else takes the first device in instance order
that can; if none can, the layer goes where its first input is. Decoding orders every
resource's tasks by (priority rank of the tensor's producer, hop, link), which is
consistent with the data flow on every resource at once, so no plan deadlocks. Memory
limits are left to the evaluator."""

from __future__ import annotations

import heapq

from splitopt.families.mesh.data import mesh_data
from splitopt.families.mesh.plan import MeshPlan
from splitopt.families.mesh.settings import MeshInstance
from splitopt.families.mesh.tasks import build_tasks
from splitopt.search.space import ChoiceGene, Genome, PermutationGene, SearchSpace

PRIORITY = "priority"


def mesh_space(inst: MeshInstance) -> SearchSpace:
    data = mesh_data(inst)
    genes = tuple(ChoiceGene(n, data.devices) for n in data.layers) + (PermutationGene(PRIORITY, data.layers),)
    preds = {n: [t for t in data.layer_inputs[n] if not data.is_raw[t]] for n in data.layers}

    def topological(priority: tuple) -> tuple:
        rank = {n: k for k, n in enumerate(priority)}
        waiting = {n: len(set(preds[n])) for n in data.layers}
        succ: dict[str, list[str]] = {n: [] for n in data.layers}
        for n in data.layers:
            for t in set(preds[n]):
                succ[t].append(n)
        heap = [(rank[n], n) for n in data.layers if waiting[n] == 0]
        heapq.heapify(heap)
        out = []
        while heap:
            _, n = heapq.heappop(heap)
            out.append(n)
            for m in succ[n]:
                waiting[m] -= 1
                if waiting[m] == 0:
                    heapq.heappush(heap, (rank[m], m))
        return tuple(out)

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        order = topological(tuple(out[PRIORITY]))
        out[PRIORITY] = order
        for n in order:
            sources = [data.source if data.is_raw[t] else out[t] for t in data.layer_inputs[n]]

            def ok(d: str) -> bool:
                if not all(data.has_route(a, d) for a in sources):
                    return False
                return not (data.options.deliver_outputs and n in data.final and not data.has_route(d, data.sink))

            if not ok(out[n]):
                out[n] = next((d for d in data.devices if ok(d)), sources[0] if sources else data.source)
        return out

    def to_plan(genome: Genome) -> MeshPlan:
        device_map = {n: genome[n] for n in data.layers}
        rank = {n: k for k, n in enumerate(genome[PRIORITY])}
        tasks = build_tasks(data, device_map)
        by_res: dict[str, list] = {}
        for tid, task in tasks.items():
            if task.duration > 0:
                producer = -1 if data.is_raw[task.tensor] else rank[task.tensor]
                hop, link = (task.key[1], task.key[2]) if task.kind == "transfer" else (0, -1)
                by_res.setdefault(task.resource, []).append(((producer, hop, link), tid))
        order = {r: tuple(tid for _, tid in sorted(items)) for r, items in by_res.items()}
        return MeshPlan(device_map, order)

    def from_plan(plan: MeshPlan) -> Genome:
        genome: Genome = {n: plan.device[n] for n in data.layers}
        position: dict[str, float] = {}
        for ids in plan.order.values():
            for k, tid in enumerate(ids):
                if tid in data.position:
                    position[tid] = k
        genome[PRIORITY] = tuple(sorted(data.layers, key=lambda n: (position.get(n, 0.0), data.position[n])))
        return genome

    # orders consistent with one priority: not every semi-active schedule is represented
    return SearchSpace(genes, to_plan, from_plan, repair,
                       notes="per layer: its device; one priority order of the layers (list scheduling)",
                       meta={"represents_every_plan": False})
