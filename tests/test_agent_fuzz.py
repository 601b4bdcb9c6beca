"""Malformed input to a real ``splitopt agent`` (drawn by hypothesis): random bytes, frames
with wrong fields, agent messages with malformed headers or blobs, before and after the
handshake. Each connection sends its bytes and closes its side; the agent must refuse it
(or answer it) without dying and keep serving: a real controller session works after
every batch. The agent runs with torch blocked, as on a device with the onnx extra
alone; the message decoder is also fuzzed in-process (only ProtocolError escapes it)."""

from __future__ import annotations

import json
import socket
import struct

import pytest
from hypothesis import given, settings, strategies as st

from agent_helpers import TOKEN, AgentProcess, children
from splitopt.agents import protocol
from splitopt.agents.addresses import parse_address
from splitopt.agents.auth import client_proof
from splitopt.agents.channel import Channel
from splitopt.agents.client import AgentClient
from splitopt.netrun.frames import HEAD, LENGTH, MAGIC, Kind, encode

KEY = TOKEN.encode()


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    a = AgentProcess(tmp_path_factory.mktemp("fuzz"), "fuzz", "--max-frame-bytes", "65536", block_torch=True)
    yield a
    assert a.stop() == 0, a.log()
    assert not children()


def send_and_close(agent: AgentProcess, data: bytes, authenticate: bool) -> None:
    address = parse_address(agent.address)
    sock = socket.create_connection((address.host, address.port), timeout=10)
    try:
        if authenticate:
            ch = Channel(sock, 10, 1 << 20, "fuzz")
            nonce = bytes(32)
            ch.send("HELLO", {"role": "controller", "name": "fuzz", "nonce": nonce.hex()})
            agent_nonce = bytes.fromhex(ch.read(("CHALLENGE",)).get("nonce"))
            ch.send("AUTH", {"proof": client_proof(KEY, nonce, agent_nonce)})
            ch.read(("WELCOME",))
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # the agent answers or refuses, then closes
                pass
        except OSError:
            pass  # the agent closed first (a refused frame header): fine
    finally:
        sock.close()


def still_serving(agent: AgentProcess) -> None:
    assert agent.proc.poll() is None, agent.log()
    with AgentClient("fuzz", agent.address, KEY, 10) as c:
        assert c.info()["runtimes"]["onnxruntime"]


def message(head: dict, blobs: list[bytes]) -> bytes:
    raw = json.dumps(head).encode()
    return encode(Kind.AGENT, "", protocol.HEADER_LENGTH.pack(len(raw)) + raw + b"".join(blobs))


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40) | st.text(max_size=20),
                           lambda v: st.lists(v, max_size=3) | st.dictionaries(st.text(max_size=8), v, max_size=3),
                           max_leaves=8)
types = st.sampled_from(list(protocol.TYPES) + ["FOO", "", "RUN "])
headers = st.fixed_dictionaries(
    {"v": st.sampled_from([1, 1, 1, 2, 0, "1", None]), "type": types,
     "blobs": st.one_of(st.lists(st.integers(0, 64), max_size=3), json_values)},
    optional={"samples": json_values, "run": json_values, "manifest": json_values, "device": json_values,
              "input": json_values, "bytes": json_values, "repeats": json_values, "address": json_values,
              "nonce": json_values, "role": st.sampled_from(["controller", "peer", "admin"]), "proof": json_values})
frames = st.one_of(
    st.binary(max_size=200),  # noise
    st.builds(lambda magic, version, kind, name_len, length, rest: HEAD.pack(magic, version, kind, name_len)
              + LENGTH.pack(length) + rest,
              st.sampled_from([MAGIC, b"SPNX", b"\0\0\0\0"]), st.integers(0, 3), st.integers(0, 9),
              st.integers(0, 70), st.integers(0, 2 ** 63), st.binary(max_size=80)),
    st.builds(message, headers, st.lists(st.binary(max_size=64), max_size=3)),
    st.builds(lambda n, body: encode(Kind.AGENT, "", struct.pack("<I", n) + body), st.integers(0, 2 ** 32 - 1),
              st.binary(max_size=100)),
)


@settings(max_examples=60)
@given(data=st.lists(frames, min_size=1, max_size=3).map(b"".join), authenticate=st.booleans())
def test_malformed_input_is_refused_and_the_agent_serves_on(agent, data, authenticate):
    send_and_close(agent, data, authenticate)
    assert agent.proc.poll() is None, agent.log()


def test_after_the_fuzzing_a_controller_is_served(agent):
    send_and_close(agent, b"GET / HTTP/1.0\r\n\r\n", authenticate=False)  # one refusal here too (xdist workers)
    still_serving(agent)
    lines = agent.log().splitlines()
    assert lines and all(l.startswith("splitopt agent 'fuzz': refused ") for l in lines), lines[:5]


@settings(max_examples=300)
@given(payload=st.one_of(st.binary(max_size=300), st.builds(lambda m: m[16:], st.builds(message, headers,
                                                                                       st.lists(st.binary(max_size=8))))))
def test_the_decoder_raises_only_protocol_errors(payload):
    try:
        msg = protocol.decode_payload(payload)
    except protocol.ProtocolError as e:
        assert "\n" not in str(e)
        return
    assert msg.type in protocol.TYPES and isinstance(msg.fields, dict)
    assert sum(map(len, msg.blobs)) == len(payload) - 4 - struct.unpack_from("<I", payload)[0]
