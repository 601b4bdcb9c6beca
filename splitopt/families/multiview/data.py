"""The multi-view shared-bus family's data (problem ``multiview``, SplitNets Sec. 3.1.3,
4.2, Tables 4 and 6): V sensors each run the sensor part of one backbone on their own view
and send over one shared bus; the aggregator finishes each view's pre-fusion part, fuses
the V views and runs the rest of the network once.

This module checks ``settings.multiview`` (``checks.py`` asks it) and derives what the
evaluator (``evaluate.py``), the programs (``cpsat.py``, ``milp.py`` from ``tables.py``)
and the methods read; the formulation is ``formulations/multiview_bus.md``.

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

Accuracy (the width ``d`` as a decision with its measured accuracy): a record
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

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Bus, Link
from splitopt.families.multiview.settings import MultiviewInstance

REDUCE = "mv.reduce"
FUSE = "mv.fuse"
#: relative tolerance of the sensor memory check (as in the edge/cloud evaluator)
MEMORY_RTOL = 1e-9
OPTION_KEYS = ("sensors", "views", "fusion_candidates", "cut_candidates", "compression_widths", "accuracy",
               "min_accuracy")
ACCURACY_KEYS = ("fusion", "width", "accuracy", "note")


def derived(inst: MultiviewInstance, key: Any, build):
    """``build()`` once per instance, kept with it (``Instance.derived``)."""
    return inst.derived(("multiview", key), build)


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


def _single_tensor_cuts(inst: MultiviewInstance) -> tuple[list[str], dict[str, tuple[str, ...]], dict[str, str]]:
    """Layer outputs ``t`` such that running ``t`` and its ancestors on the sensor sends
    exactly ``t``: no other layer reads any tensor of that part except ``t``, nor the raw
    input. Returns (cut names in execution order, prefix per layer, reason per non-cut)."""
    import networkx as nx

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


def data(inst: MultiviewInstance) -> MultiviewData:
    """The checked multiview data of ``inst`` (cached per instance object)."""
    return derived(inst, "data", lambda: _build_data(inst))


def _build_data(inst: MultiviewInstance) -> MultiviewData:
    """Check ``settings.multiview`` and the graph in this order (the first field out of
    place is the one named): the options and sensors, the links and their one bus, the
    precision, the graph, the cut and fusion candidates, the widths, the required layers,
    the accuracy table; and derive the data."""
    where = "instance.settings.multiview"
    s = inst.settings
    mv = dict(s.multiview)
    sensors = _sensors(inst, mv, where)
    bus, links = _bus_links(inst, sensors)
    for name in list(sensors) + [s.cloud]:  # precision
        dev = inst.device_by_name[name]
        if s.cloud_bits not in dev.bit_widths:
            raise InvalidInstance(f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by device "
                                  f"'{name}' (supports {list(dev.bit_widths)})")
    inp = _graph_input(inst)
    cut_layers, prefix, why = _single_tensor_cuts(inst)
    prefix = dict(prefix)
    prefix[inp] = ()

    def order(names) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=lambda t: -1 if t == inp else inst.position[t]))

    fusions = order(_tensor_list(inst, mv, where, "fusion_candidates", inp, cut_layers, why))
    cuts = order([inp] + _tensor_list(inst, mv, where, "cut_candidates", inp, cut_layers, why) + list(fusions))
    shape = {inp: inst.inputs[0].shape}
    shape.update({l.name: l.output_shape for l in inst.layers})
    channels = {t: int(shape[t][0]) if shape[t] else 1 for t in shape}
    spatial = {t: int(math.prod(shape[t][1:])) if shape[t] else 1 for t in shape}
    widths = _widths(mv, where, channels, fusions)
    required = _required_layers(inst, prefix, fusions)
    archs = tuple((f, d) for f in fusions for d in (None,) + tuple(w for w in widths if w < channels[f]))
    limits = {name: min(s.edge_memory_bytes, inst.device_by_name[name].memory_bytes) for name in sensors}
    accuracy, min_accuracy = _accuracy_table(mv, where, fusions, widths, archs)
    return MultiviewData(
        sensors=tuple(sensors), aggregator=s.cloud, bus=bus, links=links, input=inp, cuts=cuts, fusions=fusions,
        widths=widths, bits=s.cloud_bits, required=frozenset(required), prefix=prefix, channels=channels,
        spatial=spatial, archs=archs, limits=limits, accuracy=accuracy, min_accuracy=min_accuracy,
    )


def _sensors(inst: MultiviewInstance, mv: Mapping[str, Any], where: str) -> list[str]:
    """The options' names, the sensors (one per view, none the aggregator, the edge one
    of them), and the settings the problem does not use."""
    s = inst.settings
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
    return sensors


def _bus_links(inst: MultiviewInstance, sensors: Sequence[str]) -> tuple[Bus, dict[str, Link]]:
    """Each sensor's link to the aggregator, all on one shared bus."""
    s = inst.settings
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
    assert bus_name is not None  # sensors is never empty (_sensors refuses an empty list)
    return inst.bus_by_name[bus_name], links


def _graph_input(inst: MultiviewInstance) -> str:
    """The graph's one input (the view); no layer with a reserved name, and every layer's
    latency entries at the reference precision."""
    s = inst.settings
    if len(inst.inputs) != 1:
        raise InvalidInstance(f"instance.graph.inputs: problem 'multiview' needs exactly one graph input (the view), "
                              f"got {len(inst.inputs)}")
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
    return inst.inputs[0].name


def _tensor_list(inst: MultiviewInstance, mv: Mapping[str, Any], where: str, key: str, inp: str, cut_layers: list[str],
                 why: Mapping[str, str]) -> list[str]:
    """The candidates ``mv[key]`` (every single-tensor cut where not given), each the input
    or a single-tensor cut, none twice."""
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


def _widths(mv: Mapping[str, Any], where: str, channels: Mapping[str, int], fusions: Sequence[str]) -> tuple[int, ...]:
    """The compression widths, sorted: integers >= 1, none twice, each below the most
    channels of any fusion candidate."""
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
    return tuple(sorted(widths_raw))


def _required_layers(inst: MultiviewInstance, prefix: Mapping[str, tuple[str, ...]], fusions: Sequence[str]) -> set[str]:
    """The layers every sensor must run: ``settings.edge_required`` with their ancestors,
    all before some fusion candidate."""
    import networkx as nx

    required: set[str] = set()
    for i, name in enumerate(inst.settings.edge_required):
        if name not in inst.layer_by_name:
            raise InvalidInstance(f"instance.settings.edge_required[{i}]: unknown layer '{name}'")
        required.add(name)
        required |= nx.ancestors(inst.graph, name)
    if required and not any(required <= set(prefix[f]) for f in fusions):
        raise InvalidInstance("instance.settings.edge_required: no fusion candidate comes after every required "
                              "layer (required layers must run on the sensors, before fusion)")
    return required


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
        if width in general if fusion is None else (fusion, width) in specific:
            raise InvalidInstance(f"{at}: a second record for width {width} at "
                                  f"{'every fusion point' if fusion is None else repr(fusion)}")
        if fusion is None:
            general[width] = value
        else:
            specific[(fusion, width)] = value
    minimum = mv.get("min_accuracy")
    if minimum is not None:
        minimum = _fraction(minimum, f"{where}.min_accuracy")
    return {a: specific.get(a, general.get(a[1])) for a in archs}, minimum
