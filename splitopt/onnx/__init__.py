"""Build splitopt instances from ONNX model files (needs the ``onnx`` extra: ``onnx`` and
``onnxruntime``; importing this package needs neither).

* :mod:`splitopt.onnx.graph`: ONNX graph -> fused layer graph (shape inference, fusion,
  MACs, weights, shapes), by the rules of the torch capture;
* :mod:`splitopt.onnx.errors`: quantization-error tables on calibration inputs run with
  onnxruntime;
* :mod:`splitopt.onnx.latency`: per-layer latency measured with onnxruntime's profiler;
* :mod:`splitopt.onnx.runtime`: onnxruntime sessions and synthetic inputs;
* :mod:`splitopt.onnx.profile`: :func:`profile_onnx`, all of it into an instance;
* :mod:`splitopt.onnx.deps`: the one-line MissingDependency without the extra.
"""

from __future__ import annotations

from typing import Any


def profile_onnx(path, *args: Any, **kwargs: Any):
    """:func:`splitopt.onnx.profile.profile_onnx` (imported on use; a one-line
    MissingDependency without the onnx extra)."""
    from splitopt.onnx.deps import require_onnx

    require_onnx("splitopt.onnx.profile_onnx")
    from splitopt.onnx.profile import profile_onnx as run

    return run(path, *args, **kwargs)


__all__ = ["profile_onnx"]
