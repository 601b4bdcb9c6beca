"""Hardware from presets: the devices and links of a topology built from device presets
(``splitopt profile --preset pi4,jetson,v100 --topology chain``) or a paper's scenario
(``--preset eyeriss``), and the settings of the family whose instances that topology
makes.

The families own the topologies: a family names its own (:attr:`Family.topology`:
``edge-cloud``, ``chain``, ``mesh``), says which devices it links
(:meth:`Family.topology_links`) and writes the settings (:meth:`Family.topology_settings`);
this module finds the family by the topology's name through the registry and never names
a family. Device presets and scenarios are data (:mod:`splitopt.core.presets`).
"""

from __future__ import annotations

from typing import Any, Sequence

from splitopt.core import presets
from splitopt.core.errors import InvalidOption
from splitopt.core.options import check_number
from splitopt.families.base import Family

#: the reference precisions a topology's devices may share, most preferred first
REFERENCE_BITS = (16, 8, 32)


def topology_names() -> list[str]:
    """The topologies of the registered families, in registry order."""
    from splitopt.families.registry import families

    return [f.topology for f in families() if f.topology is not None]


def topology_family(kind: str) -> Family:
    """The family whose instances topology ``kind`` makes; InvalidOption (one line listing
    the topologies) for another name."""
    from splitopt.families.registry import families

    for fam in families():
        if fam.topology == kind:
            return fam
    raise InvalidOption(f"topology '{kind}': must be one of {', '.join(topology_names())}")


def default_topology(count: int) -> str:
    """The topology of ``count`` device presets given without ``--topology``: the first, in
    registry order, that takes that many devices (two: edge-cloud; more: a chain)."""
    from splitopt.families.registry import families

    for fam in families():
        if fam.topology is not None:
            low, high = fam.topology_devices
            if low <= count and (high is None or count <= high):
                return fam.topology
    raise InvalidOption(f"no topology takes {count} device presets (topologies: {', '.join(topology_names())})")


def topology_parts(names: Sequence[str], kind: str, bandwidth_bits_per_s: float, latency_ms: float = 0.0
                   ) -> tuple[Family, list[dict[str, Any]], list[dict[str, Any]]]:
    """The family of topology ``kind``, the devices of presets ``names`` in order (see
    :func:`splitopt.core.presets.preset_devices` for their names) and the links the
    family's :meth:`Family.topology_links` asks for, each of ``bandwidth_bits_per_s`` and
    ``latency_ms``. InvalidOption (one line) for an unknown topology or preset, or a number
    of devices the topology does not take."""
    family = topology_family(kind)
    low, high = family.topology_devices
    names = [p.strip() for p in names]
    if len(names) < low or (high is not None and len(names) > high):
        need = f"exactly {low}" if high == low else f"at least {low}"
        raise InvalidOption(f"topology '{kind}': needs {need} device presets, got {len(names)} "
                            f"({','.join(names) or 'none'})")
    devices = presets.preset_devices(names)
    named = [d["name"] for d in devices]
    links = [presets.link(a, b, bandwidth_bits_per_s, latency_ms) for a, b in family.topology_links(named)]
    return family, devices, links


def topology(names: Sequence[str], kind: str, bandwidth_bits_per_s: float, latency_ms: float = 0.0
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Devices, links (:func:`topology_parts`) and the family's settings of topology
    ``kind`` over device presets ``names``, without the model-dependent ones (bit-widths,
    reference precision)."""
    family, devices, links = topology_parts(names, kind, bandwidth_bits_per_s, latency_ms)
    return devices, links, family.topology_settings([d["name"] for d in devices], devices, (), False, None)


def preset_hardware(preset: str, kind: str | None, bandwidth: float, bits: Sequence[int],
                    quantized: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Devices, links and settings of ``--preset`` (a scenario, or device presets separated
    by commas) and ``--topology`` ``kind`` (None: a scenario's own, else
    :func:`default_topology`). ``bits``: the edge bit-widths to offer (those of
    the error tables); ``quantized``: error tables will be measured. The reference
    precision ``cloud_bits`` of device presets is the first of :data:`REFERENCE_BITS`
    that every device runs. InvalidOption (one line naming the option) for an unknown
    preset, a topology that does not fit, or a bad bandwidth."""
    kind = None if kind is None else str(getattr(kind, "value", kind))
    names = [p.strip() for p in preset.split(",")]
    if len(names) == 1 and names[0] in presets.SCENARIOS:
        scenario = presets.SCENARIOS[names[0]]
        if kind not in (None, scenario.topology):
            raise InvalidOption(f"--topology {kind}: preset '{names[0]}' is a scenario of topology "
                                f"{scenario.topology}; give device presets for a {kind}, e.g. --preset pi4,jetson,v100")
        devices = [make() for make in scenario.devices]
        links = [make() for make in scenario.links]
        offered = tuple(bits) if scenario.bit_widths is None else scenario.bit_widths
        settings = topology_family(scenario.topology).topology_settings(
            [d["name"] for d in devices], devices, offered, quantized and scenario.quantized,
            scenario.settings["cloud_bits"])
        settings.setdefault("bit_widths", list(offered))
        settings.update(scenario.settings)
        return devices, links, settings
    unknown = [n for n in names if n not in presets.DEVICE_PRESETS]
    if unknown or len(names) < 2:
        raise InvalidOption(f"--preset {preset}: give a scenario ({', '.join(presets.SCENARIOS)}) or at least two "
                            f"device presets separated by commas (" + ", ".join(presets.preset_names()) + ")"
                            + (f"; unknown: {unknown[0]}" if unknown else ""))
    check_number(bandwidth, "--bandwidth", 1.0, 1e21)
    kind = kind if kind is not None else default_topology(len(names))
    family, devices, links = topology_parts(names, kind, bandwidth)
    common = [b for b in REFERENCE_BITS if all(b in d["bit_widths"] for d in devices)]
    if not common:
        raise InvalidOption(f"--preset {preset}: the devices share no bit-width for the reference precision")
    try:
        settings = family.topology_settings([d["name"] for d in devices], devices, tuple(bits), quantized, common[0])
    except InvalidOption as e:
        raise InvalidOption(f"--preset {preset}: {e}") from None
    settings["cloud_bits"] = common[0]
    return devices, links, settings
