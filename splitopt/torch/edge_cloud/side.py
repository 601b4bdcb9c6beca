"""The edge/cloud family's torch side: a plan is cut into an edge part and a cloud part
(:func:`splitopt.torch.partition_sequential.partition_sequential`), runs in one process or
as two processes over TCP (:mod:`splitopt.netrun`), and exports; the evaluator's figures
are the cut's (``Metrics.transmitted_bytes``, ``sent_tensors``, compute and transmit ms).
Imports no torch."""

from __future__ import annotations

from typing import Any

from splitopt.netrun.setup import TcpOptions
from splitopt.torch.layer_graph import LayerGraphSide


class EdgeCloudSide(LayerGraphSide):
    family = "edge_cloud"
    tcp_options = TcpOptions

    def device_order(self, inst: Any) -> list[str]:
        return [inst.settings.edge, inst.settings.cloud]

    def evaluator_crossings(self, inst: Any, plan: Any) -> list[tuple[str, str, float]]:
        from splitopt.api import evaluate

        return [(inst.settings.edge, inst.settings.cloud, float(evaluate(inst, plan).transmitted_bytes))]

    def tcp_devices(self, inst: Any) -> tuple[list[str], list[Any]]:
        from splitopt.families.edge_cloud.data import uplink

        return [inst.settings.edge, inst.settings.cloud], [uplink(inst)]

    def tcp_predicted(self, inst: Any, metrics: Any) -> dict[str, Any]:
        return {"parts_ms": [metrics.edge_compute_ms, metrics.cloud_compute_ms], "links_ms": [metrics.transmit_ms],
                "total_ms": metrics.total_ms}

    def tcp_sent_bytes(self, inst: Any, plan: Any, metrics: Any) -> list[dict[str, float]]:
        return [{t: float(b) for t, b in metrics.sent_tensors}]
