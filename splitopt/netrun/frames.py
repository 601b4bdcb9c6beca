"""The wire format of ``splitopt run-tcp``: frames on a TCP stream, read without pickle.

A frame (all integers little-endian)::

    4 bytes   magic b"SPNR"
    uint8     version (1)
    uint8     kind (:class:`Kind`)
    uint16    name length N (bytes, at most MAX_NAME_BYTES)
    N bytes   name, UTF-8 (a tensor name for TENSOR frames, empty otherwise)
    uint64    payload length P (bytes, at most the reader's max frame size)
    P bytes   payload

Header: ``16 + N`` bytes (:func:`header_bytes`). Payloads by kind:

* ``SAMPLE`` (starts one transfer of one sample over one link): ``uint64`` sample index,
  ``uint32`` plan index, ``uint32`` number of TENSOR frames that follow, ``int64`` the
  sender's monotonic clock (``time.monotonic_ns``, CLOCK_MONOTONIC, shared by the
  processes of one host) when the transfer started, ns;
* ``TENSOR``: one sent tensor in the packing format,
  :meth:`splitopt.torch.packing.PackedTensor.to_bytes` (its own small header: bits,
  ndim, shape, scale, zero point; then the ``ceil(elements * bits / 8)``-byte payload);
* ``ACK`` (receiver -> sender, on the same connection, once the sample is done
  downstream): ``uint64`` sample index;
* ``PLAN`` (switch plans before the next sample; forwarded down the chain): ``uint32``
  plan index, ``float64`` the new bandwidth of the table's link, bits/s;
* ``CLOSE``: empty; the sender has nothing more to send;
* ``AGENT``: one message of the device agent (:mod:`splitopt.agents.protocol`: a
  versioned JSON header and binary blobs); ``splitopt run-tcp`` never sends it.

A reader (:func:`read_frame`) refuses, with :class:`FrameError` naming the field and
value: a wrong magic, version or kind, a name that is too long or not UTF-8, a payload
length over its max frame size (checked before anything is allocated), a payload of the
wrong size for its kind, and a stream that ends inside a frame (truncated); a peer that
sends nothing for the socket's timeout is :class:`FrameTimeout`. The end of the stream
between frames is :class:`PeerClosed`.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from enum import IntEnum

from splitopt.core.errors import SplitoptError

MAGIC = b"SPNR"
VERSION = 1
#: magic, version, kind, name length
HEAD = struct.Struct("<4sBBH")
#: payload length (bytes)
LENGTH = struct.Struct("<Q")
#: the longest name a frame may carry (bytes of UTF-8)
MAX_NAME_BYTES = 1024
#: default largest payload a reader accepts (bytes): 256 MiB
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024

SAMPLE = struct.Struct("<QIIq")  # sample index, plan index, tensor frames, transfer start (ns)
ACK = struct.Struct("<Q")  # sample index
PLAN = struct.Struct("<Id")  # plan index, bandwidth (bits/s)


class Kind(IntEnum):
    """What a frame carries (see the module docstring for each payload)."""

    SAMPLE = 1  #: one sample's transfer starts: index, plan, tensor count, start time
    TENSOR = 2  #: one packed tensor (the packing format)
    ACK = 3  #: the sample is done downstream
    PLAN = 4  #: switch to another plan of the breakpoint table
    CLOSE = 5  #: the end of the session
    AGENT = 6  #: a device agent's message (:mod:`splitopt.agents.protocol`)


#: exact payload size (bytes) of the fixed-size kinds
FIXED_PAYLOAD = {Kind.SAMPLE: SAMPLE.size, Kind.ACK: ACK.size, Kind.PLAN: PLAN.size, Kind.CLOSE: 0}


class FrameError(SplitoptError):
    """A malformed, oversized or truncated frame (one line naming the field and value)."""


class FrameTimeout(FrameError):
    """The peer sent nothing for the socket's timeout."""


class PeerClosed(FrameError):
    """The peer closed the stream between two frames."""


@dataclass(frozen=True)
class Frame:
    """One frame read from or written to the stream."""

    kind: Kind
    name: str
    payload: bytes

    @property
    def header_bytes(self) -> int:
        """Bytes of the frame header (magic .. payload length), name included."""
        return header_bytes(self.name)

    @property
    def wire_bytes(self) -> int:
        """Header + payload, bytes."""
        return self.header_bytes + len(self.payload)


def header_bytes(name: str = "") -> int:
    """Frame header size in bytes for ``name``: 16 + its UTF-8 length."""
    return HEAD.size + len(name.encode("utf-8")) + LENGTH.size


def encode(kind: Kind, name: str = "", payload: bytes = b"") -> bytes:
    """The wire form of one frame."""
    raw = name.encode("utf-8")
    if len(raw) > MAX_NAME_BYTES:
        raise FrameError(f"frame name of {len(raw)} bytes is longer than {MAX_NAME_BYTES}")
    return HEAD.pack(MAGIC, VERSION, int(kind), len(raw)) + raw + LENGTH.pack(len(payload)) + payload


def sample_frame(sample: int, plan: int, tensors: int, start_ns: int) -> bytes:
    return encode(Kind.SAMPLE, "", SAMPLE.pack(sample, plan, tensors, start_ns))


def ack_frame(sample: int) -> bytes:
    return encode(Kind.ACK, "", ACK.pack(sample))


def plan_frame(plan: int, bandwidth_bits_per_s: float) -> bytes:
    return encode(Kind.PLAN, "", PLAN.pack(plan, float(bandwidth_bits_per_s)))


def close_frame() -> bytes:
    return encode(Kind.CLOSE)


def recv_exact(sock: socket.socket, n: int, what: str, frame_started: bool = True) -> bytes:
    """Exactly ``n`` bytes from ``sock``; FrameError if the stream ends first (PeerClosed
    when it ends before the first byte of a frame), FrameTimeout on the socket's
    timeout."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except socket.timeout:
            raise FrameTimeout(f"peer sent nothing for {sock.gettimeout():g} s (waiting for {what})") from None
        except OSError as e:
            raise FrameError(f"connection failed while reading {what}: {e.strerror or e}") from None
        if k == 0:
            if got == 0 and not frame_started:
                raise PeerClosed("peer closed the connection")
            raise FrameError(f"truncated frame: {what} has {got} of {n} bytes, then the stream ended")
        got += k
    return bytes(buf)


def read_frame(sock: socket.socket, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Frame:
    """Read and check one frame (see the module docstring for what is refused)."""
    head = recv_exact(sock, HEAD.size, "the frame header", frame_started=False)
    magic, version, kind, name_len = HEAD.unpack(head)
    if magic != MAGIC:
        raise FrameError(f"frame magic {magic!r} is not {MAGIC!r} (not a splitopt run-tcp peer)")
    if version != VERSION:
        raise FrameError(f"frame version {version} is not supported (this reader speaks version {VERSION})")
    try:
        kind = Kind(kind)
    except ValueError:
        raise FrameError(f"frame kind {kind} is unknown (known: "
                         f"{', '.join(f'{k.value}={k.name}' for k in Kind)})") from None
    if name_len > MAX_NAME_BYTES:
        raise FrameError(f"frame name length {name_len} exceeds {MAX_NAME_BYTES} bytes")
    raw = recv_exact(sock, name_len, "the frame name") if name_len else b""
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError(f"frame name {raw[:40]!r} is not UTF-8") from None
    (length,) = LENGTH.unpack(recv_exact(sock, LENGTH.size, "the payload length"))
    if length > max_frame_bytes:
        raise FrameError(f"frame payload length {length} bytes exceeds the max frame size {max_frame_bytes} bytes")
    want = FIXED_PAYLOAD.get(kind)
    if want is not None and length != want:
        raise FrameError(f"{kind.name} frame payload length {length} bytes, expected {want}")
    payload = recv_exact(sock, length, f"the {kind.name} payload") if length else b""
    return Frame(kind, name, payload)
