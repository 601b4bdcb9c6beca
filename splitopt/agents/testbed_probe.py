"""Probes run inside a testbed's devices to measure the emulation itself (standard library
only, so a device needs nothing else): ``python -m splitopt.agents.testbed_probe``

- ``receive --port P``: accept one TCP connection at 0.0.0.0:P, read it to its end, print
  ``{"bytes": N, "seconds": S, "bits_per_s": R}`` with S from the first byte read to the
  last (what the link delivered, not the sender's start-up);
- ``send --to HOST:PORT --seconds S``: send 64 KiB blocks as fast as TCP takes them for S
  seconds, then close; print ``{"bytes": N, "seconds": S}``;
- ``echo --port P``: accept one TCP connection at 0.0.0.0:P and send back every byte until
  it closes; ``ping --to HOST:PORT --count N``: N round trips of one byte to an echo (after
  10 not counted), print ``{"count": N, "median_ms": M, "min_ms": m}``;
- ``sink --port P``: accept one TCP connection at 0.0.0.0:P and read messages (a 4-byte
  big-endian length, then that many bytes), answering each with one byte, until it
  closes; ``messages --to HOST:PORT --sizes N,... --count K --gap-ms G``: per size, K
  messages to a sink (after 3 not counted), each after G ms idle, timed from the first
  byte sent to the answer; print ``{"SIZE": median ms, ...}``;
- ``idle --gaps-ms G,... --count K``: per gap, K runs of a fixed piece of work (a 16 MB
  float32 matrix times a vector, 4 times: memory-bound, as a network layer's weights
  are), each after G ms idle (after 3 not counted); print ``{"G": median ms, ...}``:
  what an idle wait costs the work after it (caches, the CPU's idle states). The one
  probe that needs numpy;
- ``busy --seconds S``: spin for S wall seconds; print ``{"cpu_s": C, "wall_s": W, "share":
  C/W}``, the CPU time the process got per wall second (under a quota: about the share).

Each prints one JSON line on stdout; a receive waits at most ``--timeout`` seconds for its
connection and between reads.
"""

from __future__ import annotations

import argparse
import json
import socket
import time

#: bytes per send call and per read
BLOCK = 64 * 1024


def receive(port: int, timeout_s: float) -> dict:
    with _accept(port, timeout_s) as conn:
        total, first, last = 0, 0.0, 0.0
        while True:
            data = conn.recv(BLOCK)
            if not data:
                break
            now = time.perf_counter()
            if total == 0:
                first = now
            total, last = total + len(data), now
    seconds = last - first
    return {"bytes": total, "seconds": seconds, "bits_per_s": total * 8 / seconds if seconds > 0 else None}


def send(to: str, seconds: float, timeout_s: float) -> dict:
    host, _, port = to.rpartition(":")
    block = b"\0" * BLOCK
    total = 0
    with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            conn.sendall(block)
            total += len(block)
    return {"bytes": total, "seconds": time.perf_counter() - start}


def _accept(port: int, timeout_s: float) -> socket.socket:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen(1)
        server.settimeout(timeout_s)
        conn, _ = server.accept()
    conn.settimeout(timeout_s)
    return conn


def echo(port: int, timeout_s: float) -> dict:
    total = 0
    with _accept(port, timeout_s) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(BLOCK)
            if not data:
                break
            conn.sendall(data)
            total += len(data)
    return {"bytes": total}


def ping(to: str, count: int, timeout_s: float) -> dict:
    host, _, port = to.rpartition(":")
    times = []
    with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(count + 10):
            start = time.perf_counter()
            conn.sendall(b"x")
            if not conn.recv(1):
                raise ConnectionError(f"{to} closed the connection")
            if i >= 10:
                times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {"count": count, "median_ms": times[len(times) // 2], "min_ms": times[0]}


def sink(port: int, timeout_s: float) -> dict:
    count = 0
    with _accept(port, timeout_s) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            head = conn.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                break
            left = int.from_bytes(head, "big")
            while left > 0:
                data = conn.recv(min(BLOCK, left))
                if not data:
                    raise ConnectionError("the sender closed inside a message")
                left -= len(data)
            conn.sendall(b"k")
            count += 1
    return {"messages": count}


def messages(to: str, sizes: list[int], count: int, gap_ms: float, timeout_s: float) -> dict:
    host, _, port = to.rpartition(":")
    out = {}
    with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for size in sizes:
            payload = size.to_bytes(4, "big") + bytes(size)
            times = []
            for i in range(count + 3):
                time.sleep(gap_ms / 1000)
                start = time.perf_counter()
                conn.sendall(payload)
                if not conn.recv(1):
                    raise ConnectionError(f"{to} closed the connection")
                if i >= 3:
                    times.append((time.perf_counter() - start) * 1e3)
            times.sort()
            out[str(size)] = times[len(times) // 2]
    return out


def idle(gaps_ms: list[float], count: int) -> dict:
    import numpy as np  # noqa: PLC0415 - only this probe needs it

    rng = np.random.default_rng(0)
    matrix = rng.random((2048, 2048), dtype=np.float32)
    vector = rng.random(2048, dtype=np.float32)
    out = {}
    for gap in gaps_ms:
        times = []
        for i in range(count + 3):
            time.sleep(gap / 1000)
            start = time.perf_counter()
            for _ in range(4):
                vector = matrix @ vector
                vector /= float(np.abs(vector).max()) or 1.0
            if i >= 3:
                times.append((time.perf_counter() - start) * 1e3)
        times.sort()
        out[f"{gap:g}"] = times[len(times) // 2]
    return out


def busy(seconds: float) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall0 < seconds:
        pass
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"cpu_s": cpu, "wall_s": wall, "share": cpu / wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m splitopt.agents.testbed_probe", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="probe", required=True)
    r = sub.add_parser("receive")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--timeout", type=float, default=30.0)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--seconds", type=float, default=1.0)
    s.add_argument("--timeout", type=float, default=30.0)
    e = sub.add_parser("echo")
    e.add_argument("--port", type=int, required=True)
    e.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("ping")
    p.add_argument("--to", required=True)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--timeout", type=float, default=30.0)
    k = sub.add_parser("sink")
    k.add_argument("--port", type=int, required=True)
    k.add_argument("--timeout", type=float, default=30.0)
    m = sub.add_parser("messages")
    m.add_argument("--to", required=True)
    m.add_argument("--sizes", required=True, help="message sizes, bytes, comma-separated")
    m.add_argument("--count", type=int, default=15)
    m.add_argument("--gap-ms", type=float, default=50.0)
    m.add_argument("--timeout", type=float, default=30.0)
    i = sub.add_parser("idle")
    i.add_argument("--gaps-ms", default="0,3,10,30,100", help="idle waits, ms, comma-separated")
    i.add_argument("--count", type=int, default=21)
    b = sub.add_parser("busy")
    b.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.probe == "receive":
        result = receive(args.port, args.timeout)
    elif args.probe == "send":
        result = send(args.to, args.seconds, args.timeout)
    elif args.probe == "echo":
        result = echo(args.port, args.timeout)
    elif args.probe == "ping":
        result = ping(args.to, args.count, args.timeout)
    elif args.probe == "idle":
        result = idle([float(x) for x in args.gaps_ms.split(",")], args.count)
    elif args.probe == "sink":
        result = sink(args.port, args.timeout)
    elif args.probe == "messages":
        result = messages(args.to, [int(x) for x in args.sizes.split(",")], args.count, args.gap_ms, args.timeout)
    else:
        result = busy(args.seconds)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
