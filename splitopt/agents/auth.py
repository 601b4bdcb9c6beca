"""The shared secret of the agents and their controller, and the mutual challenge-response
that proves it on every connection without sending it.

Token: the contents of a file (``--token-file``, trailing whitespace removed) or of the
environment variable :data:`TOKEN_ENV`; at least :data:`MIN_TOKEN_CHARS` characters. The
agent refuses to start without one unless told ``--insecure-no-token`` (then the token is
empty: anyone who speaks the protocol is let in; loopback only).

Handshake (messages of :mod:`splitopt.agents.protocol`), each side with a fresh 32-byte
nonce from :func:`secrets.token_bytes`::

    client -> agent   HELLO      {role, name, nonce: Nc}
    agent  -> client  CHALLENGE  {name, nonce: Na, proof: HMAC(token, AGENT_LABEL || Nc || Na)}
    client            checks the agent's proof (the agent knows the token), else ERROR and close
    client -> agent   AUTH       {proof: HMAC(token, CLIENT_LABEL || Na || Nc)}
    agent             checks the client's proof, else ERROR and close
    agent  -> client  WELCOME    {info}

HMAC is HMAC-SHA256 (:mod:`hmac`), proofs are compared with :func:`hmac.compare_digest`
and travel as hex. The token never crosses the wire; a recorded proof does not open
another connection (the other side's nonce is new each time), and the two labels keep a
proof made by one side from being replayed as the other's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from splitopt.core.errors import InvalidOption

#: the environment variable holding the token when no file is given
TOKEN_ENV = "SPLITOPT_AGENT_TOKEN"
#: the shortest token accepted (characters)
MIN_TOKEN_CHARS = 16
#: bytes of each side's nonce
NONCE_BYTES = 32
AGENT_LABEL = b"splitopt-agent/1 agent proof\x00"
CLIENT_LABEL = b"splitopt-agent/1 client proof\x00"


def read_token(token_file: Path | str | None, option: str = "--token-file") -> bytes | None:
    """The token from ``token_file``, else from :data:`TOKEN_ENV`, else None; InvalidOption
    (one line naming the file or variable) for an unreadable file or a token shorter than
    :data:`MIN_TOKEN_CHARS`."""
    if token_file is not None:
        path = Path(token_file)
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
            raise InvalidOption(f"{option} {path}: cannot read the token ({reason})") from None
        where = f"{option} {path}"
    else:
        env = os.environ.get(TOKEN_ENV)
        if env is None:
            return None
        text, where = env.strip(), f"${TOKEN_ENV}"
    if len(text) < MIN_TOKEN_CHARS:
        raise InvalidOption(f"{where}: the token has {len(text)} characters, at least {MIN_TOKEN_CHARS} are needed "
                            f"(e.g. python -c 'import secrets; print(secrets.token_hex(32))')")
    return text.encode("utf-8")


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def proof(token: bytes, label: bytes, first: bytes, second: bytes) -> str:
    """HMAC-SHA256 of ``label || first || second`` under ``token``, hex."""
    return hmac.new(token, label + first + second, hashlib.sha256).hexdigest()


def agent_proof(token: bytes, client_nonce: bytes, agent_nonce: bytes) -> str:
    """What the agent sends to prove it knows the token."""
    return proof(token, AGENT_LABEL, client_nonce, agent_nonce)


def client_proof(token: bytes, client_nonce: bytes, agent_nonce: bytes) -> str:
    """What a client (controller or peer agent) sends to prove it knows the token."""
    return proof(token, CLIENT_LABEL, agent_nonce, client_nonce)


def proof_matches(expected: str, given: object) -> bool:
    """Whether ``given`` (from the wire) equals ``expected``, in constant time."""
    if not isinstance(given, str) or len(given) != len(expected):
        return False
    return hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", "replace"))


def nonce_from(value: object) -> bytes | None:
    """The nonce in a hex field, or None when it is not :data:`NONCE_BYTES` bytes of hex."""
    if not isinstance(value, str) or len(value) != 2 * NONCE_BYTES:
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None
