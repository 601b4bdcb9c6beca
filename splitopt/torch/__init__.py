"""The torch bridge: build splitopt instances from real PyTorch modules, cut them by plans
and run the parts (needs the ``torch`` extra).

Shared by every family, at this level:

* :mod:`splitopt.torch.capture`: ``nn.Module`` -> fused layer graph (BN folding,
  activation fusion, MACs, weights, shapes); also a ``torch.export`` program saved as
  ``.pt2`` (:func:`~splitopt.torch.capture.load_exported`);
* :mod:`splitopt.torch.profile`: a module -> an instance of a layer-graph family (its
  topology from device presets: :mod:`splitopt.families.topologies`);
* :mod:`splitopt.torch.quant_error`, :mod:`splitopt.torch.packing`,
  :mod:`splitopt.torch.transmission`: quantization-error tables, bit-packing of sent
  tensors and the transmission hook;
* :mod:`splitopt.torch.architectures`, :mod:`splitopt.torch.models`,
  :mod:`splitopt.torch.user_model`, :mod:`splitopt.torch.seeds`: the models rebuilt by
  name (built-in architectures, the digits CNN, user factories) and their inputs;
* :mod:`splitopt.torch.partition`, :mod:`splitopt.torch.partition_sequential`,
  :mod:`splitopt.torch.part_builder`, :mod:`splitopt.torch.split_model`,
  :mod:`splitopt.torch.split_compare`: cutting a captured module into parts and checking
  the parts against the unsplit model and the evaluator;
* :mod:`splitopt.torch.export_parts`, :mod:`splitopt.torch.export_manifest`,
  :mod:`splitopt.torch.exported_run`: one ONNX / pt2 file per part and its manifest;
* :mod:`splitopt.torch.side`: the protocol of a family's torch side and how it is found
  (through the family: :attr:`splitopt.families.base.Family.torch_side`);
  :mod:`splitopt.torch.layer_graph`: what the layer-graph families' sides share.

Each family's own torch side is a subpackage named like its folder in
``splitopt/families/``: :mod:`splitopt.torch.edge_cloud`, :mod:`splitopt.torch.chain`,
:mod:`splitopt.torch.mesh`, :mod:`splitopt.torch.multiview`,
:mod:`splitopt.torch.loading`, :mod:`splitopt.torch.separable`. Shared code never imports
them; it asks the instance's family for its side.

Importing this package imports no torch (the names below are loaded on first use), so
that the command line can find a family's side and check its options before torch is
imported.
"""

from __future__ import annotations

from typing import Any

#: the capture's names, importable from the package (loaded, with torch, on first use); the
#: function ``capture`` is ``splitopt.torch.capture.capture`` (``splitopt.torch.capture`` is its module)
_CAPTURE_NAMES = ("Capture", "CapturedLayer", "capture_layers", "eval_mode", "load_exported")

__all__ = list(_CAPTURE_NAMES)


def __getattr__(name: str) -> Any:
    if name in _CAPTURE_NAMES:
        import importlib

        return getattr(importlib.import_module("splitopt.torch.capture"), name)
    raise AttributeError(f"module 'splitopt.torch' has no attribute '{name}'")
