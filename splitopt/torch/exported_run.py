"""Run the saved parts of an export back (:func:`run_exported`): chain them by their
manifest (:mod:`splitopt.torch.export_manifest`) in onnxruntime or torch, one sample at
a time, as :meth:`splitopt.torch.split_model.SplitModel.run` does, with the manifest's
transmission of quantized plans applied when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from splitopt.core.errors import InvalidModel
from splitopt.torch.export_manifest import INPUT_NAME, Manifest, onnx_graph_name, read_manifest


def _load_parts(manifest: Manifest) -> dict[int, Any]:
    """Part index -> a callable taking the part's inputs (numpy arrays for ONNX, torch
    tensors for pt2, in the manifest's order) and returning its outputs in order."""
    loaded: dict[int, Any] = {}
    for p in manifest.parts:
        if p["file"] is None:
            continue
        path = manifest.directory / p["file"]
        if manifest.part_format == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.log_severity_level = 3
            try:
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as e:  # onnxruntime raises its own exception types
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                raise InvalidModel(f"{path}: onnxruntime cannot load the part: {first}") from None
            declared = [i.name for i in session.get_inputs()]
            names = [onnx_graph_name(t["name"]) for t in p["inputs"]]
            unknown = [n for n in declared if n not in names]
            if unknown:
                raise InvalidModel(f"{path}: graph input '{unknown[0]}' is not an input of the part in the manifest")
            outs = [onnx_graph_name(t["name"]) for t in p["outputs"]]

            def run_onnx(*args, session=session, names=names, declared=declared, outs=outs):
                feed = dict(zip(names, args))
                return session.run(outs, {n: feed[n] for n in declared})

            loaded[p["index"]] = run_onnx
        else:
            import torch

            try:
                module = torch.export.load(str(path)).module()
            except Exception as e:  # torch.export.load raises several types
                raise InvalidModel(f"{path}: torch.export.load cannot load the part: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:200] if str(e) else ''}") from None

            def run_torch(*args, module=module):
                with torch.no_grad():
                    out = module(*args)
                return tuple(out) if isinstance(out, (tuple, list)) else (out,)

            loaded[p["index"]] = run_torch
    return loaded


def _transmit_hook(manifest: Manifest):
    """``hook(name, tensor, bits)`` applying the manifest's transmission of quantized
    plans (:func:`splitopt.torch.transmission.packing_transmit` with the calibrated
    ranges), or None for float plans (identity)."""
    if not manifest.data["quantized"]:
        return None
    from splitopt.torch.transmission import packing_transmit

    ranges = {}
    for c in manifest.data["crossings"]:
        for t in c["tensors"]:
            tr = t["transmit"]
            if tr["scheme"] == "affine" and tr["min"] is not None:
                ranges[t["name"]] = (float(tr["min"]), float(tr["max"]))
    return packing_transmit(ranges)


def run_exported(directory: Path | str | Manifest, inputs, *, transmit: bool = False):
    """Chain the saved parts of ``directory`` by the manifest on ``inputs`` (shape
    (n, *input shape[1:]); a numpy array or a torch tensor), one sample at a time, as
    :meth:`splitopt.torch.split_model.SplitModel.run` does: each device keeps its own
    tensors; after a part runs, its ``sends`` copy tensors to their destination devices
    (mesh plans: the model input's ``sends`` first); a model output is read on its
    ``device``. ``transmit``: apply the manifest's transmission to each sent tensor
    (quantized plans: quantize-dequantize at its bits with the calibrated range; needs
    torch); by default tensors arrive unchanged. Returns the outputs stacked on dim 0 in
    the kind of ``inputs`` (a tuple when the model has several). InvalidModel for a part
    that does not load or an input of the wrong shape or dtype."""
    import numpy as np

    manifest = directory if isinstance(directory, Manifest) else read_manifest(directory)
    data = manifest.data
    as_torch = type(inputs).__module__.startswith("torch")
    onnx = manifest.part_format == "onnx"
    if onnx:
        from splitopt.onnx.deps import require_onnx

        require_onnx("running ONNX parts")
    want = tuple(data["input"]["shape"][1:])
    if inputs.ndim != len(want) + 1 or tuple(inputs.shape[1:]) != want:
        raise InvalidModel(f"input shape {tuple(inputs.shape)} does not match the manifest's input "
                           f"(n, {', '.join(map(str, want))})")
    dtype = str(inputs.dtype).removeprefix("torch.")
    if dtype != data["input"]["dtype"]:
        raise InvalidModel(f"input dtype {dtype} does not match the manifest's input ({data['input']['dtype']})")
    hook = _transmit_hook(manifest) if transmit else None

    def native(t):
        """A tensor in the parts' kind: numpy for ONNX, torch for pt2."""
        if onnx:
            return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
        import torch

        return torch.as_tensor(t)

    if not manifest.loaded:
        manifest.loaded.update(_load_parts(manifest))
    loaded = manifest.loaded

    def send(stores, name: str, a: str, b: str, bits: int) -> None:
        t = stores[a][name]
        if hook is not None:
            import torch

            t_torch = torch.from_numpy(np.ascontiguousarray(t)) if onnx else t
            t_torch = hook(name, t_torch, bits)
            t = t_torch.numpy() if onnx else t_torch
        stores[b][name] = t

    rows = []
    for i in range(inputs.shape[0]):
        stores: dict[str, dict[str, Any]] = {d: {} for d in data["devices"]}
        source = data["input"]["device"]
        stores[source][INPUT_NAME] = native(inputs[i:i + 1])
        for s in data["input"]["sends"]:
            send(stores, INPUT_NAME, source, s["to_device"], s["bits"])
        for p in manifest.parts:
            store = stores[p["device"]]
            if p["file"] is not None:
                result = loaded[p["index"]](*[store[t["name"]] for t in p["inputs"]])
                store.update(zip((t["name"] for t in p["outputs"]), result))
            for s in p["sends"]:
                send(stores, s["name"], p["device"], s["to_device"], s["bits"])
        rows.append([stores[o["device"]][o["name"]] for o in data["outputs"]])
    columns = [[r[j] for r in rows] for j in range(len(data["outputs"]))]
    if as_torch:
        import torch

        tensors = [torch.cat([torch.as_tensor(c) for c in cols], dim=0) for cols in columns]
        return tensors[0] if len(tensors) == 1 else tuple(tensors)
    arrays = [np.concatenate([np.asarray(c) for c in cols], axis=0) for cols in columns]
    return arrays[0] if len(arrays) == 1 else tuple(arrays)
