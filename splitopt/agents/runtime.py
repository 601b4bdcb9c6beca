"""What an agent does with the models it is sent: check them, measure their layers and
run its deployed part (onnxruntime on CPU; numpy; no torch).

Models: only ONNX bytes are accepted (:func:`check_onnx_bytes`): they must parse as an
ONNX ``ModelProto`` with a graph of at least one node, and may not refer to external data
files (a model could otherwise make the agent read a file of its host). onnxruntime
runs only the standard operators it knows; nothing sent is executed as code.

Per-layer latency (:func:`measure_layers`): the rules of ``splitopt profile MODEL.onnx
--measure`` (:func:`splitopt.onnx.profile.profile_onnx`): the model's fused layer graph
(:func:`splitopt.onnx.graph.load`, layer names as the ONNX bridge gives them), the run
input synthesised with seed ``RUN_INPUT_SEED`` (:func:`splitopt.onnx.runtime.synthetic_inputs`),
``warmup`` runs then the median of ``repeats`` profiled runs per layer
(:func:`splitopt.onnx.latency.measure_layer_latency`), onnxruntime with the agent's
intra-op threads. Beside them: ``run_ms``, the median wall time of a whole run in a
session without profiling (:func:`splitopt.onnx.latency.plain_runs_ms`: what a deployed
part runs as; the profiler's own work per node is left out), ``profiled_run_ms``, the
same of the profiled runs (onnxruntime's ``model_run``), and ``layers_run_ms``, the
median of a run's layers added up (under a CPU quota the throttled intervals fall into a
few layers of each run, which the per-layer medians leave out, so the run's wall time is
the larger).

A deployed part (:class:`DeployedPart`): one part of a sequential export (edge/cloud or
chain plans; :mod:`splitopt.torch.export_parts` writes them with ``manifest.json``), run
one sample at a time: its inputs are the model input (first device) or what the previous
device sent; after it runs, the tensors of its ``sends`` are packed at their bits
(:mod:`splitopt.agents.wire`) for the next device; the last device reads the model
outputs. The memory a part needs is counted as its file's bytes plus the bytes of its
inputs and outputs (float32 etc. at batch 1) and refused over the agent's
``--memory-bytes``.
"""

from __future__ import annotations

import datetime
import math
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from splitopt.core.errors import InvalidModel
from splitopt.core.packing import PackedTensor
from splitopt.agents.wire import manifest_ranges, wire_pack, wire_unpack

#: the part kind an agent runs (the manifest's ``kind``; mesh plans are not deployed)
DEPLOYABLE_KIND = "sequential"
#: bytes per element of the manifest's dtypes (bool: 1)
DTYPE_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
               "int8": 1, "uint8": 1, "bool": 1}


def _tensors_of(graph):
    """Every TensorProto of ``graph`` and its subgraphs (initializers, constant attributes)."""
    import onnx

    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            elif a.type == onnx.AttributeProto.TENSORS:
                yield from a.tensors
            elif a.type == onnx.AttributeProto.GRAPH:
                yield from _tensors_of(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _tensors_of(g)


def check_onnx_bytes(data: bytes, what: str = "the model"):
    """The ``onnx.ModelProto`` of ``data``; InvalidModel (one line naming ``what``) for
    bytes that are no ONNX model or a model with external data."""
    import onnx
    from google.protobuf.message import DecodeError

    model = onnx.ModelProto()
    try:
        model.ParseFromString(bytes(data))
    except (DecodeError, ValueError, RuntimeError) as e:
        raise InvalidModel(f"{what} is not an ONNX model ({type(e).__name__})") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise InvalidModel(f"{what} is not an ONNX model (no IR version or no graph nodes in its "
                           f"{len(data)} bytes)")
    for t in _tensors_of(model.graph):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise InvalidModel(f"{what}: tensor '{t.name}' refers to external data; send a model with its "
                               f"weights inside")
    return model


def measure_layers(data: bytes, threads: int, input_shape: Any = None, input_high: int | None = None,
                   repeats: int = 5, warmup: int = 1, optimization: str = "basic") -> dict[str, Any]:
    """Per-layer latency of the ONNX model ``data`` on this host (module docstring): the
    result fields of MEASURE_LAYERS (``layers``: ``[name, ms]`` in the graph's order)."""
    import onnxruntime

    from splitopt.onnx.graph import load
    from splitopt.onnx.latency import layer_medians, plain_runs_ms, profiled_runs
    from splitopt.onnx.profile import read_shape_arg
    from splitopt.onnx.runtime import RUN_INPUT_SEED, run_shapes, synthetic_inputs

    check_onnx_bytes(data)

    def fill(model, inputs, tensors):
        return run_shapes(model, inputs, tensors, high=input_high)

    with tempfile.TemporaryDirectory(prefix="splitopt_agent_") as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(data)
        graph = load(path, read_shape_arg(input_shape), shape_fill=fill)
    feed = synthetic_inputs(1, graph.inputs, graph.input_types, RUN_INPUT_SEED, high=input_high)[0]
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    runs, walls = profiled_runs(graph, feed, repeats=repeats, warmup=warmup, optimization=optimization,
                                threads=threads)
    measured = layer_medians(graph, runs)
    plain = plain_runs_ms(graph, feed, repeats=repeats, warmup=warmup, optimization=optimization, threads=threads)
    return {"layers": [[name, ms] for name, ms in measured.items()], "run_ms": statistics.median(plain),
            "profiled_run_ms": statistics.median(walls),
            "layers_run_ms": statistics.median(1000.0 * sum(r.values()) for r in runs),
            "repeats": repeats, "warmup": warmup,
            "threads": threads, "optimization": optimization, "onnxruntime": onnxruntime.__version__,
            "measured_at": when, "seconds": round(time.monotonic() - started, 3),
            "input_shape": {n: list(s) for n, s in graph.inputs.items()}}


def check_deployable(manifest: Any, device: str) -> dict[str, Any]:
    """The part of ``device`` in the export manifest ``manifest`` (its JSON object),
    after checking the manifest (:func:`splitopt.torch.export_manifest.check_manifest`)
    and that it is an ONNX export of a sequential split with ``device`` among its
    devices; InvalidModel (one line) otherwise."""
    from splitopt.torch.export_manifest import check_manifest

    check_manifest(manifest)
    if manifest["kind"] != DEPLOYABLE_KIND:
        raise InvalidModel(f"manifest kind '{manifest['kind']}': agents run sequential splits (edge/cloud and "
                           f"chain plans)")
    if manifest["part_format"] != "onnx":
        raise InvalidModel(f"manifest part_format '{manifest['part_format']}': agents run ONNX parts "
                           f"(`splitopt export --format onnx`)")
    parts = [p for p in manifest["parts"] if p["device"] == device]
    if len(parts) != 1:
        raise InvalidModel(f"device '{device}' has {len(parts)} parts in the manifest (devices: "
                           f"{', '.join(manifest['devices'])}); a sequential split has one per device")
    return parts[0]


def part_memory_bytes(part: Mapping[str, Any], file_bytes: int) -> int:
    """The memory the part is counted to need: its file plus its inputs and outputs."""
    tensors = list(part["inputs"]) + list(part["outputs"])
    return int(file_bytes + sum(math.prod(t["shape"]) * DTYPE_BYTES[t["dtype"]] for t in tensors))


@dataclass
class DeployedPart:
    """The part of ``device`` of a sequential export, ready to run (module docstring).
    ``data``: the part's ONNX bytes (None for a device that only forwards)."""

    manifest: dict[str, Any]
    device: str
    data: bytes | None
    threads: int | None = None
    part: dict[str, Any] = field(init=False)
    session: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.part = check_deployable(self.manifest, self.device)
        if (self.part["file"] is None) != (self.data is None):
            raise InvalidModel(f"device '{self.device}': the manifest's part file is {self.part['file']!r} but "
                               f"{'a model was' if self.data is not None else 'no model was'} sent")
        self.ranges = manifest_ranges(self.manifest)
        self.dtypes = {self.manifest["input"]["name"]: self.manifest["input"]["dtype"]}
        for p in self.manifest["parts"]:
            self.dtypes.update((t["name"], t["dtype"]) for t in p["outputs"])
        sends = self.part["sends"]
        targets = sorted({s["to_device"] for s in sends})
        if len(targets) > 1:
            raise InvalidModel(f"device '{self.device}' sends to {targets}; a sequential part sends to one device")
        self.next_device: str | None = targets[0] if targets else None
        if self.data is not None:
            self.session = self._session(self.data)

    def _session(self, data: bytes):
        import onnxruntime as ort

        from splitopt.torch.export_manifest import onnx_graph_name

        check_onnx_bytes(data, f"the part of device '{self.device}'")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if self.threads is not None:
            options.intra_op_num_threads = int(self.threads)
            options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(bytes(data), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - onnxruntime's own exception types: the part is bad input
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise InvalidModel(f"the part of device '{self.device}': onnxruntime cannot load it: {first}") from None
        self.feed_names = [onnx_graph_name(t["name"]) for t in self.part["inputs"]]
        declared = [i.name for i in session.get_inputs()]
        unknown = [n for n in declared if n not in self.feed_names]
        if unknown:
            raise InvalidModel(f"the part of device '{self.device}': graph input '{unknown[0]}' is not an input of "
                               f"the part in the manifest")
        self.declared = declared
        self.output_names = [onnx_graph_name(t["name"]) for t in self.part["outputs"]]
        return session

    @property
    def is_first(self) -> bool:
        """Whether this device holds the model input."""
        return self.manifest["input"]["device"] == self.device

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """The model outputs read on this device (the last one)."""
        return [o for o in self.manifest["outputs"] if o["device"] == self.device]

    @property
    def summary(self) -> dict[str, Any]:
        """What DEPLOY answers: the part's file, layers, inputs, outputs, sends."""
        return {"device": self.device, "file": self.part["file"], "layers": len(self.part["layers"]),
                "inputs": [t["name"] for t in self.part["inputs"]], "outputs": [t["name"] for t in self.part["outputs"]],
                "sends": [s["name"] for s in self.part["sends"]], "next_device": self.next_device,
                "model_outputs": [o["name"] for o in self.outputs], "first": self.is_first}

    def input_store(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """The store of the first device for one sample ``x`` (batch 1)."""
        spec = self.manifest["input"]
        want = tuple(spec["shape"])
        if tuple(x.shape) != want or str(x.dtype) != spec["dtype"]:
            raise InvalidModel(f"input sample {x.dtype} {tuple(x.shape)} is not the manifest's input "
                               f"{spec['dtype']} {want}")
        return {spec["name"]: x}

    def compute(self, store: dict[str, np.ndarray]) -> float:
        """Run the part on ``store`` (its outputs added to it); the compute time, ms."""
        if self.session is None:
            return 0.0
        missing = [t["name"] for t in self.part["inputs"] if t["name"] not in store]
        if missing:
            raise InvalidModel(f"device '{self.device}': input '{missing[0]}' of its part did not arrive")
        feed = dict(zip(self.feed_names, (store[t["name"]] for t in self.part["inputs"])))
        started = time.perf_counter()
        values = self.session.run(self.output_names, {n: feed[n] for n in self.declared})
        ms = 1000.0 * (time.perf_counter() - started)
        store.update(zip((t["name"] for t in self.part["outputs"]), values))
        return ms

    def pack_sends(self, store: Mapping[str, np.ndarray]) -> list[tuple[str, PackedTensor]]:
        """The packed tensors this device sends after its part, in the manifest's order."""
        out = []
        for s in self.part["sends"]:
            if s["name"] not in store:
                raise InvalidModel(f"device '{self.device}': tensor '{s['name']}' to send is not on the device")
            out.append((s["name"], wire_pack(s["name"], store[s["name"]], int(s["bits"]), self.ranges)))
        return out

    def unpack(self, name: str, packed: PackedTensor) -> np.ndarray:
        """A received tensor in its sender's dtype."""
        dtype = self.dtypes.get(name)
        if dtype is None:
            raise InvalidModel(f"device '{self.device}': received tensor '{name[:80]}' is no tensor of the manifest")
        return wire_unpack(packed, "float32" if dtype == "bfloat16" else dtype)

    def model_outputs(self, store: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The model outputs read on this device, in the manifest's order."""
        return [store[o["name"]] for o in self.outputs]


def reference_run(manifest: dict[str, Any], part_files: Mapping[str, bytes | None], inputs: np.ndarray,
                  threads: int | None = None) -> list[np.ndarray]:
    """The deployed parts chained in this process, each crossing tensor packed and
    unpacked as between agents: the outputs (stacked over the samples of ``inputs``, shape
    ``(n, *input shape[1:])``) a run on agents must reproduce. ``part_files``: device ->
    its part's ONNX bytes (None: forwards only)."""
    devices = manifest["devices"]
    parts = {d: DeployedPart(manifest, d, part_files.get(d), threads) for d in devices}
    order = [p["device"] for p in (manifest["parts"][k] for k in manifest["run_order"])]
    rows = []
    for i in range(inputs.shape[0]):
        store = parts[order[0]].input_store(np.ascontiguousarray(inputs[i:i + 1]))
        for k, d in enumerate(order):
            part = parts[d]
            part.compute(store)
            if part.outputs:  # the device the model outputs are read on (the last one that computes)
                rows.append(part.model_outputs(store))
            if k + 1 < len(order):
                store = {name: parts[order[k + 1]].unpack(name, p) for name, p in part.pack_sends(store)}
    return [np.concatenate([r[j] for r in rows], axis=0) for j in range(len(rows[0]))] if rows else []
