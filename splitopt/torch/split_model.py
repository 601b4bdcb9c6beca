"""A partitioned module: its parts, the tensors crossing between them, and running it.

:func:`splitopt.torch.partition.partition` builds a :class:`SplitModel` from a plan:
edge/cloud (``split``, ``split_bits``) and ``chain`` plans get one :class:`Part` per device
(:mod:`splitopt.torch.partition_sequential`), ``mesh`` plans one per stage
(:mod:`splitopt.torch.mesh.partition`). A part is an fx graph module built by
:mod:`splitopt.torch.part_builder`; what crosses between parts is a list of
:class:`Crossing`, each tensor priced at ``elements * bits / 8`` bytes per sample
(:func:`tensor_elements`, :func:`sent_bits`). :meth:`SplitModel.run` runs the parts in
order one sample at a time and hands every crossing tensor through a transmission hook
(:mod:`splitopt.torch.transmission`), recording :class:`RunStats`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from splitopt.core.errors import InvalidModel
from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.export_manifest import SEQUENTIAL
from splitopt.torch.transmission import Transmit, identity_transmit, packing_transmit

#: bits at or above which a layer runs in float (the evaluator's reference precision)
DEFAULT_REFERENCE_BITS = 16


@dataclass(frozen=True)
class Crossing:
    """The tensors sent from device ``source`` to device ``target``, each ``(name,
    elements per sample, bits per element)``. Edge/cloud and chain plans: the boundary
    between consecutive devices (forwarded tensors included); mesh plans: an ordered
    device pair, each tensor once per destination device however many hops its route
    takes (the per-link view: :func:`splitopt.torch.mesh.compare.link_bytes`)."""

    source: str
    target: str
    tensors: tuple[tuple[str, int, int], ...]

    @property
    def bytes(self) -> float:
        """Bytes per sample: sum of elements * bits / 8."""
        return sum(e * b / 8.0 for _, e, b in self.tensors)

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the tensors sent, in order."""
        return tuple(n for n, _, _ in self.tensors)


@dataclass
class Part:
    """What one device runs (mesh plans: one stage; a device may have several parts).
    ``module`` takes the tensors named by ``inputs`` (in order) and returns a tuple of
    the tensors named by ``outputs``; None when the device runs no layer (it may still
    forward tensors). ``sends``: mesh plans, the ``(tensor, destination device)`` pairs
    sent once the part has run."""

    device: str
    layers: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    module: torch.nn.Module | None
    sends: tuple[tuple[str, str], ...] = ()


@dataclass
class RunStats:
    """Measured on the last :meth:`SplitModel.run`: seconds per part (summed over the
    samples) and bytes per sample per crossing (from the real tensors' element counts)."""

    samples: int = 0
    part_seconds: list[float] = field(default_factory=list)
    crossing_bytes: list[float] = field(default_factory=list)


class SplitModel:
    """The parts of a partitioned module and how to run them.

    ``kind``: :data:`SEQUENTIAL` (edge/cloud and chain: one part per device in device
    order, crossing ``m`` after part ``m``) or a kind of stages (``mesh``: parts are
    stages in run order; each device keeps its own tensors; ``source`` produces the raw
    input, final outputs are delivered to ``sink`` when it is set; the bytes per link:
    :func:`splitopt.torch.mesh.compare.link_bytes`)."""

    def __init__(self, capture: Capture, plan, devices: Sequence[str], parts: list[Part],
                 crossings: list[Crossing], output_names: tuple[str, ...], example_input: torch.Tensor,
                 quantized: bool, ranges: Mapping[str, tuple[float, float]], *, kind: str = SEQUENTIAL,
                 inst=None, source: str | None = None, sink: str | None = None,
                 input_sends: Sequence[str] = (), output_devices: Sequence[str] = ()):
        self.capture = capture
        self.plan = plan
        self.devices = tuple(devices)
        self.parts = parts
        self.crossings = crossings
        self.output_names = output_names
        self.example_input = example_input
        self.quantized = quantized
        self.ranges = dict(ranges)  # layer -> calibrated (lo, hi) of its float output
        self.kind = kind
        self.inst = inst
        self.source = source if source is not None else (self.devices[0] if self.devices else None)
        self.sink = sink
        self.input_sends = tuple(input_sends)  # mesh: devices the raw input is sent to at the start
        self.output_devices = tuple(output_devices)  # mesh: device producing each model output
        self.last_run = RunStats()

    @property
    def sent_bytes(self) -> list[float]:
        """Bytes per sample per crossing (edge/cloud/chain: each boundary device m -> m+1;
        mesh: each device pair), from the shapes."""
        return [c.bytes for c in self.crossings]

    @property
    def transmitted_bytes(self) -> float:
        """Bytes per sample over all crossings (mesh: each (tensor, destination) once)."""
        return sum(self.sent_bytes)

    def default_transmit(self) -> Transmit:
        """Identity for float plans; pack/unpack at the sent bits for quantized plans."""
        if not self.quantized:
            return identity_transmit
        return packing_transmit(self.ranges)

    def _check_input(self, x: torch.Tensor) -> None:
        want = tuple(self.example_input.shape[1:])
        if x.dim() != self.example_input.dim() or tuple(x.shape[1:]) != want:
            raise InvalidModel(f"input shape {tuple(x.shape)} does not match the captured input shape "
                               f"(n, {', '.join(map(str, want))})")

    def run(self, x: torch.Tensor, transmit: Transmit | None = None) -> torch.Tensor:
        """Run the parts in order on ``x`` (shape (n, *example shape[1:])), one sample at a
        time (the exported graph has batch 1); returns the outputs stacked on dim 0 (a
        tuple if the module returns several tensors)."""
        self._check_input(x)
        hook = self.default_transmit() if transmit is None else transmit
        if self.kind != SEQUENTIAL:
            return self._run_stages(x, hook)
        stats = RunStats(samples=x.shape[0], part_seconds=[0.0] * len(self.parts),
                         crossing_bytes=[0.0] * len(self.crossings))
        outs: list[tuple[torch.Tensor, ...]] = []
        with torch.no_grad():
            for i in range(x.shape[0]):
                store: dict[str, torch.Tensor] = {INPUT_NAME: x[i:i + 1]}
                for m, part in enumerate(self.parts):
                    if part.module is not None:
                        t0 = time.perf_counter()
                        result = part.module(*[store[n] for n in part.inputs])
                        stats.part_seconds[m] += time.perf_counter() - t0
                        store.update(zip(part.outputs, result))
                    if m < len(self.crossings):
                        measured = 0.0
                        for name, _, bits in self.crossings[m].tensors:
                            t = store[name]
                            measured += t.numel() * bits / 8.0
                            store[name] = hook(name, t, bits)
                        stats.crossing_bytes[m] = measured
                outs.append(tuple(store[n] for n in self.output_names))
        self.last_run = stats
        return stack_outputs(outs, len(self.output_names))

    def _run_stages(self, x: torch.Tensor, hook: Transmit) -> torch.Tensor:
        """Parts that are stages (mesh plans): every device has its own store; after a part runs, each tensor it
        sends goes through ``hook`` once per destination device (the producer keeps its
        own copy); a model output is read on the sink when it was delivered there."""
        source = self.source
        assert source is not None  # a split has devices, and the first is the default source
        index = {(c.source, c.target): k for k, c in enumerate(self.crossings)}
        bits = {(c.source, c.target, n): b for c in self.crossings for n, _, b in c.tensors}
        stats = RunStats(samples=x.shape[0], part_seconds=[0.0] * len(self.parts),
                         crossing_bytes=[0.0] * len(self.crossings))
        outs: list[tuple[torch.Tensor, ...]] = []

        def send(stores, measured, name: str, a: str, b: str) -> None:
            t = stores[a][name]
            k = index[(a, b)]
            nbits = bits[(a, b, name)]
            measured[k] += t.numel() * nbits / 8.0
            stores[b][name] = hook(name, t, nbits)

        with torch.no_grad():
            for i in range(x.shape[0]):
                stores: dict[str, dict[str, torch.Tensor]] = {d: {} for d in self.devices}
                measured = [0.0] * len(self.crossings)
                stores[source][INPUT_NAME] = x[i:i + 1]
                for b in self.input_sends:
                    send(stores, measured, INPUT_NAME, source, b)
                for m, part in enumerate(self.parts):
                    store = stores[part.device]
                    if part.module is not None:
                        t0 = time.perf_counter()
                        result = part.module(*[store[n] for n in part.inputs])
                        stats.part_seconds[m] += time.perf_counter() - t0
                        store.update(zip(part.outputs, result))
                    for name, b in part.sends:
                        send(stores, measured, name, part.device, b)
                stats.crossing_bytes = measured
                row = []
                sink_store = stores[self.sink] if self.sink is not None else {}
                for n, d in zip(self.output_names, self.output_devices):
                    row.append(sink_store[n] if n in sink_store else stores[d][n])
                outs.append(tuple(row))
        self.last_run = stats
        return stack_outputs(outs, len(self.output_names))

    def summary(self) -> list[dict[str, Any]]:
        """Per part: device, layer count, first/last layer, received and sent tensors."""
        rows = []
        for m, p in enumerate(self.parts):
            if self.kind != SEQUENTIAL:
                size = {(c.source, c.target, n): e * b / 8.0 for c in self.crossings for n, e, b in c.tensors}
                sent = [f"{n}->{b}" for n, b in p.sends]
                sent_bytes = sum(size[(p.device, b, n)] for n, b in p.sends)
            else:
                c = self.crossings[m] if m < len(self.crossings) else None
                sent, sent_bytes = (list(c.names), c.bytes) if c else ([], 0.0)
            rows.append({"device": p.device, "layers": len(p.layers),
                         "first_layer": p.layers[0] if p.layers else None,
                         "last_layer": p.layers[-1] if p.layers else None,
                         "inputs": list(p.inputs), "outputs": list(p.outputs),
                         "sent_tensors": sent, "sent_bytes": sent_bytes})
        return rows


def stack_outputs(outs: list[tuple[torch.Tensor, ...]], k: int):
    """Per-sample output tuples ``outs`` (each of ``k`` tensors with batch 1) stacked on
    dim 0: one tensor when ``k`` is 1, else a tuple of ``k`` tensors."""
    cat = tuple(torch.cat([o[j] for o in outs], dim=0) for j in range(k))
    return cat[0] if len(cat) == 1 else cat


def tensor_elements(cap: Capture) -> dict[str, int]:
    """Elements per sample (batch dimension dropped) of the raw input (``input``) and of
    every captured layer's output."""
    elements = {INPUT_NAME: math.prod(cap.graph_input["shape"])}
    elements.update({l.name: math.prod(l.output_shape) for l in cap.layers})
    return elements


def sent_bits(name: str, cap: Capture, abits: Mapping[str, int], inst) -> int:
    """Bits per element at which tensor ``name`` crosses a boundary: the raw input at its
    own bits (the instance's, else the capture's), a layer output at
    ``inst.sent_bits(name, abits[name])`` (``abits``: the layer's activation bits; without
    an instance, ``abits[name]`` itself)."""
    if name == INPUT_NAME:
        return int(inst.inputs[0].bits if inst is not None else cap.graph_input["bits"])
    bits = int(abits[name])
    return int(inst.sent_bits(name, bits)) if inst is not None else bits

