"""What ``splitopt profile`` and ``splitopt run`` take for the separable family, each
option checked when built (one line naming it), without torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from splitopt.core.errors import InvalidOption
from splitopt.core.options import check_count, check_number, check_seed

#: the model ``splitopt profile`` names the Sep-ResNeXt on the digits by
MODEL = "sep_resnext"
#: the devices of a profiled instance: this host (measured) or devices of a MAC rate
DEVICE_PROFILES = ("host", "analytic")
#: how an accuracy record summarises its class's policies
STATISTICS = ("min", "mean")
#: marks the options that name a file the profile writes (checked before any work)
OUTPUT = {"output": True}


def parse_blocks(text: str) -> tuple[int, int, int]:
    """``"2,2,2"`` -> ``(2, 2, 2)``: residual blocks in each of the three stages, each in
    [1, 16]; InvalidOption otherwise."""
    try:
        out = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InvalidOption(f"--blocks-per-stage: must be integers separated by commas, e.g. 2,2,2, got {text!r}") \
            from None
    if len(out) != 3 or any(not 1 <= v <= 16 for v in out):
        raise InvalidOption(f"--blocks-per-stage: three integers in [1, 16] (one per stage), got {text!r}")
    return out  # type: ignore[return-value]


@dataclass(frozen=True)
class SeparableProfileOptions:
    """``splitopt profile sep_resnext``: where to write the trained weights and the
    accuracy records (None: not written), a checkpoint to take the networks from instead
    of training, the training epochs, G devices, blocks per transmission step, blocks per
    stage, the devices (``host`` measured, ``analytic`` of ``mac_per_s``), the links' rate
    (Mbit/s; None: measured, or 300 for analytic devices) and fixed latency, the policies
    measured per accuracy record and how a record summarises them, torch's threads, the
    seed and the instance's name."""

    checkpoint: Path | None = field(default=None, metadata=OUTPUT)
    load: Path | None = None
    records: Path | None = field(default=None, metadata=OUTPUT)
    epochs: int = 25
    groups: int = 4
    alpha: int = 2
    blocks_per_stage: str = "2,2,2"
    devices: str = "host"
    mac_per_s: float = 0.85e8
    bandwidth_mbps: float | None = None
    link_latency_ms: float = 0.0
    samples: int = 8
    statistic: str = "min"
    torch_threads: int = 1
    seed: int = 0
    name: str | None = None

    def __post_init__(self) -> None:
        if self.load is not None and not Path(self.load).is_file():
            raise InvalidOption(f"--load {self.load}: no such file")
        check_count(self.epochs, "--epochs", high=10_000)
        check_count(self.groups, "--groups", high=8)
        check_count(self.alpha, "--alpha", high=48)
        check_count(self.samples, "--samples", high=10_000)
        check_count(self.torch_threads, "--torch-threads", high=256)
        check_number(self.mac_per_s, "--mac-per-s", 1.0, 1e21)
        check_number(self.bandwidth_mbps, "--bandwidth-mbps", 0.0, 1e15, low_open=True)
        check_number(self.link_latency_ms, "--link-latency-ms", 0.0, 1e6)
        if self.link_latency_ms and self.bandwidth_mbps is None:  # the measured links carry their own latency
            raise InvalidOption(f"--link-latency-ms {self.link_latency_ms:g}: applies with --bandwidth-mbps (without "
                                "it the links are measured, latency included)")
        check_seed(self.seed)
        parse_blocks(self.blocks_per_stage)
        if self.devices not in DEVICE_PROFILES:
            raise InvalidOption(f"--devices: must be one of {', '.join(DEVICE_PROFILES)}, got {self.devices!r}")
        if self.statistic not in STATISTICS:
            raise InvalidOption(f"--statistic: must be one of {', '.join(STATISTICS)}, got {self.statistic!r}")


@dataclass(frozen=True)
class SeparableRunOptions:
    """``splitopt run`` of a separable plan: the trained weights (None: the instance's
    model with seeded random weights), timed inferences, images per inference, and the
    seconds before the worker processes are stopped."""

    checkpoint: Path | None = None
    repeats: int = 10
    batch: int = 1
    timeout: float = 120.0

    def __post_init__(self) -> None:
        check_count(self.repeats, "--repeats", high=10_000)
        check_count(self.batch, "--batch", high=360)
        check_number(self.timeout, "--timeout", 1.0, 86_400.0)
        if self.checkpoint is not None and not Path(self.checkpoint).is_file():
            raise InvalidOption(f"--checkpoint {self.checkpoint}: no such file")
