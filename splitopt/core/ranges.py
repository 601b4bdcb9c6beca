"""The ranges of an instance's numbers: what every program represents exactly.

The JSON Schema (``schema/instance.schema.json``) states the bound of each single value;
:func:`check_ranges` checks, after the schema, the bounds that need totals or derived
values (a layer's latency from its MACs and the device's rate, a transfer's time from a
tensor's size and the link's rate). Each bound and why (docs/guide/instances.md, "Ranges"):

* sizes: every size in bits is an integer, and the sum over all tensors and weights at
  the widest bit-width of the instance stays below ``MAX_TOTAL_BITS = 2**50``: memory
  rows sum sizes times 0/1 variables, so every row's activity is an integer below 2**50,
  exact in a double (MILP backends) and far inside CP-SAT's 64-bit integers (its
  NOTES.md margin: |coefficient x bound| well below 2**53). A shape dimension is at most
  2**31 - 1, a layer's weights at most 2**44, a memory at most 2**47 bytes (2**50 bits);
* times: every single time (a measured latency, a link's fixed latency, a layer's
  latency on a device, one tensor's transfer over one link) is in [0, ``MAX_MS`` = 1e8]
  ms (28 hours), and the slowest conceivable plan (every layer on its slowest device,
  every tensor over every link once) takes at most ``MAX_TOTAL_MS = 1e9`` ms (12 days).
  The objective is a sum of such times: in doubles its sums keep about 1e-7 ms, and
  CP-SAT's integer emission (2**40 units over the sum of the objective's terms, at most
  some 1e10 ms) keeps a unit below 0.02 ms in the worst case and about 1e-9 ms on the
  shipped instances; the rounding error is stated and included in the reported gap;
* rates (MAC/s, bytes/s, bits/s) are in [1, 1e21]: with the sizes above, no time
  overflows and a rate never divides by a denormal;
* quantization errors (relative MSE) are in [0, 1e6], an error budget in [0, 1e9];
* at most ``MAX_DEVICES`` devices.

Messages name the field that breaks a bound: for a total, the largest contributor.
"""

from __future__ import annotations

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Instance, Layer
from splitopt.core.latency import analytical_latency_ms

#: the largest dimension of a tensor shape (also in the schema)
MAX_DIM = 2**31 - 1
#: a layer's weight count (also in the schema)
MAX_WEIGHTS = 2**44
#: MACs of one layer (also in the schema): integers up to 2**53 are exact in a double
MAX_MACS = 2**53
#: memory sizes in bytes (also in the schema): 2**50 bits
MAX_MEMORY_BYTES = 2**47
#: every size in bits summed over all tensors and weights at the widest bit-width
MAX_TOTAL_BITS = 2**50
#: any single time in ms (also in the schema)
MAX_MS = 1e8
#: the slowest conceivable plan, in ms
MAX_TOTAL_MS = 1e9
#: rates: MAC/s, bytes/s, bits/s (also in the schema)
MIN_RATE, MAX_RATE = 1.0, 1e21
#: quantization error entries and budgets (also in the schema)
MAX_ERROR, MAX_ERROR_BUDGET = 1e6, 1e9
#: devices of one instance (also in the schema)
MAX_DEVICES = 1024


def widest_bits(inst: Instance) -> int:
    """The largest bit-width any tensor or weight of ``inst`` can take."""
    bits = [*inst.settings.bit_widths_named(), *(t.bits for t in inst.inputs)]
    bits += [b for d in inst.devices for b in d.bit_widths]
    return max(bits)


def _sizes(inst: Instance) -> None:
    bits = widest_bits(inst)
    items = [(t.elements * bits, f"instance.graph.inputs[{i}].shape") for i, t in enumerate(inst.inputs)]
    for i, layer in enumerate(inst.layers):
        items.append((layer.output_elements * bits, f"instance.graph.layers[{i}].output_shape"))
        items.append((int(layer.weights) * bits, f"instance.graph.layers[{i}].weights"))
    total = sum(size for size, _ in items)
    if total >= MAX_TOTAL_BITS:
        size, where = max(items)
        raise InvalidInstance(f"{where}: {size:.3g} bits at {bits} bits per value; all tensors and weights total "
                              f"{total:.3g} bits, at least 2**50 = {MAX_TOTAL_BITS:.3g}, beyond what the programs "
                              "represent exactly")


def layer_latencies_ms(inst: Instance, layer: Layer) -> dict[str, float]:
    """Device -> the largest latency ``layer`` can take there (measured table entries, or
    the analytical model at the device's widest bit-width)."""
    out = {}
    for device in inst.devices:
        table = layer.latency_ms.get(device.name)
        if isinstance(table, dict):
            out[device.name] = max(float(v) for v in table.values())
        elif table is not None:
            out[device.name] = float(table)
        else:
            bits = max(device.bit_widths + (inst.settings.reference_bits,))
            out[device.name] = analytical_latency_ms(inst, layer, device, bits, bits)
    return out


def _times(inst: Instance) -> None:
    compute = 0.0
    for i, layer in enumerate(inst.layers):
        latencies = layer_latencies_ms(inst, layer)
        device, slowest = max(latencies.items(), key=lambda kv: kv[1])
        if not slowest <= MAX_MS:  # also catches an overflow to inf or nan
            source = (f"latency_ms.{device}" if device in layer.latency_ms
                      else f"macs (on device '{device}' at {inst.device_by_name[device].mac_per_s:.3g} MAC/s)")
            raise InvalidInstance(f"instance.graph.layers[{i}].{source}: layer '{layer.name}' takes "
                                  f"{slowest:.3g} ms there, more than {MAX_MS:g} ms")
        compute += slowest
    bits = widest_bits(inst)
    tensor_bits = sum(t.elements for t in inst.inputs) * bits + sum(l.output_elements for l in inst.layers) * bits
    largest = max([t.elements for t in inst.inputs] + [l.output_elements for l in inst.layers]) * bits
    transfers = 0.0
    for i, link in enumerate(inst.links):
        rate = inst.link_rate_bits_per_s(link)
        sending = 1000.0 * largest / rate
        one = link.latency_ms + sending
        if not one <= MAX_MS:
            if link.latency_ms >= sending:  # the fixed latency is the larger part: name it
                field = f"instance.links[{i}].latency_ms"
            elif link.bus is None:
                field = f"instance.links[{i}].bandwidth_bits_per_s"
            else:
                field = f"instance.buses[{[b.name for b in inst.buses].index(link.bus)}].bandwidth_bits_per_s"
            raise InvalidInstance(f"{field}: the largest tensor ({largest:.3g} bits) takes {one:.3g} ms over link "
                                  f"'{link.source}' -> '{link.target}' ({link.latency_ms:.3g} ms fixed latency + "
                                  f"{sending:.3g} ms at {rate:.3g} bits/s), more than {MAX_MS:g} ms")
        transfers += len(inst.inputs + inst.layers) * link.latency_ms + 1000.0 * tensor_bits / rate
    if not compute + transfers <= MAX_TOTAL_MS:
        what = ("layer latencies (every layer on its slowest device)" if compute >= transfers else
                "transfer times (every tensor over every link)")
        raise InvalidInstance(f"instance: the slowest conceivable plan takes {compute + transfers:.3g} ms "
                              f"(compute {compute:.3g} ms + transfers {transfers:.3g} ms), more than "
                              f"{MAX_TOTAL_MS:g} ms; mostly {what}")


def check_ranges(inst: Instance) -> None:
    """The totals and derived values behind the schema's per-value ranges (module
    docstring); InvalidInstance (one line naming the field) otherwise."""
    _sizes(inst)
    _times(inst)
