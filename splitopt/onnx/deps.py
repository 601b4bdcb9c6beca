"""Whether the ``onnx`` extra is installed: ``onnx`` (graph, shape inference) and
``onnxruntime`` (calibration runs, per-layer latency). The core never imports either;
without them the ONNX bridge says so in one line (:class:`MissingDependency`, exit 3 in
the CLI) naming the extra that installs them."""

from __future__ import annotations

import importlib.util

from splitopt.core.errors import MissingDependency

PACKAGES = ("onnx", "onnxruntime")


def missing() -> list[str]:
    """The packages of the onnx extra that cannot be imported here."""
    out = []
    for name in PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a blocked or broken entry in sys.modules
            found = False
        if not found:
            out.append(name)
    return out


def require_onnx(what: str = "splitopt profile MODEL.onnx") -> None:
    """MissingDependency (one line) unless onnx and onnxruntime are importable."""
    gone = missing()
    if gone:
        raise MissingDependency(f"{what}: needs {' and '.join(gone)}, which {'is' if len(gone) == 1 else 'are'} not "
                                f"installed; install the onnx extra: pip install 'splitopt[onnx]' "
                                f"(from a checkout: pip install -e '.[onnx]')")
