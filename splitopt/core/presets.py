"""Hardware presets from the papers, in the instance's JSON form (units in field names).

Both papers count one multiply-accumulate as one OP: Eyeriss' 168 PEs at 200 MHz give
33.6 GMAC/s ("34 GOPs", AUTO-SPLIT Table 1), and SplitNets' 125 GOP/s sensor runs
MobileNet-v2's 301 M OPs in 2.4 ms (Table 4). So ``mac_per_s`` takes the papers' OP/s.
Decimal units throughout (1 MB = 1e6 B, 1 GB/s = 1e9 B/s) except on-chip buffers, which
are binary (192 KB = 196,608 B), as hardware buffers are.
"""

from __future__ import annotations

from typing import Any

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
