"""``profile_onnx``: an ONNX model file -> a validated splitopt instance.

Steps, as the torch bridge's :func:`splitopt.torch.profile.profile`:

1. the fused layer graph (:mod:`splitopt.onnx.graph`: onnx + shape inference; names,
   ops, shapes, MACs, weights);
2. quantization-error tables per layer and bit-width on calibration inputs, run with
   onnxruntime (:mod:`splitopt.onnx.errors`), when calibration inputs are given;
3. optionally per-layer latency measured with onnxruntime on this host
   (:mod:`splitopt.onnx.latency`), added as device ``host_device_name``.

Without devices, links and settings: the ``eyeriss`` preset of ``splitopt profile``
(:func:`splitopt.families.topologies.preset_hardware`: Eyeriss edge, TPU cloud, 3 Mbit/s
uplink, ``split_bits`` over {2, 4, 6, 8} with the whole network's W8A8 error as budget
when calibrated, else the float ``split``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from splitopt.core import progress
from splitopt.core.input_bits import FLOAT_INPUT_BITS, integer_input_bits
from splitopt.onnx.deps import require_onnx

DEFAULT_BITS = (2, 4, 6, 8)
FeedList = Sequence[Mapping[str, np.ndarray]]


def eyeriss_parts(calibrated: bool) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Devices, links and settings of ``splitopt profile --preset eyeriss``."""
    from splitopt.families.topologies import preset_hardware

    return preset_hardware("eyeriss", None, 0.0, DEFAULT_BITS, calibrated)


def read_shape_arg(input_shape: Any) -> Any:
    """``input_shape`` as :func:`splitopt.onnx.graph.load` takes it: None, a mapping, or
    ``"1,3,224,224"`` / a sequence of ints as a tuple."""
    from splitopt.onnx.graph import parse_input_shape

    if input_shape is None or isinstance(input_shape, Mapping):
        return input_shape
    if isinstance(input_shape, str):
        return parse_input_shape(input_shape)
    return tuple(int(d) for d in input_shape)


def _calibration_feeds(calibration: Any, graph, high: int | None) -> FeedList | None:
    from splitopt.onnx.runtime import CALIBRATION_SEED, synthetic_inputs

    if calibration is None or (isinstance(calibration, (int, np.integer)) and not isinstance(calibration, bool)
                               and int(calibration) == 0):
        return None
    if isinstance(calibration, (int, np.integer)):
        if calibration < 0:
            raise ValueError(f"calibration must be >= 0, got {calibration}")
        return synthetic_inputs(int(calibration), graph.inputs, graph.input_types, CALIBRATION_SEED, high=high)
    if isinstance(calibration, np.ndarray):
        if len(graph.inputs) != 1:
            raise ValueError("an array of calibration inputs needs a model with one data input; give a list of feeds")
        (name, shape), = graph.inputs.items()
        if tuple(calibration.shape[1:]) != tuple(shape[1:]):
            raise ValueError(f"calibration inputs have shape {tuple(calibration.shape[1:])} per sample, "
                             f"the model's input {tuple(shape[1:])}")
        return [{name: np.ascontiguousarray(calibration[i:i + 1])} for i in range(calibration.shape[0])]
    return [dict(f) for f in calibration]


def profile_onnx(
    path: str | Path,
    devices: Sequence[Mapping[str, Any]] | None = None,
    links: Sequence[Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    input_shape: str | Sequence[int] | Mapping[str, Sequence[int]] | None = None,
    input_high: int | None = None,
    calibration: int | np.ndarray | FeedList | None = 8,
    bits: Iterable[int] = DEFAULT_BITS,
    measure_latency: bool = False,
    repeats: int = 5,
    optimization: str = "basic",
    threads: int | None = None,
    host_device_name: str = "host",
    input_bits: int | None = None,
    description: str = "",
    device_latency: Mapping[str, Mapping[str, float]] | None = None,
    provenance: Mapping[str, Any] | None = None,
):
    """Build a validated :class:`~splitopt.core.instance.Instance` of the ONNX model at ``path``.

    ``input_shape``: ``"1,3,224,224"`` or a tuple (one data input) or ``{input name: shape}``,
    for inputs with dynamic dimensions (a dynamic leading batch dimension alone is taken
    as 1); ``input_high``: the exclusive bound of random ids for integer inputs (and of
    their values: they are counted at ``ceil(log2(input_high))`` bits);
    ``input_bits``: bits per element of every input (None: by the rule of
    ``splitopt.core.input_bits``, recorded in ``source["input_bits"]``);
    ``calibration``: how many seeded synthetic calibration inputs (0 or None: no error
    tables), an array ``(N, *input shape without batch)`` or a list of feeds;
    ``measure_latency``: add this host as device ``host_device_name`` with per-layer
    latencies (median of ``repeats`` onnxruntime runs, ms; ``optimization`` and
    ``threads`` of the session). ``devices``/``links``/``settings`` in the instance JSON
    format; all None: the eyeriss preset (see module docstring). ``device_latency``: per device
    of ``devices``, every layer's latency (ms) measured elsewhere (a device agent), keyed
    by the layer names given here; ``provenance``: entries of ``source`` saying how.

    MissingDependency (one line) without the onnx extra; InvalidModel (one line) for a
    file that is no ONNX model, a dynamic input shape without ``input_shape``, or an
    unsupported op; InvalidInstance (one line) for pieces that make no valid instance."""
    require_onnx("splitopt.onnx.profile_onnx")
    import onnx
    import onnxruntime

    from splitopt.api import parse_instance
    from splitopt.core.instance_io import FORMAT
    from splitopt.onnx.errors import layer_dicts_with_errors
    from splitopt.onnx.graph import load
    from splitopt.onnx.latency import host_device, measure_layer_latency
    from splitopt.onnx.runtime import RUN_INPUT_SEED, run_shapes, synthetic_inputs

    bits = [int(b) for b in bits]

    def fill(model, inputs, tensors):
        return run_shapes(model, inputs, tensors, high=input_high)

    with progress.phase("reading the model"):
        graph = load(path, read_shape_arg(input_shape), shape_fill=fill, input_bits=input_bits or FLOAT_INPUT_BITS)
    graph_inputs, bits_rules = _input_bits(graph, input_high) if input_bits is None else \
        (graph.graph_dict()["inputs"], {})
    feeds = _calibration_feeds(calibration, graph, input_high)
    preset = devices is None and links is None and settings is None
    if preset:
        devices, links, settings = eyeriss_parts(feeds is not None)
    elif devices is None or links is None or settings is None:
        raise ValueError("give devices, links and settings together (or none of them for the eyeriss preset)")
    if feeds is not None:
        with progress.phase(f"quantization-error tables on {len(feeds)} inputs"):
            layers = layer_dicts_with_errors(graph, feeds, bits, threads=threads)
    else:
        layers = [layer.to_dict() for layer in graph.layers]
    devices = [dict(d) for d in devices]
    if name is None:
        name = Path(path).stem
    source: dict[str, Any] = {
        "generator": "splitopt.onnx.profile", "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
        "model_file": Path(path).name, "input_shape": {n: list(s) for n, s in graph.inputs.items()},
        "total_macs": graph.total_macs, "total_weights": graph.total_weights,
        "error_tables": f"bits {bits} on {len(feeds)} calibration inputs" if feeds is not None else "none"}
    if bits_rules:
        source["input_bits"] = bits_rules if len(bits_rules) > 1 else next(iter(bits_rules.values()))
    if measure_latency:
        feed = synthetic_inputs(1, graph.inputs, graph.input_types, RUN_INPUT_SEED, high=input_high)[0]
        with progress.phase("measuring layer latency"):
            measured = measure_layer_latency(graph, feed, repeats=repeats, optimization=optimization,
                                             threads=threads)
        for layer in layers:
            layer.setdefault("latency_ms", {})[host_device_name] = measured[layer["name"]]
        devices.append(host_device(host_device_name, graph, measured))
        source["host_latency"] = (f"median of {repeats} onnxruntime runs per layer on this host "
                                  f"(optimization {optimization}), ms")
    if device_latency:
        from splitopt.core.latency import add_measured_latency

        add_measured_latency(layers, device_latency)
    source.update(provenance or {})
    data = {
        "format": FORMAT,
        "name": name,
        "description": description or f"{name} profiled by splitopt.onnx.profile from {Path(path).name}",
        "source": source,
        "graph": {"inputs": graph_inputs, "layers": layers},
        "devices": devices,
        "links": [dict(l) for l in links],
        "settings": dict(settings),
    }
    inst = parse_instance(data)
    if preset:  # what the family derives from the tables (split_bits: the W8A8 error as the budget)
        from splitopt.families.registry import family_of

        inst = family_of(inst).complete_profiled(inst)
    return inst


#: bits of the ONNX integer element types (TensorProto: UINT8, INT8, UINT16, INT16, INT32, INT64, UINT32,
#: UINT64) and BOOL
INTEGER_TYPE_BITS = {2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 12: 32, 13: 64, 9: 1}
#: ops that pass ids on unchanged, between an input and the Gather that looks them up
_ID_VIEWS = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"}


def _input_bits(graph, input_high: int | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The instance's graph inputs with their bits by the rule of ``splitopt.core.input_bits``
    (floats: as captured; integers: by ``input_high``, the rows of the table a Gather
    looks them up in, or the element type's width), and per integer input the rule used."""
    inputs = graph.graph_dict()["inputs"]
    rules: dict[str, str] = {}
    for onnx_name, entry in zip(graph.inputs, inputs):
        width = INTEGER_TYPE_BITS.get(int(graph.input_types.get(onnx_name, 1)))
        if width is None:
            continue
        entry["bits"], rule = integer_input_bits(width, input_high, _gather_rows(graph.model, onnx_name))
        rules[entry["name"]] = f"{entry['bits']}: {rule}"
    return inputs, rules


def _gather_rows(model, name: str) -> int | None:
    """Rows of the constant table that input ``name`` indexes (``Gather(table, ids)``, the
    ids as they are or through shape ops), else None."""
    tables = {t.name: t for t in model.graph.initializer}
    ids = {name}
    for node in model.graph.node:
        if node.op_type in _ID_VIEWS and node.input and node.input[0] in ids:
            ids.update(node.output)
        elif node.op_type == "Gather" and len(node.input) >= 2 and node.input[1] in ids \
                and node.input[0] in tables and tables[node.input[0]].dims:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            if axis == 0:
                return int(tables[node.input[0]].dims[0])
    return None
