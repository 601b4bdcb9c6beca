"""Hardware presets in the instance's JSON form (units in field names): the papers'
devices and links, and device presets from vendor datasheets (Raspberry Pi 4, Jetson
Nano and Xavier NX, a phone NPU, a laptop GPU, a V100 server; for language models an
Apple M1 Max laptop, an RTX 4090 desktop, a Jetson AGX Orin, a Raspberry Pi 5 and an H100
server), listed by
:func:`preset_names` / :func:`list_presets` (``splitopt devices``), built by
:func:`device_preset` (:func:`preset_devices` for several), and the papers' scenarios
(:data:`SCENARIOS`). ``splitopt.families.topologies`` puts them together into the
topology of a family (``splitopt profile --preset pi4,jetson,v100``). Every rate states
its source next to it; the vendor figures are peak rates and so assumptions (see below).

Both papers count one multiply-accumulate as one OP: Eyeriss' 168 PEs at 200 MHz give
33.6 GMAC/s ("34 GOPs", AUTO-SPLIT Table 1), and SplitNets' 125 GOP/s sensor runs
MobileNet-v2's 301 M OPs in 2.4 ms (Table 4). So ``mac_per_s`` takes the papers' OP/s.
Decimal units throughout (1 MB = 1e6 B, 1 GB/s = 1e9 B/s) except on-chip buffers, which
are binary (192 KB = 196,608 B), as hardware buffers are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from splitopt.core.errors import InvalidOption

KB = 1024
MiB = 1024 * 1024


def eyeriss_edge() -> dict[str, Any]:
    """AUTO-SPLIT Table 1, edge: 192 KB on-chip, 4 GB off-chip, 1 GB/s, 34 GOPs.
    Eyeriss computes in 16-bit fixed point; sub-8-bit widths only shrink storage and
    traffic (AUTO-SPLIT Sec. 5.1)."""
    return {
        "name": "eyeriss",
        "description": "Eyeriss edge accelerator (AUTO-SPLIT Table 1)",
        "mac_per_s": 34e9,
        "offchip_bytes_per_s": 1e9,
        "onchip_bytes": 192 * KB,
        "memory_bytes": 4e9,
        "bit_widths": [2, 4, 6, 8, 16],
    }


def tpu_cloud() -> dict[str, Any]:
    """AUTO-SPLIT Table 1, cloud: 28 MB on-chip, 16 GB off-chip, 13 GB/s, 96 TOPs."""
    return {
        "name": "tpu",
        "description": "TPU cloud accelerator (AUTO-SPLIT Table 1)",
        "mac_per_s": 96e12,
        "offchip_bytes_per_s": 13e9,
        "onchip_bytes": 28 * MiB,
        "memory_bytes": 16e9,
        "bit_widths": [8, 16],
    }


def uplink_3mbps(source: str = "eyeriss", target: str = "tpu") -> dict[str, Any]:
    """AUTO-SPLIT Table 1 uplink rate: 3 Mbps."""
    return {"source": source, "target": target, "bandwidth_bits_per_s": 3e6, "latency_ms": 0.0}


def splitnets_sensor() -> dict[str, Any]:
    """SplitNets Sec. 3.2 / App. G: 16 nm sensor NPU, 125 GOP/s, 2 MB peak memory;
    latency = OPs / Comp (no off-chip traffic modelled); 8-bit weights and activations."""
    return {
        "name": "sensor",
        "description": "SplitNets on-sensor NPU (16 nm)",
        "mac_per_s": 125e9,
        "offchip_bytes_per_s": None,
        "onchip_bytes": 2e6,
        "memory_bytes": 2e6,
        "bit_widths": [8],
    }


def splitnets_aggregator() -> dict[str, Any]:
    """SplitNets: 7 nm aggregator NPU, 1.25 TOP/s, sufficient memory."""
    return {
        "name": "aggregator",
        "description": "SplitNets aggregator NPU (7 nm)",
        "mac_per_s": 1.25e12,
        "offchip_bytes_per_s": None,
        "onchip_bytes": 1e9,
        "memory_bytes": 1e12,
        "bit_widths": [8],
    }


def splitnets_bus_share(share: float = 0.25, source: str = "sensor", target: str = "aggregator") -> dict[str, Any]:
    """A share of SplitNets' shared 1.2 Gb/s bus; Table 4 gives each of four sensors 25 %
    (37.5 MB/s), Table 6 each of twelve 1/12 (12.5 MB/s)."""
    return {"source": source, "target": target, "bandwidth_bits_per_s": 1.2e9 * share, "latency_ms": 0.0}


# ----- device presets: vendor peak figures ----------------------------------------------
#
# The devices below are not from the papers. Their rates are **vendor datasheet peak
# numbers**, converted to this package's units, and every one is an assumption: batch-1
# DNN inference typically reaches 10-50 % of a peak rate (launch overheads, memory
# stalls, layers too small to fill the machine), and the analytical model
# (``formulations/device_model.md``) charges compute and off-chip traffic at these rates.
# The JMSNAS instances (``instances/make_mesh_instances.py``) use *effective* rates for
# the same devices instead (Pi 4 4e9, laptop GPU 2.5e11, Jetson AGX Xavier 1.25e11, V100
# server 4e11 MAC/s). Change a rate in an instance with ``--set devices[NAME].mac_per_s=...``.
#
# Conversions: ``mac_per_s`` counts multiply-accumulates. Vendors count FLOP/s and TOPS
# with an FMA (one MAC) as **two** operations, so MAC/s = FLOP/s / 2 = OP/s / 2. (The
# papers' presets above take their OP/s figures as MAC/s, as the papers do.) The rate is
# the one of the device's 16-bit path where it has one (the instances' reference
# precision ``cloud_bits`` is 16; the model's MAC units run at one rate at every
# bit-width), else its FP32 path. ``offchip_bytes_per_s``: the theoretical DRAM bandwidth
# (bus width x transfer rate). ``onchip_bytes``: the last-level cache or on-chip SRAM the
# accelerator can tile in. ``memory_bytes``: the DRAM of the smallest common variant
# (shared with the OS on SoCs; lower it with ``--set`` for a realistic model budget).


def raspberry_pi4(name: str = "pi4") -> dict[str, Any]:
    """Raspberry Pi 4 Model B (BCM2711: 4x Cortex-A72 at 1.5 GHz, 1 MiB shared L2,
    LPDDR4-3200 on a 32-bit bus, Raspberry Pi product brief).

    * mac_per_s 24e9: 4 cores x 1.5 GHz x 4 FP32 lanes, one 128-bit NEON FMA per cycle per
      core (our reading of the Cortex-A72's two 64-bit FP/ASIMD pipes; 48 GFLOP/s). FP32
      because the A72 (ARMv8.0) has no FP16 arithmetic and no int8 dot product. Peak; an
      assumption.
    * offchip_bytes_per_s 12.8e9: 3200 MT/s x 4 bytes (theoretical).
    * onchip_bytes 1 MiB (the L2); memory_bytes 4 GB (the 4 GB board; 1, 2 and 8 GB exist).
    """
    return {
        "name": name,
        "description": "Raspberry Pi 4 (4x Cortex-A72 1.5 GHz NEON FP32 peak 24 GMAC/s, LPDDR4-3200 32-bit "
                       "12.8 GB/s); vendor peak figures, an assumption",
        "mac_per_s": 24e9,
        "offchip_bytes_per_s": 12.8e9,
        "onchip_bytes": 1 * MiB,
        "memory_bytes": 4e9,
        "bit_widths": [8, 16, 32],
    }


def jetson_nano(name: str = "jetson") -> dict[str, Any]:
    """NVIDIA Jetson Nano module (128-core Maxwell GPU at 921 MHz, 4 GB 64-bit LPDDR4,
    NVIDIA Jetson Nano datasheet: "472 GFLOPS" FP16, 25.6 GB/s).

    * mac_per_s 235.8e9: 472 GFLOP/s FP16 / 2 (128 cores x 921 MHz x FP16x2 x FMA). Peak;
      an assumption.
    * offchip_bytes_per_s 25.6e9 (datasheet); onchip_bytes 256 KiB (the GPU's L2);
      memory_bytes 4 GB (shared with the CPU and OS).
    """
    return {
        "name": name,
        "description": "NVIDIA Jetson Nano (Maxwell GPU 472 GFLOP/s FP16 = 235.8 GMAC/s, 25.6 GB/s LPDDR4); vendor "
                       "peak figures, an assumption",
        "mac_per_s": 235.8e9,
        "offchip_bytes_per_s": 25.6e9,
        "onchip_bytes": 256 * KB,
        "memory_bytes": 4e9,
        "bit_widths": [8, 16, 32],
    }


def jetson_xavier_nx(name: str = "xavier_nx") -> dict[str, Any]:
    """NVIDIA Jetson Xavier NX module (384-core Volta GPU with 48 tensor cores at up to
    1100 MHz, 8 GB 128-bit LPDDR4x at 1600 MHz, NVIDIA Jetson Xavier NX datasheet
    DA-09366-001: "up to 21 TOPS (INT8)", GPU and two NVDLA engines together).

    * mac_per_s 3.38e12: the GPU's tensor cores at FP16, 48 x 64 FMA per clock x 1.1 GHz
      (6.8 TFLOP/s). The 21 INT8 TOPS (10.5 T MAC/s) need the DLAs and INT8 as well. Peak;
      an assumption.
    * offchip_bytes_per_s 51.2e9: 16 bytes x 3200 MT/s (theoretical).
    * onchip_bytes 512 KiB (the GPU's L2); memory_bytes 8 GB (shared with the CPU and OS).
    """
    return {
        "name": name,
        "description": "NVIDIA Jetson Xavier NX (Volta tensor cores FP16 6.8 TFLOP/s = 3.38 TMAC/s; 21 INT8 TOPS "
                       "with the DLAs; 51.2 GB/s LPDDR4x); vendor peak figures, an assumption",
        "mac_per_s": 3.38e12,
        "offchip_bytes_per_s": 51.2e9,
        "onchip_bytes": 512 * KB,
        "memory_bytes": 8e9,
        "bit_widths": [8, 16, 32],
    }


def phone_npu(name: str = "phone_npu") -> dict[str, Any]:
    """A flagship phone's NPU: Apple A15 Bionic's 16-core Neural Engine (Apple, iPhone 13
    announcement: "15.8 trillion operations per second"), with the phone's 4 GB LPDDR4X.

    * mac_per_s 7.9e12: 15.8 TOPS / 2. Apple does not state the precision; the Neural
      Engine is commonly reported to compute in FP16 and INT8 at this rate. Peak; an
      assumption.
    * offchip_bytes_per_s 34.1e9: a 64-bit LPDDR4X-4266 interface (theoretical; not
      published by Apple, an assumption).
    * onchip_bytes 32 MiB (the A15's system-level cache, Apple); memory_bytes 4 GB
      (iPhone 13; the model gets a fraction of it: lower it with ``--set``).
    """
    return {
        "name": name,
        "description": "Phone NPU: Apple A15 Neural Engine (15.8 TOPS = 7.9 TMAC/s, precision unstated), 64-bit "
                       "LPDDR4X-4266 34.1 GB/s assumed; vendor peak figures, an assumption",
        "mac_per_s": 7.9e12,
        "offchip_bytes_per_s": 34.1e9,
        "onchip_bytes": 32 * MiB,
        "memory_bytes": 4e9,
        "bit_widths": [8, 16],
    }


def laptop_gpu(name: str = "laptop_gpu") -> dict[str, Any]:
    """A laptop GPU: NVIDIA GeForce RTX 3050 Laptop (GA107, 2048 CUDA cores, 4 GB GDDR6 on
    a 128-bit bus; the GPU of JMSNAS' XPS15 small base station). Clocks depend on the
    laptop's power limit (about 1.2-1.7 GHz boost).

    * mac_per_s 3.07e12: 2048 cores x 1.5 GHz, one FP32 FMA per core per clock (6.1
      TFLOP/s); Ampere GA10x runs non-tensor FP16 at the FP32 rate. The tensor cores'
      FP16 rate is higher and not used here. Peak at an assumed 1.5 GHz; an assumption.
    * offchip_bytes_per_s 192e9: 16 bytes x 12 Gbit/s GDDR6 (theoretical).
    * onchip_bytes 2 MiB (the L2); memory_bytes 4 GB (the GPU's own memory).
    """
    return {
        "name": name,
        "description": "Laptop GPU: RTX 3050 Laptop (2048 CUDA cores x 1.5 GHz FP32 = 3.07 TMAC/s, GDDR6 128-bit "
                       "192 GB/s); vendor peak figures, an assumption",
        "mac_per_s": 3.07e12,
        "offchip_bytes_per_s": 192e9,
        "onchip_bytes": 2 * MiB,
        "memory_bytes": 4e9,
        "bit_widths": [8, 16, 32],
    }


def v100_server(name: str = "v100") -> dict[str, Any]:
    """A V100-class server GPU: NVIDIA Tesla V100 SXM2 (NVIDIA V100 datasheet: 125 TFLOP/s
    tensor (mixed precision), 15.7 TFLOP/s FP32, 31.4 TFLOP/s FP16, 900 GB/s HBM2, 16 or
    32 GB; 6 MiB L2, Volta whitepaper).

    * mac_per_s 62.5e12: 125 TFLOP/s tensor / 2 (FP16 multiply, FP32 accumulate). At FP32
      on the CUDA cores it is 7.85e12 (15.7 TFLOP/s / 2): set that for an FP32 model.
      Peak; an assumption, and far from what one batch-1 inference reaches.
    * offchip_bytes_per_s 900e9 (HBM2, datasheet); onchip_bytes 6 MiB (the L2);
      memory_bytes 16 GB.
    """
    return {
        "name": name,
        "description": "Tesla V100 SXM2 (tensor 125 TFLOP/s = 62.5 TMAC/s FP16; FP32 15.7 TFLOP/s; HBM2 900 GB/s); "
                       "vendor peak figures, an assumption",
        "mac_per_s": 62.5e12,
        "offchip_bytes_per_s": 900e9,
        "onchip_bytes": 6 * MiB,
        "memory_bytes": 16e9,
        "bit_widths": [8, 16, 32],
    }


# ----- device presets for language models: memory bandwidth first ----------------------
#
# Decoding a language model reads every weight once per token, so these presets state the
# memory bandwidth carefully (the vendor's theoretical figure) and the memory a model may
# use (the variant named). ``mac_per_s`` is the 16-bit rate (tensor/matrix units where the
# device has them, dense, FP32 accumulate where stated); ``bit_widths`` are the weight
# precisions common runtimes load on it (4-bit and 8-bit quantized, 16-bit). Every figure
# is a peak and an assumption, as above.


def macbook_m1_max(name: str = "macbook_m1max") -> dict[str, Any]:
    """An Apple M-series laptop: MacBook Pro with M1 Max (32-core GPU, 32 GB unified
    memory; Apple's M1 Pro and M1 Max announcement, October 2021: "400GB/s" memory
    bandwidth, "10.4 teraflops" GPU).

    * mac_per_s 5.2e12: 10.4 TFLOP/s / 2 (Apple's figure, FP32; the GPU runs FP16 at about
      the same rate). Peak; an assumption.
    * offchip_bytes_per_s 400e9 (Apple, unified LPDDR5); onchip_bytes 48 MiB (the system
      level cache, commonly reported; an assumption); memory_bytes 32 GB (shared with the OS:
      lower it with ``--set`` for a realistic model budget).
    """
    return {
        "name": name,
        "description": "Apple MacBook Pro M1 Max (32-core GPU 10.4 TFLOP/s = 5.2 TMAC/s, 400 GB/s unified memory, "
                       "32 GB); vendor peak figures, an assumption",
        "mac_per_s": 5.2e12,
        "offchip_bytes_per_s": 400e9,
        "onchip_bytes": 48 * MiB,
        "memory_bytes": 32e9,
        "bit_widths": [4, 8, 16],
    }


def rtx4090_desktop(name: str = "rtx4090") -> dict[str, Any]:
    """An RTX-class desktop GPU: NVIDIA GeForce RTX 4090 (24 GB GDDR6X on a 384-bit bus at
    21 Gbit/s; NVIDIA Ada Lovelace architecture whitepaper: 1008 GB/s, peak FP16 tensor
    165.2 TFLOP/s dense with FP32 accumulate, 72 MB L2).

    * mac_per_s 82.6e12: 165.2 TFLOP/s / 2. Peak; an assumption.
    * offchip_bytes_per_s 1008e9 (whitepaper); onchip_bytes 72 MiB (the L2); memory_bytes
      24 GB (the GPU's own memory; the desktop's host RAM, reached over PCIe at a far lower
      rate, is a second tier this preset does not describe).
    """
    return {
        "name": name,
        "description": "Desktop GPU: GeForce RTX 4090 (FP16 tensor 165.2 TFLOP/s dense = 82.6 TMAC/s, GDDR6X "
                       "1008 GB/s, 24 GB); vendor peak figures, an assumption",
        "mac_per_s": 82.6e12,
        "offchip_bytes_per_s": 1008e9,
        "onchip_bytes": 72 * MiB,
        "memory_bytes": 24e9,
        "bit_widths": [4, 8, 16],
    }


def jetson_agx_orin(name: str = "orin") -> dict[str, Any]:
    """NVIDIA Jetson AGX Orin 64GB module (2048-core Ampere GPU with 64 tensor cores, 64 GB
    256-bit LPDDR5; NVIDIA Jetson AGX Orin datasheet: 204.8 GB/s, 275 INT8 TOPS sparse of
    which the GPU 170).

    * mac_per_s 21.25e12: the GPU's 170 sparse INT8 TOPS halved for dense (85) and again for
      FP16 (42.5 TFLOP/s), / 2. Our derivation from the datasheet; peak; an assumption.
    * offchip_bytes_per_s 204.8e9 (datasheet); onchip_bytes 4 MiB (the GPU's L2, commonly
      reported; an assumption); memory_bytes 64 GB (shared with the CPU and OS).
    """
    return {
        "name": name,
        "description": "NVIDIA Jetson AGX Orin 64GB (GPU FP16 dense ~42.5 TFLOP/s = 21.25 TMAC/s derived from 170 "
                       "sparse INT8 TOPS, LPDDR5 204.8 GB/s, 64 GB); vendor peak figures, an assumption",
        "mac_per_s": 21.25e12,
        "offchip_bytes_per_s": 204.8e9,
        "onchip_bytes": 4 * MiB,
        "memory_bytes": 64e9,
        "bit_widths": [4, 8, 16],
    }


def raspberry_pi5(name: str = "pi5") -> dict[str, Any]:
    """Raspberry Pi 5 8GB (BCM2712: 4x Cortex-A76 at 2.4 GHz, LPDDR4X-4267 on a 32-bit bus,
    Raspberry Pi product brief).

    * mac_per_s 153.6e9: 4 cores x 2.4 GHz x 16 FP16 lanes (two 128-bit NEON FMA pipes per
      core, our reading of the Cortex-A76; ARMv8.2 FP16 arithmetic). Peak; an assumption.
    * offchip_bytes_per_s 17.1e9: 4267 MT/s x 4 bytes (theoretical).
    * onchip_bytes 2 MiB (the L3); memory_bytes 8 GB (the 8 GB board, shared with the OS).
    """
    return {
        "name": name,
        "description": "Raspberry Pi 5 8GB (4x Cortex-A76 2.4 GHz NEON FP16 peak 153.6 GMAC/s, LPDDR4X-4267 32-bit "
                       "17.1 GB/s); vendor peak figures, an assumption",
        "mac_per_s": 153.6e9,
        "offchip_bytes_per_s": 17.1e9,
        "onchip_bytes": 2 * MiB,
        "memory_bytes": 8e9,
        "bit_widths": [4, 8, 16],
    }


def h100_server(name: str = "h100") -> dict[str, Any]:
    """A datacenter GPU: NVIDIA H100 SXM5 80GB (NVIDIA H100 datasheet: 3.35 TB/s HBM3, FP16
    tensor 1,979 TFLOP/s with sparsity, 989.5 dense; 50 MB L2).

    * mac_per_s 494.7e12: 989.5 TFLOP/s dense / 2 (rounded). Peak; an assumption, and far
      from what batch-1 decoding reaches (it is memory-bound).
    * offchip_bytes_per_s 3.35e12 (datasheet); onchip_bytes 50 MiB (the L2); memory_bytes
      80 GB.
    """
    return {
        "name": name,
        "description": "NVIDIA H100 SXM5 80GB (FP16 tensor 989.5 TFLOP/s dense = 494.7 TMAC/s, HBM3 3.35 TB/s); "
                       "vendor peak figures, an assumption",
        "mac_per_s": 494.7e12,
        "offchip_bytes_per_s": 3.35e12,
        "onchip_bytes": 50 * MiB,
        "memory_bytes": 80e9,
        "bit_widths": [4, 8, 16],
    }


#: preset name -> (the function building its device, one line on where it comes from);
#: the name is also the device's default name in an instance
DEVICE_PRESETS: dict[str, tuple[Callable[..., dict[str, Any]], str]] = {
    "pi4": (raspberry_pi4, "Raspberry Pi 4, vendor peak (assumption)"),
    "jetson": (jetson_nano, "NVIDIA Jetson Nano, vendor peak (assumption)"),
    "xavier_nx": (jetson_xavier_nx, "NVIDIA Jetson Xavier NX GPU, vendor peak (assumption)"),
    "phone_npu": (phone_npu, "Apple A15 Neural Engine, vendor peak (assumption)"),
    "laptop_gpu": (laptop_gpu, "RTX 3050 Laptop GPU, vendor peak (assumption)"),
    "v100": (v100_server, "Tesla V100 SXM2 tensor cores, vendor peak (assumption)"),
    "macbook_m1max": (macbook_m1_max, "Apple MacBook Pro M1 Max, vendor peak (assumption)"),
    "rtx4090": (rtx4090_desktop, "GeForce RTX 4090 desktop GPU, vendor peak (assumption)"),
    "orin": (jetson_agx_orin, "NVIDIA Jetson AGX Orin 64GB GPU, vendor peak (assumption)"),
    "pi5": (raspberry_pi5, "Raspberry Pi 5 8GB, vendor peak (assumption)"),
    "h100": (h100_server, "NVIDIA H100 SXM5 80GB tensor cores, vendor peak (assumption)"),
    "eyeriss": (eyeriss_edge, "AUTO-SPLIT Table 1 edge"),
    "tpu": (tpu_cloud, "AUTO-SPLIT Table 1 cloud"),
    "sensor": (splitnets_sensor, "SplitNets Sec. 3.2 / App. G sensor NPU"),
    "aggregator": (splitnets_aggregator, "SplitNets aggregator NPU"),
}


def preset_names() -> list[str]:
    """The device presets' names, in the order :data:`DEVICE_PRESETS` lists them."""
    return list(DEVICE_PRESETS)


def device_preset(preset: str, name: str | None = None) -> dict[str, Any]:
    """The device ``preset`` (a name of :func:`preset_names`) in the instance JSON's device
    form, named ``name`` (default: the preset's name). InvalidOption (one line listing
    the presets) for an unknown name."""
    entry = DEVICE_PRESETS.get(preset)
    if entry is None:
        raise InvalidOption(f"device preset '{preset}': unknown (presets: {', '.join(DEVICE_PRESETS)})")
    device = entry[0]()
    device["name"] = name if name is not None else preset
    return device


def list_presets() -> list[dict[str, Any]]:
    """Every device preset: ``{"preset", "source", "device"}`` (the device in the
    instance JSON's form), in :func:`preset_names` order."""
    return [{"preset": key, "source": source, "device": device_preset(key)}
            for key, (_, source) in DEVICE_PRESETS.items()]


def link(source: str, target: str, bandwidth_bits_per_s: float, latency_ms: float = 0.0) -> dict[str, Any]:
    """A link in the instance JSON's form."""
    return {"source": source, "target": target, "bandwidth_bits_per_s": float(bandwidth_bits_per_s),
            "latency_ms": float(latency_ms)}


def preset_devices(presets: Sequence[str]) -> list[dict[str, Any]]:
    """The devices of ``presets`` in order, e.g. ``["pi4", "jetson", "v100"]``, each named
    by its preset; a preset named twice gets the suffixes ``_2``, ``_3``, ... after its
    first use. InvalidOption (one line) for an unknown preset."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for p in presets:
        seen[p] = seen.get(p, 0) + 1
        names.append(p if seen[p] == 1 else f"{p}_{seen[p]}")
    return [device_preset(p, n) for p, n in zip(presets, names)]


@dataclass(frozen=True)
class Scenario:
    """A paper's hardware scenario (``splitopt profile --preset NAME``): its devices and
    links, the topology they form (``splitopt.families.topologies``), whether its edge
    runs the quantized plans the error tables allow, the bit-widths it offers (None: those
    of the error tables) and the settings it fixes beyond the topology's."""

    devices: tuple[Callable[[], dict[str, Any]], ...]
    links: tuple[Callable[[], dict[str, Any]], ...]
    topology: str
    quantized: bool
    bit_widths: tuple[int, ...] | None
    settings: Mapping[str, Any]


#: the papers' scenarios ``--preset`` names
SCENARIOS: dict[str, Scenario] = {
    # AUTO-SPLIT Table 1: Eyeriss edge, TPU cloud, 3 Mbit/s, 4 MB of edge memory
    "eyeriss": Scenario((eyeriss_edge, tpu_cloud), (uplink_3mbps,), "edge-cloud", True, None,
                        {"cloud_bits": 16, "edge_memory_bytes": 4e6}),
    # SplitNets Table 4: sensor and aggregator NPUs on 25 % of a 1.2 Gbit/s bus, 8-bit, 2 MB
    "splitnets": Scenario((splitnets_sensor, splitnets_aggregator), (splitnets_bus_share,), "edge-cloud", False,
                          (8,), {"cloud_bits": 8, "edge_memory_bytes": 2e6}),
}
