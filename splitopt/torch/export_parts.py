"""Export the parts of a split model as files, one per part, with a manifest that says
how to chain them; and run the saved parts back.

:func:`export_split` writes every part of a :class:`splitopt.torch.split_model.SplitModel`
(edge/cloud and chain plans: one per device; mesh plans: one per stage) as an ONNX file
(``torch.onnx.export`` with the TorchScript exporter, ``dynamo=False``, opset
:data:`ONNX_OPSET`; needs ``onnx``, not ``onnxscript``) or a ``torch.export`` program
(``.pt2``, ``torch.export.save``), and ``manifest.json`` (:data:`MANIFEST`):

* ``input``: the model input (``input``), its shape and dtype (batch 1), the device
  producing it and the devices it is sent to first (mesh plans);
* ``parts``, in run order (``run_order``): the part's ``file`` (None for a device that
  runs no layer and only forwards), ``device``, ``layers``, ``inputs`` (name, shape,
  dtype, the part and device producing it, the bits it was sent at or None when it did
  not cross a device boundary), ``outputs`` (name, shape, dtype, the parts and devices
  reading it, its sent bits) and ``sends``: the tensors the part's device sends once
  the part has run (name, destination device, bits, elements, bytes; edge/cloud and
  chain plans: every tensor crossing the boundary to the next device, forwarded ones
  included);
* ``crossings``: :attr:`SplitModel.crossings` (per boundary, mesh plans per device pair),
  each tensor with its elements per sample, bits and ``bytes = elements * bits / 8``
  (the evaluator's count), and its ``transmit`` quantization;
* ``outputs``: the model outputs, the part producing each and the device it is read on.

Graph inputs and outputs of an ONNX part are named by the manifest's tensor names; a
``.pt2`` part takes its inputs positionally in the manifest's order and returns a tuple
in the order of its ``outputs``. All shapes have batch 1 (the parts are cut from a
batch-1 export): run one sample at a time.

Quantized plans: a part computes its layers with their quantize-dequantized weights and
quantized activations, exactly as the in-process split does (the weights saved in the
file are the quantize-dequantized ones). The *transmission* of a crossing tensor at its
sent bits is not in the files: the manifest describes it (``transmit``: ``identity``;
``float16``/``float32`` for 16/32 bits; ``affine`` for 1..8 bits with the calibrated
``min``/``max`` and the ``scale``/``zero_point`` they give by
:func:`splitopt.torch.packing.activation_qparams`; at run time the range is widened to
the tensor's own min/max, as :func:`splitopt.torch.transmission.packing_transmit` does),
and :func:`run_exported` applies it when asked (``transmit=True``). Float plans send
every tensor unchanged (``identity``); their bits count the bytes only.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from splitopt.core.errors import InvalidModel, InvalidOption
from splitopt.torch.export_manifest import (
    FORMAT_VERSION, FORMATS, INPUT_NAME, KINDS, MANIFEST, SEQUENTIAL, Manifest, onnx_graph_name, read_manifest,
)
from splitopt.torch.exported_run import run_exported

#: ONNX opset the parts are exported at (pinned: the same graph whatever torch defaults to)
ONNX_OPSET = 17
#: float plans, and quantized plans in pt2: the most max abs difference between the saved
#: parts chained and the in-process split, relative to the output's magnitude
#: (``tolerance * max(1, max |output|)``); pt2 parts run torch's own ATen kernels
PT2_ATOL = 1e-5
#: the same for ONNX parts: onnxruntime's float32 kernels differ from torch's in the last
#: bits (about 2.4e-5 on ResNet-50's logits of magnitude 3.8)
ONNX_ATOL = 1e-4
#: quantized plans in ONNX: a last-bit difference of onnxruntime's kernels can flip a
#: quantized activation by one code step, which later layers carry on; the saved parts
#: then pass when their relative MSE against the in-process split is at most this share
#: of the split's own quantization error (its relative MSE against the unsplit model;
#: ResNet-50 W8A8 cut after 30 layers: 0.0017 against 0.018)
ONNX_QUANTIZED_SHARE = 0.25


def check_format(fmt: str, option: str = "--format") -> str:
    """``fmt`` if it is one of :data:`FORMATS`, else InvalidOption naming them."""
    if fmt not in FORMATS:
        raise InvalidOption(f"{option} {fmt}: unknown part format (choose from {', '.join(FORMATS)})")
    return fmt


def _file_name(index: int, device: str, fmt: str) -> str:
    return f"part{index}_{re.sub(r'[^A-Za-z0-9_.-]', '_', device)[:64]}{FORMATS[fmt]}"


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _tensor_values(split) -> dict[str, Any]:
    """Every tensor of ``split`` (the model input and each part's outputs) on its example
    input, the parts run in order without transmission."""
    import torch

    values = {INPUT_NAME: split.example_input}
    with torch.no_grad():
        for part in split.parts:
            if part.module is not None:
                values.update(zip(part.outputs, part.module(*[values[n] for n in part.inputs])))
    return values


def transmit_entry(name: str, bits: int, quantized: bool, ranges: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """How tensor ``name`` is transmitted at ``bits`` bits per element (module docstring):
    ``identity`` for float plans and the raw input; ``float16``/``float32`` for 16/32
    bits; ``affine`` (asymmetric uniform, per tensor) for 1..8 bits with the calibrated
    range (``min``/``max`` in the tensor's units; None where no range was calibrated: the
    tensor's own min/max at run time) and its ``scale`` (units per code step) and
    ``zero_point`` (the code of 0.0)."""
    from splitopt.torch.packing import PASS_THROUGH_BITS, activation_qparams

    if not quantized or name == INPUT_NAME:
        return {"scheme": "identity"}
    if bits in PASS_THROUGH_BITS:
        return {"scheme": f"float{bits}"}
    calibrated = ranges.get(name)
    lo, hi = calibrated if calibrated is not None else (None, None)
    qp = activation_qparams(bits, *calibrated) if calibrated is not None else None
    return {"scheme": "affine", "bits": bits, "min": lo, "max": hi,
            "scale": None if qp is None else float(qp[0]), "zero_point": None if qp is None else int(qp[1])}


def build_manifest(split, files: Sequence[str | None], fmt: str, values: Mapping[str, Any], *,
                   model: str | None = None, seed: int | None = None) -> dict[str, Any]:
    """The manifest's JSON object (module docstring) for ``split`` whose parts were written
    to ``files`` (None: a part without a module); ``values``: every tensor on the example
    input (shapes and dtypes)."""
    inst = split.inst
    staged = split.kind != SEQUENTIAL
    producer: dict[str, int | None] = {INPUT_NAME: None}
    for m, part in enumerate(split.parts):
        for n in part.outputs:
            producer.setdefault(n, m)
    bits = {n: b for c in split.crossings for n, _, b in c.tensors}
    elements = {n: e for c in split.crossings for n, e, _ in c.tensors}

    def shape_of(name: str) -> list[int]:
        return [int(d) for d in values[name].shape]

    # the sends after each part (staged: the part's; sequential: the crossing to the next device)
    sends: list[list[tuple[str, str]]] = []
    for m, part in enumerate(split.parts):
        if staged:
            sends.append(list(part.sends))
        else:
            c = split.crossings[m] if m < len(split.crossings) else None
            sends.append([(n, c.target) for n in c.names] if c is not None else [])
    input_sends = list(split.input_sends) if staged else []

    def send_entry(name: str, to: str) -> dict[str, Any]:
        b = bits[name]
        return {"name": name, "to_device": to, "bits": b, "elements": elements[name],
                "bytes": elements[name] * b / 8.0}

    # the parts reading each tensor
    readers: dict[str, list[int]] = {}
    for m, part in enumerate(split.parts):
        for n in part.inputs:
            readers.setdefault(n, []).append(m)
    source = split.source if split.source is not None else split.devices[0]

    def device_of(m: int | None) -> str:
        return source if m is None else split.parts[m].device

    parts = []
    for m, part in enumerate(split.parts):
        inputs = []
        for n in part.inputs:
            src = producer[n]
            crossed = device_of(src) != part.device
            inputs.append({"name": n, "shape": shape_of(n), "dtype": _dtype_name(values[n]), "from_part": src,
                           "from_device": device_of(src), "bits": bits[n] if crossed else None})
        outputs = []
        for n in part.outputs:
            to_parts = [r for r in readers.get(n, []) if r != m]
            sent_to = sorted({to for k in range(len(split.parts)) for name, to in sends[k] if name == n},
                             key=list(split.devices).index)
            outputs.append({"name": n, "shape": shape_of(n), "dtype": _dtype_name(values[n]),
                            "to_parts": to_parts, "to_devices": sent_to,
                            "bits": bits.get(n) if sent_to else None})
        parts.append({"index": m, "device": part.device, "file": files[m], "layers": list(part.layers),
                      "inputs": inputs, "outputs": outputs, "sends": [send_entry(n, to) for n, to in sends[m]]})

    crossings = []
    for c in split.crossings:
        tensors = [{"name": n, "elements": e, "bits": b, "bytes": e * b / 8.0,
                    "transmit": transmit_entry(n, b, split.quantized, split.ranges)} for n, e, b in c.tensors]
        crossings.append({"source": c.source, "target": c.target, "bytes": c.bytes, "tensors": tensors})

    outputs = []
    for i, n in enumerate(split.output_names):
        src = producer.get(n)
        if staged:
            delivered = {(name, to) for ss in sends for name, to in ss} | {(INPUT_NAME, d) for d in input_sends}
            where = split.sink if (n, split.sink) in delivered else split.output_devices[i]
        else:  # the furthest device the tensor reaches (SplitModel.run reads its latest copy)
            reached = [device_of(src)] + [to for ss in sends for name, to in ss if name == n]
            where = max(reached, key=list(split.devices).index)
        outputs.append({"name": n, "part": src, "device": where, "shape": shape_of(n),
                        "dtype": _dtype_name(values[n])})

    plan = split.plan
    return {
        "format_version": FORMAT_VERSION,
        "part_format": fmt,
        "onnx_opset": ONNX_OPSET if fmt == "onnx" else None,
        "model": model,
        "seed": seed,
        "instance": inst.name if inst is not None else None,
        "problem": inst.problem if inst is not None else getattr(plan, "problem", None),
        "kind": split.kind,
        "quantized": bool(split.quantized),
        "batch": 1,
        "devices": list(split.devices),
        "input": {"name": INPUT_NAME, "shape": shape_of(INPUT_NAME), "dtype": _dtype_name(values[INPUT_NAME]),
                  "device": source, "bits": int(bits.get(INPUT_NAME, _input_bits(split))),
                  "sends": [send_entry(INPUT_NAME, to) for to in input_sends]},
        "parts": parts,
        "run_order": list(range(len(parts))),
        "crossings": crossings,
        "outputs": outputs,
        "transmitted_bytes": float(sum(c.bytes for c in split.crossings)),
    }


def _input_bits(split) -> int:
    inst = split.inst
    return int(inst.inputs[0].bits) if inst is not None else int(split.capture.graph_input["bits"])


def _export_onnx(module, args: tuple, inputs: Sequence[str], outputs: Sequence[str], path: Path) -> None:
    """One part as ONNX (TorchScript exporter, opset :data:`ONNX_OPSET`), its graph inputs
    and outputs named by the tensors; InvalidModel (one line) when an op does not export
    or the names do not survive. Tensors are named in the graph by
    :func:`onnx_graph_name`."""
    import onnx
    import torch

    inputs, outputs = [onnx_graph_name(n) for n in inputs], [onnx_graph_name(n) for n in outputs]
    if len(set(inputs + outputs)) != len(inputs + outputs):
        raise InvalidModel(f"{path.name}: two of the part's tensors have the same ONNX name "
                           f"({', '.join(inputs + outputs)}): rename a layer")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=ONNX_OPSET,
                              input_names=inputs, output_names=outputs, do_constant_folding=True)
    except OSError:
        raise
    except Exception as e:  # an op the exporter cannot translate: torch's own error type varies
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise InvalidModel(f"{path.name}: the part does not export to ONNX (opset {ONNX_OPSET}): "
                           f"{type(e).__name__}: {first}") from None
    graph = onnx.load(str(path), load_external_data=False).graph
    got = [o.name for o in graph.output]
    if got != list(outputs):
        raise InvalidModel(f"{path.name}: the exported graph's outputs are {got}, expected {list(outputs)}")


def _export_pt2(module, args: tuple, path: Path) -> None:
    """One part as a ``torch.export`` program saved to ``path``; InvalidModel when it does
    not export."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, args, strict=False)
    except Exception as e:  # torch.export's failures have many types
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise InvalidModel(f"{path.name}: the part does not export with torch.export: {type(e).__name__}: {first}") \
            from None
    torch.export.save(program, str(path))


def export_split(split, fmt: str, out_dir: Path | str, *, model: str | None = None,
                 seed: int | None = None) -> Manifest:
    """Write every part of ``split`` to ``out_dir`` (created if missing; files of the same
    names are overwritten) in format ``fmt`` (``onnx`` or ``pt2``) and the manifest; return
    the manifest as read back and checked (:func:`read_manifest`). ``model``/``seed``: how
    the model was built, recorded in the manifest. Raises InvalidOption (unknown format),
    NotApplicable (a multiview split), InvalidModel (a part that does not export)."""
    from splitopt.core.errors import NotApplicable

    check_format(fmt)
    if getattr(split, "kind", None) not in KINDS:
        raise NotApplicable(f"export: only splits of partition (kinds {', '.join(KINDS)}: edge/cloud, chain and mesh "
                            f"plans) are exported, one file per part")
    if fmt == "onnx":
        from splitopt.onnx.deps import require_onnx

        require_onnx("splitopt export --format onnx")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # a failed export leaves no manifest of older parts
    values = _tensor_values(split)
    files: list[str | None] = []
    for m, part in enumerate(split.parts):
        if part.module is None:
            files.append(None)
            continue
        name = _file_name(m, part.device, fmt)
        args = tuple(values[n] for n in part.inputs)
        if fmt == "onnx":
            _export_onnx(part.module, args, part.inputs, part.outputs, out / name)
        else:
            _export_pt2(part.module, args, out / name)
        files.append(name)
    data = build_manifest(split, files, fmt, values, model=model, seed=seed)
    (out / MANIFEST).write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    return read_manifest(out)


def export_parts(inst, plan, module, example_input, fmt: str, out_dir: Path | str, *, rename=None,
                 calibration=None, model: str | None = None, seed: int | None = None) -> Manifest:
    """Partition ``module`` by ``plan`` (:func:`splitopt.torch.partition.partition`; its
    errors: InvalidModel, InvalidPlan, NotApplicable) and export the parts
    (:func:`export_split`). ``calibration``: inputs (n, ...) whose min/max set the
    activation ranges of quantized plans (default: the example input)."""
    from splitopt.torch.partition import partition

    check_format(fmt)
    split = partition(module, example_input, plan, inst, rename=rename, calibration=calibration)
    return export_split(split, fmt, out_dir, model=model, seed=seed)


def _max_diff(a, b) -> float:
    pairs = zip(a, b) if isinstance(a, tuple) else [(a, b)]
    return max((float((x.double() - y.double()).abs().max()) if x.numel() else 0.0) for x, y in pairs)


def _magnitude(ref) -> float:
    refs = ref if isinstance(ref, tuple) else (ref,)
    return max([1.0] + [float(r.double().abs().max()) for r in refs if r.numel() and r.is_floating_point()])


def _relative_mse(a, b) -> float:
    from splitopt.torch.quant_error import relative_mse

    pairs = zip(a, b) if isinstance(a, tuple) else [(a, b)]
    return max(relative_mse(x.float(), y.float()) for x, y in pairs)


def check_exported(manifest: Manifest, split, module, inputs) -> dict[str, Any]:
    """Chain the saved parts of ``manifest`` on ``inputs`` (n, ...) and compare them with
    the in-process ``split`` (and, for float plans, the unsplit ``module``). Returns
    ``max_abs_diff`` (tensors sent unchanged, against ``split.run`` with the identity
    transmission), ``tolerance`` (:data:`PT2_ATOL` or :data:`ONNX_ATOL` times
    ``max(1, max |output|)``), for float plans ``max_abs_diff_unsplit``, for quantized
    plans ``max_abs_diff_transmitted`` (the manifest's transmission against the split's
    own), the relative MSEs and ``ok``. Quantized plans in ONNX pass on the relative MSE
    (:data:`ONNX_QUANTIZED_SHARE`), all others on the max abs difference."""
    import torch

    from splitopt.torch.transmission import identity_transmit

    onnx = manifest.part_format == "onnx"
    with torch.no_grad():
        ref = split.run(inputs, identity_transmit)
        got = run_exported(manifest, inputs)
        tol = (ONNX_ATOL if onnx else PT2_ATOL) * _magnitude(ref)
        report: dict[str, Any] = {"samples": int(inputs.shape[0]), "max_abs_diff": _max_diff(got, ref),
                                  "tolerance": tol}
        if not split.quantized:
            report["max_abs_diff_unsplit"] = _max_diff(got, module(inputs))
            report["ok"] = report["max_abs_diff"] <= tol and report["max_abs_diff_unsplit"] <= tol
            return report
        sent_ref = split.run(inputs)
        sent = run_exported(manifest, inputs, transmit=True)
        unsplit = module(inputs)
        report["max_abs_diff_transmitted"] = _max_diff(sent, sent_ref)
        report["relative_mse"] = _relative_mse(got, ref)
        report["relative_mse_transmitted"] = _relative_mse(sent, sent_ref)
        report["split_relative_mse"] = _relative_mse(sent_ref, unsplit)  # the plan's quantization error
    if onnx:
        limit = ONNX_QUANTIZED_SHARE * report["split_relative_mse"]
        report["relative_mse_limit"] = limit
        report["ok"] = all(report[f"max_abs_diff{k}"] <= tol or report[f"relative_mse{k}"] <= limit
                           for k in ("", "_transmitted"))
    else:
        report["ok"] = report["max_abs_diff"] <= tol and report["max_abs_diff_transmitted"] <= tol
    return report


def export_plan(inst, plan, *, model: str, fmt: str, directory: Path | str, seed: int = 0, samples: int = 2,
                input_shape: str | None = None, input_dtype: str | None = None,
                input_high: int | None = None) -> dict[str, Any]:
    """``splitopt export``: rebuild ``model`` as ``splitopt run`` does
    (:func:`splitopt.torch.models.build_model`), cut it by ``plan``
    (:func:`splitopt.torch.partition.partition`), write one ``fmt`` file per part and the
    manifest into ``directory`` (:func:`export_split`), then check the manifest's crossing
    bytes against the evaluator's and, on ``samples`` synthetic inputs, the saved parts
    chained by the manifest against the in-process split (:func:`check_exported`). The
    report (JSON-ready): the parts and crossings as written, ``bytes_match``, the checks,
    ``ok``. A file that cannot be written: InvalidOption naming ``--output``."""
    from splitopt.torch.models import build_model
    from splitopt.torch.partition import partition
    from splitopt.torch.side import partition_side
    from splitopt.torch.split_compare import bytes_close, evaluator_sent_bytes

    side = partition_side(plan, inst)
    module, rename, example, inputs, calibration = build_model(
        model, seed, inst, input_shape=input_shape, input_dtype=input_dtype, input_high=input_high)
    split = partition(module, example, plan, inst, rename=rename, calibration=None if side.staged else calibration())
    try:
        manifest = export_split(split, fmt, directory, model=model, seed=seed)
    except OSError as e:
        raise InvalidOption(f"--output {directory}: cannot write the file ({e.strerror or type(e).__name__})") from None
    evaluator = evaluator_sent_bytes(inst, plan)
    ours = manifest.crossing_bytes
    bytes_match = len(ours) == len(evaluator) and all(bytes_close(a, b) for a, b in zip(ours, evaluator))
    report: dict[str, Any] = {
        "instance": inst.name, "model": model, "seed": seed, "format": fmt, "directory": str(directory),
        "kind": split.kind, "quantized": split.quantized,
        "parts": [{"file": p["file"], "device": p["device"], "layers": len(p["layers"]),
                   "inputs": [t["name"] for t in p["inputs"]], "outputs": [t["name"] for t in p["outputs"]]}
                  for p in manifest.parts],
        "crossings": [{"source": c["source"], "target": c["target"], "bytes": c["bytes"], "evaluator_bytes": e,
                       "tensors": [t["name"] for t in c["tensors"]]}
                      for c, e in zip(manifest.data["crossings"], evaluator)],
        "bytes_match": bytes_match, "samples": samples}
    ok = bytes_match
    if samples:
        report.update(check_exported(manifest, split, module, inputs(samples)))
        ok = ok and report["ok"]
    report["ok"] = ok
    return report
