"""Checks of an edge/cloud instance (problems ``split`` and ``split_bits``): bit-widths
the devices support, the uplink, error tables for every candidate bit-width, latency
tables for every pair the problem may choose."""

from __future__ import annotations

from splitopt.core.errors import InvalidInstance
from splitopt.families.edge_cloud.data import candidate_bits, cloud_device, edge_device, uplink
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


def check_edge_cloud(inst: EdgeCloudInstance) -> None:
    """Consistency of an edge/cloud instance: bit-widths, uplink, error and latency tables."""
    where = "instance.graph"
    s = inst.settings
    if s.edge == s.cloud:
        raise InvalidInstance(f"instance.settings.cloud: must differ from settings.edge, both are '{s.edge}'")
    edge, cloud = edge_device(inst), cloud_device(inst)
    bad = [b for b in s.bit_widths if b not in edge.bit_widths]
    if bad:
        raise InvalidInstance(
            f"instance.settings.bit_widths: {bad[0]} bits is not supported by edge device "
            f"'{edge.name}' (supports {list(edge.bit_widths)})"
        )
    if s.cloud_bits not in cloud.bit_widths:
        raise InvalidInstance(
            f"instance.settings.cloud_bits: {s.cloud_bits} bits is not supported by cloud device "
            f"'{cloud.name}' (supports {list(cloud.bit_widths)})"
        )
    if inst.problem == "split" and s.cloud_bits not in edge.bit_widths:
        raise InvalidInstance(
            f"instance.settings.problem: 'split' runs edge layers at cloud_bits={s.cloud_bits}, "
            f"which edge device '{edge.name}' does not support (supports {list(edge.bit_widths)})"
        )
    for name in s.edge_required:
        if name not in inst.layer_by_name:
            raise InvalidInstance(f"instance.settings.edge_required: unknown layer '{name}'")
    uplink(inst)  # raises if missing
    # error tables must cover every quantized candidate bit-width
    for i, layer in enumerate(inst.layers):
        for b in candidate_bits(inst):
            if b >= s.cloud_bits:
                continue
            if layer.weights > 0 and b not in layer.weight_error:
                raise InvalidInstance(
                    f"{where}.layers[{i}].weight_error: layer '{layer.name}' has no entry for candidate bit-width {b}"
                )
            if b not in layer.activation_error:
                raise InvalidInstance(
                    f"{where}.layers[{i}].activation_error: layer '{layer.name}' has no entry for candidate bit-width {b}"
                )
        tb = s.transmit_bits
        if tb is not None and tb < s.cloud_bits and inst.consumers[layer.name] and tb not in layer.activation_error:
            raise InvalidInstance(
                f"{where}.layers[{i}].activation_error: layer '{layer.name}' has no entry for "
                f"settings.transmit_bits={tb} (its output reaches the cloud at that width when sent)"
            )
        for dev, entry in layer.latency_ms.items():
            if dev not in inst.device_by_name:
                raise InvalidInstance(f"{where}.layers[{i}].latency_ms: unknown device '{dev}'")
            if isinstance(entry, dict):
                if dev == s.edge:
                    needed = [f"w{w}a{a}" for w in candidate_bits(inst) for a in candidate_bits(inst)]
                elif dev == s.cloud:
                    needed = [f"w{s.cloud_bits}a{s.cloud_bits}"]
                else:
                    needed = []
                missing = [k for k in needed if k not in entry]
                if missing:
                    raise InvalidInstance(
                        f"{where}.layers[{i}].latency_ms.{dev}: layer '{layer.name}' has no entry '{missing[0]}' "
                        f"for a bit-width pair the problem may choose"
                    )
