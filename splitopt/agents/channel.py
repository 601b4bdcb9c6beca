"""One TCP connection carrying agent messages (:class:`Channel`), and the handshake that
opens it on both sides (:func:`client_handshake`, :func:`agent_handshake`; the exchange
is described in :mod:`splitopt.agents.auth`).

Every read has a timeout (the socket's, ``timeout_s``; while a session waits for the
next request, ``wait_s``); before the peer has authenticated, a message may be at most
:data:`~splitopt.agents.protocol.HANDSHAKE_MAX_BYTES` long, after it the channel's max
frame size.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable, Sequence

from splitopt.agents.addresses import Address
from splitopt.agents.auth import agent_proof, client_proof, new_nonce, nonce_from, proof_matches
from splitopt.agents.protocol import (
    HANDSHAKE_MAX_BYTES, Message, PeerError, ProtocolError, encode_message, read_message, wait_readable,
)
from splitopt.netrun.frames import FrameError

#: the roles a client says it has in HELLO
ROLES = ("controller", "peer")


class AuthError(ProtocolError):
    """The other side did not prove the token (or refused this side's proof)."""


class Channel:
    """Agent messages over one socket: :meth:`send`, :meth:`read`, :meth:`close`.
    ``peer``: how log lines and errors name the other side."""

    def __init__(self, sock: socket.socket, timeout_s: float, max_frame_bytes: int, peer: str) -> None:
        self.sock = sock
        self.timeout_s = float(timeout_s)
        self.max_frame_bytes = int(max_frame_bytes)
        self.peer = peer
        #: bytes of the last message sent (frame header included)
        self.last_sent_bytes = 0
        sock.settimeout(self.timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def send(self, type_: str, fields: dict[str, Any] | None = None, blobs: Sequence[bytes] = ()) -> tuple[float, float]:
        """Send one message; the monotonic times (s) before and after the send."""
        data = encode_message(type_, fields, blobs)
        self.last_sent_bytes = len(data)
        started = time.monotonic()
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise FrameError(f"{self.peer} accepted nothing for {self.timeout_s:g} s") from None
        except OSError as e:
            raise FrameError(f"sending to {self.peer} failed: {e.strerror or e}") from None
        return started, time.monotonic()

    def read(self, expect: Sequence[str] | None = None, wait_s: float | None = None,
             max_frame_bytes: int | None = None) -> Message:
        """The next message (see :func:`splitopt.agents.protocol.read_message`); it may
        take ``wait_s`` (default: the channel's timeout) to start arriving."""
        try:
            if wait_s is not None:
                self.sock.settimeout(wait_s)
                wait_readable(self.sock)
                self.sock.settimeout(self.timeout_s)
            return read_message(self.sock, self.max_frame_bytes if max_frame_bytes is None else max_frame_bytes,
                                expect)
        except OSError as e:  # settimeout on a socket closed under us
            raise FrameError(f"connection to {self.peer} failed: {e.strerror or e}") from None

    def request(self, type_: str, fields: dict[str, Any] | None = None, blobs: Sequence[bytes] = (),
                wait_s: float | None = None) -> Message:
        """Send a request and read its RESULT (an ERROR answer: :class:`PeerError`)."""
        self.send(type_, fields, blobs)
        return self.read(("RESULT",), wait_s=wait_s)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def shutdown(self) -> None:
        """Wake a thread blocked on this channel (its read ends with an error)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def connect(address: Address, timeout_s: float, max_frame_bytes: int, what: str) -> Channel:
    """A channel to ``address``; FrameError naming ``what`` when it cannot connect."""
    try:
        sock = socket.create_connection((address.host, address.port), timeout=timeout_s)
    except OSError as e:
        reason = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
        raise FrameError(f"{what} at {address}: cannot connect ({reason})") from None
    return Channel(sock, timeout_s, max_frame_bytes, f"{what} at {address}")


def client_handshake(channel: Channel, token: bytes, role: str, name: str) -> dict[str, Any]:
    """Open ``channel`` as a client (module :mod:`splitopt.agents.auth`); the agent's
    WELCOME fields (``name``, ``info``). AuthError when the agent does not prove the
    token or refuses ours, PeerError/ProtocolError (e.g. another protocol version) for
    other refusals."""
    mine = new_nonce()
    channel.send("HELLO", {"role": role, "name": name, "nonce": mine.hex()})
    challenge = channel.read(("CHALLENGE",), max_frame_bytes=HANDSHAKE_MAX_BYTES)
    theirs = nonce_from(challenge.get("nonce"))
    if theirs is None:
        raise ProtocolError("CHALLENGE field nonce is not 64 hex digits")
    if not proof_matches(agent_proof(token, mine, theirs), challenge.get("proof")):
        try:
            channel.send("ERROR", {"message": "the agent's proof does not match this side's token"})
        except FrameError:
            pass
        raise AuthError("authentication failed: the agent does not prove the token (is the same token set on "
                        "both sides?)")
    channel.send("AUTH", {"proof": client_proof(token, mine, theirs)})
    try:
        welcome = channel.read(("WELCOME",), max_frame_bytes=HANDSHAKE_MAX_BYTES)
    except ProtocolError as e:
        if "authentication" in str(e):
            raise AuthError(str(e)) from None
        raise
    return dict(welcome.fields)


def agent_handshake(channel: Channel, token: bytes, name: str,
                    welcome: Callable[[str], dict[str, Any]]) -> tuple[str, str]:
    """Open ``channel`` as the agent ``name``; ``(role, client name)``. AuthError (after
    telling the client) when the client does not prove the token; ProtocolError for a
    malformed or out-of-order HELLO. ``welcome(role)``: the WELCOME fields."""
    hello = channel.read(("HELLO",), max_frame_bytes=HANDSHAKE_MAX_BYTES)
    role = hello.get("role")
    theirs = nonce_from(hello.get("nonce"))
    client = hello.get("name")
    if role not in ROLES or theirs is None or not isinstance(client, str) or len(client) > 200:
        raise ProtocolError(f"HELLO needs role ({' or '.join(ROLES)}), name and a 64-hex-digit nonce, got role "
                            f"{str(role)[:30]!r}")
    mine = new_nonce()
    channel.send("CHALLENGE", {"name": name, "nonce": mine.hex(), "proof": agent_proof(token, theirs, mine)})
    try:
        auth = channel.read(("AUTH",), max_frame_bytes=HANDSHAKE_MAX_BYTES)
    except PeerError as e:
        raise AuthError(f"authentication failed: {role} '{client[:60]}' refused this agent's proof ({e})") from None
    if not proof_matches(client_proof(token, theirs, mine), auth.get("proof")):
        try:
            channel.send("ERROR", {"message": "authentication failed: wrong token"})
        except FrameError:
            pass
        raise AuthError(f"authentication failed: {role} '{client[:60]}' gave a proof that does not match the token")
    channel.send("WELCOME", welcome(role))
    return role, client
