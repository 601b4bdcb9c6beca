"""The multi-view shared-bus family (problem ``multiview``, SplitNets Sec. 3.1.3, 4.2,
Tables 4 and 6): V sensors each run the sensor part of one backbone on their own view and
send over one shared bus; the aggregator finishes each view's pre-fusion part, fuses the V
views and runs the rest of the network once.

This module holds the family's data model (``settings.multiview``, checked by
``check_instance``), its plan type (``MultiviewPlan``), the independent evaluator
(``evaluate``: per-view costs plus a semi-active schedule) and the human report. The
programs live in ``splitopt/multiview_program.py`` (CP-SAT and MILP), the baselines in
``splitopt/baselines/multiview.py``; the formulation is ``formulations/multiview_bus.md``.

Units: ms, bytes, bits, MAC/s, bits/s.

Instance data (``settings.multiview``)::

    {"sensors": ["sensor0", ..., "sensor11"],      # V devices, one view each (required)
     "views": 12,                                   # optional; must equal len(sensors)
     "fusion_candidates": ["layer3.1.add", ...],   # optional; default: every single-tensor cut
     "cut_candidates": ["conv1", ...],              # optional; default: every single-tensor cut
     "compression_widths": [8, 16],                 # optional Conv-Reduce widths d; default []
     "accuracy": [{"width": 8, "accuracy": 0.91},   # optional measured accuracy per width
                  {"fusion": "layer3.1.add", "width": 16, "accuracy": 0.94}],
     "min_accuracy": 0.9}                           # optional: the least accuracy a plan may have

``settings.cloud`` is the aggregator, ``settings.edge`` one of the sensors (the reference
sensor, used in reports), ``settings.cloud_bits`` the precision of every layer (SplitNets:
8), ``settings.edge_memory_bytes`` the sensor memory limit (each sensor's limit is the
smaller of it and the sensor device's ``memory_bytes``), ``settings.edge_required`` layers
every sensor must run (so that the raw view never leaves the sensor). Every sensor needs a
link to the aggregator, all on one bus (``Bus.mode`` "serial" or "share").

The network of a plan, for fusion point ``f`` (a single-tensor cut of the backbone) and
width ``d`` (None: no compression):

* pre-fusion pipeline, run once per view: the backbone layers up to ``f``
  (``f`` and its ancestors), then, if ``d`` is set, the Conv-Reduce layer ``mv.reduce``
  (1x1 conv ``c -> d`` on ``f``'s ``c x spatial`` output: ``spatial*c*d`` MACs,
  ``c*d + d`` weights);
* the fusion layer ``mv.fuse``, run once on the aggregator: with ``d`` the View-Fuse
  (interlaced concatenation of the V reduced views, then a 1x1 conv ``V*d -> c`` that
  restores the backbone's channel count: ``spatial*V*d*c`` MACs, ``V*d*c + c`` weights);
  without ``d`` a View-Pool (element-wise max over the V views, MVCNN; ``(V-1)*n[f]``
  operations, no weights). With V = 1 and no ``d`` there is no fusion layer;
* the post-fusion layers (every other backbone layer), run once on the aggregator.

Accuracy (issue 4: the width ``d`` as a decision with its measured accuracy): a record
gives the accuracy measured for width ``d`` (``null``: no Conv-Reduce) at one fusion
point, or at every fusion point when it names none (a record naming the fusion point wins).
With ``min_accuracy`` set, an architecture (fusion, d) may be chosen only if its accuracy
is at least ``min_accuracy``; a width without a record is then not allowed, while no
compression (d = null) without a record is (it is the backbone itself). ``splitopt
retrain --instance-out`` writes such records from its measurements.

Each view's sensor runs a prefix of its pipeline, chosen by its *cut point*: the raw input
(nothing on the sensor), a cut tensor ``t`` at or before ``f`` (``t`` and its ancestors),
or ``mv.reduce`` (the whole pipeline, compression included). Cut points are single-tensor
cuts, so exactly one tensor per view crosses the bus.
"""

from __future__ import annotations

import json
import math
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import networkx as nx

from splitopt.errors import InvalidInstance, InvalidPlan
from splitopt.instance import Bus, Instance, Layer, Link, Settings
from splitopt.latency import layer_latency_ms
from splitopt.schedule import Task

PROBLEMS = ("multiview",)
PLAN_FORMAT = "splitopt-multiview-plan/1"
#: names of the synthetic layers (reserved: no backbone layer may use them)
REDUCE = "mv.reduce"
FUSE = "mv.fuse"
#: relative tolerance of the sensor memory check (as in the two-tier evaluator)
MEMORY_RTOL = 1e-9
OPTION_KEYS = ("sensors", "views", "fusion_candidates", "cut_candidates", "compression_widths", "accuracy",
               "min_accuracy")
ACCURACY_KEYS = ("fusion", "width", "accuracy", "note")

_CACHE: dict[int, tuple[Any, dict]] = {}


def _cached(inst: Instance, key: Any, build):
    """Memoise ``build()`` per live Instance object (Instances are unhashable)."""
    entry = _CACHE.get(id(inst))
    if entry is None or entry[0]() is not inst:
        key_id = id(inst)
        entry = (weakref.ref(inst, lambda _ref: _CACHE.pop(key_id, None)), {})
        _CACHE[id(inst)] = entry
    store = entry[1]
    if key not in store:
        store[key] = build()
    return store[key]


# ----- instance data ------------------------------------------------------------------------

@dataclass(frozen=True)
class MultiviewData:
    """The checked ``settings.multiview`` and what follows from the graph.

    ``cuts``: the cut points a view may use before compression, in execution order, the
    raw input first; ``fusions``: fusion candidates in execution order; ``prefix[t]``:
    the backbone layers up to tensor ``t`` (``t`` and its ancestors; empty for the raw
    input), in execution order; ``channels[t]``/``spatial[t]``: ``t``'s first dimension
    and the product of the others; ``archs``: every (fusion, width) pair, width None
    first; ``limits[s]``: sensor ``s``'s memory limit (bytes); ``accuracy[a]``: the
    measured accuracy of arch ``a`` (None: no record); ``min_accuracy``: the least
    accuracy a plan may have (None: no limit)."""

    sensors: tuple[str, ...]
    aggregator: str
    bus: Bus
    links: Mapping[str, Link]
    input: str
    cuts: tuple[str, ...]
    fusions: tuple[str, ...]
    widths: tuple[int, ...]
    bits: int
    required: frozenset
    prefix: Mapping[str, tuple[str, ...]]
    channels: Mapping[str, int]
    spatial: Mapping[str, int]
    archs: tuple[tuple[str, int | None], ...]
    limits: Mapping[str, float]
    accuracy: Mapping[tuple[str, int | None], float | None] = field(default_factory=dict)
    min_accuracy: float | None = None

    @property
    def views(self) -> int:
        return len(self.sensors)

    @property
    def serial(self) -> bool:
        return self.bus.mode == "serial"

    def widths_at(self, fusion: str) -> tuple[int, ...]:
        """Compression widths offered at ``fusion``: those below its channel count."""
        return tuple(d for d in self.widths if d < self.channels[fusion])

    def points(self, fusion: str, width: int | None) -> tuple[str, ...]:
        """Cut points a view may use under (fusion, width), pipeline order."""
        before = set(self.prefix[fusion])
        out = [t for t in self.cuts if t == self.input or t in before]
        if width is not None:
            out.append(REDUCE)
        return tuple(out)

    def sensor_layers(self, fusion: str, width: int | None, cut: str) -> tuple[str, ...]:
        """Layers a sensor runs for cut point ``cut`` (synthetic ``mv.reduce`` included)."""
        if cut == REDUCE:
            return self.prefix[fusion] + (REDUCE,)
        return self.prefix[cut]

    def pipeline(self, fusion: str, width: int | None) -> tuple[str, ...]:
        return self.prefix[fusion] + ((REDUCE,) if width is not None else ())

    def has_fuse(self, width: int | None) -> bool:
        return width is not None or self.views > 1

    def accuracy_problem(self, fusion: str, width: int | None) -> str | None:
        """Why (fusion, width) breaks ``min_accuracy`` (one line), None if it does not."""
        if self.min_accuracy is None:
            return None
        acc = self.accuracy.get((fusion, width))
        if acc is None:
            if width is None:
                return None
            return (f"width d={width} at '{fusion}' has no measured accuracy (settings.multiview.accuracy) and "
                    f"settings.multiview.min_accuracy is {self.min_accuracy:g}")
        if acc < self.min_accuracy:
            what = "no compression" if width is None else f"width d={width}"
            return (f"accuracy {acc:.4f} of {what} at '{fusion}' is below settings.multiview.min_accuracy "
                    f"{self.min_accuracy:g}")
        return None

    @property
    def allowed_archs(self) -> tuple[tuple[str, int | None], ...]:
        """The archs whose accuracy meets ``min_accuracy`` (all of them without a limit)."""
        return tuple(a for a in self.archs if self.accuracy_problem(*a) is None)


def _single_tensor_cuts(inst: Instance) -> tuple[list[str], dict[str, tuple[str, ...]], dict[str, str]]:
    """Layer outputs ``t`` such that running ``t`` and its ancestors on the sensor sends
    exactly ``t``: no other layer reads any tensor of that part except ``t``, nor the raw
    input. Returns (cut names in execution order, prefix per layer, reason per non-cut)."""
    g = inst.graph
    prefix: dict[str, tuple[str, ...]] = {}
    cuts, why = [], {}
    for layer in inst.layers:
        part = nx.ancestors(g, layer.name) | {layer.name}
        prefix[layer.name] = tuple(l.name for l in inst.layers if l.name in part)
        bad = None
        for other in inst.layers:
            if other.name in part:
                continue
            for src in other.inputs:
                if src in inst.input_by_name or (src in part and src != layer.name):
                    bad = (other.name, src)
                    break
            if bad:
                break
        if bad is None:
            cuts.append(layer.name)
        else:
            why[layer.name] = f"layer '{bad[0]}' outside its sensor part also reads '{bad[1]}'"
    return cuts, prefix, why


def data(inst: Instance) -> MultiviewData:
    """The checked multiview data of ``inst`` (cached per instance object)."""
    return _cached(inst, "data", lambda: _build_data(inst))


def _build_data(inst: Instance) -> MultiviewData:
    where = "instance.settings.multiview"
    s = inst.settings
    mv = dict(s.multiview)
    unknown = [k for k in mv if k not in OPTION_KEYS]
    if unknown:
        raise InvalidInstance(f"{where}.{unknown[0]}: unknown option (options: {', '.join(OPTION_KEYS)})")
    sensors = mv.get("sensors")
    if not isinstance(sensors, list) or not sensors:
        raise InvalidInstance(f"{where}.sensors: required, a non-empty list of sensor device names (one per view)")
    for i, name in enumerate(sensors):
        if not isinstance(name, str) or name not in inst.device_by_name:
            raise InvalidInstance(f"{where}.sensors[{i}]: unknown sensor device {name!r} "
                                  f"(devices: {', '.join(sorted(inst.device_by_name))})")
        if name in sensors[:i]:
            raise InvalidInstance(f"{where}.sensors[{i}]: sensor '{name}' listed twice")
        if name == s.cloud:
            raise InvalidInstance(f"{where}.sensors[{i}]: '{name}' is the aggregator (settings.cloud)")
    views = mv.get("views", len(sensors))
    if not isinstance(views, int) or isinstance(views, bool) or views < 1:
        raise InvalidInstance(f"{where}.views: must be an integer >= 1, got {views!r}")
    if views != len(sensors):
        raise InvalidInstance(f"{where}.views: {views} views but {len(sensors)} sensors; one sensor per view")
    if s.edge not in sensors:
        raise InvalidInstance(f"instance.settings.edge: '{s.edge}' is not one of settings.multiview.sensors")
    if s.error_budget is not None:
        raise InvalidInstance("instance.settings.error_budget: not used by problem 'multiview' (every layer runs at "
                              "cloud_bits); set it to null")
    # links and the bus
    links: dict[str, Link] = {}
    bus_name = None
    for name in sensors:
        link = inst.link_between.get((name, s.cloud))
        if link is None:
            raise InvalidInstance(f"instance.links: no link from sensor '{name}' to aggregator '{s.cloud}'")
        if link.bus is None:
            i = inst.links.index(link)
            raise InvalidInstance(f"instance.links[{i}].bus: link '{name}' -> '{s.cloud}' is on no bus; problem "
                                  "'multiview' sends every view over one shared bus")
        if bus_name is not None and link.bus != bus_name:
            raise InvalidInstance(f"instance.links: sensor '{name}' sends on bus '{link.bus}', another sensor on "
                                  f"'{bus_name}'; problem 'multiview' needs one shared bus")
        bus_name = link.bus
        links[name] = link
    bus = inst.bus_by_name[bus_name]
    # precision
    for name in list(sensors) + [s.cloud]:
        dev = inst.device_by_name[name]
        if s.cloud_bits not in dev.bit_widths:
            raise InvalidInstance(f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by device "
                                  f"'{name}' (supports {list(dev.bit_widths)})")
    # graph
    if len(inst.inputs) != 1:
        raise InvalidInstance(f"instance.graph.inputs: problem 'multiview' needs exactly one graph input (the view), "
                              f"got {len(inst.inputs)}")
    inp = inst.inputs[0].name
    for i, layer in enumerate(inst.layers):
        if layer.name in (REDUCE, FUSE):
            raise InvalidInstance(f"instance.graph.layers[{i}].name: '{layer.name}' is reserved by problem 'multiview'")
        for dev, entry in layer.latency_ms.items():
            if dev not in inst.device_by_name:
                raise InvalidInstance(f"instance.graph.layers[{i}].latency_ms: unknown device '{dev}'")
            key = f"w{s.cloud_bits}a{s.cloud_bits}"
            if isinstance(entry, dict) and key not in entry:
                raise InvalidInstance(f"instance.graph.layers[{i}].latency_ms.{dev}: layer '{layer.name}' has no "
                                      f"entry '{key}'")
    cut_layers, prefix, why = _single_tensor_cuts(inst)
    prefix = dict(prefix)
    prefix[inp] = ()

    def tensor_list(key: str) -> list[str]:
        raw = mv.get(key)
        if raw is None:
            return list(cut_layers)
        if not isinstance(raw, list) or not raw:
            raise InvalidInstance(f"{where}.{key}: must be a non-empty list of tensor names")
        for i, t in enumerate(raw):
            if t != inp and t not in inst.layer_by_name:
                raise InvalidInstance(f"{where}.{key}[{i}]: unknown tensor {t!r}")
            if t in raw[:i]:
                raise InvalidInstance(f"{where}.{key}[{i}]: '{t}' listed twice")
            if t != inp and t not in cut_layers:
                raise InvalidInstance(f"{where}.{key}[{i}]: '{t}' is not a valid single-tensor cut ({why[t]})")
        return list(raw)

    def order(names) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=lambda t: -1 if t == inp else inst.position[t]))

    fusions = order(tensor_list("fusion_candidates"))
    cuts = order([inp] + tensor_list("cut_candidates") + list(fusions))
    shape = {inp: inst.inputs[0].shape}
    shape.update({l.name: l.output_shape for l in inst.layers})
    channels = {t: int(shape[t][0]) if shape[t] else 1 for t in shape}
    spatial = {t: int(math.prod(shape[t][1:])) if shape[t] else 1 for t in shape}
    widths_raw = mv.get("compression_widths", [])
    if not isinstance(widths_raw, list):
        raise InvalidInstance(f"{where}.compression_widths: must be a list of channel counts d")
    most = max(channels[f] for f in fusions)
    for i, d in enumerate(widths_raw):
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise InvalidInstance(f"{where}.compression_widths[{i}]: must be an integer >= 1, got {d!r}")
        if d in widths_raw[:i]:
            raise InvalidInstance(f"{where}.compression_widths[{i}]: d={d} listed twice")
        if d >= most:
            raise InvalidInstance(f"{where}.compression_widths[{i}]: d={d} is not smaller than the channels of any "
                                  f"fusion candidate (at most {most}); Conv-Reduce must compress")
    widths = tuple(sorted(widths_raw))
    # layers every sensor must run
    required: set[str] = set()
    for i, name in enumerate(s.edge_required):
        if name not in inst.layer_by_name:
            raise InvalidInstance(f"instance.settings.edge_required[{i}]: unknown layer '{name}'")
        required.add(name)
        required |= nx.ancestors(inst.graph, name)
    if required and not any(required <= set(prefix[f]) for f in fusions):
        raise InvalidInstance("instance.settings.edge_required: no fusion candidate comes after every required "
                              "layer (required layers must run on the sensors, before fusion)")
    archs = tuple((f, d) for f in fusions for d in (None,) + tuple(w for w in widths if w < channels[f]))
    limits = {name: min(s.edge_memory_bytes, inst.device_by_name[name].memory_bytes) for name in sensors}
    accuracy, min_accuracy = _accuracy_table(mv, where, fusions, widths, archs)
    return MultiviewData(
        sensors=tuple(sensors), aggregator=s.cloud, bus=bus, links=links, input=inp, cuts=cuts, fusions=fusions,
        widths=widths, bits=s.cloud_bits, required=frozenset(required), prefix=prefix, channels=channels,
        spatial=spatial, archs=archs, limits=limits, accuracy=accuracy, min_accuracy=min_accuracy,
    )


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidInstance(f"{where}: must be a number in [0, 1] (a fraction of correct predictions), "
                              f"got {value!r}")
    return float(value)


def _accuracy_table(mv: Mapping[str, Any], where: str, fusions: Sequence[str], widths: Sequence[int],
                    archs: Sequence[tuple[str, int | None]]
                    ) -> tuple[dict[tuple[str, int | None], float | None], float | None]:
    """The checked ``accuracy`` records resolved per arch (a record naming the fusion
    point wins over one naming none), and ``min_accuracy``."""
    raw = mv.get("accuracy", [])
    if not isinstance(raw, list):
        raise InvalidInstance(f"{where}.accuracy: must be a list of records {{fusion?, width, accuracy}}")
    specific: dict[tuple[str, int | None], float] = {}
    general: dict[int | None, float] = {}
    for i, rec in enumerate(raw):
        at = f"{where}.accuracy[{i}]"
        if not isinstance(rec, dict):
            raise InvalidInstance(f"{at}: must be an object {{fusion?, width, accuracy}}")
        unknown = [k for k in rec if k not in ACCURACY_KEYS]
        if unknown:
            raise InvalidInstance(f"{at}.{unknown[0]}: unknown key (keys: {', '.join(ACCURACY_KEYS)})")
        if "width" not in rec or "accuracy" not in rec:
            raise InvalidInstance(f"{at}: needs 'width' (a compression width, or null) and 'accuracy'")
        width, fusion = rec["width"], rec.get("fusion")
        if width is not None and width not in widths:
            raise InvalidInstance(f"{at}.width: {width!r} is not one of settings.multiview.compression_widths "
                                  f"{list(widths)} (or null: no compression)")
        if fusion is not None and fusion not in fusions:
            raise InvalidInstance(f"{at}.fusion: {fusion!r} is not a fusion candidate ({', '.join(fusions)})")
        value = _fraction(rec["accuracy"], f"{at}.accuracy")
        table, key = (general, width) if fusion is None else (specific, (fusion, width))
        if key in table:
            raise InvalidInstance(f"{at}: a second record for width {width} at "
                                  f"{'every fusion point' if fusion is None else repr(fusion)}")
        table[key] = value
    minimum = mv.get("min_accuracy")
    if minimum is not None:
        minimum = _fraction(minimum, f"{where}.min_accuracy")
    return {a: specific.get(a, general.get(a[1])) for a in archs}, minimum


def check_instance(inst: Instance) -> None:
    """Family checks; raises InvalidInstance with a one-line message naming the field."""
    data(inst)


# ----- the single-view architecture graph ---------------------------------------------------

def arch_layers(inst: Instance, fusion: str, width: int | None) -> tuple[Layer, ...]:
    """One view's network for (fusion, width): the pre-fusion backbone layers, then
    ``mv.reduce`` (with a width), then ``mv.fuse`` (when V > 1 or a width is set), then the
    post-fusion layers, which read ``mv.fuse`` where they read ``fusion``."""
    def build():
        d = data(inst)
        pre = set(d.prefix[fusion])
        c, sp, V = d.channels[fusion], d.spatial[fusion], d.views
        out = [l for l in inst.layers if l.name in pre]
        last = fusion
        if width is not None:
            op = "conv" if _ndim(inst, fusion) > 1 else "linear"
            out.append(Layer(REDUCE, op, (fusion,), float(sp * c * width), float(c * width + width),
                             (width,) + _shape(inst, fusion)[1:]))
            last = REDUCE
        if d.has_fuse(width):
            if width is not None:
                fuse = Layer(FUSE, "view_fuse", (last,), float(sp * V * width * c), float(V * width * c + c),
                             _shape(inst, fusion))
            else:
                fuse = Layer(FUSE, "view_pool", (last,), float((V - 1) * c * sp), 0.0, _shape(inst, fusion))
            out.append(fuse)
            last = FUSE
        for l in inst.layers:
            if l.name not in pre:
                out.append(replace(l, inputs=tuple(last if x == fusion else x for x in l.inputs)))
        return tuple(out)

    return _cached(inst, ("arch", fusion, width), build)


def _shape(inst: Instance, tensor: str) -> tuple[int, ...]:
    if tensor in inst.input_by_name:
        return tuple(inst.input_by_name[tensor].shape)
    return tuple(inst.layer_by_name[tensor].output_shape)


def _ndim(inst: Instance, tensor: str) -> int:
    return len(_shape(inst, tensor))


def two_tier_view(inst: Instance, fusion: str, width: int | None, sensor: str) -> Instance:
    """The single-view network of (fusion, width) as a two-tier ``split`` instance between
    ``sensor`` and the aggregator, over a private link at the rate the sensor's transfers
    get on the bus (``Instance.link_rate_bits_per_s``). Used for the sensor memory walk
    (``splitopt.evaluator.evaluate_two_tier``, SplitNets App. G) and the sent tensors."""
    def build():
        d = data(inst)
        s = inst.settings
        link = d.links[sensor]
        private = Link(sensor, d.aggregator, inst.link_rate_bits_per_s(link), link.latency_ms)
        settings = Settings(problem="split", edge=sensor, cloud=d.aggregator, edge_memory_bytes=d.limits[sensor],
                            error_budget=None, bit_widths=(d.bits,), cloud_bits=d.bits, transmit_bits=s.transmit_bits)
        devices = (inst.device_by_name[sensor], inst.device_by_name[d.aggregator])
        return Instance(name=f"{inst.name}[{sensor}]", inputs=inst.inputs, layers=arch_layers(inst, fusion, width),
                        devices=devices, links=(private,), settings=settings)

    return _cached(inst, ("view", fusion, width, sensor), build)


def layer_ms(inst: Instance, fusion: str, width: int | None, name: str, device: str) -> float:
    """Latency (ms) of layer ``name`` on ``device`` at ``cloud_bits``. A backbone layer is
    timed on the backbone graph (``splitopt.latency``, as in the two-tier family), so its
    latency does not depend on the fusion point; ``mv.reduce``/``mv.fuse`` on the
    architecture graph of (fusion, width)."""
    d = data(inst)
    dev = inst.device_by_name[device]
    if name in (REDUCE, FUSE):
        view = two_tier_view(inst, fusion, width, d.sensors[0])
        return layer_latency_ms(view, view.layer_by_name[name], dev, d.bits, d.bits)
    return layer_latency_ms(inst, inst.layer_by_name[name], dev, d.bits, d.bits)


# ----- plans ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MultiviewPlan:
    """``fusion``: the fusion tensor; ``width``: the Conv-Reduce width d (None: none);
    ``cuts[sensor]``: that view's cut point (the raw input name, a cut tensor, or
    ``mv.reduce``); ``bus_order``: the order of the transfers on a serial bus (None on a
    share bus); ``aggregator_order``: the order of the per-view aggregator tasks. Orders
    list every sensor; tasks of zero duration occupy no resource and their place in an
    order is ignored."""

    fusion: str
    width: int | None
    cuts: Mapping[str, str]
    bus_order: tuple[str, ...] | None
    aggregator_order: tuple[str, ...]

    def key(self) -> tuple:
        return (self.fusion, self.width, tuple(sorted(self.cuts.items())), self.bus_order, self.aggregator_order)

    def to_dict(self, inst: Instance) -> dict[str, Any]:
        d = data(inst)
        return {"format": PLAN_FORMAT, "instance": inst.name, "fusion": self.fusion, "width": self.width,
                "cuts": {s: self.cuts[s] for s in d.sensors},
                "bus_order": None if self.bus_order is None else list(self.bus_order),
                "aggregator_order": list(self.aggregator_order)}


def uniform_plan(inst: Instance, fusion: str, width: int | None, cut: str) -> MultiviewPlan:
    """Every view at cut point ``cut``; orders by sensor index."""
    d = data(inst)
    return MultiviewPlan(fusion, width, {s: cut for s in d.sensors}, d.sensors if d.serial else None, d.sensors)


def plan_from_dict(inst: Instance, raw: Any, where: str = "plan") -> MultiviewPlan:
    """Parse and check a multiview plan; raises InvalidPlan naming the field."""
    d = data(inst)
    if not isinstance(raw, dict):
        raise InvalidPlan(f"{where}: must be a JSON object")
    if raw.get("format", PLAN_FORMAT) != PLAN_FORMAT:
        raise InvalidPlan(f"{where}.format: expected '{PLAN_FORMAT}', got {raw.get('format')!r}")
    for key in ("fusion", "cuts", "aggregator_order"):
        if key not in raw:
            raise InvalidPlan(f"{where}.{key}: missing")
    cuts = raw["cuts"]
    if not isinstance(cuts, dict):
        raise InvalidPlan(f"{where}.cuts: must map each sensor to its cut point")

    def order(key):
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InvalidPlan(f"{where}.{key}: must be a list of sensors")
        return tuple(value)

    bus = order("bus_order")
    if bus is None and d.serial:
        bus = d.sensors if d.views == 1 else None
    plan = MultiviewPlan(raw["fusion"], raw.get("width"), dict(cuts), bus if d.serial else None,
                         order("aggregator_order") or ())
    if not d.serial and raw.get("bus_order") is not None:
        raise InvalidPlan(f"{where}.bus_order: bus '{d.bus.name}' is in share mode; transfers do not queue (use null)")
    check_plan(inst, plan, where)
    return plan


def check_plan(inst: Instance, plan: MultiviewPlan, where: str = "plan") -> None:
    """Raise InvalidPlan unless the plan is well-formed: a fusion candidate, a width offered
    there, every sensor's cut point valid for (fusion, width), and orders that are
    permutations of the sensors (a bus order only on a serial bus). Limits (memory,
    required layers) are not checked here: the evaluator reports them."""
    d = data(inst)
    if plan.fusion not in d.fusions:
        raise InvalidPlan(f"{where}.fusion: '{plan.fusion}' is not a fusion candidate "
                          f"(candidates: {', '.join(d.fusions)})")
    if plan.width is not None and plan.width not in d.widths_at(plan.fusion):
        raise InvalidPlan(f"{where}.width: {plan.width!r} is not a compression width offered at '{plan.fusion}' "
                          f"({d.channels[plan.fusion]} channels; offered {list(d.widths_at(plan.fusion))})")
    points = d.points(plan.fusion, plan.width)
    for name in plan.cuts:
        if name not in d.sensors:
            raise InvalidPlan(f"{where}.cuts.{name}: unknown sensor (sensors: {', '.join(d.sensors)})")
    for name in d.sensors:
        if name not in plan.cuts:
            raise InvalidPlan(f"{where}.cuts: sensor '{name}' is missing")
        if plan.cuts[name] not in points:
            raise InvalidPlan(f"{where}.cuts.{name}: {plan.cuts[name]!r} is not a cut point under fusion "
                              f"'{plan.fusion}' and width {plan.width} (points: {', '.join(points)})")
    for key, value in (("bus_order", plan.bus_order), ("aggregator_order", plan.aggregator_order)):
        if key == "bus_order" and not d.serial:
            if value is not None:
                raise InvalidPlan(f"{where}.bus_order: bus '{d.bus.name}' is in share mode; must be null")
            continue
        if value is None or sorted(value) != sorted(d.sensors):
            raise InvalidPlan(f"{where}.{key}: must list every sensor exactly once, got {value!r}")


def save_plan(inst: Instance, plan: MultiviewPlan, path) -> None:
    Path(path).write_text(json.dumps(plan.to_dict(inst), indent=1) + "\n")


# ----- the evaluator ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ViewCosts:
    """One view's costs: sensor compute (ms), what it sends (bytes) and how long the
    transfer occupies its channel (ms), the aggregator's per-view work (ms), and the
    sensor memory of the App. G walk (bytes)."""

    sensor: str
    cut: str
    sensor_layers: tuple[str, ...]
    sensor_ms: float
    sent: tuple[tuple[str, float], ...]
    sent_bytes: float
    transfer_ms: float
    aggregator_ms: float
    weight_bytes: float
    activation_bytes: float
    memory_bytes: float
    memory_limit: float
    peak_layer: str | None
    missing_required: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"sensor": self.sensor, "cut": self.cut, "sensor_layers": len(self.sensor_layers),
                "sensor_ms": self.sensor_ms, "sent": [{"tensor": t, "bytes": b} for t, b in self.sent],
                "sent_bytes": self.sent_bytes, "transfer_ms": self.transfer_ms, "aggregator_ms": self.aggregator_ms,
                "sensor_weight_bytes": self.weight_bytes, "sensor_activation_bytes": self.activation_bytes,
                "sensor_memory_bytes": self.memory_bytes, "sensor_memory_limit": self.memory_limit,
                "peak_layer": self.peak_layer}


def view_costs(inst: Instance, fusion: str, width: int | None, sensor: str, cut: str) -> ViewCosts:
    """Costs of one view (cached): compute as sums of ``layer_ms``; memory and the sent
    tensor from the two-tier evaluator on the view's two-tier instance."""
    def build():
        from splitopt.evaluator import evaluate_two_tier
        from splitopt.plan import Plan

        d = data(inst)
        on_sensor = d.sensor_layers(fusion, width, cut)
        pipeline = d.pipeline(fusion, width)

        def walk():  # the memory walk and the sent tensor do not depend on the sensor device
            view = two_tier_view(inst, fusion, width, d.sensors[0])
            return evaluate_two_tier(view, Plan.uniform(view, on_sensor))

        m = _cached(inst, ("walk", fusion, width, cut), walk)
        sensor_ms = sum(layer_ms(inst, fusion, width, n, sensor) for n in on_sensor)
        agg_ms = sum(layer_ms(inst, fusion, width, n, d.aggregator) for n in pipeline if n not in on_sensor)
        sent = tuple(m.sent_tensors)
        nbytes = sum(b for _, b in sent)
        return ViewCosts(
            sensor=sensor, cut=cut, sensor_layers=on_sensor, sensor_ms=sensor_ms, sent=sent, sent_bytes=nbytes,
            transfer_ms=inst.link_transfer_ms(d.links[sensor], nbytes), aggregator_ms=agg_ms,
            weight_bytes=m.edge_weight_bytes, activation_bytes=m.edge_peak_activation_bytes,
            memory_bytes=m.edge_memory_bytes, memory_limit=d.limits[sensor], peak_layer=m.peak_layer,
            missing_required=tuple(l.name for l in inst.layers if l.name in d.required and l.name not in on_sensor),
        )

    return _cached(inst, ("costs", fusion, width, sensor, cut), build)


def fusion_ms(inst: Instance, fusion: str, width: int | None) -> float:
    """Aggregator time (ms) of the fusion layer plus every post-fusion layer (run once)."""
    d = data(inst)
    pre = set(d.pipeline(fusion, width))
    names = [l.name for l in arch_layers(inst, fusion, width) if l.name not in pre]
    return sum(layer_ms(inst, fusion, width, n, d.aggregator) for n in names)


@dataclass(frozen=True)
class MultiviewMetrics:
    """What a multiview plan costs. ``makespan_ms`` is the end of the last aggregator task
    of the semi-active schedule; ``schedule`` lists every task of positive duration."""

    makespan_ms: float
    views: tuple[ViewCosts, ...]
    fusion_ms: float
    aggregator_compute_ms: float
    bus_busy_ms: float
    schedule: tuple[Task, ...]
    device_compute_ms: Mapping[str, float]
    violations: tuple[str, ...] = field(default=())
    accuracy: float | None = None

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def objective_ms(self) -> float:
        """What the solvers minimise: the makespan (ms)."""
        return self.makespan_ms

    def to_dict(self) -> dict:
        return {"makespan_ms": self.makespan_ms, "fusion_ms": self.fusion_ms,
                "aggregator_compute_ms": self.aggregator_compute_ms, "bus_busy_ms": self.bus_busy_ms,
                "device_compute_ms": dict(self.device_compute_ms),
                "views": [v.to_dict() for v in self.views],
                "schedule": [t.to_dict() for t in self.schedule], "accuracy": self.accuracy,
                "feasible": self.feasible, "violations": list(self.violations)}


def simulate(inst: Instance, costs: Sequence[ViewCosts], final_ms: float, bus_order: Sequence[str] | None,
             aggregator_order: Sequence[str]) -> tuple[float, list[Task]]:
    """The semi-active schedule: every task starts as soon as its predecessor in its view
    has ended and its resource is free, resources serving tasks in the plan's orders.

    Sensor compute starts at 0; a transfer starts after its sensor's compute
    (store-and-forward) and, on a serial bus, after the previous transfer in
    ``bus_order`` (on a share bus each link is its own channel); the view's aggregator
    task starts after its transfer has ended and the previous aggregator task in
    ``aggregator_order``; the fusion task (fusion + post-fusion layers) after every
    transfer and every aggregator task. No preemption. Returns (makespan ms, tasks)."""
    d = data(inst)
    by = {c.sensor: c for c in costs}
    tasks: list[Task] = []
    arrive: dict[str, float] = {}
    for c in costs:
        if c.sensor_ms > 0:
            tasks.append(Task(c.sensor, "compute", f"view {c.sensor}: up to {c.cut}", 0.0, c.sensor_ms))
    if d.serial:
        free = 0.0
        for s in bus_order:
            c = by[s]
            start = max(free, c.sensor_ms)
            end = start + c.transfer_ms
            if c.transfer_ms > 0:
                tasks.append(Task(d.bus.name, "transfer", f"{s}: {c.sent[0][0] if c.sent else ''}", start, end))
                free = end
            arrive[s] = end
    else:
        for s in d.sensors:
            c = by[s]
            end = c.sensor_ms + c.transfer_ms
            if c.transfer_ms > 0:
                tasks.append(Task(f"{s}->{d.aggregator}", "transfer", f"{s}: {c.sent[0][0] if c.sent else ''}",
                                  c.sensor_ms, end))
            arrive[s] = end
    free = 0.0
    ready = []
    for s in aggregator_order:
        c = by[s]
        if c.aggregator_ms > 0:
            start = max(free, arrive[s])
            free = start + c.aggregator_ms
            tasks.append(Task(d.aggregator, "compute", f"view {s}: after {c.cut}", start, free))
            ready.append(free)
        else:
            ready.append(arrive[s])
    start = max(ready + [free])
    end = start + final_ms
    if final_ms > 0:
        tasks.append(Task(d.aggregator, "compute", "fusion + post-fusion", start, end))
    return end, tasks


def evaluate(inst: Instance, plan: MultiviewPlan) -> MultiviewMetrics:
    """Evaluate a multiview plan; raises InvalidPlan if malformed, lists broken limits
    (sensor memory, required sensor layers, ``min_accuracy``) in ``violations``;
    ``accuracy`` is the measured accuracy of the plan's (fusion, width), if recorded."""
    check_plan(inst, plan)
    d = data(inst)
    costs = [view_costs(inst, plan.fusion, plan.width, s, plan.cuts[s]) for s in d.sensors]
    final = fusion_ms(inst, plan.fusion, plan.width)
    makespan, tasks = simulate(inst, costs, final, plan.bus_order, plan.aggregator_order)
    violations = []
    accuracy_problem = d.accuracy_problem(plan.fusion, plan.width)
    if accuracy_problem:
        violations.append(accuracy_problem)
    for c in costs:
        if c.memory_bytes > c.memory_limit * (1 + MEMORY_RTOL):
            violations.append(f"sensor '{c.sensor}' memory {c.memory_bytes:,.0f} B (weights {c.weight_bytes:,.0f} + "
                              f"activations {c.activation_bytes:,.0f}) exceeds limit {c.memory_limit:,.0f} B")
        if c.missing_required:
            violations.append(f"sensor '{c.sensor}' does not run required layer '{c.missing_required[0]}' "
                              "(settings.edge_required)")
    compute = {c.sensor: c.sensor_ms for c in costs}
    agg = sum(c.aggregator_ms for c in costs) + final
    compute[d.aggregator] = agg
    return MultiviewMetrics(makespan_ms=makespan, views=tuple(costs), fusion_ms=final, aggregator_compute_ms=agg,
                            bus_busy_ms=sum(c.transfer_ms for c in costs), schedule=tuple(tasks),
                            device_compute_ms=compute, violations=tuple(violations),
                            accuracy=d.accuracy.get((plan.fusion, plan.width)))


# ----- helpers for solvers ----------------------------------------------------------------------

def allowed_cut(inst: Instance, fusion: str, width: int | None, sensor: str, cut: str) -> bool:
    """Whether a view may use ``cut``: it runs every required layer and fits the memory."""
    c = view_costs(inst, fusion, width, sensor, cut)
    return not c.missing_required and c.memory_bytes <= c.memory_limit * (1 + MEMORY_RTOL)


def best_orders(inst: Instance, plan_cuts: Mapping[str, str], fusion: str, width: int | None
                ) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """A simple order rule (not optimal in general): transfers by sensor finish time,
    aggregator tasks by arrival, ties by sensor index. Used by the baselines."""
    d = data(inst)
    costs = {s: view_costs(inst, fusion, width, s, plan_cuts[s]) for s in d.sensors}
    idx = {s: i for i, s in enumerate(d.sensors)}
    bus = tuple(sorted(d.sensors, key=lambda s: (costs[s].sensor_ms, idx[s]))) if d.serial else None
    if d.serial:
        free, arrive = 0.0, {}
        for s in bus:
            free = max(free, costs[s].sensor_ms) + costs[s].transfer_ms
            arrive[s] = free
    else:
        arrive = {s: costs[s].sensor_ms + costs[s].transfer_ms for s in d.sensors}
    agg = tuple(sorted(d.sensors, key=lambda s: (arrive[s], idx[s])))
    return bus, agg


def start_plan(inst: Instance) -> MultiviewPlan | None:
    """A plan meeting every limit, if a cheap one exists: the earliest allowed common cut
    point (raw input unless layers are required on the sensors) under the first fusion
    candidate that admits it, no compression; None when no common cut fits every sensor
    (or no compression misses ``min_accuracy``)."""
    d = data(inst)
    for fusion in d.fusions:
        if d.accuracy_problem(fusion, None):
            continue
        for cut in d.points(fusion, None):
            if all(allowed_cut(inst, fusion, None, s, cut) for s in d.sensors):
                bus, agg = best_orders(inst, {s: cut for s in d.sensors}, fusion, None)
                return MultiviewPlan(fusion, None, {s: cut for s in d.sensors}, bus, agg)
    return None


def diagnose_infeasibility(inst: Instance) -> str:
    """Name the limit no plan meets: the sensor whose memory limit is below what every
    cut point it may use (running the required layers) needs."""
    d = data(inst)
    if not d.allowed_archs:
        best = max((a for a in d.archs if d.accuracy.get(a) is not None), key=lambda a: d.accuracy[a], default=None)
        found = "no architecture has a measured accuracy" if best is None else (
            f"the best measured is {d.accuracy[best]:.4f} "
            f"({'no compression' if best[1] is None else f'width d={best[1]}'} at '{best[0]}')")
        return (f"infeasible: settings.multiview.min_accuracy {d.min_accuracy:g} is met by no fusion point and "
                f"width: {found}")
    required = ", ".join(inst.settings.edge_required) or "none"
    for s in d.sensors:
        best = None
        for f, w in d.allowed_archs:
            for cut in d.points(f, w):
                c = view_costs(inst, f, w, s, cut)
                if c.missing_required:
                    continue
                if best is None or c.memory_bytes < best.memory_bytes:
                    best = c
        if best is None:
            return f"infeasible: no cut point of sensor '{s}' runs the required layers ({required})"
        if best.memory_bytes > best.memory_limit * (1 + MEMORY_RTOL):
            return (f"infeasible: sensor memory limit {best.memory_limit:,.0f} B of sensor '{s}' "
                    f"(settings.edge_memory_bytes / device memory_bytes) is below the {best.memory_bytes:,.0f} B "
                    f"that the smallest allowed sensor part needs (cut '{best.cut}', required layers: {required})")
    return "infeasible: no plan meets the sensor memory limits and required layers together"


def solve_exact(backend_name: str, inst: Instance, options):
    """Run the multiview program on ``backend_name`` ("cpsat", "milp-cbc", "milp-highs")."""
    from splitopt.multiview_program import solve_program

    return solve_program(backend_name, inst, options)


# ----- the report ---------------------------------------------------------------------------------

def print_metrics(console, inst: Instance, plan: MultiviewPlan, metrics: MultiviewMetrics,
                  show_layers: bool = True) -> None:
    """Per-device table (compute, bytes sent, memory), the schedule, violations."""
    from rich.table import Table

    d = data(inst)
    width = "no compression" if plan.width is None else f"Conv-Reduce to d={plan.width}"
    console.print(f"[bold]Fusion[/bold]   at '{plan.fusion}' ({width}); {d.views} view(s); bus '{d.bus.name}' "
                  f"{d.bus.mode} mode, {d.bus.bandwidth_bits_per_s / 1e6:,.1f} Mb/s")
    if metrics.accuracy is not None or d.min_accuracy is not None:
        measured = "not measured" if metrics.accuracy is None else f"{metrics.accuracy:.4f}"
        limit = "" if d.min_accuracy is None else f" (min_accuracy {d.min_accuracy:g})"
        console.print(f"[bold]Accuracy[/bold] {measured}{limit}", highlight=False)
    console.print(f"[bold]Makespan[/bold] [bold]{metrics.makespan_ms:.4f} ms[/bold]  (aggregator busy "
                  f"{metrics.aggregator_compute_ms:.4f} ms, bus busy {metrics.bus_busy_ms:.4f} ms)")
    table = Table(title="Devices")
    for col in ("device", "cut", "compute ms", "sent B", "transfer ms", "memory MB", "limit MB"):
        table.add_column(col, justify="left" if col in ("device", "cut") else "right")
    for c in metrics.views:
        color = "red" if c.memory_bytes > c.memory_limit * (1 + MEMORY_RTOL) else "green"
        table.add_row(c.sensor, c.cut, f"{c.sensor_ms:.4f}", f"{c.sent_bytes:,.0f}", f"{c.transfer_ms:.4f}",
                      f"[{color}]{c.memory_bytes / 1e6:,.3f}[/{color}]", f"{c.memory_limit / 1e6:,.1f}")
    table.add_row(d.aggregator, "-", f"{metrics.aggregator_compute_ms:.4f}", "0", "-", "-", "-")
    console.print(table)
    if show_layers:
        sched = Table(title="Schedule (ms)")
        for col in ("resource", "kind", "task", "start", "end"):
            sched.add_column(col, justify="right" if col in ("start", "end") else "left")
        for t in sorted(metrics.schedule, key=lambda t: (t.start_ms, t.resource)):
            sched.add_row(t.resource, t.kind, t.label, f"{t.start_ms:.4f}", f"{t.end_ms:.4f}")
        console.print(sched)
    for v in metrics.violations:
        console.print(f"[red]VIOLATION[/red] {v}")


__all__ = ["PROBLEMS", "PLAN_FORMAT", "REDUCE", "FUSE", "MultiviewData", "MultiviewPlan", "MultiviewMetrics",
           "ViewCosts", "data", "check_instance", "check_plan", "plan_from_dict", "evaluate", "simulate",
           "view_costs", "fusion_ms", "arch_layers", "two_tier_view", "layer_ms", "uniform_plan", "start_plan",
           "best_orders", "allowed_cut", "diagnose_infeasibility", "solve_exact", "print_metrics", "save_plan"]
