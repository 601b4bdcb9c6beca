"""Measure the link from one agent to another, both ways, with a bounded probe.

The probing agent opens an authenticated peer channel to the other agent (the same
program; it answers PING, PROBE_SINK and PROBE_SOURCE) and measures on its own clock
only, so the two hosts need no shared clock:

* round trip: :data:`PINGS` PING/PONG exchanges, the median (ms); each way's latency is
  taken as half of it (a symmetric link: one clock cannot tell the two halves apart);
* bandwidth to the peer: a PROBE_SINK message of ``n`` bytes, answered by PROBE_ACK once
  its last byte is read; ``n * 8 / (t - rtt)`` bits/s, ``t`` the time from the send's
  start to the answer (the answer's and the first byte's travel are the round trip);
* bandwidth from the peer: a PROBE_SOURCE request for ``n`` bytes; ``n * 8 / (t - rtt)``
  with ``t`` from the request's send to the last byte of the PROBE_DATA answer.

Each direction starts at :data:`START_BYTES` and doubles ``n`` until one transfer takes
at least :data:`TARGET_S` (so that the round trip and TCP's start are a small part of
it), ``n`` would exceed ``max_bytes``, or the direction has used ``max_seconds``; the
last transfer gives the rate. ``max_bytes`` is capped by :data:`MAX_PROBE_BYTES` and by
both agents' max frame size; the peer caps a PROBE_SOURCE request the same way.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from splitopt.agents.channel import Channel
from splitopt.agents.protocol import Message, ProtocolError, int_field

#: round trips measured
PINGS = 5
#: bytes of the first transfer of each direction
START_BYTES = 64 * 1024
#: a transfer this long (s) is long enough to give the rate
TARGET_S = 0.25
#: the most bytes one probe transfer may carry
MAX_PROBE_BYTES = 64 * 1024 * 1024
#: default caps of one direction
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_SECONDS = 3.0
#: room for the message header within a frame
HEADER_ROOM = 4096


def round_trip_ms(channel: Channel, pings: int = PINGS) -> float:
    """Median PING/PONG round trip over ``channel``, ms."""
    times = []
    for k in range(pings):
        start, _ = channel.send("PING", {"seq": k})
        pong = channel.read(("PONG",))
        times.append(pong.last_byte_s - start)
    return 1000.0 * statistics.median(times)


def _direction(channel: Channel, outgoing: bool, rtt_s: float, max_bytes: int, max_seconds: float) -> dict[str, Any]:
    n = min(START_BYTES, max_bytes)
    began = time.monotonic()
    capped = False
    while True:
        if outgoing:
            start, _ = channel.send("PROBE_SINK", {}, [bytes(n)])
            done = channel.read(("PROBE_ACK",)).last_byte_s
        else:
            start, _ = channel.send("PROBE_SOURCE", {"bytes": n})
            data = channel.read(("PROBE_DATA",))
            done = data.last_byte_s
            got = sum(len(b) for b in data.blobs)
            if not 0 < got <= n:
                raise ProtocolError(f"PROBE_DATA carries {got} bytes, {n} were asked for")
            capped, n = got < n, got  # the peer sends at most its own cap
        took = done - start
        spent = time.monotonic() - began
        if took >= TARGET_S or 2 * n > max_bytes or spent + 2.5 * took > max_seconds or (not outgoing and capped):
            break
        n *= 2
    net = took - rtt_s if took - rtt_s > 0.1 * took else took
    return {"bits_per_s": 8.0 * n / net, "bytes": n, "transfer_ms": 1000.0 * took,
            "latency_ms": 500.0 * rtt_s, "seconds": round(time.monotonic() - began, 3)}


def probe_link(channel: Channel, max_bytes: int = DEFAULT_MAX_BYTES,
               max_seconds: float = DEFAULT_MAX_SECONDS) -> dict[str, Any]:
    """The link over ``channel`` both ways (module docstring): ``rtt_ms`` and, for
    ``to_peer`` and ``from_peer``, ``bits_per_s``, ``latency_ms`` (half the round trip),
    the ``bytes`` and ``transfer_ms`` of the transfer that gave the rate and the
    ``seconds`` the direction took."""
    max_bytes = max(1, min(int(max_bytes), MAX_PROBE_BYTES, channel.max_frame_bytes - HEADER_ROOM))
    rtt_ms = round_trip_ms(channel)
    return {"rtt_ms": rtt_ms, "method": "PING round trip (median of 5), then doubling transfers timed on the prober's "
                                         "clock less one round trip",
            "to_peer": _direction(channel, True, rtt_ms / 1000.0, max_bytes, max_seconds),
            "from_peer": _direction(channel, False, rtt_ms / 1000.0, max_bytes, max_seconds)}


def answer_probe(channel: Channel, msg: Message) -> None:
    """The peer side: answer one PING, PROBE_SINK or PROBE_SOURCE message."""
    if msg.type == "PING":
        channel.send("PONG", {"seq": msg.get("seq")})
    elif msg.type == "PROBE_SINK":
        channel.send("PROBE_ACK", {"bytes": sum(len(b) for b in msg.blobs)})
    elif msg.type == "PROBE_SOURCE":
        cap = max(1, min(MAX_PROBE_BYTES, channel.max_frame_bytes - HEADER_ROOM))
        n = min(int_field(msg, "bytes", 1, MAX_PROBE_BYTES), cap)
        channel.send("PROBE_DATA", {}, [bytes(n)])
