"""Real architectures built with no download, and synthetic calibration images.

* :func:`resnet50`, :func:`mobilenet_v2`: transformers' ``ResNetForImageClassification``
  (``ResNetConfig()`` is ResNet-50 v1.5) and ``MobileNetV2ForImageClassification``
  (``MobileNetV2Config()``, width 1.0, 224x224) with 1000 classes, wrapped so that
  ``forward(x)`` returns the logits tensor;
* :func:`googlenet`: GoogLeNet / Inception v1 in plain torch, laid out like torchvision's
  ``googlenet`` (BN after every conv, a 3x3 conv in the "5x5" branch as torchvision has
  it, no auxiliary classifiers, no input transform).

All weights are the libraries' random initialisation under ``torch.manual_seed(seed)``:
no pretrained weights can be downloaded here. Random-init activations shrink layer after
layer (MobileNetV2's reach 1e-20, where float32 arithmetic goes subnormal), so by default
every builder then re-estimates the batch-norm running statistics on synthetic images
(:func:`recalibrate_batchnorm`, 8 images of :func:`synthetic_images` with seed
``BN_SEED``, distinct from the quantization calibration images): every BN output then
has zero mean and unit variance per channel, as in a trained network, and the folded
weights differ per channel. Each builder returns ``(module, rename)``
where ``rename`` maps the captured module path to the short layer names used in the
instances (``layer4.2.conv3``, ``block11.project``, ``inception4a.branch2.1``).
"""

from __future__ import annotations

import os
import re
from typing import Callable

import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")

Rename = Callable[[str], str]

#: ImageNet per-channel normalisation (the usual torchvision values)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


BN_SEED = 4321
BN_IMAGES = 8


def recalibrate_batchnorm(module: nn.Module, images: torch.Tensor) -> nn.Module:
    """Reset every batch norm's running mean/var and re-estimate them as the plain
    average over ``images`` (one forward pass in training mode, no gradient); returns
    the module in eval mode."""
    bns = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average
    module.train()
    with torch.no_grad():
        module(images)
    return module.eval()


def finish_model(module: nn.Module, recalibrate: bool) -> nn.Module:
    """``module`` in eval mode, its batch-norm statistics first recalibrated on
    ``BN_IMAGES`` seeded synthetic images when ``recalibrate``."""
    if recalibrate:
        recalibrate_batchnorm(module, synthetic_images(BN_IMAGES, seed=BN_SEED))
    return module.eval()


class LogitsOnly(nn.Module):
    """Wrap a transformers image classifier so that ``forward(x)`` returns ``.logits``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=x).logits


def _rules(rules: list[tuple[str, str | Callable[[re.Match[str]], str]]]) -> Rename:
    def rename(path: str) -> str:
        for pattern, repl in rules:
            path = re.sub(pattern, repl, path)
        return path

    return rename


# ----- ResNet-50 (transformers) -----------------------------------------------------------

def _resnet_stage(m: re.Match[str]) -> str:
    return f"layer{int(m.group(1)) + 1}.{m.group(2)}"


RESNET_RENAME = _rules([
    (r"^model\.", ""),
    (r"^resnet\.embedder\.embedder\.convolution", "conv1"),
    (r"^resnet\.embedder\.pooler", "maxpool"),
    (r"^resnet\.pooler", "avgpool"),
    (r"^classifier\.1", "fc"),
    (r"^resnet\.encoder\.stages\.(\d+)\.layers\.(\d+)", _resnet_stage),
    (r"\.layer\.(\d+)\.convolution$", lambda m: f".conv{int(m.group(1)) + 1}"),
    (r"\.shortcut\.convolution$", ".downsample"),
])


def resnet50(seed: int = 0, num_labels: int = 1000, recalibrate: bool = True) -> tuple[nn.Module, Rename]:
    """ResNet-50 (v1.5: stride in the 3x3 conv) from ``transformers.ResNetConfig()``,
    random init. Layer names follow torchvision: ``conv1``, ``layer1.0.conv1``,
    ``layer1.0.downsample``, ``layer1.0.add``, ``avgpool``, ``fc``."""
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(seed)
    config = ResNetConfig()
    config.num_labels = num_labels  # the setter builds id2label/label2id
    model = ResNetForImageClassification(config)
    return finish_model(LogitsOnly(model), recalibrate), RESNET_RENAME


# ----- MobileNetV2 (transformers) ---------------------------------------------------------

MOBILENET_RENAME = _rules([
    (r"^model\.mobilenet_v2\.", ""),
    (r"^model\.classifier", "classifier"),
    (r"^conv_stem\.first_conv\.convolution", "stem.conv"),
    (r"^conv_stem\.conv_3x3\.convolution", "stem.dw"),
    (r"^conv_stem\.reduce_1x1\.convolution", "stem.project"),
    (r"^layer\.(\d+)", r"block\1"),
    (r"\.expand_1x1\.convolution$", ".expand"),
    (r"\.conv_3x3\.convolution$", ".dw"),
    (r"\.reduce_1x1\.convolution$", ".project"),
    (r"^conv_1x1\.convolution", "conv_last"),
    (r"^pooler", "avgpool"),
])


def mobilenet_v2(seed: int = 0, num_labels: int = 1000, recalibrate: bool = True) -> tuple[nn.Module, Rename]:
    """MobileNetV2 1.0/224 from ``transformers.MobileNetV2Config()`` with
    ``tf_padding=False`` (symmetric padding like torchvision; same MACs), random init.
    Names: ``stem.conv``, ``stem.dw``, ``stem.project``, ``block<i>.expand|dw|project|add``,
    ``conv_last``, ``avgpool``, ``classifier``."""
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    torch.manual_seed(seed)
    config = MobileNetV2Config(tf_padding=False)
    config.num_labels = num_labels  # the setter builds id2label/label2id
    model = MobileNetV2ForImageClassification(config)
    return finish_model(LogitsOnly(model), recalibrate), MOBILENET_RENAME


# ----- GoogLeNet (plain torch) --------------------------------------------------------------

class BasicConv2d(nn.Sequential):
    """conv (no bias) + batch norm (eps 1e-3) + ReLU, as in torchvision's GoogLeNet."""

    def __init__(self, cin: int, cout: int, **kw):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, bias=False, **kw)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)
        self.relu = nn.ReLU()


class Inception(nn.Module):
    """Four branches concatenated on channels: 1x1; 1x1->3x3; 1x1->3x3 (the "5x5"
    branch, 3x3 as in torchvision); 3x3 max-pool->1x1."""

    def __init__(self, cin: int, ch1: int, ch3red: int, ch3: int, ch5red: int, ch5: int, pool_proj: int):
        super().__init__()
        self.branch1 = BasicConv2d(cin, ch1, kernel_size=1)
        self.branch2 = nn.Sequential(BasicConv2d(cin, ch3red, kernel_size=1), BasicConv2d(ch3red, ch3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(cin, ch5red, kernel_size=1), BasicConv2d(ch5red, ch5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), BasicConv2d(cin, pool_proj, kernel_size=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNet(nn.Module):
    """GoogLeNet (Szegedy et al. 2015, torchvision layout) for 224x224 inputs."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = BasicConv2d(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = BasicConv2d(64, 64, kernel_size=1)
        self.conv3 = BasicConv2d(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = Inception(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = Inception(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = Inception(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = Inception(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = Inception(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = Inception(832, 384, 192, 384, 48, 128, 128)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)
        for m in self.modules():  # torchvision's init
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.inception3b(self.inception3a(x))
        x = self.maxpool3(x)
        for block in (self.inception4a, self.inception4b, self.inception4c, self.inception4d, self.inception4e):
            x = block(x)
        x = self.maxpool4(x)
        x = self.inception5b(self.inception5a(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(self.dropout(x))


GOOGLENET_RENAME = _rules([
    (r"\.conv$", ""),  # BasicConv2d's conv: inception3a.branch2.1.conv -> inception3a.branch2.1
    (r"\.branch4\.0$", ".branch4.pool"),
])


def googlenet(seed: int = 0, num_classes: int = 1000, recalibrate: bool = True) -> tuple[nn.Module, Rename]:
    """GoogLeNet in plain torch, random init (torchvision's truncated normal, std 0.01).
    Names: ``conv1``, ``maxpool1``, ..., ``inception3a.branch2.1``,
    ``inception3a.branch4.pool``, ``inception3a.concat``, ``avgpool``, ``fc``."""
    torch.manual_seed(seed)
    return finish_model(GoogLeNet(num_classes), recalibrate), GOOGLENET_RENAME


# ----- calibration images ----------------------------------------------------------------

def synthetic_images(n: int = 8, size: int = 224, seed: int = 1234) -> torch.Tensor:
    """``n`` synthetic RGB images, shape (n, 3, size, size), normalised like ImageNet.

    No data set can be downloaded here. Each image is a smooth random field: the sum of
    Gaussian noise at 4x4, 16x16 and 56x56 resolution upsampled bilinearly to ``size``
    (weights 1, 0.5, 0.25) plus a little per-pixel noise (0.05), rescaled per image to
    pixel values in [0, 1] and normalised with the ImageNet mean and std."""
    g = torch.Generator().manual_seed(seed)
    img = 0.05 * torch.randn(n, 3, size, size, generator=g)
    for res, w in ((4, 1.0), (16, 0.5), (56, 0.25)):
        low = torch.randn(n, 3, res, res, generator=g)
        img += w * nn.functional.interpolate(low, size=(size, size), mode="bilinear", align_corners=False)
    lo = img.amin(dim=(1, 2, 3), keepdim=True)
    hi = img.amax(dim=(1, 2, 3), keepdim=True)
    img = (img - lo) / (hi - lo)
    mean = torch.tensor(IMAGENET_MEAN).reshape(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).reshape(1, 3, 1, 1)
    return (img - mean) / std


MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "googlenet": googlenet}


# ----- a tiny transformer (transformers GPT-2) ---------------------------------------------

TINY_GPT2_SEQ = 16
TINY_GPT2_VOCAB = 100

TINY_GPT2_RENAME = _rules([
    (r"^model\.transformer\.", ""),
    (r"^model\.", ""),
])


class GPT2LogitsOnly(nn.Module):
    """Wrap a transformers causal LM so that ``forward(ids)`` returns ``.logits``
    (no key/value cache)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, use_cache=False).logits


def tiny_gpt2(seed: int = 0) -> tuple[nn.Module, Rename]:
    """A 2-layer GPT-2 (``GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=100,
    n_positions=32)``), random init, taking token ids of shape (1, 16) and returning the
    logits (1, 16, 100). Names: ``wte.embedding``, ``h.0.ln_1``, ``h.0.attn.c_attn``,
    ``h.0.attn.attention``, ``h.0.add``, ``h.1.mlp.c_proj``, ``ln_f``, ``lm_head``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=TINY_GPT2_VOCAB, n_positions=32,
                        use_cache=False, bos_token_id=0, eos_token_id=0)
    return GPT2LogitsOnly(GPT2LMHeadModel(config)).eval(), TINY_GPT2_RENAME


def synthetic_tokens(n: int = 8, seq: int = TINY_GPT2_SEQ, vocab: int = TINY_GPT2_VOCAB, seed: int = 1234) -> torch.Tensor:
    """``n`` sequences of ``seq`` uniformly random token ids in [0, vocab), int64."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n, seq), generator=g)


#: small models beside :data:`MODELS` (not used for the shipped instances)
SMALL_MODELS = {"tiny_gpt2": tiny_gpt2}


# ----- a small CNN for the 8x8 digits (splitting-module retraining) --------------------------

#: test samples of the deterministic digits split (the other 1,437 of 1,797 train)
DIGITS_TEST_SIZE = 360
#: seed of that split
DIGITS_SPLIT_SEED = 0


def digits_cnn(seed: int = 0, num_classes: int = 10) -> nn.Sequential:
    """A small CNN for 1x8x8 digit images, random init under ``torch.manual_seed(seed)``.

    Named blocks (output shape per sample):

    * ``block1``: conv 1->16 3x3 pad 1, ReLU -> (16, 8, 8);
    * ``block2``: conv 16->32 3x3 pad 1, ReLU, max-pool 2x2 -> (32, 4, 4);
    * ``block3``: conv 32->32 3x3 pad 1, ReLU -> (32, 4, 4);
    * ``classifier``: global average pool, flatten, linear 32->``num_classes`` -> logits.

    A splitting module can be inserted after ``block1``, ``block2`` or ``block3``
    (:class:`splitopt.torch.multiview.splitting.SplitNet`). 14,378 parameters for 10 classes."""
    from collections import OrderedDict

    torch.manual_seed(seed)
    return nn.Sequential(OrderedDict([
        ("block1", nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU())),
        ("block2", nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))),
        ("block3", nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())),
        ("classifier", nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))),
    ]))


def digits_data(seed: int = DIGITS_SPLIT_SEED, test_size: int = DIGITS_TEST_SIZE):
    """scikit-learn's shipped ``load_digits`` (1,797 images of 8x8 pixels with values
    0..16, 10 classes; no download) as ``(x_train, y_train, x_test, y_test)``: ``x``
    float32 tensors of shape (n, 1, 8, 8) scaled to [0, 1] (pixel / 16), ``y`` int64
    labels. The split is stratified by class and deterministic
    (``sklearn.model_selection.train_test_split(random_state=seed)``): 1,437 train /
    360 test by default."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = digits.images.astype("float32") / 16.0
    x_tr, x_te, y_tr, y_te = train_test_split(images, digits.target, test_size=test_size,
                                              random_state=seed, stratify=digits.target)
    as_x = lambda a: torch.from_numpy(a).reshape(-1, 1, 8, 8).contiguous()  # noqa: E731
    as_y = lambda a: torch.from_numpy(a.astype("int64"))  # noqa: E731
    return as_x(x_tr), as_y(y_tr), as_x(x_te), as_y(y_te)
