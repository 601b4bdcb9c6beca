"""Problem data: the layer graph, the devices and links, the problem and objective, and
the settings of the problem's family (``splitopt.core.settings``).

An :class:`Instance` is built from JSON by ``splitopt.core.instance_io`` (schema and
consistency checks) and checked further by its problem's family when loaded
(``splitopt.api``). One built in Python (``Instance(...)``, ``dataclasses.replace``) runs
the same checks when it is constructed (:func:`set_build_check`): a defect is a one-line
InvalidInstance naming the field and value, never a bare KeyError later. Sequences given
as lists are stored as tuples, and bit-widths sorted, as the parser stores them.
Everything downstream (evaluators, programs, baselines) reads this immutable model and
never the raw JSON; data a family derives from it is cached on the instance
(:meth:`Instance.derived`).

Units: latency in ms, sizes in bytes, bit-widths in bits, compute in MAC/s, off-chip
bandwidth in bytes/s, link bandwidth in bits/s.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from splitopt.core.built_types import store_as_tuples
from splitopt.core.settings import FamilySettings

#: the checks an Instance built in Python runs when constructed: the JSON path's (schema
#: on its JSON form, consistency, ranges, the family's), installed by ``splitopt.api``
#: (:func:`set_build_check`), which knows the families; the core cannot import them
_build_check: Callable[["Instance"], None] | None = None
#: set while an Instance is built from data already checked (the JSON parser) or derived
#: from a checked instance (``with_settings``, a family's derived data)
_checked_elsewhere: contextvars.ContextVar[bool] = contextvars.ContextVar("splitopt_checked_elsewhere",
                                                                          default=False)


def set_build_check(check: Callable[["Instance"], None] | None) -> None:
    """Install the checks :class:`Instance` runs when built in Python (None: none)."""
    global _build_check
    _build_check = check


@contextmanager
def checked_elsewhere() -> Iterator[None]:
    """Instances built inside skip the build check: their data is checked by the caller
    (the JSON parser) or derived from a checked instance."""
    token = _checked_elsewhere.set(True)
    try:
        yield
    finally:
        _checked_elsewhere.reset(token)


@dataclass(frozen=True)
class InputTensor:
    """A raw graph input captured on the edge (an image, a sensor frame)."""

    name: str
    shape: tuple[int, ...]
    bits: int

    def __post_init__(self) -> None:
        store_as_tuples(self, "shape")

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Layer:
    """One fused layer; it produces one output tensor named like the layer."""

    name: str
    op: str
    inputs: tuple[str, ...]
    macs: float
    weights: float
    output_shape: tuple[int, ...]
    weight_error: Mapping[int, float] = field(default_factory=dict)
    activation_error: Mapping[int, float] = field(default_factory=dict)
    latency_ms: Mapping[str, Any] = field(default_factory=dict)
    fused: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        store_as_tuples(self, "inputs", "output_shape", "fused")

    @functools.cached_property  # program builders ask for it per row (frozen: safe to cache)
    def output_elements(self) -> int:
        return math.prod(self.output_shape)


@dataclass(frozen=True)
class Device:
    """A processor with its compute rate (MAC/s), off-chip bandwidth (bytes/s), on-chip
    buffer (bytes), memory for the model (bytes) and supported bit-widths."""

    name: str
    mac_per_s: float
    offchip_bytes_per_s: float | None
    onchip_bytes: float
    memory_bytes: float
    bit_widths: tuple[int, ...]
    description: str = ""

    def __post_init__(self) -> None:
        store_as_tuples(self, "bit_widths", sort=("bit_widths",))


@dataclass(frozen=True)
class Link:
    """A directed link: bandwidth in bits/s plus a fixed latency in ms per transfer. A
    link on a shared ``bus`` takes its bandwidth from the bus (see :class:`Bus`)."""

    source: str
    target: str
    bandwidth_bits_per_s: float
    latency_ms: float = 0.0
    bus: str | None = None


@dataclass(frozen=True)
class Bus:
    """A medium shared by several links (e.g. the sensors' bus of a head-mounted device).

    ``mode`` says how the links share it: ``"serial"``: one transfer at a time, each at
    the full ``bandwidth_bits_per_s``; ``"share"``: every link on the bus owns a fixed
    equal share, ``bandwidth_bits_per_s / links``, at all times (time-division), so
    transfers on different links overlap and never wait for each other."""

    name: str
    bandwidth_bits_per_s: float
    mode: str = "serial"


#: the type of an instance's settings object (a family's ``FamilySettings`` subclass)
SettingsT = TypeVar("SettingsT", bound=FamilySettings)


@dataclass(frozen=True)
class Instance(Generic[SettingsT]):
    """A problem instance: the layer graph (``inputs``, ``layers``), the devices, links and
    buses, the problem and objective, and the settings of the problem's family (a
    :class:`~splitopt.core.settings.FamilySettings`, e.g. the edge/cloud family's edge and
    cloud devices and limits). A family's modules may name it as
    ``Instance[ItsSettings]`` so that a type checker knows the settings' fields."""

    name: str
    inputs: tuple[InputTensor, ...]
    layers: tuple[Layer, ...]
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    #: the problem name (``splitopt.families.registry`` maps it to its family)
    problem: str
    #: the family's settings object
    settings: SettingsT
    #: what to minimise (one of the family's objectives)
    objective: str = "latency"
    description: str = ""
    source: Mapping[str, Any] = field(default_factory=dict)
    buses: tuple[Bus, ...] = ()

    def __post_init__(self) -> None:
        """Built in Python (not by the JSON parser, not derived from a checked instance):
        the JSON path's checks (:func:`set_build_check`), InvalidInstance on a defect."""
        store_as_tuples(self, "inputs", "layers", "devices", "links", "buses")
        if _build_check is not None and not _checked_elsewhere.get():
            _build_check(self)

    # ----- lookups -------------------------------------------------------------------
    @cached_property
    def layer_by_name(self) -> dict[str, Layer]:
        return {layer.name: layer for layer in self.layers}

    @cached_property
    def input_by_name(self) -> dict[str, InputTensor]:
        return {t.name: t for t in self.inputs}

    @cached_property
    def device_by_name(self) -> dict[str, Device]:
        return {d.name: d for d in self.devices}

    @cached_property
    def position(self) -> dict[str, int]:
        """Index of each layer in the execution order (the file's order)."""
        return {layer.name: i for i, layer in enumerate(self.layers)}

    @cached_property
    def consumers(self) -> dict[str, tuple[str, ...]]:
        """Tensor name (graph input or layer) -> layers that read it, in execution order,
        each once even if it reads the tensor twice."""
        out: dict[str, list[str]] = {t.name: [] for t in self.inputs}
        out.update({layer.name: [] for layer in self.layers})
        for layer in self.layers:
            for src in dict.fromkeys(layer.inputs):
                out[src].append(layer.name)
        return {k: tuple(v) for k, v in out.items()}

    def derived(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()`` computed once per instance and kept with it (instances are
        immutable): the family's prepared data, latency tables, ...; ``key`` names it."""
        cache = self.__dict__.setdefault("_derived_cache", {})
        if key not in cache:
            with checked_elsewhere():  # instances built from a checked one (e.g. a view)
                cache[key] = build()
        return cache[key]

    @cached_property
    def graph(self):
        """Layer DAG (graph inputs excluded, a ``networkx.DiGraph``); node attribute
        ``layer`` holds the Layer."""
        import networkx as nx  # imported when first needed: it costs 0.6 s at start-up

        g = nx.DiGraph()
        for layer in self.layers:
            g.add_node(layer.name, layer=layer)
        for layer in self.layers:
            for src in layer.inputs:
                if src in self.layer_by_name:
                    g.add_edge(src, layer.name)
        return g

    @cached_property
    def bus_by_name(self) -> dict[str, Bus]:
        return {b.name: b for b in self.buses}

    @cached_property
    def link_between(self) -> dict[tuple[str, str], Link]:
        """(source device, target device) -> the link."""
        return {(l.source, l.target): l for l in self.links}

    def link_rate_bits_per_s(self, link: Link) -> float:
        """Bandwidth (bits/s) a transfer on ``link`` gets: the link's own, or on a bus the
        full bus rate (serial) or the link's equal share of it (share)."""
        if link.bus is None:
            return link.bandwidth_bits_per_s
        bus = self.bus_by_name[link.bus]
        if bus.mode == "share":
            return bus.bandwidth_bits_per_s / sum(1 for l in self.links if l.bus == bus.name)
        return bus.bandwidth_bits_per_s

    def link_transfer_ms(self, link: Link, nbytes: float) -> float:
        """Time (ms) to send ``nbytes`` in one transfer over ``link``; zero for nothing."""
        if nbytes <= 0:
            return 0.0
        return link.latency_ms + 1000.0 * nbytes * 8.0 / self.link_rate_bits_per_s(link)

    def sent_bits(self, tensor: str, activation_bits: int) -> int:
        """Bits per element at which ``tensor`` crosses the cut: a raw input at its own
        bits, a layer output at the settings' ``transmit_bits`` if set, else at the bits it was
        produced at (``activation_bits``)."""
        if tensor in self.input_by_name:
            return self.input_by_name[tensor].bits
        transmit = self.settings.transmit_bits
        if transmit is not None:
            return transmit
        return activation_bits

    def tensor_elements(self, tensor: str) -> int:
        if tensor in self.input_by_name:
            return self.input_by_name[tensor].elements
        return self.layer_by_name[tensor].output_elements

    def summary(self) -> str:
        """One line: size of the graph, devices, problem and objective (a family may say
        more: ``Family.summary``)."""
        macs = sum(l.macs for l in self.layers)
        weights = sum(l.weights for l in self.layers)
        more = self.settings.describe()
        return (f"{self.name}: {len(self.layers)} layers, {macs / 1e9:.3f} GMAC, {weights / 1e6:.3f} M weights, "
                f"{len(self.devices)} devices, problem {self.problem}, objective {self.objective}"
                + (f", {more}" if more else ""))

    def with_settings(self, **changes: Any) -> "Instance[SettingsT]":
        """A copy with some settings replaced: ``problem`` and ``objective``, and fields of
        the family's settings object (e.g. ``problem="split"``, ``error_budget=None``);
        InvalidInstance names a field the settings do not have. The family's checks run
        again when the copy is prepared for solving or evaluation (``splitopt.families``),
        and derived data is not carried over."""
        core = {key: changes.pop(key) for key in ("problem", "objective") if key in changes}
        settings = self.settings.replaced(**changes) if changes else self.settings
        with checked_elsewhere():
            return dataclasses.replace(self, settings=settings, **core)
