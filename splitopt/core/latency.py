"""Per-layer latency on a device: measured values from the instance, or the analytical
accelerator model documented in ``formulations/device_model.md``; and
:func:`add_measured_latency`, which puts latencies measured elsewhere (device agents)
into a profiled graph's layers.

Analytical model for layer i on device d at weight bit-width ``wb`` and activation
bit-width ``ab`` (the bits of the layer's output tensor)::

    compute_s  = macs_i / mac_per_s                     # fixed-rate MAC units: bits do not speed up MACs
    weight_B   = weights_i * wb / 8                     # weights streamed from off-chip once
    out_B      = out_elements_i * ab / 8
    spill_B    = out_B * (1 + readers_i)  if out_B > onchip_bytes / 2 else 0
                                                        # an output that does not fit half the buffer
                                                        # is written off-chip and read back by each reader
    input_B    = sum of raw graph inputs read by i (elements * bits / 8) that exceed onchip_bytes / 2
    latency_ms = 1000 * (compute_s + (weight_B + spill_B + input_B) / offchip_bytes_per_s)

``readers_i`` is the number of layers that read layer i's output in the graph (at least
one: the result or the transmission reads it). A device with ``offchip_bytes_per_s``
null models compute only (SplitNets App. G: latency = OPs / Comp). Every term depends only on the layer's
own bit-widths, so the latency of a plan is a sum of per-layer table entries.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from splitopt.core.errors import InvalidInstance, InvalidModel
from splitopt.core.instance import Device, Instance, Layer


def layer_latency_ms(inst: Instance, layer: Layer, device: Device, weight_bits: int, activation_bits: int) -> float:
    """Latency (ms) of ``layer`` on ``device`` at the given bit-widths."""
    override = layer.latency_ms.get(device.name)
    if override is not None:
        if isinstance(override, (int, float)):
            return float(override)
        key = f"w{weight_bits}a{activation_bits}"
        if key not in override:
            raise InvalidInstance(
                f"layer '{layer.name}'.latency_ms.{device.name}: no entry '{key}' "
                f"(has {', '.join(sorted(override))})"
            )
        return float(override[key])
    return analytical_latency_ms(inst, layer, device, weight_bits, activation_bits)


def analytical_latency_ms(inst: Instance, layer: Layer, device: Device, weight_bits: int, activation_bits: int) -> float:
    """The analytical accelerator model (see module docstring), in ms."""
    compute_s = layer.macs / device.mac_per_s
    if device.offchip_bytes_per_s is None:
        return 1000.0 * compute_s
    half_buffer = device.onchip_bytes / 2.0
    weight_bytes = layer.weights * weight_bits / 8.0
    out_bytes = layer.output_elements * activation_bits / 8.0
    readers = max(1, len(inst.consumers[layer.name]))
    spill_bytes = out_bytes * (1 + readers) if out_bytes > half_buffer else 0.0
    input_bytes = raw_input_spill_bytes(inst, layer, half_buffer)
    traffic = weight_bytes + spill_bytes + input_bytes
    return 1000.0 * (compute_s + traffic / device.offchip_bytes_per_s)


def raw_input_spill_bytes(inst: Instance, layer: Layer, half_buffer: float) -> float:
    """Bytes of the raw graph inputs ``layer`` reads that do not fit half the on-chip
    buffer (``half_buffer``, bytes) and are read from off-chip memory."""
    input_bytes = 0.0
    for src in dict.fromkeys(layer.inputs):
        raw = inst.input_by_name.get(src)
        if raw is not None:
            raw_bytes = raw.elements * raw.bits / 8.0
            if raw_bytes > half_buffer:
                input_bytes += raw_bytes
    return input_bytes


def analytical(layer: Layer, device: Device) -> bool:
    """True where ``layer``'s latency on ``device`` comes from the analytical model, whose
    weight and activation terms are apart: its table is separable,
    ``L[w, a] = L[w, a0] + L[w0, a] - L[w0, a0]`` (to rounding)."""
    return layer.latency_ms.get(device.name) is None


def latency_table(inst: Instance, layer: Layer, device: Device, bits: Sequence[int]) -> dict[tuple[int, int], float]:
    """``(weight bits, activation bits) -> latency (ms)`` of ``layer`` on ``device`` for every
    pair of ``bits``: the values of :func:`layer_latency_ms`, to the last bit (the same
    operations in the same order), with the parts that do not depend on the bit-widths
    computed once (a program builder asks for every pair of every layer)."""
    override = layer.latency_ms.get(device.name)
    if override is not None or device.offchip_bytes_per_s is None:
        return {(w, a): layer_latency_ms(inst, layer, device, w, a) for w in bits for a in bits}
    compute_s = layer.macs / device.mac_per_s
    half_buffer = device.onchip_bytes / 2.0
    readers = max(1, len(inst.consumers[layer.name]))
    input_bytes = raw_input_spill_bytes(inst, layer, half_buffer)
    rate = device.offchip_bytes_per_s
    table = {}
    for w in bits:
        weight_bytes = layer.weights * w / 8.0
        for a in bits:
            out_bytes = layer.output_elements * a / 8.0
            spill_bytes = out_bytes * (1 + readers) if out_bytes > half_buffer else 0.0
            table[w, a] = 1000.0 * (compute_s + (weight_bytes + spill_bytes + input_bytes) / rate)
    return table


def add_measured_latency(layers: Sequence[dict[str, Any]], measured: Mapping[str, Mapping[str, float]]) -> None:
    """Put each device's measured per-layer latencies (ms, by layer name) into the layers'
    ``latency_ms`` tables; InvalidModel (one line) where a device's table misses a layer
    or names one the graph does not have."""
    names = {layer["name"] for layer in layers}
    for device, table in measured.items():
        missing = [layer["name"] for layer in layers if layer["name"] not in table]
        extra = [n for n in table if n not in names]
        if missing or extra:
            what = f"no latency for layer '{missing[0]}'" if missing else f"a latency for '{extra[0]}', no layer"
            raise InvalidModel(f"device '{device}': the measured table has {what} of the profiled graph")
        for layer in layers:
            layer.setdefault("latency_ms", {})[device] = float(table[layer["name"]])
