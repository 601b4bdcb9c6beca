"""The loading family's models as sequences of named top-level blocks (the RL
modularization paper's PyTorch model set, Sec. 5 and Table 2): ResNet-152, Inception-V3,
DenseNet-201 and MobileNet-V1, in plain torch, laid out like torchvision's modules (no
download: random init under ``torch.manual_seed(seed)``, batch-norm statistics then
re-estimated on synthetic images, :func:`splitopt.torch.architectures.recalibrate_batchnorm`,
so that activations stay of order one through the 152 layers).

A model is a :class:`BlockSequence`: block ``i`` takes block ``i-1``'s output (a block
may have internal branches: a bottleneck's shortcut, an Inception module's four branches,
a dense layer's concatenation). Every block has a stable name (the instance's layer
name and the child checkpoint's key):

* ``resnet152``: ``stem`` (torchvision's conv1, bn1, relu, maxpool), ``layer1.0`` ..
  ``layer4.2`` (the 3 + 8 + 36 + 3 bottlenecks, v1.5: stride on the 3x3), ``avgpool``
  (pool and flatten), ``fc``;
* ``inception_v3``: torchvision's top-level children by name (``Conv2d_1a_3x3`` ..
  ``Mixed_7c``, ``avgpool``, ``dropout``, ``fc``), 299x299 inputs; the auxiliary
  classifier (``AuxLogits``, training only) is left out;
* ``densenet201``: ``stem`` (conv0, norm0, relu0, pool0), every dense layer as its own
  block ``denseblockB.denselayerL`` (it returns its input concatenated with its new
  features, which is what torchvision's dense block computes), ``transitionB``, ``norm5``
  and ``classifier`` (relu, pool, flatten, linear); growth 32, layers (6, 12, 48, 32);
* ``mobilenet_v1``: ``conv0`` (3x3 conv, stride 2), ``dw1`` .. ``dw13`` (depthwise 3x3 +
  pointwise 1x1, each with BN and ReLU), ``avgpool``, ``fc``.

Knobs (:class:`BlockModelConfig`): ``width`` multiplies every channel count, ``depth``
the number of repeated blocks per stage (at least one each); with both 1.0 the models
have the published sizes (ResNet-152 60.2 M parameters, Inception-V3 23.8 M without the
auxiliary head, DenseNet-201 20.0 M, MobileNet-V1 4.2 M). Tests build tiny versions
(width 1/16, depth 0.1, small images) in milliseconds.

The builders here only describe blocks; :mod:`splitopt.torch.loading.children` builds a
child's blocks on the meta device and assigns the loaded tensors to them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Callable, Mapping

import torch
from torch import nn

from splitopt.torch.loading.options import MODEL_NAMES

#: input image side (pixels) at full size
DEFAULT_IMAGE_SIZE = {"resnet152": 224, "inception_v3": 299, "densenet201": 224, "mobilenet_v1": 224}
#: seed of the synthetic images the batch norms are recalibrated on
BN_SEED = 4321


@dataclass(frozen=True)
class BlockModelConfig:
    """Which model and how big: ``width`` multiplies channel counts, ``depth`` the number
    of repeated blocks per stage; ``image_size`` (pixels, square; None: the model's
    default) is the input the instance is profiled and run on."""

    model: str
    width: float = 1.0
    depth: float = 1.0
    num_classes: int = 1000
    image_size: int | None = None

    def __post_init__(self):
        if self.model not in MODEL_NAMES:
            raise ValueError(f"unknown block model '{self.model}' (choose from {', '.join(MODEL_NAMES)})")
        if not (0 < self.width <= 4 and 0 < self.depth <= 4):
            raise ValueError(f"width and depth must be in (0, 4], got {self.width}, {self.depth}")
        if not 1 <= self.num_classes <= 100_000:
            raise ValueError(f"num_classes must be in [1, 100000], got {self.num_classes}")
        if self.image_size is not None and not 32 <= self.image_size <= 1024:
            raise ValueError(f"image_size must be in [32, 1024] pixels, got {self.image_size}")

    @property
    def size(self) -> int:
        """The input image side (pixels)."""
        return self.image_size or DEFAULT_IMAGE_SIZE[self.model]

    @property
    def full_size(self) -> bool:
        """Whether the architecture is the published one (width and depth 1)."""
        return self.width == 1.0 and self.depth == 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "BlockModelConfig":
        return cls(model=str(raw["model"]), width=float(raw["width"]), depth=float(raw["depth"]),
                   num_classes=int(raw["num_classes"]),
                   image_size=None if raw.get("image_size") is None else int(raw["image_size"]))


@dataclass(frozen=True)
class BlockSpec:
    """A named block and the function that builds it (random init; on the meta device when
    called under ``torch.device("meta")``)."""

    name: str
    build: Callable[[], nn.Module]


class BlockSequence(nn.Module):
    """Named blocks run one after another; ``forward(x)`` is the last block's output.
    ``block_names[i]`` names ``blocks[i]`` (module attribute names cannot hold dots)."""

    def __init__(self, names: list[str], blocks: list[nn.Module]):
        super().__init__()
        if len(names) != len(blocks):
            raise ValueError(f"{len(names)} names for {len(blocks)} blocks")
        self.block_names = list(names)
        self.blocks = nn.ModuleList(blocks)

    def named_blocks(self) -> list[tuple[str, nn.Module]]:
        return list(zip(self.block_names, self.blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


# ----- shared pieces ---------------------------------------------------------------------

class ConvBNReLU(nn.Sequential):
    """conv (no bias) + batch norm + ReLU (torchvision's ``BasicConv2d``)."""

    def __init__(self, cin: int, cout: int, kernel, stride=1, padding=0, groups: int = 1, eps: float = 1e-5):
        super().__init__(nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, groups=groups, bias=False),
                         nn.BatchNorm2d(cout, eps=eps), nn.ReLU(inplace=False))


class PoolFlatten(nn.Module):
    """Global average pool and flatten: (N, C, H, W) -> (N, C)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


def _scaled(width: float) -> Callable[[int], int]:
    return lambda c: max(1, int(round(c * width)))


def _repeats(n: int, depth: float) -> int:
    return max(1, int(math.ceil(n * depth - 1e-9)))


# ----- ResNet-152 ------------------------------------------------------------------------

class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: 1x1, 3x3 (stride), 1x1 (x4), shortcut."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU()
        self.downsample = (nn.Sequential(nn.Conv2d(cin, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))
                           if stride != 1 or cin != out else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


def _resnet152(c: BlockModelConfig) -> list[BlockSpec]:
    ch = _scaled(c.width)
    stem_out = ch(64)
    specs = [BlockSpec("stem", lambda: nn.Sequential(nn.Conv2d(3, stem_out, 7, stride=2, padding=3, bias=False),
                                                     nn.BatchNorm2d(stem_out), nn.ReLU(),
                                                     nn.MaxPool2d(3, stride=2, padding=1)))]
    cin = stem_out
    for stage, (n, planes) in enumerate(zip((3, 8, 36, 3), (64, 128, 256, 512)), start=1):
        for i in range(_repeats(n, c.depth)):
            stride = 2 if i == 0 and stage > 1 else 1
            specs.append(BlockSpec(f"layer{stage}.{i}", partial(Bottleneck, cin, ch(planes), stride)))
            cin = ch(planes) * Bottleneck.expansion
    specs.append(BlockSpec("avgpool", PoolFlatten))
    specs.append(BlockSpec("fc", partial(nn.Linear, cin, c.num_classes)))
    return specs


# ----- Inception-V3 ----------------------------------------------------------------------

def _bc(cin: int, cout: int, kernel, stride=1, padding=0) -> ConvBNReLU:
    return ConvBNReLU(cin, cout, kernel, stride, padding, eps=0.001)


class InceptionModule(nn.Module):
    """One of Inception-V3's mixed modules: parallel branches concatenated along the
    channels; ``out_channels``: the channels of that concatenation."""

    out_channels: int


class InceptionA(InceptionModule):
    def __init__(self, cin: int, pool_features: int, ch: Callable[[int], int]):
        super().__init__()
        self.branch1x1 = _bc(cin, ch(64), 1)
        self.branch5x5_1, self.branch5x5_2 = _bc(cin, ch(48), 1), _bc(ch(48), ch(64), 5, padding=2)
        self.branch3x3dbl_1 = _bc(cin, ch(64), 1)
        self.branch3x3dbl_2 = _bc(ch(64), ch(96), 3, padding=1)
        self.branch3x3dbl_3 = _bc(ch(96), ch(96), 3, padding=1)
        self.branch_pool = _bc(cin, pool_features, 1)
        self.out_channels = ch(64) + ch(64) + ch(96) + pool_features

    def forward(self, x):
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(nn.functional.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(InceptionModule):
    def __init__(self, cin: int, ch: Callable[[int], int]):
        super().__init__()
        self.branch3x3 = _bc(cin, ch(384), 3, stride=2)
        self.branch3x3dbl_1 = _bc(cin, ch(64), 1)
        self.branch3x3dbl_2 = _bc(ch(64), ch(96), 3, padding=1)
        self.branch3x3dbl_3 = _bc(ch(96), ch(96), 3, stride=2)
        self.out_channels = ch(384) + ch(96) + cin

    def forward(self, x):
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([b3, bd, nn.functional.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(InceptionModule):
    def __init__(self, cin: int, c7: int, ch: Callable[[int], int]):
        super().__init__()
        self.branch1x1 = _bc(cin, ch(192), 1)
        self.branch7x7_1 = _bc(cin, c7, 1)
        self.branch7x7_2 = _bc(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = _bc(c7, ch(192), (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = _bc(cin, c7, 1)
        self.branch7x7dbl_2 = _bc(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = _bc(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = _bc(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = _bc(c7, ch(192), (1, 7), padding=(0, 3))
        self.branch_pool = _bc(cin, ch(192), 1)
        self.out_channels = 4 * ch(192)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = x
        for conv in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                     self.branch7x7dbl_5):
            bd = conv(bd)
        bp = self.branch_pool(nn.functional.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(InceptionModule):
    def __init__(self, cin: int, ch: Callable[[int], int]):
        super().__init__()
        self.branch3x3_1, self.branch3x3_2 = _bc(cin, ch(192), 1), _bc(ch(192), ch(320), 3, stride=2)
        self.branch7x7x3_1 = _bc(cin, ch(192), 1)
        self.branch7x7x3_2 = _bc(ch(192), ch(192), (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = _bc(ch(192), ch(192), (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = _bc(ch(192), ch(192), 3, stride=2)
        self.out_channels = ch(320) + ch(192) + cin

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, nn.functional.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(InceptionModule):
    def __init__(self, cin: int, ch: Callable[[int], int]):
        super().__init__()
        self.branch1x1 = _bc(cin, ch(320), 1)
        self.branch3x3_1 = _bc(cin, ch(384), 1)
        self.branch3x3_2a = _bc(ch(384), ch(384), (1, 3), padding=(0, 1))
        self.branch3x3_2b = _bc(ch(384), ch(384), (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = _bc(cin, ch(448), 1)
        self.branch3x3dbl_2 = _bc(ch(448), ch(384), 3, padding=1)
        self.branch3x3dbl_3a = _bc(ch(384), ch(384), (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = _bc(ch(384), ch(384), (3, 1), padding=(1, 0))
        self.branch_pool = _bc(cin, ch(192), 1)
        self.out_channels = ch(320) + 4 * ch(384) + ch(192)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(nn.functional.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b3, bd, bp], 1)


def _inception_v3(c: BlockModelConfig) -> list[BlockSpec]:
    ch = _scaled(c.width)
    specs = [BlockSpec("Conv2d_1a_3x3", lambda: _bc(3, ch(32), 3, stride=2)),
             BlockSpec("Conv2d_2a_3x3", lambda: _bc(ch(32), ch(32), 3)),
             BlockSpec("Conv2d_2b_3x3", lambda: _bc(ch(32), ch(64), 3, padding=1)),
             BlockSpec("maxpool1", lambda: nn.MaxPool2d(3, stride=2)),
             BlockSpec("Conv2d_3b_1x1", lambda: _bc(ch(64), ch(80), 1)),
             BlockSpec("Conv2d_4a_3x3", lambda: _bc(ch(80), ch(192), 3)),
             BlockSpec("maxpool2", lambda: nn.MaxPool2d(3, stride=2))]
    cin = ch(192)
    # the module list, each with the function that builds it from its input channels
    stages: list[tuple[str, Callable[[int], InceptionModule]]] = [
        ("Mixed_5b", lambda i: InceptionA(i, ch(32), ch)), ("Mixed_5c", lambda i: InceptionA(i, ch(64), ch)),
        ("Mixed_5d", lambda i: InceptionA(i, ch(64), ch)), ("Mixed_6a", lambda i: InceptionB(i, ch)),
        ("Mixed_6b", lambda i: InceptionC(i, ch(128), ch)), ("Mixed_6c", lambda i: InceptionC(i, ch(160), ch)),
        ("Mixed_6d", lambda i: InceptionC(i, ch(160), ch)), ("Mixed_6e", lambda i: InceptionC(i, ch(192), ch)),
        ("Mixed_7a", lambda i: InceptionD(i, ch)), ("Mixed_7b", lambda i: InceptionE(i, ch)),
        ("Mixed_7c", lambda i: InceptionE(i, ch))]
    for name, make in stages:
        with torch.device("meta"):  # only to read the output channels
            out = make(cin).out_channels
        specs.append(BlockSpec(name, partial(make, cin)))
        cin = out
    specs += [BlockSpec("avgpool", PoolFlatten), BlockSpec("dropout", lambda: nn.Dropout(0.5)),
              BlockSpec("fc", partial(nn.Linear, cin, c.num_classes))]
    return specs


# ----- DenseNet-201 ----------------------------------------------------------------------

class DenseLayer(nn.Module):
    """torchvision's dense layer (BN-ReLU-1x1-BN-ReLU-3x3) returning its input with the
    new ``growth`` channels appended (the running concatenation of a dense block)."""

    def __init__(self, cin: int, growth: int, bn_size: int = 4):
        super().__init__()
        self.norm1, self.relu1 = nn.BatchNorm2d(cin), nn.ReLU()
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2, self.relu2 = nn.BatchNorm2d(bn_size * growth), nn.ReLU()
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        new = self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))
        return torch.cat([x, new], 1)


class Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.norm, self.relu = nn.BatchNorm2d(cin), nn.ReLU()
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)
        self.pool = nn.AvgPool2d(2, stride=2)


class ReLUPoolLinear(nn.Module):
    """DenseNet's classifier: ReLU, global average pool, flatten, linear."""

    def __init__(self, cin: int, classes: int):
        super().__init__()
        self.linear = nn.Linear(cin, classes)

    def forward(self, x):
        return self.linear(torch.flatten(nn.functional.adaptive_avg_pool2d(nn.functional.relu(x), 1), 1))


def _densenet201(c: BlockModelConfig) -> list[BlockSpec]:
    ch = _scaled(c.width)
    growth, init = ch(32), ch(64)
    specs = [BlockSpec("stem", lambda: nn.Sequential(nn.Conv2d(3, init, 7, stride=2, padding=3, bias=False),
                                                     nn.BatchNorm2d(init), nn.ReLU(),
                                                     nn.MaxPool2d(3, stride=2, padding=1)))]
    cin = init
    config = (6, 12, 48, 32)
    for b, n in enumerate(config, start=1):
        for layer in range(1, _repeats(n, c.depth) + 1):
            specs.append(BlockSpec(f"denseblock{b}.denselayer{layer}", partial(DenseLayer, cin, growth)))
            cin += growth
        if b < len(config):
            specs.append(BlockSpec(f"transition{b}", partial(Transition, cin, cin // 2)))
            cin //= 2
    specs += [BlockSpec("norm5", partial(nn.BatchNorm2d, cin)),
              BlockSpec("classifier", partial(ReLUPoolLinear, cin, c.num_classes))]
    return specs


# ----- MobileNet-V1 ----------------------------------------------------------------------

class DepthwiseSeparable(nn.Sequential):
    """3x3 depthwise conv (stride) + BN + ReLU, then 1x1 pointwise + BN + ReLU."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__(ConvBNReLU(cin, cin, 3, stride, 1, groups=cin), ConvBNReLU(cin, cout, 1))


def _mobilenet_v1(c: BlockModelConfig) -> list[BlockSpec]:
    ch = _scaled(c.width)
    specs = [BlockSpec("conv0", lambda: ConvBNReLU(3, ch(32), 3, 2, 1))]
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * _repeats(5, c.depth) \
        + [(1024, 2), (1024, 1)]
    cin = ch(32)
    for i, (cout, stride) in enumerate(plan, start=1):
        specs.append(BlockSpec(f"dw{i}", partial(DepthwiseSeparable, cin, ch(cout), stride)))
        cin = ch(cout)
    specs += [BlockSpec("avgpool", PoolFlatten), BlockSpec("fc", partial(nn.Linear, cin, c.num_classes))]
    return specs


_BUILDERS: dict[str, Callable[[BlockModelConfig], list[BlockSpec]]] = {
    "resnet152": _resnet152, "inception_v3": _inception_v3, "densenet201": _densenet201,
    "mobilenet_v1": _mobilenet_v1}


def block_specs(config: BlockModelConfig) -> list[BlockSpec]:
    """The model's blocks in execution order (names and builders; nothing is allocated)."""
    return _BUILDERS[config.model](config)


def synthetic_input(config: BlockModelConfig, n: int = 1, seed: int = 2024) -> torch.Tensor:
    """``n`` seeded synthetic ImageNet-normalised images of the model's input size."""
    from splitopt.torch.architectures import synthetic_images

    return synthetic_images(n, size=config.size, seed=seed)


def build_block_model(config: BlockModelConfig, seed: int = 0, recalibrate: bool = True) -> BlockSequence:
    """The whole model (eval mode): every block built under ``torch.manual_seed(seed)``,
    the batch norms re-estimated on 2 synthetic images (seed ``BN_SEED``) when
    ``recalibrate``."""
    from splitopt.torch.architectures import recalibrate_batchnorm

    torch.manual_seed(seed)
    specs = block_specs(config)
    model = BlockSequence([s.name for s in specs], [s.build() for s in specs])
    if recalibrate:
        recalibrate_batchnorm(model, synthetic_input(config, 2, seed=BN_SEED))
    return model.eval()


def trainable_tail(config: BlockModelConfig) -> int:
    """The paper's trainable layers (Sec. 4.2.3): the classifier, the last block of every
    model here (``fc`` or DenseNet's ``classifier``)."""
    return 1


def reference_plans(config: BlockModelConfig) -> dict[str, list[str]]:
    """The paper's Table 2 cut positions on this model's blocks (the first block of each
    child), for the published architectures (width and depth 1) that Table 2 lists.

    Table 2 counts torchvision's top-level children:

    * ResNet-152 (conv1, bn1, relu, maxpool, layer1, layer2, layer3, layer4, avgpool, fc):
      0-3 | 4 | 5 | 6 | 7 | 8-end -> ``stem``, ``layer1.0``, ``layer2.0``, ``layer3.0``,
      ``layer4.0``, ``avgpool`` (our ``stem`` is torchvision's 0-3, each ``layerS`` is split
      into its bottlenecks);
    * Inception-V3 (Conv2d_1a_3x3 = 0 .. Mixed_5d = 9, Mixed_6a = 10, ..., Mixed_6e = 14,
      AuxLogits = 15, Mixed_7a = 16, ...): 0-9 | 10-12 | 13-15 | 16-end ->
      ``Conv2d_1a_3x3``, ``Mixed_6a``, ``Mixed_6d``, ``Mixed_7a`` (the auxiliary head of
      child 3 is not built here);
    * DenseNet (features: conv0, norm0, relu0, pool0, denseblock1 = 4, transition1 = 5,
      denseblock2 = 6, transition2 = 7, denseblock3 = 8, transition3 = 9, denseblock4 = 10,
      norm5 = 11; then the classifier): 0-4 | 5 | 6 | 7 | 8.0-8.16 | 8.17-8.32 | 8.33-8.48 |
      9 | 10.0-10.15 | 10.16-10.32 | 11-end, sub-block ``x.y`` read as the y-th dense
      layer of block x counted from 0 (``denselayer{y+1}``): ``stem``, ``transition1``,
      ``denseblock2.denselayer1``, ``transition2``, ``denseblock3.denselayer1``,
      ``denseblock3.denselayer18``, ``denseblock3.denselayer34``, ``transition3``,
      ``denseblock4.denselayer1``, ``denseblock4.denselayer17``, ``norm5`` (11 children;
      the paper's 8.48 and 10.32 run one past the 48 and 32 layers: read as "to the end");
    * MobileNet-V1: Table 1 gives positions in ArmNN/TensorFlow graph nodes, which do not
      map onto these blocks; none.
    """
    if not config.full_size:
        return {}
    plans = {
        "resnet152": ["stem", "layer1.0", "layer2.0", "layer3.0", "layer4.0", "avgpool"],
        "inception_v3": ["Conv2d_1a_3x3", "Mixed_6a", "Mixed_6d", "Mixed_7a"],
        "densenet201": ["stem", "transition1", "denseblock2.denselayer1", "transition2", "denseblock3.denselayer1",
                        "denseblock3.denselayer18", "denseblock3.denselayer34", "transition3",
                        "denseblock4.denselayer1", "denseblock4.denselayer17", "norm5"],
    }
    return {"paper Table 2": plans[config.model]} if config.model in plans else {}
