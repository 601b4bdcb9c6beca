"""Agent addresses: ``HOST:PORT`` (``[V6]:PORT`` for an IPv6 literal) and the controller's
list of agents, given either inline or as a JSON file.

* inline (``--agents edge=10.0.0.2:7431,cloud=10.0.0.3:7431``): ``NAME=HOST:PORT``
  entries separated by commas; every agent reaches every other at the address given;
* a JSON file (``--agents agents.json``; what a testbed writes, where an agent reaches a
  peer at another address than the controller does)::

      {"edge":  {"address": "10.0.0.2:7431", "peers": {"cloud": "10.1.0.3:7431"}},
       "cloud": {"address": "10.0.0.3:7431", "peers": {"edge": "10.1.0.2:7431"}}}

  ``peers`` is optional; a peer left out is reached at its ``address``.

Names are the devices of the instance (1 to 64 characters of letters, digits and
``_.-``). A bad entry is one line naming it (:class:`InvalidOption`, exit 2).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from splitopt.core.errors import InvalidOption

#: the port ``splitopt agent`` listens on when ``--listen`` gives none
DEFAULT_PORT = 7431
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Address:
    """A TCP address: ``host`` (a name or an IP literal, without brackets) and ``port``."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        """Whether the host is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(text: str, option: str = "--listen", default_port: int | None = None) -> Address:
    """``HOST:PORT`` / ``[V6]:PORT`` (``HOST`` alone with ``default_port``); InvalidOption
    (one line naming ``option`` and the text) otherwise. Port 0: the system's choice."""
    text = str(text).strip()
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d{1,5}))?|([^:\[\]\s]+)(?::(\d{1,5}))?", text)
    if m is None:
        raise InvalidOption(f"{option} {text!r}: not HOST:PORT (an IPv6 address as [ADDRESS]:PORT)")
    host = m.group(1) or m.group(3)
    port_text = m.group(2) if m.group(1) else m.group(4)
    if port_text is None:
        if default_port is None:
            raise InvalidOption(f"{option} {text!r}: no port (HOST:PORT)")
        port = default_port
    else:
        port = int(port_text)
    if not 0 <= port <= 65535:
        raise InvalidOption(f"{option} {text!r}: port {port} is not in 0..65535")
    if m.group(1):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidOption(f"{option} {text!r}: [{host}] is not an IPv6 address") from None
    return Address(host, port)


@dataclass(frozen=True)
class AgentSpec:
    """One agent as the controller knows it: its ``name`` (a device of the instance), the
    ``address`` the controller reaches it at and, per other agent, the address this one
    reaches it at (:meth:`peer_address`)."""

    name: str
    address: Address
    peers: dict[str, Address] = field(default_factory=dict)


@dataclass(frozen=True)
class Agents:
    """The agents of a run by name, in the order given."""

    specs: dict[str, AgentSpec]

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def __getitem__(self, name: str) -> AgentSpec:
        return self.specs[name]

    def peer_address(self, source: str, target: str) -> Address:
        """The address agent ``source`` reaches agent ``target`` at."""
        return self.specs[source].peers.get(target, self.specs[target].address)


def _name(text: str, option: str, entry: str) -> str:
    if not NAME.match(text):
        raise InvalidOption(f"{option} {entry!r}: agent name {text!r} is not 1-64 letters, digits or _.-")
    return text


def parse_agents(text: str, option: str = "--agents") -> Agents:
    """The agents of ``--agents``: a JSON file when ``text`` names an existing file or ends
    in ``.json``, else the inline ``NAME=HOST:PORT,...`` form (module docstring)."""
    text = str(text).strip()
    if text.endswith(".json") or (text and "=" not in text and Path(text).is_file()):
        return read_agents_file(Path(text), option)
    specs: dict[str, AgentSpec] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            raise InvalidOption(f"{option} {text!r}: an empty entry (NAME=HOST:PORT,NAME=HOST:PORT)")
        name, sep, addr = entry.partition("=")
        if not sep:
            raise InvalidOption(f"{option} {entry!r}: not NAME=HOST:PORT")
        name = _name(name.strip(), option, entry)
        if name in specs:
            raise InvalidOption(f"{option} {entry!r}: agent {name!r} is given twice")
        specs[name] = AgentSpec(name, parse_address(addr, f"{option} {name}="))
    return Agents(specs)


def read_agents_file(path: Path, option: str = "--agents") -> Agents:
    """The agents of a JSON file (module docstring); InvalidOption naming the file and
    the bad entry."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidOption(f"{option} {path}: cannot read the file ({e.strerror or type(e).__name__})") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidOption(f"{option} {path}: not a JSON file ({type(e).__name__})") from None
    where = f"{option} {path}"
    if not isinstance(data, dict) or not data:
        raise InvalidOption(f"{where}: must be an object {{name: {{\"address\": \"HOST:PORT\", \"peers\": {{...}}}}}}")
    specs: dict[str, AgentSpec] = {}
    for name, entry in data.items():
        _name(str(name), where, str(name))
        if not isinstance(entry, dict) or "address" not in entry or not set(entry) <= {"address", "peers"}:
            raise InvalidOption(f"{where}: agent {name!r} must be {{\"address\": \"HOST:PORT\", \"peers\": "
                                f"{{other: \"HOST:PORT\"}}}} (peers optional)")
        address = parse_address(str(entry["address"]), f"{where}: {name}.address")
        peers_in = entry.get("peers", {})
        if not isinstance(peers_in, dict):
            raise InvalidOption(f"{where}: {name}.peers must be an object {{other: \"HOST:PORT\"}}")
        peers = {}
        for other, addr in peers_in.items():
            if other not in data or other == name:
                raise InvalidOption(f"{where}: {name}.peers names {other!r}, not another agent of the file")
            peers[str(other)] = parse_address(str(addr), f"{where}: {name}.peers.{other}")
        specs[str(name)] = AgentSpec(str(name), address, peers)
    return Agents(specs)
