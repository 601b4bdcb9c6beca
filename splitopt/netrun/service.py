"""The receiving side of ``splitopt run-tcp``: a TCP service that reads only its own frames.

:class:`FrameService` binds ``host`` (127.0.0.1 unless told otherwise) on ``port`` (0:
the system picks a free one, read back as :attr:`FrameService.port`), accepts one
connection at a time and hands it, as a :class:`Connection`, to a session handler.
Every read goes through :func:`splitopt.netrun.frames.read_frame` with the service's
max frame size, on a socket whose timeout is the service's ``timeout_s`` (a silent peer).
When a session fails on a malformed, oversized or truncated frame, on a silent peer, or
on content the handler refuses (a :class:`~splitopt.netrun.frames.FrameError`), the
service logs one line (``splitopt.netrun`` logger, level ERROR: the peer, the reason),
closes that connection and accepts the next; it never unpickles or ``torch.load``\\ s
anything. :meth:`FrameService.serve` returns after ``sessions`` sessions ended cleanly;
it raises :class:`ServiceTimeout` when nobody connects within ``accept_timeout_s``.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Callable

from splitopt.netrun.frames import DEFAULT_MAX_FRAME_BYTES, Frame, FrameError, read_frame

log = logging.getLogger("splitopt.netrun")

#: default seconds a connected peer may stay silent
DEFAULT_TIMEOUT_S = 30.0


class ServiceTimeout(FrameError):
    """Nobody connected within the accept timeout."""


class Connection:
    """One TCP connection carrying frames: :meth:`read` (checked, see
    :func:`~splitopt.netrun.frames.read_frame`), :meth:`sendall`, :meth:`close`."""

    def __init__(self, sock: socket.socket, timeout_s: float, max_frame_bytes: int, peer: str = "") -> None:
        self.sock = sock
        self.max_frame_bytes = int(max_frame_bytes)
        self.peer = peer
        sock.settimeout(timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def read(self) -> Frame:
        return read_frame(self.sock, self.max_frame_bytes)

    def sendall(self, data: bytes | memoryview) -> None:
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise FrameError(f"peer {self.peer} accepted nothing for {self.sock.gettimeout():g} s") from None
        except OSError as e:
            raise FrameError(f"sending to {self.peer} failed: {e.strerror or e}") from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def connect(host: str, port: int, timeout_s: float = DEFAULT_TIMEOUT_S,
            max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, retry_s: float = 5.0) -> Connection:
    """Connect to a :class:`FrameService` at ``host:port`` (retrying for ``retry_s``
    seconds while it is refused); FrameError (one line) if it cannot."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
            return Connection(sock, timeout_s, max_frame_bytes, f"{host}:{port}")
        except OSError as e:
            if time.monotonic() >= deadline:
                raise FrameError(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
            time.sleep(0.05)


class FrameService:
    """A listening socket and its accept loop (see the module docstring). ``timeout_s``:
    seconds a connected peer may stay silent; ``accept_timeout_s``: seconds to wait for
    a connection (None: ``timeout_s``); ``max_frame_bytes``: the largest payload read."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, accept_timeout_s: float | None = None) -> None:
        self.host = host
        self.timeout_s = float(timeout_s)
        self.accept_timeout_s = float(timeout_s if accept_timeout_s is None else accept_timeout_s)
        self.max_frame_bytes = int(max_frame_bytes)
        self.rejected: list[str] = []  # one line per refused connection
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(4)
        except OSError as e:
            self.sock.close()
            raise FrameError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None

    @property
    def port(self) -> int:
        """The port bound (the system's choice when 0 was asked for)."""
        return int(self.sock.getsockname()[1])

    def accept(self) -> Connection:
        """The next connection; ServiceTimeout after ``accept_timeout_s`` without one."""
        self.sock.settimeout(self.accept_timeout_s)
        try:
            sock, addr = self.sock.accept()
        except socket.timeout:
            raise ServiceTimeout(f"no peer connected to {self.host}:{self.port} within "
                                 f"{self.accept_timeout_s:g} s") from None
        return Connection(sock, self.timeout_s, self.max_frame_bytes, f"{addr[0]}:{addr[1]}")

    def serve(self, session: Callable[[Connection], None], sessions: int = 1) -> int:
        """Accept connections and run ``session(connection)`` on each until ``sessions``
        of them returned normally; a session that raises FrameError is logged in one line
        and its connection closed, and the next connection is accepted. Returns the
        number of refused connections."""
        done = 0
        while done < sessions:
            conn = self.accept()
            try:
                session(conn)
                done += 1
            except FrameError as e:
                if isinstance(e, ServiceTimeout):
                    raise
                line = f"splitopt run-tcp service {self.host}:{self.port}: refused {conn.peer}: {e}"
                self.rejected.append(line)
                log.error(line)
            finally:
                conn.close()
        return len(self.rejected)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "FrameService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
