"""``splitopt agent``: run this host as a device agent (:mod:`splitopt.agents.server`) until
Ctrl-C or SIGTERM.

Every option is checked before the agent listens; a bad one is one line naming it, exit
2. Once listening, the agent prints one line to stdout, ``splitopt agent 'NAME' listening
on HOST:PORT ...`` (with ``--listen HOST:0`` the port the system chose), and, with
``--ready-file``, writes ``{"name", "address", "pid"}`` as JSON to that file. Refused
clients are logged to stderr, one line each. Torch is not imported: an agent needs the
core and the ``onnx`` extra (without it, it answers INFO and link probes and refuses
measurements and parts in one line).
"""

from pathlib import Path
from typing import Optional

import typer

def agent_command(
    listen: str = typer.Option("127.0.0.1:7431", "--listen", help="HOST:PORT to listen on ([ADDRESS]:PORT for IPv6; port 0: one the system picks, printed at start)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow listening on an address other than loopback (other hosts can then connect; they still need the token)."),
    name: Optional[str] = typer.Option(None, "--name", help="The agent's name, reported to the controller (default: this host's name)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="File holding the shared token (at least 16 characters; default: the SPLITOPT_AGENT_TOKEN environment variable)."),
    insecure_no_token: bool = typer.Option(False, "--insecure-no-token", help="Start without a token: any local process that speaks the protocol is let in (loopback only; for trying it out)."),
    threads: int = typer.Option(1, "--threads", help="onnxruntime intra-op threads for measurements and deployed parts."),
    memory_bytes: Optional[int] = typer.Option(None, "--memory-bytes", help="Memory a deployed part may use, bytes (its file, inputs and outputs; a larger part is refused); reported to the controller (default: this host's memory)."),
    max_frame_bytes: int = typer.Option(256 * 1024 * 1024, "--max-frame-bytes", help="Largest message accepted, bytes (a model, a part, one sample's tensors); a larger one is refused and its connection dropped."),
    timeout_s: float = typer.Option(30.0, "--timeout-s", help="Seconds a connected client or peer may stay silent inside an exchange before it is dropped (in a run, also the longest one sample may take on the devices after this one)."),
    idle_timeout_s: float = typer.Option(1800.0, "--idle-timeout-s", help="Seconds a controller may stay silent between two requests."),
    ready_file: Optional[Path] = typer.Option(None, "--ready-file", help="Once listening, write {\"name\", \"address\", \"pid\"} as JSON to this file."),
) -> None:
    """Run this host as a device agent for a controller (`splitopt.agents.client`): it
    reports what it is (CPUs, threads, memory, runtimes), measures the per-layer latency
    of ONNX models it is sent (as `splitopt profile MODEL.onnx --measure` does), probes
    the link to another agent both ways, and runs a deployed part of a split model
    exported by `splitopt export --format onnx`, sending the crossing tensors to the next
    device's agent. It serves one controller at a time until Ctrl-C or SIGTERM.

    Security: every connection must prove the shared token (HMAC-SHA256 over fresh random
    challenges, both ways; the token never crosses the wire). The token comes from
    --token-file or $SPLITOPT_AGENT_TOKEN; without one the agent refuses to start unless
    --insecure-no-token is given (loopback only). It listens on loopback unless
    --allow-remote is given, runs ONNX models with onnxruntime and never executes code it
    is sent. The traffic is not encrypted: use it on networks you trust."""
    from splitopt.cli.common import errors

    with errors():
        config = _config(listen, allow_remote, name, token_file, insecure_no_token, threads, memory_bytes,
                         max_frame_bytes, timeout_s, idle_timeout_s)
        _serve(config, ready_file)


def _config(listen, allow_remote, name, token_file, insecure_no_token, threads, memory_bytes, max_frame_bytes,
            timeout_s, idle_timeout_s):
    import math
    import socket

    from splitopt.agents.addresses import DEFAULT_PORT, parse_address
    from splitopt.agents.auth import TOKEN_ENV, read_token
    from splitopt.agents.server import AgentConfig, total_memory_bytes
    from splitopt.core.errors import InvalidOption

    address = parse_address(listen, "--listen", default_port=DEFAULT_PORT)
    if not address.is_loopback and not allow_remote:
        raise InvalidOption(f"--listen {listen}: not a loopback address; give --allow-remote to accept connections "
                            f"from other hosts")
    if threads < 1 or threads > 1024:
        raise InvalidOption(f"--threads {threads}: must be in 1..1024")
    if memory_bytes is not None and memory_bytes < 1:
        raise InvalidOption(f"--memory-bytes {memory_bytes}: must be positive")
    if not 1024 <= max_frame_bytes <= 2 ** 40:
        raise InvalidOption(f"--max-frame-bytes {max_frame_bytes}: must be in 1024..2^40")
    for option, value in (("--timeout-s", timeout_s), ("--idle-timeout-s", idle_timeout_s)):
        if not (math.isfinite(value) and 0 < value <= 86400):
            raise InvalidOption(f"{option} {value:g}: must be in (0, 86400] seconds")
    token = read_token(token_file)
    if insecure_no_token:
        if token is not None:
            raise InvalidOption("--insecure-no-token: a token is given too (--token-file or $SPLITOPT_AGENT_TOKEN); "
                                "drop one")
        if not address.is_loopback:
            raise InvalidOption(f"--insecure-no-token: only on a loopback address, not --listen {listen}")
        token = b""
    elif token is None:
        raise InvalidOption(f"no token: give --token-file FILE or set ${TOKEN_ENV} (the controller needs the same "
                            f"one), or --insecure-no-token on loopback")
    return AgentConfig(name=name or socket.gethostname(), host=address.host, port=address.port, token=token,
                       threads=threads, memory_bytes=memory_bytes if memory_bytes is not None else total_memory_bytes(),
                       max_frame_bytes=max_frame_bytes, timeout_s=timeout_s, idle_timeout_s=idle_timeout_s)


def _serve(config, ready_file: Optional[Path]) -> None:
    import json
    import logging
    import os
    import signal
    import sys

    from splitopt.agents.server import AgentServer
    from splitopt.core.child_processes import sigterm_interrupts
    from splitopt.core.errors import InvalidOption
    from splitopt.netrun.frames import FrameError

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    try:
        server = AgentServer(config)
    except FrameError as e:
        raise InvalidOption(f"--listen: {e}") from None
    previous = sigterm_interrupts()
    try:
        print(f"splitopt agent '{config.name}' listening on {server.address} (protocol "
              f"{server.info()['protocol']}, {config.threads} thread(s), memory {config.memory_bytes:,} bytes"
              f"{', NO TOKEN' if not config.token else ''})", flush=True)
        if ready_file is not None:
            tmp = ready_file.with_name(ready_file.name + ".tmp")
            tmp.write_text(json.dumps({"name": config.name, "address": str(server.address), "pid": os.getpid()}))
            tmp.replace(ready_file)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print(f"splitopt agent '{config.name}' stopped", flush=True)
