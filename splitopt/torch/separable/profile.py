"""Profile the separable ResNeXt into the family's instance (problem ``separable``):
train it (or take trained weights), measure its layers on this host, measure the
accuracy records, and write ``settings.separable`` so that the solver plans on the same
network that :mod:`splitopt.torch.separable.run` runs.

Two device profiles: ``host`` (G devices that are this host, one torch thread each:
every layer carries its measured ``latency_ms``; links measured between two gloo
processes by :func:`~splitopt.torch.separable.run.measure_link`, or given) and
``analytic`` (G devices of a given MAC rate, e.g. the paper's Raspberry Pi 3B+ at 1.7e8
FLOPS = 0.85e8 MAC/s, links of a given rate: latency from the MACs). Units: ms, bytes,
bits/s, MAC/s, seconds of training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from splitopt.torch.separable.model import (DigitsData, LayerProfile, SepConfig, SepResNeXt, build_model,
                                            build_reference, full_mesh_links, host_devices, instance_dict,
                                            load_digits_split, parse_separable_instance, profile_layers)
from splitopt.torch.separable.nas import TrainLog, accuracy_records, train_separable


@dataclass
class TrainedPair:
    """The separable network and its unseparated reference, trained on the digits."""

    model: SepResNeXt
    reference: SepResNeXt | None
    data: DigitsData
    log: TrainLog | None = None
    reference_log: TrainLog | None = None
    seed: int = 0


def train_pair(config: SepConfig, *, seed: int = 0, epochs: int = 25, reference_epochs: int | None = None,
               lr: float = 1e-2, data: DigitsData | None = None, reference: bool = True) -> TrainedPair:
    """Stage 1 for the separable network (a uniform random policy per mini-batch) and the
    same training for the unseparated reference (``reference_epochs``, default ``epochs``;
    ``reference=False``: none). About 1.8 s per epoch for the default network on one
    thread of this host."""
    data = data or load_digits_split(seed)
    model = build_model(config, seed)
    log = train_separable(model, data, epochs=epochs, lr=lr, seed=seed)
    ref, ref_log = None, None
    if reference:
        ref = build_reference(config, seed)
        ref_log = train_separable(ref, data, epochs=reference_epochs or epochs, lr=lr, seed=seed, policy=None)
    return TrainedPair(model, ref, data, log, ref_log, seed)


@dataclass
class SeparableProfile:
    """A profiled instance: its JSON-ready dict, the parsed instance, the layer profile,
    the records and their details."""

    data: dict[str, Any]
    instance: Any
    layers: list[LayerProfile]
    records: list[Mapping[str, Any]] = field(default_factory=list)
    record_details: list[dict[str, Any]] = field(default_factory=list)


def measured_records(model: SepResNeXt, data: DigitsData, *, samples: int = 8, statistic: str = "min",
                     seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`~splitopt.torch.separable.nas.accuracy_records` on the validation split."""
    return accuracy_records(model, data, samples=samples, statistic=statistic, split="val", seed=seed)


def profile_instance(model: SepResNeXt, *, name: str, devices: str = "host", link: Mapping[str, float] | None = None,
                     mac_per_s: float = 0.85e8, prefix: str | None = None, records: Sequence[Mapping] = (),
                     options: Mapping[str, Any] | None = None, repeats: int = 20,
                     layers: Sequence[LayerProfile] | None = None, source: Mapping[str, Any] | None = None
                     ) -> SeparableProfile:
    """The instance of ``model``: ``devices`` "host" (measured layer times on this host
    for every device) or "analytic" (``mac_per_s`` MAC/s each, no measured times);
    ``link``: ``{"bits_per_s": .., "latency_ms": ..}`` for every ordered pair of devices
    (host default: measured with gloo; analytic default: the paper's 300 Mbit/s, 0 ms)."""
    c = model.config
    layers = list(layers) if layers is not None else profile_layers(model, repeats=repeats)
    measured_link = None
    if devices == "host":
        devs = host_devices(c, layers, prefix or "host")
        measured_on = [d["name"] for d in devs]
        if link is None:
            from splitopt.torch.separable.run import measure_link

            measured_link = measure_link()
            link = measured_link
    elif devices == "analytic":
        devs = [{"name": f"{prefix or 'pi'}{g}", "description": f"an edge device of {mac_per_s:.3g} MAC/s",
                 "mac_per_s": float(mac_per_s), "offchip_bytes_per_s": None, "onchip_bytes": 0.0,
                 "memory_bytes": 1e9, "bit_widths": [16, 32]} for g in range(c.groups)]
        measured_on = []
        link = link or {"bits_per_s": 300e6, "latency_ms": 0.0}
    else:
        raise ValueError(f"devices: must be host or analytic, got {devices!r}")
    names = [d["name"] for d in devs]
    links = full_mesh_links(names, float(link["bits_per_s"]), float(link.get("latency_ms", 0.0)))
    # the generator's name as the instances written so far record it (the module's name then)
    src = {"generator": "splitopt.torch.separable_profile", "torch": torch.__version__,
           "separable_model": c.to_dict(), "torch_threads": torch.get_num_threads(),
           "device_profile": devices, "link": dict(link)}
    if measured_link is not None:
        src["measured_link"] = measured_link
    src.update(dict(source or {}))
    data = instance_dict(c, layers, devs, links, name=name, measured_on=measured_on, accuracy=records,
                         options=options, source=src)
    return SeparableProfile(data, parse_separable_instance(data), layers, list(records))


def model_from_source(inst: Any, checkpoint: Any = None) -> tuple[SepResNeXt, dict[str, Any]]:
    """The network an instance was profiled from: the checkpoint's weights (its
    configuration must match the instance's ``source.separable_model``), else the
    configuration with seeded random weights (``source.seed``, default 0). ValueError
    (one line) when the instance carries no model or the two disagree."""
    source = inst.source if isinstance(inst.source, dict) else {}
    raw = source.get("separable_model")
    if not isinstance(raw, dict):
        raise ValueError(f"instance '{inst.name}': no source.separable_model (not made by profile-separable)")
    config = SepConfig.from_dict(raw)
    info: dict[str, Any] = {"weights": "random", "seed": int(source.get("seed", 0))}
    if checkpoint is not None:
        from splitopt.torch.separable.nas import load_models

        model, _, extra = load_models(checkpoint)
        if model.config != config:
            raise ValueError(f"checkpoint {checkpoint}: its model {model.config.to_dict()} is not the instance's "
                             f"{config.to_dict()}")
        info = {"weights": str(checkpoint), **extra}
        return model, info
    model = build_model(config, info["seed"])
    model.eval()
    return model, info


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def check_matches(inst: Any, config: SepConfig) -> None:
    """ValueError (one line) unless the instance's separable data describe ``config``'s
    network: G, the blocks and their per-device channels and sizes, alpha, the levels'
    percents, the dtypes and the head device."""
    from splitopt.families.separable.data import data as separable_data

    d = separable_data(inst)
    c = config
    if d.g != c.groups:
        raise ValueError(f"instance '{inst.name}': G = {d.g} devices, the model has G = {c.groups}")
    if len(d.blocks) != c.blocks or d.alpha != c.alpha:
        raise ValueError(f"instance '{inst.name}': {len(d.blocks)} blocks with alpha = {d.alpha}, the model has "
                         f"{c.blocks} with alpha = {c.alpha}")
    for b in range(c.blocks):
        ch, hh, ww = c.block_shape(b)
        if d.channels[b] != ch or d.spatial[b] != hh * ww:
            raise ValueError(f"instance '{inst.name}': block {b} holds {d.channels[b]} x {d.spatial[b]} per device, "
                             f"the model {ch} x {hh * ww}")
    if any(abs(a - b) > 1e-9 for a, b in zip(d.percents, c.percents)) or len(d.percents) != len(c.percents):
        raise ValueError(f"instance '{inst.name}': levels {list(d.percents)} %, the model {list(c.percents)} %")
    if d.head != c.head_device:
        raise ValueError(f"instance '{inst.name}': head device {d.head}, the model's {c.head_device}")
    extra = [t for t in d.dtypes if t not in c.dtypes]
    if extra:
        raise ValueError(f"instance '{inst.name}': dtype {extra[0]} is not one the model allows ({list(c.dtypes)})")
