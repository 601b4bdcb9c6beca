"""The mesh family's torch side: a plan is cut into stages
(:func:`splitopt.torch.mesh.partition.partition_mesh`; a device may have several, every
layer runs in float), runs in one process and exports; its bytes are compared with the
mesh evaluator per device pair and per link (:mod:`splitopt.torch.mesh.compare`).
Imports no torch."""

from __future__ import annotations

from typing import Any

from splitopt.torch.layer_graph import LayerGraphSide


class MeshSide(LayerGraphSide):
    family = "mesh"
    staged = True

    def device_order(self, inst: Any) -> list[str]:
        return [d.name for d in inst.devices]

    def check_partition_plan(self, inst: Any, plan: Any) -> None:
        from splitopt.families.mesh.plan import check_plan
        from splitopt.torch.mesh.partition import as_mesh_plan

        check_plan(inst, as_mesh_plan(plan))

    def cut(self, capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges, quantized):
        from splitopt.torch.mesh.partition import partition_mesh

        return partition_mesh(capture, plan, inst, order, example_input, reference_bits, wbits, abits, ranges,
                              quantized)

    def evaluator_crossings(self, inst: Any, plan: Any) -> list[tuple[str, str, float]]:
        from splitopt.torch.mesh.compare import evaluator_mesh_crossings

        return evaluator_mesh_crossings(inst, plan)

    def check_split(self, split: Any, inst: Any) -> tuple[dict[str, Any], bool]:
        from splitopt.torch.mesh.compare import link_report

        return link_report(split, inst)
