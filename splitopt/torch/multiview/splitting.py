"""The SplitNets splitting module (Dong et al., CVPR 2022, Sec. 3.1.3, App. B, E, F).

* :class:`ConvReduce` ``phi: R^{c x s x s} -> R^{d x s x s}``, a 1x1 convolution on the
  edge (sensor) side that cuts the channels sent over the link from ``c`` to ``d``;
* :class:`ConvRecover` ``phi': R^{d x s x s} -> R^{c x s x s}``, a 1x1 convolution on the
  cloud (aggregator) side that restores ``c`` channels for the rest of the network
  (single view);
* :class:`ViewFuse`: for ``V`` views, the interlaced channel concatenation
  ``concat(V x R^{d x s x s}) -> R^{V*d x s x s}`` of App. B (fused channel ``i`` comes
  from view ``i mod V``, channel ``i // V`` of that view), replacing Conv-Recover;
* :func:`split_aware_init_` and the Kaiming fan-in / Xavier rows of the paper's Table 3
  (:func:`init_conv_`);
* :class:`SplitNet`: a sequential CNN with Conv-Reduce / Conv-Recover inserted after a
  named block; ``head`` runs on the edge and ends with Conv-Reduce, ``tail`` runs on the
  cloud and starts with Conv-Recover; :meth:`SplitNet.transmitted` counts the bytes of
  the tensor sent per sample with :func:`splitopt.torch.packing.pack`;
* :class:`MultiViewSplitNet`: V edge heads each ending with Conv-Reduce, View-Fuse, one
  cloud tail (whose first layer must take ``V * d`` channels).

``formulations/splitting_module.md`` has the formulas.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from typing import Sequence, TypeVar

import torch
from torch import nn

from splitopt.core.errors import InvalidModel

#: the initialisations :func:`init_conv_` knows
INITS = ("split-aware", "kaiming", "xavier")


# ----- initialisation ------------------------------------------------------------------------

#: the convolutions the initialisations draw: 2-d (Conv-Reduce, Conv-Recover) and 1-d
#: (the pointwise convs of :func:`splitopt.torch.multiview.partition.pointwise_conv`)
Conv = TypeVar("Conv", nn.Conv1d, nn.Conv2d)


def _fans(conv: nn.Conv1d | nn.Conv2d) -> tuple[int, int, int]:
    """``(k^2, c_in, c_out)`` of ``conv``: kernel elements ``k^2`` (kh * kw; 1-d: k), input
    channels per group and output channels per group (a grouped conv is ``groups``
    independent convs)."""
    k2 = int(math.prod(conv.kernel_size))
    return k2, conv.in_channels // conv.groups, conv.out_channels // conv.groups


def init_variance(conv: nn.Conv1d | nn.Conv2d, method: str = "split-aware") -> float:
    """Weight variance (dimensionless) that :func:`init_conv_` draws ``conv`` with, the
    paper's Table 3 / App. E, all for ReLU (gain 2):

    * ``split-aware``: ``2 / (k^2 * sqrt(c_in * c_out))`` (geometric mean of the fans);
    * ``kaiming`` (fan-in, Eq. 4): ``2 / (k^2 * c_in)``;
    * ``xavier``: ``2 / (k^2 * (c_in + c_out) / 2)`` (arithmetic mean of the fans; the
      paper's row keeps the ReLU gain 2, i.e. ``torch.nn.init.xavier_normal_`` with
      ``gain = sqrt(2)``).

    Raises InvalidModel for an unknown method."""
    k2, cin, cout = _fans(conv)
    if method == "split-aware":
        return 2.0 / (k2 * math.sqrt(cin * cout))
    if method == "kaiming":
        return 2.0 / (k2 * cin)
    if method == "xavier":
        return 2.0 / (k2 * (cin + cout) / 2.0)
    raise InvalidModel(f"init: unknown initialisation '{method}' (choose from {', '.join(INITS)})")


def init_conv_(conv: Conv, method: str = "split-aware", generator: torch.Generator | None = None) -> Conv:
    """Draw ``conv.weight ~ N(0, init_variance(conv, method))`` in place and set the bias
    (if any) to 0; returns ``conv``. ``generator`` makes the draw independent of the
    global torch seed."""
    std = math.sqrt(init_variance(conv, method))
    with torch.no_grad():
        nn.init.normal_(conv.weight, 0.0, std, generator=generator)
        if conv.bias is not None:
            conv.bias.zero_()
    return conv


def split_aware_init_(conv: nn.Conv2d, generator: torch.Generator | None = None) -> nn.Conv2d:
    """SplitNets' split-aware initialisation, in place (App. E, Table 3 "Ours").

    The paper: Kaiming fan-in draws ``W ~ N(0, 2 / (k^2 * c_in))`` (Eq. 4) and fan-out
    ``W ~ N(0, 2 / (k^2 * c_out))`` (Eq. 5), "where k is kernel size and c_in (and c_out)
    is the input (and output) channel size"; for Conv-Reduce / Conv-Recover c_in and
    c_out differ by far, so "we use a new initialization strategy by replacing c_in or
    c_out with their geometric average sqrt(c_in * c_out)" (Sec. 3.1.3); Table 3 gives
    the weights' variance ``2 / (k^2 * sqrt(c_in * c_out))``. Implemented exactly so:

        W ~ N(0, 2 / (k^2 * sqrt(c_in * c_out))),   bias = 0

    (``c_in``, ``c_out`` per group; the paper does not mention a bias: it is set to 0).
    Returns ``conv``."""
    return init_conv_(conv, "split-aware", generator)


# ----- the layers --------------------------------------------------------------------------

def _check_channels(what: str, n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidModel(f"{what}: channel count must be a positive integer, got {n!r}")
    return n


class ConvReduce(nn.Conv2d):
    """Conv-Reduce ``phi``: 1x1 convolution ``c -> d`` channels (with bias), spatial size
    unchanged; the last layer on the edge. Initialised by :func:`init_conv_` with
    ``init`` (default split-aware)."""

    def __init__(self, c: int, d: int, init: str = "split-aware", generator: torch.Generator | None = None):
        super().__init__(_check_channels("Conv-Reduce input", c), _check_channels("Conv-Reduce output", d), 1)
        init_conv_(self, init, generator)


class ConvRecover(nn.Conv2d):
    """Conv-Recover ``phi'``: 1x1 convolution ``d -> c`` channels (with bias), spatial
    size unchanged; the first layer on the cloud (single view). Initialised like
    :class:`ConvReduce`."""

    def __init__(self, d: int, c: int, init: str = "split-aware", generator: torch.Generator | None = None):
        super().__init__(_check_channels("Conv-Recover input", d), _check_channels("Conv-Recover output", c), 1)
        init_conv_(self, init, generator)


class ViewFuse(nn.Module):
    """View-Fuse: interlaced concatenation of ``V`` views along the channels (App. B,
    Fig. 10). ``forward(views)`` takes a sequence of ``V`` tensors of equal shape
    (n, d, s, s) and returns (n, V*d, s, s) whose channel ``j * V + v`` is channel ``j``
    of view ``v``: first the first channel of every view, then the second channels, and
    so on; fused channel ``i`` always comes from view ``i mod V``. No parameters."""

    def __init__(self, views: int):
        super().__init__()
        if isinstance(views, bool) or not isinstance(views, int) or views < 1:
            raise InvalidModel(f"View-Fuse: the number of views must be a positive integer, got {views!r}")
        self.views = views

    def forward(self, views: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(views) != self.views:
            raise InvalidModel(f"View-Fuse: expected {self.views} views, got {len(views)}")
        shapes = {tuple(v.shape) for v in views}
        if len(shapes) != 1:
            raise InvalidModel(f"View-Fuse: the views must have equal shapes, got {sorted(shapes)}")
        stacked = torch.stack(list(views), dim=2)  # (n, d, V, s, s): index [.., j, v, ..]
        n, d, v = stacked.shape[:3]
        return stacked.reshape(n, d * v, *stacked.shape[3:])

    def extra_repr(self) -> str:
        return f"views={self.views}"


# ----- inserting the module into a sequential CNN --------------------------------------------

def block_names(model: nn.Sequential) -> list[str]:
    """Names of the children after which a splitting module can be inserted: every child
    of the sequential ``model`` but the last."""
    return [name for name, _ in model.named_children()][:-1]


def packed_sizes(z: torch.Tensor, bits: int) -> dict[str, int]:
    """Bits per element, elements, payload bytes and header bytes of one sample ``z`` (no
    batch dim) packed at ``bits`` bits by :func:`splitopt.torch.packing.pack`."""
    from splitopt.torch.packing import pack

    packed = pack(z, bits)
    return {"bits": bits, "elements": packed.elements, "payload_bytes": packed.payload_bytes,
            "header_bytes": packed.header_bytes}


def send(z: torch.Tensor, bits: int | None) -> torch.Tensor:
    """What arrives on the cloud when the batch ``z`` (n, ...) is sent one sample at a
    time at ``bits`` bits: each sample packed and unpacked by
    :mod:`splitopt.torch.packing` (its own min/max range); ``bits`` None or 32 passes the
    float32 tensor unchanged."""
    if bits is None or bits == 32:
        return z
    from splitopt.torch.packing import pack, unpack

    return torch.stack([unpack(pack(z[i], bits)) for i in range(z.shape[0])]).to(z.dtype)


class SplitNet(nn.Module):
    """A sequential CNN cut after block ``split`` with a splitting module inserted:

    ``head`` = the blocks up to and including ``split`` (deep copies of ``model``'s
    trained weights) + :class:`ConvReduce` (c -> d), run on the edge;
    ``tail`` = :class:`ConvRecover` (d -> c) + the remaining blocks, run on the cloud.

    ``c`` and the spatial size (h, w) at the split are read from ``example_input`` (one
    sample, shape (1, ...)). ``init`` initialises Reduce and Recover
    (:data:`INITS`); ``seed`` seeds their draw. ``forward(x, bits=None)`` runs head,
    :func:`send` at ``bits`` (None: float, no quantization), tail.

    Raises InvalidModel for an unknown split name, ``d`` not in [1, c], or an unknown
    init."""

    def __init__(self, model: nn.Sequential, split: str, d: int, example_input: torch.Tensor,
                 init: str = "split-aware", seed: int = 0):
        super().__init__()
        names = block_names(model)
        if split not in names:
            raise InvalidModel(f"split: unknown block '{split}' (choose from {', '.join(names)})")
        if init not in INITS:
            raise InvalidModel(f"init: unknown initialisation '{init}' (choose from {', '.join(INITS)})")
        children = list(model.named_children())
        cut = names.index(split) + 1
        edge = nn.Sequential(OrderedDict((n, copy.deepcopy(m)) for n, m in children[:cut]))
        with torch.no_grad():
            z = edge.eval()(example_input)
        if z.dim() != 4 or z.shape[0] != 1:
            raise InvalidModel(f"split: block '{split}' outputs shape {tuple(z.shape)} for the example input; "
                               f"a splitting module needs (1, c, h, w)")
        c, h, w = (int(s) for s in z.shape[1:])
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= c:
            raise InvalidModel(f"width: d must be an integer in [1, {c}] (the channels after '{split}'), got {d!r}")
        g = torch.Generator().manual_seed(seed)
        self.split, self.channels, self.height, self.width, self.d, self.init = split, c, h, w, d, init
        self.head = nn.Sequential(OrderedDict([*edge.named_children(), ("reduce", ConvReduce(c, d, init, g))]))
        self.tail = nn.Sequential(OrderedDict([("recover", ConvRecover(d, c, init, g)),
                                               *((n, copy.deepcopy(m)) for n, m in children[cut:])]))
        self.example_input = example_input.detach().clone()

    def forward(self, x: torch.Tensor, bits: int | None = None) -> torch.Tensor:
        return self.tail(send(self.head(x), bits))

    @property
    def splitting_module(self) -> tuple[ConvReduce, ConvRecover]:
        reduce, recover = self.head[-1], self.tail[0]
        assert isinstance(reduce, ConvReduce) and isinstance(recover, ConvRecover)  # built so in __init__
        return reduce, recover

    def backbone(self) -> nn.Sequential:
        """The network without the splitting module: the (retrained) blocks under their
        original names, so that it loads into the model it was cut from."""
        return nn.Sequential(OrderedDict([*list(self.head.named_children())[:-1],
                                          *list(self.tail.named_children())[1:]]))

    @property
    def transmitted_elements(self) -> int:
        """Elements sent per sample: ``d * h * w``."""
        return self.d * self.height * self.width

    def transmitted(self, bits: int = 8) -> dict[str, int]:
        """Per sample, the tensor the head sends, packed by :func:`packing.pack` at
        ``bits`` bits: ``elements`` (= d*h*w), ``payload_bytes`` (= ceil(d*h*w*bits/8)),
        ``header_bytes`` (shape, scale, zero point; 2 + 4*3 + 8 = 22 bytes at 1..8 bits)."""
        with torch.no_grad():
            z = self.head.eval()(self.example_input)[0]
        return packed_sizes(z, bits)


class MultiViewSplitNet(nn.Module):
    """Multi-view splitting (Sec. 3.1.3, Fig. 5): ``V`` edge heads, each ending with a
    :class:`ConvReduce` ``c -> d``, their outputs fused by :class:`ViewFuse` into
    ``V * d`` channels, then one cloud ``tail`` whose first layer takes ``V * d``
    channels (no Conv-Recover). ``heads``: V modules mapping a view to (n, c, s, s)
    (deep-copied); ``forward(views, bits=None)`` takes V tensors, one per view.
    ``shared``: one head and one Conv-Reduce (copies of ``heads[0]``) serve every view,
    as when V sensors run the same model (the ``multiview`` problem family); then
    ``heads`` may be ``[head] * V``."""

    def __init__(self, heads: Sequence[nn.Module], c: int, d: int, tail: nn.Module,
                 init: str = "split-aware", seed: int = 0, shared: bool = False):
        super().__init__()
        if not heads:
            raise InvalidModel("multi-view split: needs at least one view head")
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= c:
            raise InvalidModel(f"width: d must be an integer in [1, {c}], got {d!r}")
        g = torch.Generator().manual_seed(seed)
        self.views, self.c, self.d, self.shared = len(heads), c, d, shared
        own = heads[:1] if shared else heads
        self.heads = nn.ModuleList([nn.Sequential(copy.deepcopy(h), ConvReduce(c, d, init, g)) for h in own])
        self.fuse = ViewFuse(len(heads))
        self.tail = tail

    def head(self, v: int) -> nn.Sequential:
        """View ``v``'s head (ending with its Conv-Reduce): ``Sequential(head, ConvReduce)``."""
        head = self.heads[0 if self.shared else v]
        assert isinstance(head, nn.Sequential)  # built so in __init__
        return head

    def forward(self, views: Sequence[torch.Tensor], bits: int | None = None) -> torch.Tensor:
        if len(views) != self.views:
            raise InvalidModel(f"multi-view split: expected {self.views} views, got {len(views)}")
        return self.tail(self.fuse([send(self.head(v)(x), bits) for v, x in enumerate(views)]))
