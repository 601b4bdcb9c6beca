"""``profile``: turn a traceable ``nn.Module`` into a splitopt instance.

Steps (``formulations/layer_graph.md`` has the capture rules):

1. capture with torch.export, batch-norm folding and activation fusion
   (:func:`splitopt.torch.capture.capture`): names, ops, shapes, MACs, weights;
2. quantization-error tables per layer and bit-width, measured on the real weights and
   on activations from calibration inputs (:mod:`splitopt.torch.quant_error`), when
   calibration inputs are given;
3. per-layer latency measured on this host, optionally: the exported ATen graph is run
   node by node ``repeats`` times (after ``warmup`` runs); each node's wall time is
   charged to the layer that computes it (a node of no layer, such as a pad or a view of
   the input, is charged to the next layer that runs); a layer's latency is the median
   over the runs (ms). The host becomes a device named ``host_device`` whose layers
   carry these measured ``latency_ms`` entries.

The instance is validated like any file (``parse_instance``) before it is returned.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from splitopt.api import FORMAT, parse_instance
from splitopt.core import progress
from splitopt.core.input_bits import FLOAT_INPUT_BITS, integer_input_bits
from splitopt.core.instance import Instance
from splitopt.torch.capture import Capture
from splitopt.torch.quant_error import placeholder_values, layer_dicts_with_errors

#: candidate bit-widths of the error tables
DEFAULT_BITS = (2, 4, 6, 8)


class _Timer(torch.fx.Interpreter):
    """Runs the exported graph and adds each node's wall time (s) to its layer."""

    def __init__(self, gm: torch.fx.GraphModule, owner: Mapping[str, str], totals: dict[str, float]):
        super().__init__(gm)
        self.owner, self.totals, self.pending = owner, totals, 0.0

    def run_node(self, n: torch.fx.Node) -> Any:
        t0 = time.perf_counter()
        out = super().run_node(n)
        elapsed = time.perf_counter() - t0
        layer = self.owner.get(n.name)
        if layer is None:
            self.pending += elapsed if n.op == "call_function" else 0.0
        else:
            self.totals[layer] += elapsed + self.pending
            self.pending = 0.0
        return out


#: ops that pass ids on unchanged (shape only), between the input and its embedding
_ID_VIEWS = ("view", "reshape", "unsqueeze", "squeeze", "flatten", "clone", "contiguous", "alias", "expand",
             "slice", "select")


def embedding_rows(program: Any) -> int | None:
    """Rows (``num_embeddings``) of the embedding table that the program's user input
    indexes (``aten.embedding(weight, ids)``, the ids taken as they are or through shape
    ops such as ``view``), else None."""
    ids = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
            continue
        op = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        if op in _ID_VIEWS and node.args[0].name in ids:
            ids.add(node.name)
        elif op == "embedding" and len(node.args) >= 2 and isinstance(node.args[1], torch.fx.Node) \
                and node.args[1].name in ids:
            val = node.args[0].meta.get("val")
            if val is not None and val.dim() >= 1:
                return int(val.shape[0])
    return None


def measure_layer_latency(cap: Capture, x: torch.Tensor, repeats: int = 5, warmup: int = 1) -> dict[str, float]:
    """Median per-layer wall time (ms) of the captured program on ``x`` over ``repeats``
    runs, on this host, one thread per torch's current setting."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    owner = {node: layer.name for layer in cap.layers for node in layer.nodes}
    program = cap.program
    args = placeholder_values(program, x)
    runs: list[dict[str, float]] = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            progress.step(f"run {i + 1} of {warmup + repeats}")
            totals = {layer.name: 0.0 for layer in cap.layers}
            _Timer(program.graph_module, owner, totals).run(*args)
            if i >= warmup:
                runs.append(totals)
    progress.step("")
    return {name: 1000.0 * statistics.median(r[name] for r in runs) for name in runs[0]}


def host_device(name: str, cap: Capture, latency_ms: Mapping[str, float], memory_bytes: float = 8e9) -> dict[str, Any]:
    """The device entry of this host: its effective rate (MAC/s, total MACs over total
    measured time, informative only: the layers carry their measured latencies)."""
    total_s = sum(latency_ms.values()) / 1000.0
    rate = cap.total_macs / total_s if total_s > 0 and cap.total_macs > 0 else 1e9
    return {"name": name, "description": f"this host, measured by splitopt.torch.profile (torch {torch.__version__})",
            "mac_per_s": rate, "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": memory_bytes,
            "bit_widths": [2, 4, 6, 8, 16, 32]}


def profile(
    module: torch.nn.Module,
    example_input: torch.Tensor,
    devices: Sequence[Mapping[str, Any]],
    links: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    *,
    name: str = "model",
    calibration: torch.Tensor | None = None,
    bits: Iterable[int] = DEFAULT_BITS,
    measure_latency: bool = False,
    repeats: int = 5,
    host_device_name: str = "host",
    rename: Callable[[str], str] | None = None,
    input_bits: int | None = None,
    input_high: int | None = None,
    description: str = "",
    device_latency: Mapping[str, Mapping[str, float]] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Instance:
    """Build a validated :class:`Instance` of ``module`` on ``example_input`` (batch 1).

    ``devices``, ``links`` and ``settings`` are in the instance JSON format (e.g. from
    :mod:`splitopt.core.presets`); ``calibration`` (N x input shape): measure the error
    tables at ``bits``; ``measure_latency``: add this host as device ``host_device_name`` with
    measured per-layer latencies (median of ``repeats``, ms). ``input_bits``: bits per
    element of the input (None: by the rule of ``splitopt.core.input_bits``, from its
    dtype, ``input_high`` (the exclusive bound of integer ids, e.g. the vocabulary size)
    or the embedding it indexes; the rule used goes to ``source["input_bits"]``).
    ``device_latency``: per device of ``devices``, the latency (ms) of every layer measured
    elsewhere (by a device agent, :mod:`splitopt.agents.hardware`), keyed by layer name,
    put in the layers' latency tables; ``provenance``: entries of the instance's
    ``source`` saying how (e.g. ``{"agents": ...}``). Raises InvalidInstance (one
    line) if the pieces do not make a valid instance, InvalidModel (one line) for an
    untraceable module or an example input that does not fit it, ValueError for
    calibration inputs of another shape."""
    from splitopt.torch.user_model import capture_checked  # one-line InvalidModel for bad modules/inputs

    with progress.phase("capturing the model"):
        cap = capture_checked(module, example_input, rename=rename, input_bits=input_bits or FLOAT_INPUT_BITS)
    bits_rule = None
    if input_bits is None and not (example_input.dtype.is_floating_point or example_input.dtype.is_complex):
        width = torch.iinfo(example_input.dtype).bits if example_input.dtype != torch.bool else 1
        cap.graph_input["bits"], bits_rule = integer_input_bits(width, input_high, embedding_rows(cap.program))
    if calibration is not None:
        if tuple(calibration.shape[1:]) != tuple(example_input.shape[1:]):
            raise ValueError(f"calibration inputs have shape {tuple(calibration.shape[1:])} per sample, "
                             f"the example input {tuple(example_input.shape[1:])}")
        with progress.phase(f"quantization-error tables on {calibration.shape[0]} inputs"):
            layers = layer_dicts_with_errors(cap, calibration, bits)
    else:
        layers = cap.layer_dicts()
    devices = [dict(d) for d in devices]
    source: dict[str, Any] = {"generator": "splitopt.torch.profile", "torch": torch.__version__,
                              "input_shape": list(example_input.shape[1:]), "total_macs": cap.total_macs,
                              "total_weights": cap.total_weights,
                              "error_tables": f"bits {list(bits)} on {calibration.shape[0]} calibration inputs"
                              if calibration is not None else "none"}
    if bits_rule is not None:
        source["input_bits"] = f"{cap.graph_input['bits']}: {bits_rule}"
    if measure_latency:
        with progress.phase("measuring layer latency"):
            measured = measure_layer_latency(cap, example_input, repeats=repeats)
        for layer in layers:
            layer.setdefault("latency_ms", {})[host_device_name] = measured[layer["name"]]
        devices.append(host_device(host_device_name, cap, measured))
        source["host_latency"] = f"median of {repeats} runs per layer on this host, ms"
    if device_latency:
        from splitopt.core.latency import add_measured_latency

        add_measured_latency(layers, device_latency)
    source.update(provenance or {})
    data = {
        "format": FORMAT,
        "name": name,
        "description": description or f"{name} profiled by splitopt.torch.profile",
        "source": source,
        "graph": {"inputs": [dict(cap.graph_input)], "layers": layers},
        "devices": devices,
        "links": [dict(l) for l in links],
        "settings": dict(settings),
    }
    return parse_instance(data)
