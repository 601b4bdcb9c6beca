"""Build splitopt instances from real PyTorch modules (needs the ``torch`` extra).

* :mod:`splitopt.torch.capture`: ``nn.Module`` -> fused layer graph (BN folding,
  activation fusion, MACs, weights, shapes); also a ``torch.export`` program saved as
  ``.pt2`` (:func:`~splitopt.torch.capture.load_exported`, then
  :func:`splitopt.torch.profile.profile` on the program and its example input);
* :mod:`splitopt.torch.quant_error`: per-layer weight/activation quantization-error tables;
* :mod:`splitopt.torch.architectures`: ResNet-50, MobileNetV2 (transformers configs,
  random init) and GoogLeNet (plain torch), plus synthetic calibration images.
"""

from splitopt.torch.capture import Capture, CapturedLayer, capture, capture_layers, eval_mode, load_exported

__all__ = ["Capture", "CapturedLayer", "capture", "capture_layers", "eval_mode", "load_exported"]
