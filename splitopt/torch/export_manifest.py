"""The manifest of exported parts (``manifest.json``, written by
:mod:`splitopt.torch.export_parts`, read back by :mod:`splitopt.torch.exported_run`): its
format (see :mod:`splitopt.torch.export_parts` for its fields), its JSON schema and the
rules between its fields, checked on reading."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitopt.core.errors import InvalidModel

#: the part formats :mod:`splitopt.torch.export_parts` writes, with their file suffixes
FORMATS = {"onnx": ".onnx", "pt2": ".pt2"}
#: the manifest's file name in the export directory
MANIFEST = "manifest.json"
#: the manifest format this module writes and reads
FORMAT_VERSION = 1
#: name of the model input in the manifest (:data:`splitopt.torch.capture.INPUT_NAME`)
INPUT_NAME = "input"
#: the kinds of split (:attr:`splitopt.torch.split_model.SplitModel.kind`) a manifest records:
#: ``sequential`` (one part per device, in device order) or ``mesh`` (the stages of a mesh plan)
SEQUENTIAL = "sequential"
KINDS = (SEQUENTIAL, "mesh")
#: dtypes a manifest may name (torch's names without ``torch.``)
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def onnx_graph_name(tensor: str) -> str:
    """The name a tensor has in an ONNX part: its own, except that a name of digits only
    (``nn.Sequential`` names its layers "0", "1", ...) gets the prefix ``t_``, since the
    TorchScript exporter reserves such names ("Invalid name: '2'"). The manifest keeps
    the tensor's own name; the runner maps it through this function."""
    return f"t_{tensor}" if tensor.isdigit() else tensor


@dataclass(frozen=True)
class Manifest:
    """A checked manifest (:func:`read_manifest`): the export ``directory`` and the
    manifest's JSON object ``data`` (module docstring); ``loaded`` holds the parts once
    :func:`run_exported` has loaded them."""

    directory: Path
    data: dict[str, Any]
    #: the parts loaded by :func:`run_exported`, part index -> callable (loaded once)
    loaded: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def part_format(self) -> str:
        """``onnx`` or ``pt2``."""
        return self.data["part_format"]

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The parts, in run order."""
        return [self.data["parts"][k] for k in self.data["run_order"]]

    @property
    def crossing_bytes(self) -> list[float]:
        """Bytes per sample per crossing (``elements * bits / 8`` summed over its tensors)."""
        return [c["bytes"] for c in self.data["crossings"]]



_NAME = {"type": "string", "minLength": 1}
_SHAPE = {"type": "array", "items": {"type": "integer", "minimum": 0}}
_DTYPE = {"enum": list(DTYPES)}
_BITS = {"type": "integer", "minimum": 1, "maximum": 64}
_INDEX = {"type": ["integer", "null"], "minimum": 0}
_SEND = {"type": "object", "additionalProperties": False,
         "required": ["name", "to_device", "bits", "elements", "bytes"],
         "properties": {"name": _NAME, "to_device": _NAME, "bits": _BITS,
                        "elements": {"type": "integer", "minimum": 0}, "bytes": {"type": "number", "minimum": 0}}}
_TRANSMIT = {"type": "object", "required": ["scheme"], "additionalProperties": False,
             "properties": {"scheme": {"enum": ["identity", "float16", "float32", "affine"]}, "bits": _BITS,
                            "min": {"type": ["number", "null"]}, "max": {"type": ["number", "null"]},
                            "scale": {"type": ["number", "null"], "minimum": 0},
                            "zero_point": {"type": ["integer", "null"]}}}

#: JSON schema of ``manifest.json`` (the rules between fields: :func:`check_manifest`)
MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["format_version", "part_format", "onnx_opset", "model", "seed", "instance", "problem", "kind",
                 "quantized", "batch", "devices", "input", "parts", "run_order", "crossings", "outputs",
                 "transmitted_bytes"],
    "properties": {
        "format_version": {"const": FORMAT_VERSION},
        "part_format": {"enum": list(FORMATS)},
        "onnx_opset": {"type": ["integer", "null"]},
        "model": {"type": ["string", "null"]},
        "seed": {"type": ["integer", "null"]},
        "instance": {"type": ["string", "null"]},
        "problem": {"type": ["string", "null"]},
        "kind": {"enum": list(KINDS)},
        "quantized": {"type": "boolean"},
        "batch": {"const": 1},
        "devices": {"type": "array", "items": _NAME, "minItems": 1},
        "input": {"type": "object", "additionalProperties": False,
                  "required": ["name", "shape", "dtype", "device", "bits", "sends"],
                  "properties": {"name": {"const": INPUT_NAME}, "shape": _SHAPE, "dtype": _DTYPE, "device": _NAME,
                                 "bits": _BITS, "sends": {"type": "array", "items": _SEND}}},
        "parts": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["index", "device", "file", "layers", "inputs", "outputs", "sends"],
            "properties": {
                "index": {"type": "integer", "minimum": 0}, "device": _NAME,
                "file": {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9_.-]+\.(onnx|pt2)$"},
                "layers": {"type": "array", "items": _NAME},
                "inputs": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["name", "shape", "dtype", "from_part", "from_device", "bits"],
                    "properties": {"name": _NAME, "shape": _SHAPE, "dtype": _DTYPE, "from_part": _INDEX,
                                   "from_device": _NAME, "bits": {"type": ["integer", "null"], "minimum": 1}}}},
                "outputs": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["name", "shape", "dtype", "to_parts", "to_devices", "bits"],
                    "properties": {"name": _NAME, "shape": _SHAPE, "dtype": _DTYPE,
                                   "to_parts": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                                   "to_devices": {"type": "array", "items": _NAME},
                                   "bits": {"type": ["integer", "null"], "minimum": 1}}}},
                "sends": {"type": "array", "items": _SEND}}}},
        "run_order": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "crossings": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["source", "target", "bytes", "tensors"],
            "properties": {"source": _NAME, "target": _NAME, "bytes": {"type": "number", "minimum": 0},
                           "tensors": {"type": "array", "items": {
                               "type": "object", "additionalProperties": False,
                               "required": ["name", "elements", "bits", "bytes", "transmit"],
                               "properties": {"name": _NAME, "elements": {"type": "integer", "minimum": 0},
                                              "bits": _BITS, "bytes": {"type": "number", "minimum": 0},
                                              "transmit": _TRANSMIT}}}}}},
        "outputs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "part", "device", "shape", "dtype"],
            "properties": {"name": _NAME, "part": _INDEX, "device": _NAME, "shape": _SHAPE, "dtype": _DTYPE}}},
        "transmitted_bytes": {"type": "number", "minimum": 0},
    },
}


def _bad(where: str, text: str) -> InvalidModel:
    return InvalidModel(f"{MANIFEST}: {where}: {text}")


def check_manifest(data: Any, directory: Path | None = None) -> None:
    """Check a manifest's JSON object against :data:`MANIFEST_SCHEMA` and the rules between
    its fields: ``run_order`` a permutation of the parts; parts indexed in order; devices
    known; every part input produced before it runs (by an earlier part in run order or
    as the model input) with the producer's shape and dtype, and on the part's device
    (made there or sent there before); a send only of what its device holds; each model
    output on its device at the end; crossing bytes ``elements * bits / 8``; the part
    files present in ``directory`` with the manifest's suffix. InvalidModel naming the
    field and the value."""
    from splitopt.core.errors import InvalidInstance
    from splitopt.core.instance_io import check_schema

    try:
        check_schema(data, MANIFEST_SCHEMA)
    except InvalidInstance as e:
        raise InvalidModel(f"{MANIFEST}: {str(e).removeprefix('instance.')}") from None
    parts = data["parts"]
    devices = data["devices"]
    order = data["run_order"]
    if sorted(order) != list(range(len(parts))):
        raise _bad("run_order", f"must list each part index 0..{len(parts) - 1} once, got {order}")
    for m, p in enumerate(parts):
        if p["index"] != m:
            raise _bad(f"parts[{m}].index", f"must be {m}, got {p['index']}")
    tensors: dict[str, tuple[int | None, list[int], str]] = {}  # name -> (producer, shape, dtype)
    inp = data["input"]
    if inp["device"] not in devices:
        raise _bad("input.device", f"'{inp['device']}' is not one of the devices {devices}")
    tensors[INPUT_NAME] = (None, inp["shape"], inp["dtype"])
    suffix = FORMATS[data["part_format"]]
    for m in order:
        p = parts[m]
        where = f"parts[{m}]"
        if p["device"] not in devices:
            raise _bad(f"{where}.device", f"'{p['device']}' is not one of the devices {devices}")
        if p["file"] is None and (p["inputs"] or p["outputs"] or p["layers"]):
            raise _bad(f"{where}.file", "is null but the part has layers, inputs or outputs")
        if p["file"] is not None:
            if not p["file"].endswith(suffix):
                raise _bad(f"{where}.file", f"'{p['file']}' does not end in {suffix} (part_format "
                                            f"{data['part_format']})")
            if directory is not None and not (directory / p["file"]).is_file():
                raise _bad(f"{where}.file", f"'{p['file']}' is not a file in {directory}")
        for i, t in enumerate(p["inputs"]):
            known = tensors.get(t["name"])
            if known is None:
                raise _bad(f"{where}.inputs[{i}].name", f"'{t['name']}' is not produced before part {m} runs")
            src, shape, dtype = known
            if t["from_part"] != src:
                raise _bad(f"{where}.inputs[{i}].from_part", f"'{t['name']}' is produced by part {src}, "
                                                            f"not {t['from_part']}")
            if (list(t["shape"]), t["dtype"]) != (list(shape), dtype):
                raise _bad(f"{where}.inputs[{i}]", f"'{t['name']}' is {dtype} {shape} where produced, "
                                                  f"not {t['dtype']} {t['shape']}")
        for i, t in enumerate(p["outputs"]):
            if t["name"] in tensors:
                raise _bad(f"{where}.outputs[{i}].name", f"'{t['name']}' is produced twice")
            tensors[t["name"]] = (m, t["shape"], t["dtype"])
    # the flow: a part reads only what is on its device (made there or sent there before)
    held: dict[str, set[str]] = {d: set() for d in devices}
    held[inp["device"]].add(INPUT_NAME)

    def sent(where: str, sends: list, device: str) -> None:
        for i, s in enumerate(sends):
            if s["to_device"] not in devices:
                raise _bad(f"{where}.sends[{i}].to_device", f"'{s['to_device']}' is not one of the devices {devices}")
            if s["name"] not in held[device]:
                raise _bad(f"{where}.sends[{i}].name", f"'{s['name']}' is not on device '{device}' when sent")
            held[s["to_device"]].add(s["name"])

    sent("input", inp["sends"], inp["device"])
    for m in order:
        p = parts[m]
        for i, t in enumerate(p["inputs"]):
            if t["name"] not in held[p["device"]]:
                raise _bad(f"parts[{m}].inputs[{i}].name", f"'{t['name']}' does not reach device '{p['device']}' "
                                                          f"before part {m} runs")
        held[p["device"]].update(t["name"] for t in p["outputs"])
        sent(f"parts[{m}]", p["sends"], p["device"])
    for k, c in enumerate(data["crossings"]):
        for i, t in enumerate(c["tensors"]):
            if t["name"] not in tensors:
                raise _bad(f"crossings[{k}].tensors[{i}].name", f"'{t['name']}' is not a tensor of the parts")
            if not math.isclose(t["bytes"], t["elements"] * t["bits"] / 8.0, rel_tol=1e-12, abs_tol=1e-9):
                raise _bad(f"crossings[{k}].tensors[{i}].bytes", f"{t['bytes']} is not elements * bits / 8 = "
                                                                f"{t['elements'] * t['bits'] / 8.0}")
    for i, o in enumerate(data["outputs"]):
        if o["name"] not in tensors:
            raise _bad(f"outputs[{i}].name", f"'{o['name']}' is not produced by any part")
        if o["device"] not in devices or o["name"] not in held[o["device"]]:
            raise _bad(f"outputs[{i}].device", f"'{o['name']}' is not on device '{o['device']}' at the end")


def read_manifest(directory: Path | str) -> Manifest:
    """Read and check ``directory/manifest.json`` (:func:`check_manifest`); InvalidModel
    (one line) for a missing, unreadable or invalid manifest."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        raise InvalidModel(f"{path}: no manifest (written by `splitopt export`)")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InvalidModel(f"{path}: not a readable JSON file ({type(e).__name__}: {str(e)[:200]})") from None
    check_manifest(data, directory)
    return Manifest(directory, data)
