"""The chain family's torch side: a plan is cut into one part per device of
``settings.chain``, in order (:func:`splitopt.torch.partition_sequential.partition_sequential`),
runs in one process or as one process per device over TCP (:mod:`splitopt.netrun`), and
exports; the evaluator's figures are per device (``sent_bytes``, ``compute_ms``,
``send_ms``) and per sent tensor (``chain_tensors``). Imports no torch."""

from __future__ import annotations

from typing import Any

from splitopt.netrun.setup import TcpOptions
from splitopt.torch.layer_graph import LayerGraphSide


class ChainSide(LayerGraphSide):
    family = "chain"
    tcp_options = TcpOptions

    def device_order(self, inst: Any) -> list[str]:
        return list(inst.settings.chain)

    def evaluator_crossings(self, inst: Any, plan: Any) -> list[tuple[str, str, float]]:
        from splitopt.api import evaluate

        devices = evaluate(inst, plan).devices  # in chain order
        return [(d.device, e.device, float(d.sent_bytes)) for d, e in zip(devices, devices[1:])]

    def tcp_devices(self, inst: Any) -> tuple[list[str], list[Any]]:
        chain = list(inst.settings.chain)
        return chain, [inst.link_between[(a, b)] for a, b in zip(chain, chain[1:])]

    def tcp_predicted(self, inst: Any, metrics: Any) -> dict[str, Any]:
        return {"parts_ms": [d.compute_ms for d in metrics.devices],
                "links_ms": [d.send_ms for d in metrics.devices[:-1]], "total_ms": metrics.latency_ms}

    def tcp_sent_bytes(self, inst: Any, plan: Any, metrics: Any) -> list[dict[str, float]]:
        from splitopt.families.chain.data import chain_tensors

        sizes = chain_tensors(inst).sent_bytes
        return [{t: float(sizes[t]) for t in d.sent_tensors} for d in metrics.devices[:-1]]
