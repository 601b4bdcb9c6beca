"""The device agent's messages: a versioned JSON header and binary blobs, carried in one
frame kind (``AGENT``) of the netrun frames (:mod:`splitopt.netrun.frames`). No pickle:
a peer's bytes are only ever parsed as JSON, raw numeric arrays of a listed dtype, the
packing format (:mod:`splitopt.core.packing`) or an ONNX model (protobuf).

A message is one frame (:mod:`splitopt.netrun.frames`: magic ``SPNR``, frame version 1,
kind ``AGENT`` = 6, name empty, ``uint64`` payload length checked against the reader's
max frame size before anything is allocated). Its payload (little-endian)::

    uint32    J: JSON header length in bytes, 2 <= J <= MAX_HEADER_BYTES (1 MiB)
    J bytes   the header: a JSON object in UTF-8 with at least
                "v":     the protocol version (PROTOCOL_VERSION = 2), an integer
                "type":  the message type, one of TYPES
                "blobs": the byte lengths of the blobs that follow, a list of integers
                         >= 0 (at most MAX_BLOBS)
              and the fields of its type
    B bytes   the blobs, concatenated in order; the payload is exactly 4 + J + B bytes,
              B = the sum of "blobs"

A reader (:func:`read_message`) refuses, as :class:`ProtocolError` naming the field and
value (and the frame errors of :func:`splitopt.netrun.frames.read_frame`): a frame of
another kind, a header length out of range or beyond the payload, a header that is not a
UTF-8 JSON object, a missing or non-integer ``v``, another protocol version (the line
names both versions), an unknown ``type``, a malformed ``blobs`` list, and blob lengths
that do not add up to the payload. A peer that stays silent for the socket's timeout is
:class:`~splitopt.netrun.frames.FrameTimeout`.

Arrays (:func:`array_blob`, :func:`array_from`): a header field ``{"dtype": D, "shape":
[...]}`` and a blob of the C-order little-endian values, ``prod(shape) * itemsize``
bytes; D is one of :data:`ARRAY_DTYPES`. Tensors between agents travel in the packing
format (:class:`splitopt.core.packing.PackedTensor`, one blob each).

Message types (fields besides ``v``/``type``/``blobs``; ``->`` the answer):

* handshake, every connection (:mod:`splitopt.agents.auth`): ``HELLO`` {role:
  "controller" or "peer", name, nonce (64 hex digits)} -> ``CHALLENGE`` {name, nonce,
  proof} -> ``AUTH`` {proof} -> ``WELCOME`` {info}; either side may answer ``ERROR``
  {message} and close;
* controller requests, each answered by ``RESULT`` {the fields below} or ``ERROR``
  {message}: ``INFO`` -> {info}; ``MEASURE_LAYERS`` {input_shape, input_high, repeats,
  warmup, optimization; blob 0 the ONNX model} -> {layers: [[name, ms], ...], repeats,
  warmup, threads, optimization, onnxruntime, measured_at}; ``PROBE_LINK`` {peer,
  address, max_bytes, max_seconds} -> {the link both ways}; ``DEPLOY`` {manifest,
  device, next; blob 0 the part's ONNX file unless the part only forwards} -> {part};
  ``RESET`` -> {}; ``RUN`` {run, samples, pipelined (true: samples stream through the
  devices, several in flight; false or absent: one sample at a time), input (an array
  spec, first device only); blob 0 the inputs} -> one ``SAMPLE_REPORT`` per sample, then
  ``RUN_END`` {samples, error} (:mod:`splitopt.agents.agent_run`); ``BYE`` ends the
  session;
* peer requests (another agent): ``PING`` -> ``PONG``; ``PROBE_SINK`` {blob 0: bytes}
  -> ``PROBE_ACK``; ``PROBE_SOURCE`` {bytes} -> ``PROBE_DATA`` {blob 0}; ``STREAM``
  {run} hands the connection to the run ``run`` as its upstream link, which then
  carries ``SAMPLE`` {sample, tensors; one blob per tensor, packed} downstream and
  ``RECEIVED`` {sample, receive_ms} and ``DONE`` {sample} upstream (DONE only in a run
  that is not pipelined), and ``END`` {}.

Version 2 added RUN's ``pipelined`` field: an agent of version 1 would run such a RUN one
sample at a time, so its numbers would pass for a pipeline's; the version check refuses
it at the handshake instead.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from splitopt.netrun.frames import FrameError, Kind, encode, read_frame

#: the agent protocol's version; a peer speaking another is refused with both named
PROTOCOL_VERSION = 2
#: the longest JSON header a message may have (bytes)
MAX_HEADER_BYTES = 1024 * 1024
#: the most blobs one message may carry
MAX_BLOBS = 4096
#: the largest message read before a peer has authenticated (bytes of frame payload)
HANDSHAKE_MAX_BYTES = 64 * 1024
HEADER_LENGTH = struct.Struct("<I")

TYPES = (
    "HELLO", "CHALLENGE", "AUTH", "WELCOME", "ERROR",
    "INFO", "MEASURE_LAYERS", "PROBE_LINK", "DEPLOY", "RESET", "RUN", "BYE", "RESULT", "SAMPLE_REPORT", "RUN_END",
    "PING", "PONG", "PROBE_SINK", "PROBE_ACK", "PROBE_SOURCE", "PROBE_DATA", "STREAM", "SAMPLE", "RECEIVED", "DONE",
    "END",
)
#: the dtypes of raw arrays (:func:`array_blob`)
ARRAY_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


class ProtocolError(FrameError):
    """A message that breaks the agent protocol (one line naming the field and value)."""


@dataclass
class Message:
    """One message: its ``type``, its header ``fields`` (without v/type/blobs) and its
    ``blobs``. ``first_byte_s``/``last_byte_s``: the reader's monotonic clock (s) when
    the message's first byte was available and when its last byte was read (0 for a
    message built here)."""

    type: str
    fields: dict[str, Any] = field(default_factory=dict)
    blobs: list[bytes] = field(default_factory=list)
    first_byte_s: float = 0.0
    last_byte_s: float = 0.0
    wire_bytes: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


def encode_message(type_: str, fields: Mapping[str, Any] | None = None,
                   blobs: Sequence[bytes | memoryview] = ()) -> bytes:
    """The frame of one message (see the module docstring)."""
    if type_ not in TYPES:
        raise ProtocolError(f"message type '{type_}' is unknown")
    head = dict(fields or {})
    head.update(v=PROTOCOL_VERSION, type=type_, blobs=[len(b) for b in blobs])
    raw = json.dumps(head, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(raw) > MAX_HEADER_BYTES:
        raise ProtocolError(f"message header of {len(raw)} bytes exceeds {MAX_HEADER_BYTES}")
    return encode(Kind.AGENT, "", b"".join([HEADER_LENGTH.pack(len(raw)), raw, *[bytes(b) for b in blobs]]))


def decode_payload(payload: bytes) -> Message:
    """The message in a frame payload; ProtocolError for anything the module docstring
    says is refused."""
    if len(payload) < HEADER_LENGTH.size:
        raise ProtocolError(f"message payload of {len(payload)} bytes is shorter than its 4-byte header length")
    (n,) = HEADER_LENGTH.unpack_from(payload)
    if not 2 <= n <= MAX_HEADER_BYTES or HEADER_LENGTH.size + n > len(payload):
        raise ProtocolError(f"message header length {n} is out of range (2..{MAX_HEADER_BYTES} and within the "
                            f"{len(payload)}-byte payload)")
    try:
        head = json.loads(payload[HEADER_LENGTH.size:HEADER_LENGTH.size + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("message header is not a UTF-8 JSON object") from None
    if not isinstance(head, dict):
        raise ProtocolError(f"message header is a JSON {type(head).__name__}, not an object")
    version = head.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ProtocolError(f"message header field v {version!r} is not a protocol version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"peer speaks agent protocol version {version}, this side speaks version "
                            f"{PROTOCOL_VERSION}")
    type_ = head.get("type")
    if type_ not in TYPES:
        raise ProtocolError(f"message type {str(type_)[:60]!r} is unknown")
    sizes = head.get("blobs")
    if not isinstance(sizes, list) or len(sizes) > MAX_BLOBS or \
            not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sizes):
        raise ProtocolError(f"message field blobs {str(sizes)[:60]} is not a list of at most {MAX_BLOBS} byte "
                            f"lengths")
    off = HEADER_LENGTH.size + n
    if off + sum(sizes) != len(payload):
        raise ProtocolError(f"message blobs of {sum(sizes)} bytes do not fill the {len(payload) - off} bytes after "
                            f"the header")
    blobs = []
    for s in sizes:
        blobs.append(payload[off:off + s])
        off += s
    fields = {k: v for k, v in head.items() if k not in ("v", "type", "blobs")}
    return Message(type_, fields, blobs, wire_bytes=len(payload))


def wait_readable(sock: socket.socket) -> float:
    """Block until ``sock`` has a byte to read (or is closed); the monotonic time then
    (s). FrameTimeout after the socket's timeout, as a read would."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        from splitopt.netrun.frames import FrameTimeout

        raise FrameTimeout(f"peer sent nothing for {sock.gettimeout():g} s") from None
    except OSError:
        pass  # the read that follows names the failure
    return time.monotonic()


def read_message(sock: socket.socket, max_frame_bytes: int, expect: Sequence[str] | None = None) -> Message:
    """Read and check one message (ProtocolError/FrameError, one line); ``expect``: the
    types allowed here (another one is a ProtocolError, an ``ERROR`` message from the
    peer is a :class:`PeerError` with its text)."""
    first = wait_readable(sock)
    frame = read_frame(sock, max_frame_bytes)
    last = time.monotonic()
    if frame.kind is not Kind.AGENT:
        raise ProtocolError(f"expected an agent message, got a {frame.kind.name} frame")
    msg = decode_payload(frame.payload)
    msg.first_byte_s, msg.last_byte_s = first, last
    msg.wire_bytes = frame.wire_bytes
    if expect is not None and msg.type not in expect:
        if msg.type == "ERROR":
            raise PeerError(str(msg.get("message", "no reason given"))[:500])
        raise ProtocolError(f"expected a {' or '.join(expect)} message, got {msg.type}")
    return msg


class PeerError(ProtocolError):
    """The peer answered ERROR; the message is its one line."""


# ----- raw arrays --------------------------------------------------------------------------

def array_blob(a: np.ndarray) -> tuple[dict[str, Any], bytes]:
    """``(spec, blob)`` of a numpy array: the spec for the header, the C-order
    little-endian bytes."""
    a = np.asarray(a)
    name = str(a.dtype)
    if name not in ARRAY_DTYPES:
        raise ProtocolError(f"array dtype {name} cannot be sent (dtypes: {', '.join(ARRAY_DTYPES)})")
    little = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return {"dtype": name, "shape": [int(d) for d in a.shape]}, np.ascontiguousarray(little).tobytes()


def array_from(spec: Any, blob: bytes, what: str) -> np.ndarray:
    """The array of ``spec`` ({dtype, shape}) and ``blob``; ProtocolError naming ``what``
    when the spec is malformed or the blob has the wrong length."""
    if not isinstance(spec, dict) or spec.get("dtype") not in ARRAY_DTYPES:
        raise ProtocolError(f"{what}: array spec {str(spec)[:80]} needs a dtype of {', '.join(ARRAY_DTYPES)}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or len(shape) > 32 or \
            not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2 ** 31 for d in shape):
        raise ProtocolError(f"{what}: array shape {str(shape)[:80]} is not a list of dimensions")
    dtype = np.dtype(spec["dtype"]).newbyteorder("<")
    want = math.prod(shape) * dtype.itemsize
    if len(blob) != want:
        raise ProtocolError(f"{what}: array of shape {shape} {spec['dtype']} needs {want} bytes, got {len(blob)}")
    return np.frombuffer(blob, dtype=dtype).astype(np.dtype(spec["dtype"])).reshape(shape)


# ----- checked fields ----------------------------------------------------------------------

def int_field(msg: Message, key: str, low: int, high: int, default: int | None = None) -> int:
    """Header field ``key`` as an int in [low, high] (``default`` when absent and given);
    ProtocolError naming it otherwise."""
    value = msg.fields.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ProtocolError(f"{msg.type} field {key} {str(value)[:40]!r} is not an integer in [{low}, {high}]")
    return value


def number_field(msg: Message, key: str, low: float, high: float, default: float | None = None) -> float:
    """Header field ``key`` as a finite number in [low, high]; ProtocolError otherwise."""
    value = msg.fields.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ProtocolError(f"{msg.type} field {key} {str(value)[:40]!r} is not a number in [{low:g}, {high:g}]")
    return float(value)


def bool_field(msg: Message, key: str, default: bool) -> bool:
    """Header field ``key`` as a boolean (``default`` when absent); ProtocolError otherwise."""
    value = msg.fields.get(key, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"{msg.type} field {key} {str(value)[:40]!r} is not true or false")
    return value


def str_field(msg: Message, key: str, choices: Sequence[str] | None = None, optional: bool = False,
              max_len: int = 1000) -> str | None:
    """Header field ``key`` as a string (one of ``choices`` when given; None when absent
    and ``optional``); ProtocolError otherwise."""
    value = msg.fields.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > max_len or (choices is not None and value not in choices):
        allowed = f" (one of {', '.join(choices)})" if choices is not None else ""
        raise ProtocolError(f"{msg.type} field {key} {str(value)[:60]!r} is not a string{allowed}")
    return value


def blob(msg: Message, index: int, what: str) -> bytes:
    """Blob ``index`` of ``msg``; ProtocolError naming ``what`` when it is missing."""
    if index >= len(msg.blobs):
        raise ProtocolError(f"{msg.type}: {what} (blob {index}) is missing")
    return msg.blobs[index]
