"""onnxruntime sessions on this host (CPU): the model with chosen intermediate tensors
exposed as extra graph outputs, the synthetic inputs it runs on, and the shapes that
shape inference could not tell (measured by one run).

Synthetic inputs (as the torch bridge's user models, but drawn with numpy so the ONNX
bridge needs no torch): floats are standard normal draws, integers uniform in
``[0, high)``, from ``numpy.random.default_rng(seed)``; the run input uses seed
``RUN_INPUT_SEED`` and the calibration inputs ``CALIBRATION_SEED`` (the torch bridge's
seeds, different generator: the values differ from torch's).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from splitopt.core.errors import InvalidModel

RUN_INPUT_SEED = 2024
CALIBRATION_SEED = 1234
CALIBRATION_INPUTS = 8

#: ONNX TensorProto element types -> numpy dtypes of the inputs we can synthesise
NUMPY_TYPES = {1: np.float32, 11: np.float64, 10: np.float16, 7: np.int64, 6: np.int32, 9: np.bool_}


def numpy_type(elem_type: int, name: str) -> Any:
    dtype = NUMPY_TYPES.get(int(elem_type))
    if dtype is None:
        raise InvalidModel(f"input '{name}': ONNX element type {elem_type} is not supported "
                           f"(float32/64/16, int64/32, bool)")
    return dtype


def synthetic_inputs(n: int, shapes: Mapping[str, Sequence[int]], types: Mapping[str, int], seed: int,
                     high: int | None = None) -> list[dict[str, np.ndarray]]:
    """``n`` feeds (one dict per sample, batch 1) for the data inputs ``shapes`` (with the
    batch dimension); integer inputs need ``high`` (the exclusive upper bound of the ids)."""
    rng = np.random.default_rng(seed)
    feeds: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
    for name, shape in shapes.items():
        dtype = numpy_type(types.get(name, 1), name)
        per = tuple(int(d) for d in shape[1:])
        if np.issubdtype(dtype, np.floating):
            values = rng.standard_normal((n, 1, *per)).astype(dtype)
        elif dtype is np.bool_:
            values = rng.integers(0, 2, (n, 1, *per)).astype(np.bool_)
        else:
            if high is None:
                raise InvalidModel(f"--input-high: needed for the integer input '{name}' (the exclusive upper "
                                   f"bound of the random ids, e.g. the vocabulary size)")
            values = rng.integers(0, int(high), (n, 1, *per)).astype(dtype)
        for i in range(n):
            feeds[i][name] = values[i]
    return feeds


def with_outputs(model, tensors: Iterable[str]):
    """A copy of ``model`` whose graph also outputs ``tensors`` (type-free value infos:
    onnxruntime takes the types from its own inference)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    present = {o.name for o in copy.graph.output}
    for t in dict.fromkeys(tensors):
        if t not in present:
            copy.graph.output.append(onnx.ValueInfoProto(name=t))
    return copy


def session(model, optimization: str = "basic", threads: int | None = None, profile_prefix: str | None = None):
    """An onnxruntime CPU session of ``model`` (a ModelProto). ``optimization``: ``basic``
    (constant folding and redundancy removal only: every layer keeps its own kernels),
    ``all`` (onnxruntime's default, with cross-node fusion and layout changes) or ``none``."""
    import onnxruntime as ort

    levels = {"none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    if optimization not in levels:
        raise ValueError(f"optimization must be one of {', '.join(levels)}, got '{optimization}'")
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[optimization]
    so.log_severity_level = 3
    if threads is not None:
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    try:
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - a model onnxruntime cannot run is bad input
        first = next((l.strip() for l in str(e).splitlines() if l.strip()), type(e).__name__)
        raise InvalidModel(f"onnxruntime cannot load the model: {first}") from e


def run(sess, feed: Mapping[str, np.ndarray], outputs: Sequence[str]) -> list[np.ndarray]:
    try:
        return sess.run(list(outputs), dict(feed))
    except Exception as e:  # noqa: BLE001 - the model failing on its input is bad input
        first = next((l.strip() for l in str(e).splitlines() if l.strip()), type(e).__name__)
        shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in feed.items())
        raise InvalidModel(f"onnxruntime failed on input {shapes}: {first}") from e


def run_shapes(model, inputs: Mapping[str, Sequence[int]], tensors: Sequence[str],
               types: Mapping[str, int] | None = None, high: int | None = None) -> dict[str, tuple[int, ...]]:
    """The shapes of ``tensors`` measured by one run on a synthetic input (for tensors
    whose shape ONNX shape inference leaves unknown)."""
    elem_types = dict(types or {})
    if not elem_types:
        for vi in model.graph.input:
            if vi.name in inputs and vi.type.HasField("tensor_type"):
                elem_types[vi.name] = vi.type.tensor_type.elem_type
    feed = synthetic_inputs(1, inputs, elem_types, RUN_INPUT_SEED, high=high if high is not None else 2)[0]
    sess = session(with_outputs(model, tensors), optimization="none")
    values = run(sess, feed, tensors)
    return {t: tuple(int(d) for d in v.shape) for t, v in zip(tensors, values)}
