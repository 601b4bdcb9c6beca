"""The testbed's network, made with iproute2 (``ip``, ``tc``) through subprocess: network
namespaces, veth pairs, addresses, ``tbf`` qdiscs; the address block a testbed takes and
the check that nothing on the host already uses it; what a crashed testbed left behind.

Addresses: a testbed takes one /24 block (default: the first free 10.213.K.0/24, K = 0..255;
free = no route or address of the root namespace overlaps it, checked and taken under a
file lock so that parallel testbeds do not pick the same one). Inside the block, device i's
control pair is the /30 at offset 4i (root end .4i+1, device end .4i+2) and link j's pair
the /30 at offset 128+4j (end a .128+4j+1, end b .128+4j+2).

Names: namespace ``PREFIX-DEVICE``; inside it, ``ctl`` (the control veth end) and ``lnJ``
(link J's end); in the root namespace the control ends are ``so<pid hex>x<n hex>c<i>``
(interface names have at most 15 characters) with the alias ``PREFIX DEVICE control``,
where PREFIX = ``so-<pid>-<n>`` names the process that made the testbed and its count.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from splitopt.core.errors import InvalidOption, SplitoptError

#: the pool of /24 blocks a testbed picks from when not given one
POOL = ipaddress.IPv4Network("10.213.0.0/16")
#: offsets in a block: control /30s from 0, link /30s from 128
LINK_OFFSET = 128
#: a testbed's prefix, and the root-side control interface names derived from it
PREFIX_PATTERN = re.compile(r"so-(\d+)-(\d+)")
ROOT_LINK_PATTERN = re.compile(r"so([0-9a-f]+)x([0-9a-f]+)c(\d+)")
#: seconds an ``ip``/``tc`` call may take
TOOL_TIMEOUT_S = 20.0
#: where tools live when PATH lacks the sbin directories
SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
#: the lock that serializes picking and taking address blocks
LOCK_DIRS = ("/run/lock", "/var/lock", "/tmp")


class TestbedError(SplitoptError):
    """A system call of the testbed failed (the message names the command and its error)."""

    __test__ = False  # not a pytest test class


def find_tool(name: str) -> Optional[str]:
    """The path of ``name`` (PATH, then the sbin directories), None where absent."""
    found = shutil.which(name)
    if found:
        return found
    for d in SBIN:
        path = Path(d, name)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def run_tool(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip``/``tc``/... (looked up with :func:`find_tool`); TestbedError naming the
    command and its stderr when it fails and ``check``."""
    tool = find_tool(argv[0])
    if tool is None:
        raise TestbedError(f"{argv[0]}: not found (iproute2)")
    try:
        done = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(argv)}: no answer in {TOOL_TIMEOUT_S:g} s") from None
    if check and done.returncode != 0:
        message = " ".join((done.stderr or done.stdout).split()) or f"exit {done.returncode}"
        raise TestbedError(f"{' '.join(argv)}: {message}")
    return done


def root_link_name(prefix: str, index: int) -> str:
    """The root-side control interface of device ``index`` of testbed ``prefix`` (<= 15 chars)."""
    m = PREFIX_PATTERN.fullmatch(prefix)
    if m is None:
        raise ValueError(f"testbed prefix {prefix!r} is not so-<pid>-<n>")
    name = f"so{int(m.group(1)):x}x{int(m.group(2)):x}c{index}"
    if len(name) > 15:
        raise TestbedError(f"testbed {prefix}: interface name {name} longer than 15 characters")
    return name


def prefix_of_root_link(name: str) -> Optional[str]:
    """The testbed prefix a root-side control interface name was derived from, else None."""
    m = ROOT_LINK_PATTERN.fullmatch(name)
    return None if m is None else f"so-{int(m.group(1), 16)}-{int(m.group(2), 16)}"


# ---------------------------------------------------------------- addresses

def host_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks the root namespace already uses: every route's destination (all
    tables; the default route excepted) and every address's subnet."""
    used: list[ipaddress.IPv4Network] = []
    routes = json.loads(run_tool("ip", "-j", "-4", "route", "show", "table", "all").stdout or "[]")
    for r in routes:
        dst = r.get("dst", "")
        if dst in ("", "default"):
            continue
        try:
            used.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
        except ValueError:
            continue
    for link in json.loads(run_tool("ip", "-j", "-4", "addr", "show").stdout or "[]"):
        for a in link.get("addr_info", []):
            used.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return used


def check_block(block: ipaddress.IPv4Network, used: list[ipaddress.IPv4Network]) -> None:
    """InvalidOption naming ``block`` and what on the host already covers it."""
    for net in used:
        if block.overlaps(net):
            raise InvalidOption(f"testbed subnet {block}: the host already routes or holds {net} "
                                f"(pick another private /24)")


def parse_block(text: str) -> ipaddress.IPv4Network:
    """A testbed's /24 block from ``10.213.7.0/24``; one line otherwise."""
    try:
        block = ipaddress.IPv4Network(text)
    except ValueError:
        raise InvalidOption(f"testbed subnet {text!r}: not an IPv4 network such as 10.213.7.0/24") from None
    if block.prefixlen != 24 or not block.is_private:
        raise InvalidOption(f"testbed subnet {text!r}: must be a private IPv4 /24 such as 10.213.7.0/24")
    return block


def pick_block(used: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    """The first /24 of :data:`POOL` nothing in ``used`` overlaps."""
    for block in POOL.subnets(new_prefix=24):
        if not any(block.overlaps(net) for net in used):
            return block
    raise InvalidOption(f"testbed subnet: every /24 of {POOL} is in use on this host (give --subnet)")


def control_pair(block: ipaddress.IPv4Network, index: int) -> tuple[str, str]:
    """(root end, device end) addresses of device ``index``'s control pair."""
    base = int(block.network_address) + 4 * index
    return str(ipaddress.IPv4Address(base + 1)), str(ipaddress.IPv4Address(base + 2))


def link_pair(block: ipaddress.IPv4Network, index: int) -> tuple[str, str]:
    """(end a, end b) addresses of link ``index``."""
    base = int(block.network_address) + LINK_OFFSET + 4 * index
    return str(ipaddress.IPv4Address(base + 1)), str(ipaddress.IPv4Address(base + 2))


@contextmanager
def address_lock() -> Iterator[None]:
    """Held while a testbed checks and takes its block (one host-wide file lock)."""
    for d in LOCK_DIRS:
        if os.path.isdir(d) and os.access(d, os.W_OK):
            path = os.path.join(d, "splitopt-testbed.lock")
            break
    else:
        raise TestbedError("no writable lock directory among " + ", ".join(LOCK_DIRS))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------- namespaces, veths, tbf

def add_namespace(name: str) -> None:
    """``ip netns add NAME`` (fails when it exists: never takes over another's namespace)."""
    run_tool("ip", "netns", "add", name)


def configure_control_pair(namespace: str, root_name: str, alias: str, root_ip: str, device_ip: str) -> None:
    """Address and bring up the control veth made as ``root_name`` in the root namespace
    (``root_ip``/30) and ``ctl`` in ``namespace`` (``device_ip``/30); unshaped."""
    run_tool("ip", "link", "set", "dev", root_name, "alias", alias)
    run_tool("ip", "addr", "add", f"{root_ip}/30", "dev", root_name)
    run_tool("ip", "link", "set", root_name, "up")
    run_tool("ip", "-n", namespace, "addr", "add", f"{device_ip}/30", "dev", "ctl")
    run_tool("ip", "-n", namespace, "link", "set", "ctl", "up")


def add_link_pair(ns_a: str, ns_b: str, dev: str, ip_a: str, ip_b: str, alias: str) -> None:
    """A veth ``dev`` in ``ns_a`` (``ip_a``/30) to ``dev`` in ``ns_b`` (``ip_b``/30),
    made directly in the two namespaces (nothing appears in the root namespace)."""
    run_tool("ip", "link", "add", dev, "netns", ns_a, "type", "veth", "peer", "name", dev, "netns", ns_b)
    for ns, ip in ((ns_a, ip_a), (ns_b, ip_b)):
        run_tool("ip", "-n", ns, "link", "set", "dev", dev, "alias", alias)
        run_tool("ip", "-n", ns, "addr", "add", f"{ip}/30", "dev", dev)
        run_tool("ip", "-n", ns, "link", "set", dev, "up")


def add_tbf(namespace: str, dev: str, tbf_args: list[str]) -> None:
    """tbf as the root qdisc of ``dev`` in ``namespace``: shapes what leaves through it."""
    run_tool("tc", "-n", namespace, "qdisc", "add", "dev", dev, "root", "tbf", *tbf_args)


def namespaces() -> list[str]:
    """The named network namespaces (``ip netns list``)."""
    done = run_tool("ip", "netns", "list", check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def namespace_pids(name: str) -> list[int]:
    """The processes in namespace ``name`` (``ip netns pids``)."""
    done = run_tool("ip", "netns", "pids", name, check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def delete_namespace(name: str) -> bool:
    """Remove namespace ``name`` (its interfaces and qdiscs go with it); whether it existed."""
    return run_tool("ip", "netns", "del", name, check=False).returncode == 0


def root_links() -> list[str]:
    """The interface names of the root namespace."""
    done = run_tool("ip", "-j", "link", "show", check=False)
    try:
        return [link["ifname"] for link in json.loads(done.stdout or "[]")]
    except (ValueError, KeyError, TypeError):
        return []


def delete_root_link(name: str) -> bool:
    """Remove root-side interface ``name`` (its veth peer goes with it); whether it existed."""
    return run_tool("ip", "link", "del", name, check=False).returncode == 0


def probe(prefix: str) -> Optional[str]:
    """Why namespaces, veths and tbf are not usable here (one phrase), or None when a
    throw-away namespace ``PREFIX-probe`` took a veth pair and a tbf qdisc (then removed)."""
    for tool in ("ip", "tc", "nsenter"):
        if find_tool(tool) is None:
            return f"{tool} not found"
    name = f"{prefix}-probe"
    try:
        run_tool("ip", "netns", "add", name)
    except TestbedError as e:
        return f"network namespaces not permitted ({e})"
    try:
        run_tool("ip", "-n", name, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        run_tool("tc", "-n", name, "qdisc", "add", "dev", "p0", "root", "tbf", "rate", "1mbit", "burst", "6056",
                 "limit", "12112")
    except TestbedError as e:
        return f"veth or tbf not available ({e})"
    finally:
        delete_namespace(name)
    return None
