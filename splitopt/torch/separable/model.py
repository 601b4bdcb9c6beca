"""A small separable ResNeXt (the Separable NN paper's Sep-ResNeXt, Table 1) on the
scikit-learn digits (1x8x8 images, 10 classes; shipped with scikit-learn, no download),
its communication policies, its unseparated reference and its ``separable`` instance.

The network (:class:`SepResNeXt`): a stem (3x3 conv, BN, ReLU) with ONE set of weights
whose output is duplicated on every device (the paper's "concatenate G duplications":
shared weights; at deployment each device runs its own copy of the same stem), then
``sum(blocks_per_stage)`` residual grouped bottleneck blocks in three stages, whose
``C`` paths are divided among the ``G`` devices: device ``g``'s part
(:class:`DevicePart`, its own ``nn.Module`` with its own parameters) keeps its own
residual stream of ``C_dev = widths[stage]`` channels (each device's stream is as wide as
one copy of the unseparated stream) and computes ``C / G`` of the paths; a stage's first
block may downsample (stride 2, projection shortcut) and widen the stream. The head
(global average pool, linear classifier) runs on device 0's stream only (the paper's
"keep the first 1/G of the last features").

A policy (one step per ``alpha`` blocks; :func:`normalize_policy`) is applied exactly
as ``splitopt.families.separable.evaluate`` assumes: at step ``j`` over blocks
``first_j .. last_j``, after block ``first_j`` device ``g`` snapshots its stream; if
``send_to[g] = h != g`` it sends the first ``N_send = floor(C_dev * percent[level] /
100)`` channels cast to the step's dtype; ``h`` computes blocks ``first_j + 1 ..
last_j`` and then adds the message (cast back to float32, zero-padded to ``C_dev``
channels) to its stream (Eq. 2: ``X = X + T(X) + D``). A stage boundary may only fall at
a window's first block (checked), so a message always has the shape of the stream it
is added to.

The unseparated reference (:func:`build_reference`): the same network with ``G = 1``
(one device holding all ``C`` paths, summed), i.e. the ResNeXt whose distributed form
all-reduces every block's feature map (the family's ``ring_allreduce`` plan).

Units: MACs per sample, bytes, ms. Widths in channels.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from splitopt.families.separable.plan import SeparablePlan, Step
from splitopt.families.separable.settings import DTYPE_BYTES, channels_sent, level_percents
from splitopt.torch.macs import count_macs

#: the torch dtype of each transmission dtype (bytes per element: the family's DTYPE_BYTES)
DTYPES = {"float32": torch.float32, "float16": torch.float16}


@dataclass(frozen=True)
class SepConfig:
    """The separable network's shape and its policy knobs.

    ``groups``: G devices; ``paths``: C, the cardinality (paths in all, divided among the
    devices, ``C / G`` each); ``widths[s]``: channels of ONE device's residual stream in
    stage ``s`` (C_dev); ``bottleneck[s]``: channels of one path's bottleneck (d);
    ``blocks_per_stage``: residual blocks per stage (the first of stages 1.. downsamples
    by 2); ``alpha``: blocks per transmission step; ``levels``/``min_percent``: the
    sparsification levels (paper Table 4: 9 levels from 50 %); ``dtypes``: transmission
    dtypes allowed; ``head_device``: the device that runs the classifier."""

    groups: int = 4
    paths: int = 8
    widths: tuple[int, ...] = (16, 32, 64)
    bottleneck: tuple[int, ...] = (4, 8, 16)
    blocks_per_stage: tuple[int, ...] = (2, 2, 2)
    stem_channels: int = 16
    in_channels: int = 1
    image_size: int = 8
    num_classes: int = 10
    alpha: int = 2
    levels: int = 9
    min_percent: float = 50.0
    dtypes: tuple[str, ...] = ("float32", "float16")
    head_device: int = 0

    def __post_init__(self) -> None:
        check_config(self)

    @property
    def blocks(self) -> int:
        """B: residual blocks in all."""
        return sum(self.blocks_per_stage)

    @property
    def steps(self) -> int:
        """J = ceil(B / alpha) transmission steps."""
        return len(self.windows)

    @property
    def windows(self) -> tuple[tuple[int, int], ...]:
        """Per step the blocks ``(first, last)`` (both included)."""
        return tuple((j, min(j + self.alpha, self.blocks) - 1) for j in range(0, self.blocks, self.alpha))

    @property
    def stage_of_block(self) -> tuple[int, ...]:
        return tuple(s for s, n in enumerate(self.blocks_per_stage) for _ in range(n))

    @property
    def percents(self) -> tuple[float, ...]:
        """The family's sparsity levels (% of the channels)."""
        return level_percents(self.min_percent, self.levels)

    def block_shape(self, b: int) -> tuple[int, int, int]:
        """One device's stream after block ``b``: (C_dev, H, W)."""
        s = self.stage_of_block[b]
        side = self.image_size
        for _ in range(s):
            side = (side + 1) // 2
        return (self.widths[s], side, side)

    def sent_channels(self, step: int, level: int) -> int:
        """N_send at ``step`` and ``level``: floor(C_dev * percent / 100) (the family's rule)."""
        return channels_sent(self.block_shape(self.windows[step][0])[0], self.percents[level])

    def message_bytes(self, step: int, level: int, dtype: str) -> int:
        """Bytes one sender sends at ``step`` for one sample."""
        _, h, w = self.block_shape(self.windows[step][0])
        return self.sent_channels(step, level) * h * w * DTYPE_BYTES[dtype]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "SepConfig":
        fields = {f for f in cls.__dataclass_fields__}
        unknown = [k for k in raw if k not in fields]
        if unknown:
            raise ValueError(f"separable model config: unknown field '{unknown[0]}' "
                             f"(fields: {', '.join(sorted(fields))})")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        return cls(**values)  # the field types are checked as it is built (check_config)


def _positive(value: Any, name: str, high: int = 1 << 16) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ValueError(f"separable model config: {name} must be an integer in [1, {high}], got {value!r}")


def check_config(c: SepConfig) -> None:
    """Raise ValueError (one line) unless the configuration is consistent."""
    _positive(c.groups, "groups (G)", 16)
    _positive(c.paths, "paths (C)")
    if c.paths % c.groups:
        raise ValueError(f"separable model config: G = {c.groups} devices do not divide the C = {c.paths} paths "
                         f"(each device holds C / G paths)")
    if not c.widths or len(c.widths) != len(c.bottleneck) or len(c.widths) != len(c.blocks_per_stage):
        raise ValueError(f"separable model config: widths {list(c.widths)}, bottleneck {list(c.bottleneck)} and "
                         f"blocks_per_stage {list(c.blocks_per_stage)} must have one entry per stage")
    for name, seq in (("widths", c.widths), ("bottleneck", c.bottleneck), ("blocks_per_stage", c.blocks_per_stage)):
        for v in seq:
            _positive(v, name)
    for name in ("stem_channels", "in_channels", "image_size", "num_classes", "alpha"):
        _positive(getattr(c, name), name)
    _positive(c.levels, "levels (K)", 101)
    if isinstance(c.min_percent, bool) or not isinstance(c.min_percent, (int, float)) or not 0 < c.min_percent <= 100:
        raise ValueError(f"separable model config: min_percent must be in (0, 100], got {c.min_percent!r}")
    if not c.dtypes or any(t not in DTYPES for t in c.dtypes) or len(set(c.dtypes)) != len(c.dtypes):
        raise ValueError(f"separable model config: dtypes must list distinct dtypes of {', '.join(DTYPES)}, "
                         f"got {list(c.dtypes)}")
    if isinstance(c.head_device, bool) or not isinstance(c.head_device, int) or not 0 <= c.head_device < c.groups:
        raise ValueError(f"separable model config: head_device must be in [0, {c.groups - 1}], got {c.head_device!r}")
    stage = c.stage_of_block
    for first, last in c.windows:
        if stage[first] != stage[last]:
            raise ValueError(f"separable model config: alpha = {c.alpha}: the step over blocks {first}..{last} crosses "
                             f"a stage boundary (blocks per stage {list(c.blocks_per_stage)}); choose alpha so that "
                             f"every stage starts a step")


# --------------------------------------------------------------------------- modules


class Stem(nn.Module):
    """3x3 conv, BN, ReLU: the replicated first layer."""

    def __init__(self, c: SepConfig):
        super().__init__()
        self.conv = nn.Conv2d(c.in_channels, c.stem_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c.stem_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class BlockPart(nn.Module):
    """One device's part of a residual grouped bottleneck block: ``paths`` paths of
    ``d`` channels (1x1 conv, grouped 3x3 conv with ``paths`` groups, 1x1 conv back to
    the stream, their outputs summed), BN, plus the shortcut (identity, or 1x1 conv with
    stride and BN where the shape changes), ReLU."""

    def __init__(self, c_in: int, c_out: int, paths: int, d: int, stride: int):
        super().__init__()
        width = paths * d
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=paths, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = F.relu(self.bn1(self.conv1(x)))
        t = F.relu(self.bn2(self.conv2(t)))
        t = self.bn3(self.conv3(t))
        return F.relu(self.shortcut(x) + t)


class Head(nn.Module):
    """Global average pool and the linear classifier (logits)."""

    def __init__(self, c: SepConfig):
        super().__init__()
        self.fc = nn.Linear(c.widths[-1], c.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


class DevicePart(nn.Module):
    """Everything device ``index`` holds: its blocks' parts (``blocks[b]``) and, on the
    head device, the head. The stem is shared in training; :func:`device_state` gives
    each device its own copy."""

    def __init__(self, c: SepConfig, index: int):
        super().__init__()
        self.index = index
        per = c.paths // c.groups
        blocks = []
        c_in = c.stem_channels
        for s, n in enumerate(c.blocks_per_stage):
            for i in range(n):
                stride = 2 if (s > 0 and i == 0) else 1
                blocks.append(BlockPart(c_in, c.widths[s], per, c.bottleneck[s], stride))
                c_in = c.widths[s]
        self.blocks = nn.ModuleList(blocks)
        self.head = Head(c) if index == c.head_device else None


#: one step of a policy as the model applies it: the family's step (``send_to[g]`` the
#: receiver of device ``g``, ``g``: none; the sparsity level; the wire dtype)
PolicyStep = Step
Policy = Sequence[PolicyStep]


class SepResNeXt(nn.Module):
    """The separable network: a shared stem, ``G`` :class:`DevicePart` modules
    (``parts[g]``) and the policy-driven forward (:meth:`forward`)."""

    def __init__(self, config: SepConfig):
        super().__init__()
        self.config = config
        self.stem = Stem(config)
        self.parts = nn.ModuleList(DevicePart(config, g) for g in range(config.groups))

    def part(self, g: int) -> DevicePart:
        """Device ``g``'s :class:`DevicePart` (``parts[g]``)."""
        part = self.parts[g]
        assert isinstance(part, DevicePart)  # parts holds the DevicePart modules built above
        return part

    def head_module(self) -> Head:
        """The classifier, held by the head device's part."""
        head = self.part(self.config.head_device).head
        assert head is not None  # DevicePart builds the head on the head device
        return head

    def forward(self, x: torch.Tensor, policy: Any = None) -> torch.Tensor:
        """Logits ``[N, classes]`` of the head device under ``policy`` (anything
        :func:`normalize_policy` reads; None: no communication)."""
        steps = normalize_policy(policy, self.config)
        return forward_streams(self, x, steps)


def forward_streams(model: SepResNeXt, x: torch.Tensor, steps: Policy) -> torch.Tensor:
    """The policy forward of the module docstring (steps already normalized)."""
    c = model.config
    x0 = model.stem(x)
    streams = [x0] * c.groups
    for j, (first, last) in enumerate(c.windows):
        s = steps[j]
        streams = [model.part(g).blocks[first](streams[g]) for g in range(c.groups)]
        n_send = c.sent_channels(j, s.level)
        msgs = {}
        for g, h in enumerate(s.send_to):
            if g != h:
                msgs[h] = wire(streams[g], n_send, s.dtype)
        for b in range(first + 1, last + 1):
            streams = [model.part(g).blocks[b](streams[g]) for g in range(c.groups)]
        for h, m in msgs.items():
            streams[h] = merge(streams[h], m)
    return model.head_module()(streams[c.head_device])


def wire(stream: torch.Tensor, n_send: int, dtype: str) -> torch.Tensor:
    """What a sender puts on the wire: the first ``n_send`` channels of its stream, in
    ``dtype`` (contiguous)."""
    return stream[:, :n_send].to(DTYPES[dtype]).contiguous()


def merge(stream: torch.Tensor, message: torch.Tensor) -> torch.Tensor:
    """The receiver's stream plus a message (float32, zero-padded to the stream's channels)."""
    m = message.to(stream.dtype)
    pad = stream.shape[1] - m.shape[1]
    if pad:
        m = F.pad(m, (0, 0, 0, 0, 0, pad))
    return stream + m


# --------------------------------------------------------------------------- policies


def _one_line(msg: str) -> ValueError:
    return ValueError(" ".join(msg.split()))


def normalize_policy(policy: Any, config: SepConfig) -> list[PolicyStep]:
    """The policy as one :class:`PolicyStep` per step, checked: a
    ``splitopt.families.separable.plan.SeparablePlan`` (not a ring plan), or a sequence of
    steps each a ``Step``/:class:`PolicyStep`, a ``(send_to, level, dtype)`` tuple, a
    ``(send_to, level)`` tuple (widest dtype) or a dict with ``send_to``, ``level``,
    ``dtype``; None: every step the identity (no communication). ValueError (one line)
    names the step and the field."""
    c = config
    if policy is None:
        return [PolicyStep(tuple(range(c.groups)), c.levels - 1, "float32") for _ in range(c.steps)]
    if hasattr(policy, "ring") and hasattr(policy, "steps"):
        if policy.ring:
            raise _one_line("policy: a ring all-reduce plan is the unseparated model; run the reference model "
                            "(build_reference) instead")
        policy = policy.steps
    try:
        steps = list(policy)
    except TypeError:
        raise _one_line(f"policy: must list one step per transmission step ({c.steps}), got {type(policy).__name__}") \
            from None
    if len(steps) != c.steps:
        raise _one_line(f"policy: {len(steps)} steps; the model has {c.steps} ({c.blocks} blocks, alpha = {c.alpha})")
    widest = max(c.dtypes, key=lambda t: DTYPE_BYTES[t])
    out = []
    for j, raw in enumerate(steps):
        at = f"policy step {j}"
        if isinstance(raw, Mapping):
            send_to, level, dtype = raw.get("send_to"), raw.get("level", c.levels - 1), raw.get("dtype", widest)
        elif hasattr(raw, "send_to"):
            send_to, level, dtype = raw.send_to, raw.level, raw.dtype
        elif isinstance(raw, (tuple, list)) and len(raw) in (2, 3):
            send_to, level = raw[0], raw[1]
            dtype = raw[2] if len(raw) == 3 else widest
        else:
            raise _one_line(f"{at}: must be (send_to, level, dtype), got {raw!r}")
        if send_to is None:  # a mapping without it
            raise _one_line(f"{at}: send_to must list device indices, got None")
        try:
            perm = tuple(int(h) for h in send_to)
        except (TypeError, ValueError):
            raise _one_line(f"{at}: send_to must list device indices, got {send_to!r}") from None
        if len(perm) != c.groups or sorted(perm) != list(range(c.groups)):
            raise _one_line(f"{at}: send_to {list(perm)} is not a permutation of the G = {c.groups} devices")
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level < c.levels:
            raise _one_line(f"{at}: level {level!r} is out of range [0, {c.levels - 1}]")
        if dtype not in c.dtypes:
            raise _one_line(f"{at}: dtype {dtype!r} is not one of {', '.join(c.dtypes)}")
        out.append(PolicyStep(perm, int(level), str(dtype)))
    return out


def identity_policy(c: SepConfig) -> list[PolicyStep]:
    """No communication: every step the identity."""
    return normalize_policy(None, c)


def intensive_policy(c: SepConfig, level: int | None = None, dtype: str = "float32") -> list[PolicyStep]:
    """Every step a derangement (every device sends), by default 100 % in float32: the
    cyclic shift ``g -> g + 1 + (j mod (G - 1))`` at step ``j``, so that features mix."""
    level = c.levels - 1 if level is None else level
    if c.groups == 1:
        return identity_policy(c)
    return [PolicyStep(tuple((g + 1 + j % (c.groups - 1)) % c.groups for g in range(c.groups)), level, dtype)
            for j in range(c.steps)]


def random_policy(c: SepConfig, rng: np.random.Generator) -> list[PolicyStep]:
    """A policy drawn uniformly: per step a permutation of the G! (Table 3), a level and
    a dtype."""
    out = []
    for _ in range(c.steps):
        perm = tuple(int(v) for v in rng.permutation(c.groups))
        out.append(PolicyStep(perm, int(rng.integers(c.levels)), str(c.dtypes[int(rng.integers(len(c.dtypes)))])))
    return out


def policy_bytes(c: SepConfig, steps: Policy) -> int:
    """Bytes all senders send for one sample (the family's ``total_bytes``)."""
    return sum(c.message_bytes(j, s.level, s.dtype) * s.senders for j, s in enumerate(steps))


def ring_bytes(c: SepConfig) -> float:
    """The ring all-reduce reference for one sample: ``2 (G - 1)`` float32 stream maps
    per block (bytes)."""
    return float(sum(2 * (c.groups - 1) * int(np.prod(c.block_shape(b))) * 4 for b in range(c.blocks)))


def policy_to_json(steps: Policy) -> list[dict[str, Any]]:
    """The plan file's ``steps`` list."""
    return [{"send_to": list(s.send_to), "level": s.level, "dtype": s.dtype} for s in steps]


def policy_to_plan(steps: Policy) -> SeparablePlan:
    """The family's ``SeparablePlan`` for a normalized policy."""
    return SeparablePlan(tuple(Step(tuple(s.send_to), s.level, s.dtype) for s in steps))


def permutations(g: int) -> list[tuple[int, ...]]:
    """The G! permutations in lexicographic order (Table 3's ids for G = 4)."""
    return list(itertools.permutations(range(g)))


# --------------------------------------------------------------------------- build, data


def build_model(config: SepConfig | None = None, seed: int = 0) -> SepResNeXt:
    """The separable network with seeded random weights."""
    config = config or SepConfig()
    torch.manual_seed(seed)
    return SepResNeXt(config)


def build_reference(config: SepConfig | None = None, seed: int = 0) -> SepResNeXt:
    """The unseparated ResNeXt of the same widths: ``G = 1``, all ``C`` paths on one
    device, summed (what a ring all-reduce after every block computes)."""
    config = config or SepConfig()
    ref = SepConfig(**{**asdict(config), "groups": 1, "head_device": 0})
    torch.manual_seed(seed)
    return SepResNeXt(ref)


@dataclass
class DigitsData:
    """The digits split (fixed seed): float32 images ``[N, 1, 8, 8]`` in [0, 1], labels."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    seed: int = 0
    sizes: dict[str, int] = field(default_factory=dict)


def load_digits_split(seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.2) -> DigitsData:
    """scikit-learn's digits (1797 images), stratified into train / validation / test with
    ``seed`` (default 70 / 10 / 20 %)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None]
    y = d.target.astype(np.int64)
    x_rest, x_test, y_rest, y_test = train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)
    x_train, x_val, y_train, y_val = train_test_split(x_rest, y_rest, test_size=val_fraction / (1 - test_fraction),
                                                      random_state=seed, stratify=y_rest)
    t = torch.from_numpy
    out = DigitsData(t(x_train), t(y_train), t(x_val), t(y_val), t(x_test), t(y_test), seed)
    out.sizes = {"train": len(y_train), "val": len(y_val), "test": len(y_test)}
    return out


def accuracy(model: SepResNeXt, x: torch.Tensor, y: torch.Tensor, policy: Any = None, batch: int = 512) -> float:
    """Top-1 accuracy (fraction) of ``model`` under ``policy`` (eval mode, no grad)."""
    steps = normalize_policy(policy, model.config)
    was = model.training
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            correct += int((forward_streams(model, x[i:i + batch], steps).argmax(1) == y[i:i + batch]).sum())
    model.train(was)
    return correct / max(1, len(y))


# --------------------------------------------------------------------------- deployment pieces


def device_state(model: SepResNeXt, g: int) -> dict[str, torch.Tensor]:
    """What device ``g`` holds (a state dict, copies): its own stem copy (``stem.*``), its
    blocks' parts (``blocks.*``) and, on the head device, the head (``head.*``)."""
    out = {f"stem.{k}": v.detach().clone() for k, v in model.stem.state_dict().items()}
    out.update({k: v.detach().clone() for k, v in model.parts[g].state_dict().items()})
    return out


class DeviceModule(nn.Module):
    """One device's deployable model: its stem copy, its blocks' parts, its head (head
    device only). Built from :func:`device_state`."""

    def __init__(self, config: SepConfig, g: int, state: Mapping[str, torch.Tensor] | None = None):
        super().__init__()
        self.config = config
        self.index = g
        self.stem = Stem(config)
        part = DevicePart(config, g)
        self.blocks = part.blocks
        self.head = part.head
        if state is not None:
            self.load_state_dict(dict(state))
        self.eval()


# --------------------------------------------------------------------------- profile and instance


@dataclass(frozen=True)
class LayerProfile:
    """One instance layer: name, MACs (per sample, all devices' parts of a block
    together), weights (elements), output shape (a block: ``[G * C_dev, H, W]``) and the
    measured time (ms, batch 1, one thread): for a block the slowest device's part
    (``part_ms``: each device's)."""

    name: str
    op: str
    macs: int
    weights: int
    output_shape: tuple[int, ...]
    ms: float
    part_ms: tuple[float, ...] = ()


def profile_layers(model: SepResNeXt, repeats: int = 20) -> list[LayerProfile]:
    """MACs, weights, shapes and median times (ms, batch 1) of the stem, every block (each
    device's part timed alone) and the head."""
    c = model.config
    model.eval()
    x = torch.zeros(1, c.in_channels, c.image_size, c.image_size)

    def timed(fn, arg) -> float:
        with torch.no_grad():
            fn(arg)
            ts = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn(arg)
                ts.append(1000.0 * (time.perf_counter() - t0))
        return statistics.median(ts)

    out = []
    with torch.no_grad():
        y = model.stem(x)
        out.append(LayerProfile("stem", "conv", count_macs(model.stem, x),
                                sum(p.numel() for p in model.stem.state_dict().values()), tuple(y.shape[1:]),
                                timed(model.stem, x)))
        for b in range(c.blocks):
            parts = [model.part(g).blocks[b] for g in range(c.groups)]
            macs = sum(count_macs(p, y) for p in parts)
            weights = sum(sum(v.numel() for v in p.state_dict().values()) for p in parts)
            times = tuple(timed(p, y) for p in parts)
            y = parts[0](y)
            out.append(LayerProfile(f"block{b}", "block", macs, weights,
                                    (c.groups * y.shape[1],) + tuple(y.shape[2:]), max(times), times))
        head = model.head_module()
        out.append(LayerProfile("head", "linear", count_macs(head, y),
                                sum(v.numel() for v in head.state_dict().values()), (c.num_classes,),
                                timed(head, y)))
    return out


def host_devices(config: SepConfig, layers: Sequence[LayerProfile], prefix: str = "host") -> list[dict[str, Any]]:
    """G device objects that are this host (one per device: ``host0`` ..), with the MAC
    rate the profile implies (MACs over measured ms; layers carry their measured
    ``latency_ms``, which overrides it)."""
    macs = sum(l.macs for l in layers)
    ms = sum(l.ms * (config.groups if l.op == "block" else 1) for l in layers)
    rate = max(1.0, macs / (ms / 1000.0)) if ms > 0 else 1e9
    # (the description names the function as the instances written so far do)
    return [{"name": f"{prefix}{g}", "description": "this host (one torch thread), measured by "
             "splitopt.torch.separable_model.profile_layers", "mac_per_s": rate, "offchip_bytes_per_s": None,
             "onchip_bytes": 0.0, "memory_bytes": 8e9, "bit_widths": [16, 32]} for g in range(config.groups)]


def full_mesh_links(names: Sequence[str], bandwidth_bits_per_s: float, latency_ms: float = 0.0) -> list[dict[str, Any]]:
    """A link each way between every two devices (bits/s, ms per transfer)."""
    return [{"source": a, "target": b, "bandwidth_bits_per_s": float(bandwidth_bits_per_s),
             "latency_ms": float(latency_ms)} for a in names for b in names if a != b]


def instance_dict(config: SepConfig, layers: Sequence[LayerProfile], devices: Sequence[Mapping[str, Any]],
                  links: Sequence[Mapping[str, Any]], *, name: str, measured_on: Sequence[str] = (),
                  accuracy: Sequence[Mapping[str, Any]] = (), options: Mapping[str, Any] | None = None,
                  description: str | None = None, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The family's instance (JSON-ready dict) for the network: layers ``stem``,
    ``block0`` .. (``output_shape`` ``[G * C_dev, H, W]``, MACs of all parts), ``head``;
    ``devices`` and ``links`` as given (schema objects; device 0 first). Devices named
    in ``measured_on`` get the profile's times as ``latency_ms``: the stem and head as
    measured, a block ``G`` times the device's own part (the family's data model gives
    device ``g`` ``latency / G`` of a block), so a host device reproduces the measured
    part times. ``settings.separable``: devices, alpha, levels, dtypes, ``accuracy``
    records and any extra ``options`` (e.g. ``byte_budget_bytes``)."""
    c = config
    names = [d["name"] for d in devices]
    if len(names) != c.groups:
        raise ValueError(f"instance: {len(names)} devices given; the model has G = {c.groups}")
    graph_layers = []
    prev = "x"
    for l in layers:
        entry: dict[str, Any] = {"name": l.name, "op": l.op, "inputs": [prev], "macs": float(l.macs),
                                 "weights": int(l.weights), "output_shape": list(l.output_shape)}
        if measured_on:
            if l.op == "block":
                entry["latency_ms"] = {n: c.groups * l.part_ms[names.index(n)] for n in measured_on}
            else:
                entry["latency_ms"] = {n: l.ms for n in measured_on}
        graph_layers.append(entry)
        prev = l.name
    sep: dict[str, Any] = {"devices": names, "alpha": c.alpha, "stem_layers": 1, "head_layers": 1,
                           "head_device": names[c.head_device],
                           "levels": {"min_percent": c.min_percent, "count": c.levels}, "dtypes": list(c.dtypes)}
    if accuracy:
        sep["accuracy"] = [dict(r) for r in accuracy]
    sep.update(dict(options or {}))
    return {
        "format": "splitopt-instance/1",
        "name": name,
        "description": description or (f"Sep-ResNeXt on digits: G = {c.groups}, C = {c.paths} paths, widths "
                                        f"{list(c.widths)} per device, {c.blocks} blocks, alpha = {c.alpha}"),
        # the generator's name as the instances written so far record it (the module's name then)
        "source": dict(source or {"generator": "splitopt.torch.separable_model", "torch": torch.__version__,
                                  "separable_model": c.to_dict()}),
        "graph": {"inputs": [{"name": "x", "shape": [c.in_channels, c.image_size, c.image_size], "bits": 32}],
                  "layers": graph_layers},
        "devices": [dict(d) for d in devices],
        "links": [dict(l) for l in links],
        "settings": {"problem": "separable", "objective": "latency", "edge": names[0], "cloud": names[0],
                     "separable": sep},
    }


def parse_separable_instance(data: Mapping[str, Any]) -> Any:
    """Parse and check an instance dict (``splitopt.api.parse_instance``: InvalidInstance,
    one line)."""
    from splitopt.api import parse_instance

    return parse_instance(dict(data))


def evaluate_plan(inst: Any, steps_or_plan: Any) -> Any:
    """The family evaluator's metrics for a policy (or a ``SeparablePlan``)."""
    from splitopt.families.separable.evaluate import evaluate

    plan = steps_or_plan
    if not hasattr(plan, "ring"):
        plan = policy_to_plan(steps_or_plan)
    return evaluate(inst, plan)
