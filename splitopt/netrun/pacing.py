"""The link shaper of ``splitopt run-tcp``: a sender-side pacer on the TCP socket.

``tc netem`` is not used (it needs the ``sch_netem`` qdisc and root); the link is
shaped in the application, on the sending side, as the evaluators model one transfer
(``latency_ms + 1000 * 8 * bytes / bandwidth``):

* a transfer (one sample's frames over one link) starts at ``t0`` on the monotonic clock
  (``time.monotonic_ns``);
* its bytes (frame headers included) are cut into chunks of ``chunk_bytes`` (default
  1448, one TCP segment's payload on an Ethernet MTU); the chunk that ends at byte ``B``
  of the transfer is written at ``t0 + latency_ms + 8 * B / bandwidth``, i.e. when the
  last of its bits would have arrived over the modelled link (store and forward per
  chunk). The pacer sleeps until 0.2 ms before a deadline and polls the monotonic clock
  for the rest. Deadlines are absolute: a late wake-up is not carried into the next
  chunk, so the transfer ends ``latency + 8 * bytes / bandwidth`` after ``t0`` plus at
  most one late wake-up (on a loaded host, when the scheduler runs another process first,
  milliseconds) and the loopback's own time;
* a transfer that carries no tensor (a plan with nothing to send on the link) is not
  delayed (the evaluators charge nothing then).

What it models: the fixed latency once per transfer and the serialisation at the link
rate. What it does not: queueing behind other traffic, loss and retransmission, TCP
slow start and window limits of a real path, jitter, and the link's direction (ACK and
PLAN frames going upstream or downstream are not paced: they are control messages, a
few bytes). TCP over loopback adds its own small time (tens of microseconds per
transfer), which is measured as part of the link.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

#: bytes written at a time: one TCP segment's payload on a 1500-byte MTU
DEFAULT_CHUNK_BYTES = 1448
#: the last stretch before a deadline that the pacer polls the clock instead of sleeping, ns
SPIN_NS = 200_000


@dataclass(frozen=True)
class Transfer:
    """One paced transfer: ``start_ns`` and ``end_ns`` on the monotonic clock (ns),
    ``bytes`` written (frame headers included)."""

    start_ns: int
    end_ns: int
    bytes: int

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


class Pacer:
    """Paces writes to a socket at ``bandwidth_bits_per_s`` after ``latency_ms`` (see the
    module docstring). ``bandwidth_bits_per_s`` None or inf: no rate limit."""

    def __init__(self, bandwidth_bits_per_s: float | None, latency_ms: float = 0.0,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, clock: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes {chunk_bytes}: must be at least 1")
        if latency_ms < 0 or not math.isfinite(latency_ms):
            raise ValueError(f"latency_ms {latency_ms}: must be finite and >= 0")
        self.latency_ms = float(latency_ms)
        self.chunk_bytes = int(chunk_bytes)
        self.clock, self.sleep = clock, sleep
        self.bandwidth_bits_per_s: float | None = None
        self.set_bandwidth(bandwidth_bits_per_s)

    def set_bandwidth(self, bandwidth_bits_per_s: float | None) -> None:
        """Change the link rate (bits/s) for the next transfers."""
        if bandwidth_bits_per_s is not None and not bandwidth_bits_per_s > 0:
            raise ValueError(f"bandwidth {bandwidth_bits_per_s} bits/s: must be > 0")
        self.bandwidth_bits_per_s = bandwidth_bits_per_s

    def model_ms(self, nbytes: float) -> float:
        """The modelled time of one transfer of ``nbytes`` (ms); 0 for nothing."""
        if nbytes <= 0:
            return 0.0
        rate = self.bandwidth_bits_per_s
        return self.latency_ms + (0.0 if rate is None or math.isinf(rate) else 1000.0 * 8.0 * nbytes / rate)

    def _wait_until(self, deadline_ns: int) -> None:
        """Sleep until ``SPIN_NS`` before ``deadline_ns``, then poll the clock (a sleep's
        wake-up comes tens of microseconds late at best, milliseconds on a loaded host)."""
        while True:
            left = deadline_ns - self.clock()
            if left <= 0:
                return
            if left > SPIN_NS:
                self.sleep((left - SPIN_NS) / 1e9)

    def send(self, sendall: Callable[[bytes | memoryview], None], parts: Sequence[bytes], shaped: bool = True,
             start_ns: int | None = None) -> Transfer:
        """Write ``parts`` (one transfer) through ``sendall`` at the link's pace;
        ``shaped`` False: at once (a transfer with no tensor). ``start_ns``: the transfer's
        start on the monotonic clock (default: now)."""
        data = b"".join(parts)
        t0 = self.clock() if start_ns is None else start_ns
        if not shaped:
            sendall(data)
            return Transfer(t0, self.clock(), len(data))
        rate = self.bandwidth_bits_per_s
        base = t0 + int(self.latency_ms * 1e6)
        view = memoryview(data)
        if rate is None or math.isinf(rate):
            self._wait_until(base)
            sendall(data)
            return Transfer(t0, self.clock(), len(data))
        ns_per_byte = 8e9 / rate
        for start in range(0, len(data), self.chunk_bytes):
            end = min(len(data), start + self.chunk_bytes)
            self._wait_until(base + int(end * ns_per_byte))
            sendall(view[start:end])
        return Transfer(t0, self.clock(), len(data))
