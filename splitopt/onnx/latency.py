"""Per-layer latency of an ONNX model measured with onnxruntime on this host.

One CPU session with profiling on (``SessionOptions.enable_profiling``) runs the model on
the run input ``warmup + repeats`` times; onnxruntime's profile lists every kernel it ran
(``cat: Node``, its duration in microseconds) inside each run (``model_run``). Each
kernel is charged to the layer whose node (or output tensor) its name starts with (the
longest such name: onnxruntime names a kernel after its node, and a node it rewrote
after the node's output tensor, e.g. ``/Relu_output_0_nchwc``); a kernel of no layer
(a layout reorder, a node outside every layer) is charged to the next layer that runs,
as the torch bridge charges a node of no layer (:mod:`splitopt.torch.profile`). A
layer's latency is the median over the ``repeats`` runs (ms).

The session uses onnxruntime's ``basic`` optimisations by default (constant folding,
redundant nodes removed; no fusion across nodes, so every layer keeps its own kernels;
``optimization="all"`` measures onnxruntime's default, where fused kernels are charged
to the layer they are named after and a layer folded into another one measures 0).

The host becomes a device like the torch bridge's (:func:`host_device`): its layers
carry these measured ``latency_ms`` entries, its ``mac_per_s`` is informative only.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from typing import Any, Mapping

import numpy as np

from splitopt.onnx.graph import OnnxGraph
from splitopt.onnx.runtime import run, session


def _layer_of(graph: OnnxGraph):
    keys: dict[str, str] = {}
    for layer in graph.layers:
        for t in layer.tensors:
            keys.setdefault(t, layer.name)
        for n in layer.nodes:
            keys[n] = layer.name
    cache: dict[str, str | None] = {}

    def layer_of(kernel: str) -> str | None:
        if kernel not in cache:
            name = kernel[:-len("_kernel_time")] if kernel.endswith("_kernel_time") else kernel
            if name.startswith("fused "):
                name = name[len("fused "):]
            found = None
            for end in range(len(name), 0, -1):
                if name[:end] in keys:
                    found = keys[name[:end]]
                    break
            cache[kernel] = found
        return cache[kernel]

    return layer_of


def per_run_times(events: list[dict[str, Any]], graph: OnnxGraph) -> list[dict[str, float]]:
    """Per ``model_run`` of an onnxruntime profile, each layer's summed kernel time (s)."""
    layer_of = _layer_of(graph)
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    nodes = sorted((e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")),
                   key=lambda e: e["ts"])
    out = []
    i = 0
    for r in runs:
        start, end = r["ts"], r["ts"] + r["dur"]
        totals = {layer.name: 0.0 for layer in graph.layers}
        pending = 0.0
        while i < len(nodes) and nodes[i]["ts"] < start:
            i += 1
        while i < len(nodes) and nodes[i]["ts"] <= end:
            e = nodes[i]
            i += 1
            layer = layer_of(e["name"])
            if layer is None:
                pending += e["dur"] * 1e-6
            else:
                totals[layer] += e["dur"] * 1e-6 + pending
                pending = 0.0
        out.append(totals)
    return out


def profiled_runs(graph: OnnxGraph, feed: Mapping[str, np.ndarray], repeats: int = 5, warmup: int = 1,
                  optimization: str = "basic", threads: int | None = None
                  ) -> tuple[list[dict[str, float]], list[float]]:
    """The ``repeats`` profiled runs of ``graph`` on ``feed`` after ``warmup`` ones: per run
    each layer's time (s, :func:`per_run_times`) and the run's own wall time (ms,
    onnxruntime's ``model_run``)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    outputs = [o.name for o in graph.model.graph.output]
    with tempfile.TemporaryDirectory(prefix="splitopt_ort_") as tmp:
        sess = session(graph.model, optimization=optimization, threads=threads,
                       profile_prefix=os.path.join(tmp, "profile"))
        for _ in range(warmup + repeats):
            run(sess, feed, outputs)
        path = sess.end_profiling()
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
    runs = per_run_times(events, graph)[warmup:]
    if len(runs) < repeats:
        raise RuntimeError(f"onnxruntime's profile has {len(runs)} runs, expected {repeats}")
    walls = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                   key=lambda e: e["ts"])[warmup:]
    return runs, [e["dur"] / 1000.0 for e in walls]


def plain_runs_ms(graph: OnnxGraph, feed: Mapping[str, np.ndarray], repeats: int = 5, warmup: int = 1,
                  optimization: str = "basic", threads: int | None = None) -> list[float]:
    """The wall times (ms) of ``repeats`` runs of ``graph`` on ``feed`` after ``warmup``
    ones, in a session without profiling: what a deployed part costs. onnxruntime's
    profiler adds its own work to every node (measured at one thread, 'all': MobileNetV2
    11.5 ms profiled against 9.6 ms plain, ResNet-50 78.1 against 74.4), so a profiled
    run's wall time overstates the model's."""
    import time

    outputs = [o.name for o in graph.model.graph.output]
    sess = session(graph.model, optimization=optimization, threads=threads)
    for _ in range(warmup):
        run(sess, feed, outputs)
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        run(sess, feed, outputs)
        walls.append(1000.0 * (time.perf_counter() - started))
    return walls


def measure_layer_latency(graph: OnnxGraph, feed: Mapping[str, np.ndarray], repeats: int = 5, warmup: int = 1,
                          optimization: str = "basic", threads: int | None = None) -> dict[str, float]:
    """Median per-layer time (ms) of ``graph`` on ``feed`` over ``repeats`` runs on this host."""
    runs, _ = profiled_runs(graph, feed, repeats, warmup, optimization, threads)
    return layer_medians(graph, runs)


def layer_medians(graph: OnnxGraph, runs: list[dict[str, float]]) -> dict[str, float]:
    """Each layer's median over ``runs`` (:func:`per_run_times`), ms."""
    return {layer.name: 1000.0 * statistics.median(r[layer.name] for r in runs) for layer in graph.layers}


def host_device(name: str, graph: OnnxGraph, latency_ms: Mapping[str, float], memory_bytes: float = 8e9) -> dict[str, Any]:
    """The device entry of this host (effective rate: total MACs over total measured time,
    informative only: the layers carry their measured latencies)."""
    import onnxruntime

    total_s = sum(latency_ms.values()) / 1000.0
    rate = graph.total_macs / total_s if total_s > 0 and graph.total_macs > 0 else 1e9
    return {"name": name, "description": f"this host, measured by splitopt.onnx.profile "
                                         f"(onnxruntime {onnxruntime.__version__}, CPU)",
            "mac_per_s": rate, "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": memory_bytes,
            "bit_widths": [2, 4, 6, 8, 16, 32]}
