"""Checks of an llm instance, each failure one line naming the field and value: the layer
graph is a line of parts, the scenario fits the model's context, the devices the settings
name can be used, the precisions are runnable, the pins agree, the error tables exist
where a budget needs them, and the sizes and times stay in the ranges the programs
represent exactly."""

from __future__ import annotations

import math

from splitopt.core.errors import InvalidInstance
from splitopt.core.instance import Instance
from splitopt.core.jsonfile import shown
from splitopt.core.ranges import MAX_MS, MAX_TOTAL_BITS, MAX_TOTAL_MS
from splitopt.families.llm.data import BLOCK, EMBEDDING, HEAD, data, usable_devices
from splitopt.families.llm.settings import REFERENCE_BITS, LlmSettings


def check_llm(inst: Instance[LlmSettings]) -> None:
    check_graph(inst)
    check_scenario(inst)
    check_devices(inst)
    check_pins(inst)
    check_model(inst)
    check_errors(inst)
    check_measured(inst)
    check_sizes(inst)
    check_times(inst)


def check_graph(inst: Instance[LlmSettings]) -> None:
    """One graph input (the token), each part reading the part before it; no measured
    latency tables (the family computes its times from the cost model)."""
    if len(inst.inputs) != 1:
        raise InvalidInstance(f"instance.graph.inputs: problem 'llm' takes one input (the token ids), got "
                              f"{len(inst.inputs)}")
    previous = inst.inputs[0].name
    for i, layer in enumerate(inst.layers):
        if list(layer.inputs) != [previous]:
            raise InvalidInstance(f"instance.graph.layers[{i}].inputs: problem 'llm' takes the model's parts as a "
                                  f"line, each reading the one before ({shown(previous)}), got {shown(list(layer.inputs))}")
        if layer.latency_ms:
            raise InvalidInstance(f"instance.graph.layers[{i}].latency_ms: problem 'llm' computes prefill and decode "
                                  "times from macs, weights and memory bandwidth, or reads measured times from "
                                  "settings.measured; layer latency tables are not read here")
        previous = layer.name


def check_scenario(inst: Instance[LlmSettings]) -> None:
    """The context holds the prompt and the generated tokens, within the model's maximum."""
    s = inst.settings
    need = s.prompt_tokens + s.generated_tokens
    if s.context_limit < need:
        raise InvalidInstance(f"instance.settings.context_limit: {s.context_limit:,} tokens cannot hold the prompt "
                              f"and the generated tokens ({s.prompt_tokens:,} + {s.generated_tokens:,} = {need:,})")
    longest = s.model.max_context
    if longest is not None and s.context_limit > longest:
        raise InvalidInstance(f"instance.settings.context_limit: {s.context_limit:,} tokens is longer than the "
                              f"model's maximum context {longest:,} (settings.model.max_context)")
    if s.topology not in ("chain", "ring"):
        raise InvalidInstance(f"instance.settings.topology: {shown(s.topology)} (topologies: chain, ring)")


def check_devices(inst: Instance[LlmSettings]) -> None:
    """Every candidate bit-width runs on some device that is not excluded; some device is
    usable; every usable device states its memory bandwidth."""
    s = inst.settings
    kept = [d for d in inst.devices if d.name not in s.exclude]
    if not kept:
        raise InvalidInstance(f"instance.settings.exclude: excludes every device ({', '.join(s.exclude)})")
    for bits in s.bit_widths:
        if not any(bits in d.bit_widths for d in kept):
            runs = ", ".join(f"{d.name} {list(d.bit_widths)}" for d in kept[:6])
            raise InvalidInstance(f"instance.settings.bit_widths: {bits} bits runs on no device that is not excluded "
                                  f"({runs or 'no device left'})")
    usable = usable_devices(inst)
    if not usable:
        raise InvalidInstance("instance.settings.exclude: leaves no device that runs one of settings.bit_widths "
                              f"{list(s.bit_widths)}")
    for d in usable:
        if d.offchip_bytes_per_s is None:
            i = inst.devices.index(d)
            raise InvalidInstance(f"instance.devices[{i}].offchip_bytes_per_s: problem 'llm' needs device "
                                  f"'{d.name}''s memory bandwidth (decode reads every weight per token); exclude the "
                                  "device or give it")


def check_pins(inst: Instance[LlmSettings]) -> None:
    """Pins name usable devices and known layers in order, and no two overlap."""
    s = inst.settings
    position = {layer.name: i for i, layer in enumerate(inst.layers)}
    usable = {d.name for d in usable_devices(inst)}
    spans = []
    for device, (first, last) in s.pins.items():
        where = f"instance.settings.pins.{device}"
        if device in s.exclude:
            raise InvalidInstance(f"{where}: device '{device}' is pinned and excluded (settings.exclude)")
        if device not in usable:
            runs = list(inst.device_by_name[device].bit_widths)
            raise InvalidInstance(f"{where}: device '{device}' runs none of settings.bit_widths {list(s.bit_widths)} "
                                  f"(it runs {runs})")
        for name in (first, last):
            if name not in position:
                raise InvalidInstance(f"{where}: unknown layer {shown(name)}")
        if position[first] > position[last]:
            raise InvalidInstance(f"{where}: '{first}' comes after '{last}' (give [first layer, last layer])")
        spans.append((position[first], position[last], device))
    spans.sort()
    for (a0, a1, da), (b0, b1, db) in zip(spans, spans[1:]):
        if b0 <= a1:
            raise InvalidInstance(f"instance.settings.pins.{db}: {inst.layers[b0].name}..{inst.layers[b1].name} "
                                  f"overlaps device '{da}''s pinned {inst.layers[a0].name}..{inst.layers[a1].name} "
                                  "(a layer runs on one device)")


def check_model(inst: Instance[LlmSettings]) -> None:
    """Active weights name known layers and are at most their weights; tied embeddings
    need an embedding first and a head last (they share the smaller one's matrix)."""
    m = inst.settings.model
    for name, count in m.active_weights.items():
        layer = inst.layer_by_name.get(name)
        if layer is None:
            raise InvalidInstance(f"instance.settings.model.active_weights.{name}: unknown layer")
        if count > layer.weights:
            raise InvalidInstance(f"instance.settings.model.active_weights.{name}: {count:,} is more than the layer's "
                                  f"{layer.weights:,.0f} weights")
    if m.tied_embeddings:
        first, last = inst.layers[0], inst.layers[-1]
        if first.op != EMBEDDING or last.op != HEAD or len(inst.layers) < 2:
            raise InvalidInstance("instance.settings.model.tied_embeddings: needs a layer with op 'embedding' first "
                                  f"and one with op 'head' last (got {shown(first.op)} and {shown(last.op)})")


def check_errors(inst: Instance[LlmSettings]) -> None:
    """Where an error budget is set, every layer with weights states its error at every
    candidate bit-width below the reference precision."""
    s = inst.settings
    if s.error_budget is None:
        return
    for i, layer in enumerate(inst.layers):
        for bits in s.bit_widths:
            if bits < REFERENCE_BITS and layer.weights and bits not in layer.weight_error:
                raise InvalidInstance(f"instance.graph.layers[{i}].weight_error: no entry for {bits} bits (settings."
                                      f"error_budget is set and {bits} is in settings.bit_widths)")


def check_measured(inst: Instance[LlmSettings]) -> None:
    """Measured times: prompt lengths and contexts increasing (contexts at least two, for
    the line), one time per length and per context, known parts, and a bit-width the
    device runs."""
    for device, m in inst.settings.measured.items():
        where = f"instance.settings.measured.{device}"
        for key, values, least in (("prompt_tokens", m.prompt_tokens, 1), ("contexts", m.contexts, 2)):
            if len(values) < least or any(b <= a for a, b in zip(values, values[1:])):
                raise InvalidInstance(f"{where}.{key}: must be {least} or more lengths in increasing order, got "
                                      f"{list(values)}")
        runs = inst.device_by_name[device].bit_widths
        if m.weight_bits not in runs:
            raise InvalidInstance(f"{where}.weight_bits: {m.weight_bits} bits is not a bit-width device '{device}' "
                                  f"runs ({list(runs)})")
        for name, (prefill, decode) in m.parts.items():
            if name not in inst.layer_by_name:
                raise InvalidInstance(f"{where}.parts.{name}: unknown layer")
            for key, times, grid in (("prefill_ms", prefill, "prompt_tokens"), ("decode_ms", decode, "contexts")):
                want = len(getattr(m, grid))
                if len(times) != want:
                    raise InvalidInstance(f"{where}.parts.{name}.{key}: {len(times)} times for the {want} lengths of "
                                          f"{where}.{grid}")
        for name, (prefill, decode) in m.cpu_parts.items():
            for key, times, grid in (("prefill_cpu_ms", prefill, "prompt_tokens"),
                                     ("decode_cpu_ms", decode, "contexts")):
                want = len(getattr(m, grid))
                if len(times) != want:
                    raise InvalidInstance(f"{where}.parts.{name}.{key}: {len(times)} times for the {want} lengths of "
                                          f"{where}.{grid}")


def check_sizes(inst: Instance[LlmSettings]) -> None:
    """Weights at the widest bit-width and the KV cache at the context limit for every
    stream stay below 2**50 bits (the memory rows' exact range)."""
    s = inst.settings
    kv = sum(s.model.kv_elements_per_token for layer in inst.layers if layer.op == BLOCK)
    kv_bits = kv * s.kv_bits * s.context_limit * s.streams
    weight_bits = sum(layer.weights for layer in inst.layers) * max(s.bit_widths)
    if kv_bits + weight_bits >= MAX_TOTAL_BITS:
        raise InvalidInstance(f"instance.settings.context_limit: a KV cache of {s.context_limit:,} tokens x "
                              f"{s.streams} streams ({kv_bits:.3g} bits) and the weights ({weight_bits:.3g} bits) "
                              f"reach 2**50 bits, beyond what the programs represent exactly")


def check_times(inst: Instance[LlmSettings]) -> None:
    """Every part's prefill on every usable device within ``MAX_MS`` and the slowest
    conceivable prefill within ``MAX_TOTAL_MS`` (the programs' time range)."""
    d = data(inst)
    slowest = [float(max((t for t in d.prefill_ms[i].ravel() if math.isfinite(t)), default=0.0))
               for i in range(d.n)]
    worst = max(range(d.n), key=lambda i: slowest[i])
    if slowest[worst] > MAX_MS or sum(slowest) > MAX_TOTAL_MS:
        raise InvalidInstance(f"instance.settings.prompt_tokens: a prefill of {inst.settings.prompt_tokens:,} tokens "
                              f"takes {slowest[worst]:.3g} ms for part '{d.parts[worst]}' alone ({sum(slowest):.3g} ms "
                              f"in all on the slowest devices), beyond the {MAX_MS:g} ms a time may take")
