"""What travels between the stage processes of an llm run (:mod:`splitopt.torch.llm.run`)
and how a link is measured (:mod:`splitopt.torch.llm.profile`): per step one SAMPLE frame
(the step's index, the generation's index, one tensor, the sender's start on the
monotonic clock) and one TENSOR frame (:mod:`splitopt.netrun.frames`): hidden states as
float32, the sampled token as 32-bit codes (:func:`splitopt.netrun.wire.wire_pack`). No
pickle. A transfer's time runs from the sender's start (before packing) to the tensor
unpacked at the receiver (both on CLOCK_MONOTONIC, shared by the processes of one host)."""

from __future__ import annotations

import time
from typing import Any

from splitopt.netrun.frames import SAMPLE, FrameError, Kind, encode, sample_frame
from splitopt.netrun.wire import wire_pack, wire_unpack

#: bits per element on the wire: float32 hidden states, 32-bit token ids
WIRE_BITS = 32


def send_tensor(conn: Any, step: int, generation: int, tensor: Any) -> tuple[int, int]:
    """Send ``tensor`` as step ``step`` of generation ``generation``; ``(start ns, end
    ns)`` on the monotonic clock (start before packing, end after the last write)."""
    start = time.monotonic_ns()
    packed = wire_pack("x", tensor, WIRE_BITS, {})
    conn.sendall(sample_frame(step, generation, 1, start) + encode(Kind.TENSOR, "x", packed.to_bytes()))
    return start, time.monotonic_ns()


def recv_tensor(conn: Any, dtype: Any) -> tuple[int, int, int, Any]:
    """The next step from ``conn``: ``(step, generation, sender's start ns, tensor)``, the
    tensor unpacked as ``dtype``; FrameError (one line) on anything else."""
    from splitopt.torch.packing import PackedTensor

    head = conn.read()
    if head.kind is not Kind.SAMPLE:
        raise FrameError(f"expected a SAMPLE frame, got {head.kind.name}")
    step, generation, count, start = SAMPLE.unpack(head.payload)
    if count != 1:
        raise FrameError(f"SAMPLE frame of step {step} announces {count} tensors, a step sends 1")
    frame = conn.read()
    if frame.kind is not Kind.TENSOR:
        raise FrameError(f"expected a TENSOR frame, got {frame.kind.name}")
    try:
        packed = PackedTensor.from_bytes(frame.payload)
    except ValueError as e:
        raise FrameError(f"TENSOR frame of step {step}: {e}") from None
    if packed.bits != WIRE_BITS:
        raise FrameError(f"TENSOR frame of step {step}: {packed.bits} bits, the run sends {WIRE_BITS}")
    return int(step), int(generation), int(start), wire_unpack(packed, dtype)
