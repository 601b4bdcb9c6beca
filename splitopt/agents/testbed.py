"""Heterogeneous devices and shaped links on ONE Linux machine, for tests and benchmarks of
device agents: :class:`Testbed`, a context manager that makes them and removes them.

Topology (``emulated: "netns"``, where this process may make namespaces and cgroups):

- every device is a network namespace ``so-<pid>-<n>-DEVICE`` (``<pid>`` the process that
  made the testbed, ``<n>`` its count in that process, so parallel test workers never
  collide) with its loopback up;
- a control veth pair joins the root namespace to every device, unshaped: the device's
  control address (``address`` in :meth:`Testbed.agents_map`) is reachable from the root
  namespace, where the controller runs;
- every link is a veth pair between the two devices' namespaces; each end's egress is
  shaped by a ``tbf`` qdisc at the rate of the direction leaving it, so a device reaches a
  linked peer (``peers``) only through the shaped pair. Devices without a link between them
  have no path to each other;
- addresses: one private /24 per testbed (default the first free 10.213.K.0/24, checked
  against the root namespace's routes and addresses under a host-wide lock; a given block
  that overlaps them is refused in one line); the /30 at 4i is device i's control pair
  (root .4i+1, device .4i+2), the /30 at 128+4j link j's pair (end a .+1, end b .+2);
- every device has a cgroup with a CFS quota of its CPU share (``cpu=0.3``: 30 % of one
  core, 1.5 ms per 5 ms period by default; cgroup v1's ``cpu`` controller or v2's
  ``cpu.max``);
  commands started in a device run in its namespace (``nsenter --net``) and its cgroup from
  their first instruction, with ``OMP/MKL/OPENBLAS_NUM_THREADS`` set to its thread count;
  a device with a share is pinned to ceil(share) CPUs (``taskset``, the devices taking
  this process's CPUs in turn), where its quota is enforced evenly;

tbf parameters per direction at R bits/s: burst = max(4 x 1514, R/8 x 4 ms) bytes, limit =
burst + R/8 x 50 ms bytes (:mod:`splitopt.agents.testbed_spec`). tbf counts link-layer
bytes, so TCP payload reaches about 95 % of R (1448 payload bytes per 1514-byte frame).

What is NOT emulated: latency. This kernel has no ``netem`` qdisc ("Specified qdisc kind is
unknown"), so a link's latency (``latency_ms`` of its spec) is recorded in the description
for the senders to pace, as :mod:`splitopt.netrun.pacing` does; the veth itself adds
microseconds. A CPU share is a share of this host's cores, not a slower core: cache, memory
bandwidth and instruction set stay the host's.

Fallback (``emulated: "loopback"``): where namespaces, veths, tbf or cgroups are not
permitted (not root, no iproute2, a container without the capability, a read-only cgroup
tree), or when asked (``emulation="loopback"`` or ``SPLITOPT_TESTBED_EMULATION=loopback``),
the testbed says why in one line and runs every device as a plain process on 127.0.0.1 at
its own port: links unshaped (the senders' pacing only), no CPU quota; a device with a
CPU share is pinned to ceil(share) of this process's CPUs (``taskset``) and told its thread
count. The description records which of the two it is.

Teardown (leaving the ``with``, on an exception, on Ctrl-C, SIGTERM or SIGHUP: the testbed
turns those into KeyboardInterrupt while it is up and restores the previous handlers after)
ends every process it started and anything else in its namespaces, cgroups or carrying its
mark (environment ``SPLITOPT_TESTBED=PREFIX``), then removes its root-side veths (each
takes its pair along), its namespaces (their link veths and qdiscs go with them; the kernel
frees a namespace's interfaces shortly after), cgroups and temporary files. Only what
carries its prefix is touched. :func:`cleanup_testbeds` removes what a killed testbed left.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from splitopt.agents import testbed_cgroups as cgroups
from splitopt.agents import testbed_net as net
from splitopt.agents.testbed_net import TestbedError
from splitopt.agents.testbed_spec import DEFAULT_PORT, DeviceSpec, LinkSpec, check_topology, tbf_parameters
from splitopt.core.errors import InvalidOption

#: how a testbed emulates devices: "auto" (namespaces where permitted, else loopback)
EMULATIONS = ("auto", "netns", "loopback")
#: the environment variable that forces an emulation when a testbed is asked for "auto"
ENV_EMULATION = "SPLITOPT_TESTBED_EMULATION"
#: the mark every process started in a device carries in its environment (value: the prefix)
ENV_MARK = "SPLITOPT_TESTBED"
#: and the device it runs as
ENV_DEVICE = "SPLITOPT_TESTBED_DEVICE"
#: the command started in every device by :meth:`Testbed.start_agents` (placeholders: :meth:`Testbed.command`)
DEFAULT_AGENT_COMMAND = ("{python} -m splitopt agent --listen {address} --allow-remote "
                         "--token-file {token_file} --threads {threads} --name {device}")
#: placeholders a command template may use
PLACEHOLDERS = ("python", "address", "port", "control", "device", "threads", "token_file", "prefix")
#: seconds a process has after SIGTERM before SIGKILL
TERMINATE_GRACE_S = 3.0
#: signals that end a testbed (as KeyboardInterrupt) while it is up
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: where ``ip netns`` keeps its namespaces
NETNS_DIRS = (Path("/run/netns"), Path("/var/run/netns"))
#: an empty environment of a process with an executable is read again this many times, this
#: far apart (s): the process is in the middle of an exec (:func:`_environ`)
EXEC_RETRIES, EXEC_RETRY_S = 50, 0.002
#: environment variables that tell numeric libraries their thread count
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

_count = itertools.count()
_count_lock = threading.Lock()


def new_prefix() -> str:
    """A prefix no other testbed of this host has now: ``so-<this pid>-<count>``."""
    with _count_lock:
        return f"so-{os.getpid()}-{next(_count)}"


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")


@dataclass
class _Device:
    """Where one device lives once the testbed is up."""

    spec: DeviceSpec
    index: int
    host: str = "127.0.0.1"  # the control address (reachable from the root namespace)
    port: int = DEFAULT_PORT
    namespace: Optional[str] = None
    cgroup: Optional[Path] = None
    cpus: Optional[list[int]] = None  # the CPUs it is pinned to (devices with a share)
    peers: dict[str, str] = field(default_factory=dict)  # other device -> its address on our link


@dataclass
class _Link:
    spec: LinkSpec
    index: int
    interface: str
    ip_a: str = "127.0.0.1"
    ip_b: str = "127.0.0.1"


def check_period(period_us: Any, devices: Sequence[DeviceSpec], label: str = "testbed cpu_period_us") -> None:
    """InvalidOption (one line naming ``label``) unless ``period_us`` is a CFS period the
    kernel takes (1 ms to 1 s) at which every device's share gets at least 1 ms."""
    if isinstance(period_us, bool) or not isinstance(period_us, int) \
            or not cgroups.MIN_PERIOD_US <= period_us <= cgroups.MAX_PERIOD_US:
        raise InvalidOption(f"{label} {period_us!r}: must be an integer in "
                            f"[{cgroups.MIN_PERIOD_US}, {cgroups.MAX_PERIOD_US}]")
    low = min((d.cpu for d in devices if d.cpu is not None), default=None)
    if low is not None and low * period_us < cgroups.MIN_QUOTA_US:
        raise InvalidOption(f"{label} {period_us}: a share of {low:g} would get a quota under the kernel's 1 ms "
                            f"per period; give a period of at least {math.ceil(cgroups.MIN_QUOTA_US / low)} us")


class Testbed:
    """Devices with CPU shares and links with rates on this machine (module docstring).

    ``devices``/``links``: :class:`DeviceSpec`/:class:`LinkSpec` (or the short forms via
    :func:`splitopt.agents.testbed_spec.parse_devices` / ``parse_link``). ``port``: the
    port the devices' agents listen at (in each namespace; loopback: free ports).
    ``subnet``: the /24 to use (default: the first free one of 10.213.0.0/16).
    ``emulation``: "auto", "netns" (refused where not permitted) or "loopback".
    ``token_file``: the agents' shared secret (``{token_file}``); default a fresh one in a
    private temporary directory, removed at teardown. ``notice``: where the one-line notices
    go (default stderr). ``cpu_period_us``: the CFS period of the devices' CPU quotas
    (default 5 ms, or longer where the smallest share needs it for the kernel's 1 ms
    quota: :func:`splitopt.agents.testbed_cgroups.default_period_us`, which says why).
    ``pin_cpus``: pin every device with a share to ceil(share) CPUs of its own (default;
    in netns mode its quota is then enforced evenly, :meth:`_assign_cpus`).

    Use as ``with Testbed(...) as tb:``; :meth:`start` / :meth:`start_agents` run commands
    in devices, :meth:`agents_map` and :meth:`describe` say where they are.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, devices: Sequence[DeviceSpec], links: Sequence[LinkSpec] = (), *, port: int = DEFAULT_PORT,
                 subnet: Optional[str] = None, emulation: str = "auto", token_file: Optional[Path] = None,
                 notice: Optional[Callable[[str], None]] = None, grace_s: float = TERMINATE_GRACE_S,
                 cpu_period_us: Optional[int] = None, pin_cpus: bool = True):
        check_topology(list(devices), list(links))
        if cpu_period_us is None:
            cpu_period_us = cgroups.default_period_us(d.cpu for d in devices)
        check_period(cpu_period_us, devices)
        self.cpu_period_us = cpu_period_us
        self.pin_cpus = bool(pin_cpus)
        if emulation not in EMULATIONS:
            raise InvalidOption(f"testbed emulation {emulation!r}: must be one of {', '.join(EMULATIONS)}")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise InvalidOption(f"testbed port {port!r}: must be an integer in [1, 65535]")
        self.prefix = new_prefix()
        self.port = port
        self.emulation = emulation
        self.emulated: Optional[str] = None  # "netns" or "loopback" once up
        self.fallback_reason: Optional[str] = None
        self.cpu_control = "none"
        self.block: Optional[IPv4Network] = net.parse_block(subnet) if subnet is not None else None
        self._notice = notice or _say
        self._grace_s = grace_s
        self._given_token = token_file
        self._token: Optional[Path] = None
        self._devices = {d.name: _Device(d, i) for i, d in enumerate(devices)}
        self._links = [_Link(spec, j, f"ln{j}") for j, spec in enumerate(links)]
        self._hierarchy: Optional[cgroups.CpuHierarchy] = None
        # what this testbed made, removed at teardown
        self._namespaces: list[str] = []
        self._root_links: list[str] = []
        self._cgroups: list[Path] = []
        self._workdir: Optional[Path] = None
        self._processes: list[tuple[str, subprocess.Popen]] = []
        self._handlers: dict[int, Any] = {}
        self._up = False

    # ------------------------------------------------------------ life cycle

    def __enter__(self) -> Testbed:
        self.up()
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            self.down()
        except TestbedError as e:
            if error is None:
                raise
            self._notice(f"testbed {self.prefix}: teardown: {e}")

    def up(self) -> None:
        """Make the namespaces, links, qdiscs and cgroups (or choose loopback); on any
        failure, or a signal meanwhile, remove what was made and re-raise."""
        if self._up:
            raise TestbedError(f"testbed {self.prefix} is already up")
        self._up = True
        try:
            self._catch_signals()
            mode = self._choose_emulation()
            if mode == "netns":
                self._make_network()
                self._make_cgroups()
            else:
                self._place_on_loopback()
            self.emulated = mode
            self._fill_peers()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """End every process and remove everything this testbed made (idempotent). Ending
        signals are held meanwhile and the previous handlers restored after; TestbedError
        after trying everything when something could not be removed."""
        if not self._up:
            return
        held = set(ENDING_SIGNALS)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, held) if hasattr(signal, "pthread_sigmask") else None
        problems: list[str] = []
        try:
            for step in (self._end_processes, self._remove_network, self._remove_cgroups, self._remove_files):
                try:
                    step(problems)
                except Exception as e:  # the next steps still run: leave as little as possible behind
                    problems.append(f"{step.__name__.strip('_').replace('_', ' ')}: {e}")
            self._up = False
        finally:
            self._restore_signals()
            if blocked is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if problems:
            raise TestbedError(f"testbed {self.prefix}: " + "; ".join(problems))

    def _remove_network(self, problems: list[str]) -> None:
        # root-side ends first: deleting one removes its pair at once, where a deleted
        # namespace takes its interfaces with it only later (the kernel frees it lazily)
        for name in reversed(self._root_links):
            if not net.delete_root_link(name) and name in net.root_links():
                problems.append(f"interface {name} could not be removed")
        self._root_links.clear()
        for ns in reversed(self._namespaces):
            if not net.delete_namespace(ns) and ns in net.namespaces():
                problems.append(f"namespace {ns} could not be removed")
        self._namespaces.clear()

    def _remove_cgroups(self, problems: list[str]) -> None:
        for path in reversed(self._cgroups):
            try:
                cgroups.remove(path)
            except OSError as e:
                problems.append(f"cgroup {path}: {e.strerror or e}")
        self._cgroups.clear()

    def _remove_files(self, problems: list[str]) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self._token = None

    def _catch_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def interrupt(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        for sig in ENDING_SIGNALS:
            previous = signal.getsignal(sig)
            if previous is signal.SIG_IGN:
                continue  # ignored on purpose (a background job): leave it so
            self._handlers[sig] = signal.signal(sig, interrupt)

    def _restore_signals(self) -> None:
        for sig, previous in self._handlers.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._handlers.clear()

    def _choose_emulation(self) -> str:
        asked = self.emulation
        if asked == "auto":
            forced = os.environ.get(ENV_EMULATION, "").strip()
            if forced:
                if forced not in EMULATIONS:
                    raise InvalidOption(f"{ENV_EMULATION}={forced!r}: must be one of {', '.join(EMULATIONS)}")
                asked = forced
                if forced == "loopback":
                    self.fallback_reason = f"{ENV_EMULATION}=loopback"
        if asked == "loopback":
            self.fallback_reason = self.fallback_reason or "asked for loopback"
            return "loopback"
        reason = self._why_not_netns()
        if reason is None:
            return "netns"
        if asked == "netns":
            raise TestbedError(f"testbed: network namespaces and cgroups are not usable here: {reason}")
        self.fallback_reason = reason
        self._notice(f"testbed {self.prefix}: {reason}; the devices run as processes on loopback "
                     f"(links unshaped: sender pacing only; no CPU quota)")
        return "loopback"

    def _why_not_netns(self) -> Optional[str]:
        found = netns_unavailable(self.prefix)
        if isinstance(found, str):
            return found
        self._hierarchy = dataclasses.replace(found, period_us=self.cpu_period_us)
        return None

    # ------------------------------------------------------------ making it

    def _make_network(self) -> None:
        with net.address_lock():
            used = net.host_networks()
            if self.block is not None:
                net.check_block(self.block, used)
            else:
                self.block = net.pick_block(used)
            for dev in self._devices.values():
                ns = f"{self.prefix}-{dev.spec.name}"
                net.add_namespace(ns)
                self._namespaces.append(ns)
                dev.namespace = ns
                net.run_tool("ip", "-n", ns, "link", "set", "lo", "up")
                root_name = net.root_link_name(self.prefix, dev.index)
                net.run_tool("ip", "link", "add", root_name, "type", "veth", "peer", "name", "ctl", "netns", ns)
                self._root_links.append(root_name)
                root_ip, dev.host = net.control_pair(self.block, dev.index)
                dev.port = self.port
                net.configure_control_pair(ns, root_name, f"{self.prefix} {dev.spec.name} control", root_ip, dev.host)
        for link in self._links:
            a, b = self._devices[link.spec.a], self._devices[link.spec.b]
            assert a.namespace is not None and b.namespace is not None
            link.ip_a, link.ip_b = net.link_pair(self.block, link.index)
            net.add_link_pair(a.namespace, b.namespace, link.interface, link.ip_a, link.ip_b,
                              f"{self.prefix} {link.spec.name}")
            for end in (a, b):
                assert end.namespace is not None
                net.add_tbf(end.namespace, link.interface, tbf_parameters(link.spec.rate_from(end.spec.name)).tc_args())

    def _make_cgroups(self) -> None:
        assert self._hierarchy is not None
        self.cpu_control = self._hierarchy.label + ("+affinity" if self._assign_cpus() else "")
        for dev in self._devices.values():
            path = self._hierarchy.root / f"{self.prefix}-{dev.spec.name}"
            try:
                self._hierarchy.create(path.name, dev.spec.cpu)
            finally:
                if path.is_dir():
                    self._cgroups.append(path)
            dev.cgroup = path

    def _place_on_loopback(self) -> None:
        import socket

        self.cpu_control = "affinity" if self._assign_cpus() else "none"
        held = []  # free ports, all held until each device has its own, then released for their programs
        try:
            for dev in self._devices.values():
                held.append(socket.socket())
                held[-1].bind(("127.0.0.1", 0))
                dev.port = held[-1].getsockname()[1]
        finally:
            for s in held:
                s.close()

    def _assign_cpus(self) -> bool:
        """Give every device with a CPU share ceil(share) of this process's CPUs, in turn
        (``dev.cpus``); False where ``taskset`` or the affinity call is missing. A quota
        on a process that moves between CPUs is enforced unevenly (each CPU holds its own
        slice of the period's runtime): MobileNetV2 at a share of 0.3 and a 10 ms period
        took a median 41 ms in one process and 51 ms in the next unpinned, 31.5 and 30.1
        pinned to one CPU."""
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if not self.pin_cpus or not cpus or net.find_tool("taskset") is None:
            return False
        offset = 0
        for dev in self._devices.values():
            if dev.spec.cpu is not None:
                n = min(len(cpus), max(1, math.ceil(dev.spec.cpu)))
                dev.cpus = sorted(cpus[(offset + k) % len(cpus)] for k in range(n))
                offset += n
        return True

    def _fill_peers(self) -> None:
        for link in self._links:
            a, b = self._devices[link.spec.a], self._devices[link.spec.b]
            a.peers[b.spec.name] = f"{link.ip_b}:{b.port}"
            b.peers[a.spec.name] = f"{link.ip_a}:{a.port}"

    # ------------------------------------------------------------ processes

    def _device(self, name: str) -> _Device:
        try:
            return self._devices[name]
        except KeyError:
            raise InvalidOption(f"testbed device {name!r}: not one of {', '.join(self._devices)}") from None

    @property
    def token_file(self) -> Path:
        """The agents' token file: the one given, else a fresh 32-byte hex token in a private
        temporary file (made on first use, removed at teardown)."""
        if self._given_token is not None:
            return self._given_token
        if self._token is None:
            self._token = self._private_dir() / "token"
            fd = os.open(self._token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
        return self._token

    def _private_dir(self) -> Path:
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        return self._workdir

    def listen_address(self, device: str) -> str:
        """HOST:PORT the device's agent binds to: every address of its namespace
        (0.0.0.0) under netns, 127.0.0.1 and its own port on loopback."""
        dev = self._device(device)
        return f"{'0.0.0.0' if self.emulated == 'netns' else '127.0.0.1'}:{dev.port}"

    def address(self, device: str) -> str:
        """HOST:PORT at which the root namespace (the controller) reaches the device."""
        dev = self._device(device)
        return f"{dev.host}:{dev.port}"

    def command(self, template: str, device: str) -> list[str]:
        """``template`` split as a shell would and filled for ``device``: ``{python}`` this
        interpreter, ``{address}`` the listen address (:meth:`listen_address`), ``{port}``,
        ``{control}`` the control address (:meth:`address`), ``{device}``, ``{threads}``,
        ``{token_file}``, ``{prefix}``."""
        dev = self._device(device)
        check_template(template)
        values = {"python": sys.executable, "address": self.listen_address(device), "port": str(dev.port),
                  "control": self.address(device), "device": device, "threads": str(dev.spec.thread_count),
                  "prefix": self.prefix}
        if "{token_file}" in template:
            values["token_file"] = str(self.token_file)
        return [part.format(**values) for part in shlex.split(template)]

    def start(self, device: str, argv: Sequence[str], *, env: Optional[dict[str, str]] = None,
              **popen: Any) -> subprocess.Popen:
        """Start ``argv`` in ``device``: in its namespace and cgroup (netns), or pinned to its
        CPUs (loopback); in a new session; its environment this process's plus ``env``, the
        thread count and the testbed's mark. Ended at teardown."""
        if not self._up or self.emulated is None:
            raise TestbedError(f"testbed {self.prefix} is not up")
        dev = self._device(device)
        full_env = dict(os.environ)
        full_env.update({var: str(dev.spec.thread_count) for var in THREAD_VARIABLES})
        full_env.update(env or {})
        full_env.update({ENV_MARK: self.prefix, ENV_DEVICE: device})
        popen.setdefault("start_new_session", True)
        proc = subprocess.Popen(self._wrapped(dev, list(argv)), env=full_env, **popen)
        self._processes.append((device, proc))
        return proc

    def _wrapped(self, dev: _Device, argv: list[str]) -> list[str]:
        if self.emulated == "netns":
            assert dev.cgroup is not None and dev.namespace is not None
            nsenter = net.find_tool("nsenter")
            assert nsenter is not None  # checked by the probe
            netns = self._netns_path(dev)
            # the shell joins the cgroup, then becomes nsenter (same pid), which enters the
            # namespace and becomes the command: nothing of it runs outside either
            script = 'echo $$ > "$0" || exit 125; exec "$@"'
            pin = [net.find_tool("taskset") or "taskset", "-c", ",".join(map(str, dev.cpus))] if dev.cpus else []
            return ["/bin/sh", "-c", script, str(cgroups.procs_file(dev.cgroup)), *pin, nsenter, f"--net={netns}",
                    "--", *argv]
        if dev.cpus:
            taskset = net.find_tool("taskset")
            if taskset is not None:
                return [taskset, "-c", ",".join(map(str, dev.cpus)), *argv]
        return argv

    @staticmethod
    def _netns_path(dev: _Device) -> Path:
        assert dev.namespace is not None
        found = next((d / dev.namespace for d in NETNS_DIRS if (d / dev.namespace).exists()), None)
        if found is None:
            raise TestbedError(f"namespace {dev.namespace}: not found under {', '.join(map(str, NETNS_DIRS))}")
        return found

    def start_agents(self, template: str = DEFAULT_AGENT_COMMAND, **popen: Any) -> dict[str, subprocess.Popen]:
        """Start ``template`` (:meth:`command`) in every device; the processes by device."""
        return {name: self.start(name, self.command(template, name), **popen) for name in self._devices}

    def processes(self, device: Optional[str] = None) -> list[subprocess.Popen]:
        """The processes started (in ``device``), oldest first."""
        return [p for d, p in self._processes if device is None or d == device]

    def wait_listening(self, device: str, timeout_s: float = 30.0) -> None:
        """Wait until the device's latest process listens at its port (its own network
        namespace's TCP table; nothing connects); TestbedError naming the device when the
        process ends first or ``timeout_s`` passes."""
        procs = self.processes(device)
        if not procs:
            raise TestbedError(f"device {device}: nothing started there")
        dev = self._device(device)
        proc, port = procs[-1], dev.port
        netns = self._netns_path(dev) if self.emulated == "netns" else None
        deadline = time.monotonic() + timeout_s
        while True:
            code = proc.poll()
            if code is not None:
                raise TestbedError(f"device {device}: its command exited with status {code} before listening "
                                   f"at port {port}")
            # under netns, only once the process is in the device's namespace (not the host's table)
            if (netns is None or _same_namespace(proc.pid, netns)) and listening(proc.pid, port):
                return
            if time.monotonic() > deadline:
                raise TestbedError(f"device {device}: nothing listening at port {port} after {timeout_s:g} s")
            time.sleep(0.05)

    def _end_processes(self, problems: list[str]) -> None:
        """SIGTERM to every started process's group, SIGKILL after the grace period; then
        SIGKILL to anything left in the devices' cgroups and namespaces or carrying the mark."""
        alive = [p for _, p in self._processes if p.poll() is None]
        for p in alive:
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + self._grace_s
        for p in alive:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
        leftovers = set(marked_processes(self.prefix))
        for dev in self._devices.values():
            if dev.cgroup is not None:
                leftovers.update(cgroups.pids(dev.cgroup))
            if dev.namespace is not None and dev.namespace in self._namespaces:
                leftovers.update(net.namespace_pids(dev.namespace))
        leftovers.discard(os.getpid())
        _kill_all(leftovers)
        for _, p in self._processes:
            try:
                p.wait(self._grace_s)
            except subprocess.TimeoutExpired:
                problems.append(f"process {p.pid} did not end")
        self._processes.clear()

    # ------------------------------------------------------------ description

    def agents_map(self) -> dict[str, dict[str, Any]]:
        """``{device: {"address": "HOST:PORT", "peers": {other: "HOST:PORT"}}}``: where the
        controller reaches each device, and where each device reaches its linked peers
        (over their shaped link; a device without a link to another has no entry for it)."""
        return {name: {"address": self.address(name), "peers": dict(dev.peers)} for name, dev in self._devices.items()}

    def describe(self) -> dict[str, Any]:
        """Everything a planner or report needs to know about the emulation: the agents' map
        per device plus its CPU share and how it is enforced, each link direction's rate,
        tbf parameters and recorded latency, and whether namespaces or loopback were used."""
        devices: dict[str, Any] = {}
        for name, dev in self._devices.items():
            quota = None
            if dev.cgroup is not None and dev.spec.cpu is not None and self._hierarchy is not None:
                quota = self._hierarchy.quota_us(dev.spec.cpu)
            devices[name] = {
                "address": self.address(name), "listen": self.listen_address(name), "peers": dict(dev.peers),
                "cpu": dev.spec.cpu, "threads": dev.spec.thread_count, "namespace": dev.namespace,
                "cgroup": None if dev.cgroup is None else str(dev.cgroup),
                "cfs_quota_us": quota, "cfs_period_us": None if quota is None else self.cpu_period_us,
                "cpus": dev.cpus,
            }
        links = []
        for link in self._links:
            shaped = self.emulated == "netns"
            for src, dst, src_ip, dst_ip in ((link.spec.a, link.spec.b, link.ip_a, link.ip_b),
                                             (link.spec.b, link.spec.a, link.ip_b, link.ip_a)):
                rate = link.spec.rate_from(src)
                links.append({
                    "from": src, "to": dst, "rate_bps": rate, "latency_ms": float(link.spec.latency_ms),
                    "shaped_by": "tbf" if shaped else "none",
                    "tbf": tbf_parameters(rate).as_dict() if shaped else None,
                    "latency_emulated": False, "interface": link.interface if shaped else None,
                    "from_address": src_ip, "to_address": dst_ip,
                })
        return {
            "prefix": self.prefix, "emulated": self.emulated, "fallback_reason": self.fallback_reason,
            "cpu_control": self.cpu_control, "subnet": None if self.block is None else str(self.block),
            "latency": "not emulated by the kernel (no netem here): senders pace each link's latency_ms",
            "token_file": None if self._given_token is None and self._token is None else str(self.token_file),
            "devices": devices, "links": links,
        }


def netns_unavailable(prefix: Optional[str] = None) -> Union[str, cgroups.CpuHierarchy]:
    """Why this process cannot make namespaced devices (one phrase: not Linux, not root, no
    iproute2/nsenter, namespaces, veth or tbf refused, no writable cgroup CPU controller),
    else the cgroup hierarchy to use. Tries a throw-away namespace and cgroup named
    ``PREFIX-probe`` (default: a fresh prefix) and removes them."""
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform})"
    if os.geteuid() != 0:
        return "not running as root"
    prefix = prefix or new_prefix()
    reason = net.probe(prefix)
    if reason is not None:
        return reason
    found = cgroups.find_hierarchy()
    if isinstance(found, str):
        return found
    return cgroups.probe(found, f"{prefix}-probe") or found


def check_template(template: str) -> None:
    """InvalidOption naming a placeholder the command template uses that does not exist."""
    import string

    try:
        parts = shlex.split(template)
    except ValueError as e:
        raise InvalidOption(f"--command {template!r}: {e}") from None
    if not parts:
        raise InvalidOption("--command: empty")
    for part in parts:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(part) if f is not None]
        except ValueError as e:
            raise InvalidOption(f"--command {template!r}: {e}") from None
        for f in fields:
            if f not in PLACEHOLDERS:
                raise InvalidOption(f"--command: unknown placeholder {{{f}}} (known: "
                                    f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)})")


def listening(pid: int, port: int) -> bool:
    """Whether a TCP socket listens at ``port`` in the network namespace of process ``pid``."""
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def _same_namespace(pid: int, netns: Path) -> bool:
    """Whether process ``pid`` is in the network namespace ``ip netns`` keeps at ``netns``."""
    try:
        mine, theirs = os.stat(f"/proc/{pid}/ns/net"), os.stat(netns)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def _environ(entry: Path) -> bytes:
    """``/proc/PID/environ``. A process in the middle of an ``execve`` (a wrapper such as
    ``taskset`` or ``nsenter`` becoming the command) reads as an empty environment for an
    instant, until the new program's stack is set up: an empty one of a process with an
    executable (kernel threads and zombies have none) is read again, up to
    :data:`EXEC_RETRIES` times :data:`EXEC_RETRY_S` apart. OSError where unreadable."""
    env = (entry / "environ").read_bytes()
    if env:
        return env
    try:
        os.readlink(entry / "exe")
    except OSError:
        return env
    for _ in range(EXEC_RETRIES):
        time.sleep(EXEC_RETRY_S)
        env = (entry / "environ").read_bytes()
        if env:
            break
    return env


def marked_processes(prefix: str) -> list[int]:
    """The processes whose environment carries ``SPLITOPT_TESTBED=prefix`` (those this
    process may read; one in the middle of an exec is waited for, :func:`_environ`)."""
    mark = f"{ENV_MARK}={prefix}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            env = _environ(entry)
        except OSError:
            continue
        if mark in env.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _owner_alive(prefix: str) -> bool:
    m = net.PREFIX_PATTERN.fullmatch(prefix)
    if m is None:
        return False
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftover_prefixes() -> set[str]:
    """Prefixes of testbeds that have something on this host (namespaces, root-side veths,
    cgroups, marked processes, private directories)."""
    import re

    found: set[str] = set()
    head = re.compile(r"(so-\d+-\d+)-")
    names: list[str] = []
    if net.find_tool("ip") is not None:
        names += net.namespaces()
        for link in net.root_links():
            p = net.prefix_of_root_link(link)
            if p is not None:
                found.add(p)
    hierarchy = cgroups.find_hierarchy()
    if not isinstance(hierarchy, str):
        names += [p.name for p in hierarchy.groups("so-")]
    names += [p.name for p in Path(tempfile.gettempdir()).glob("so-*-*-*")]
    for n in names:
        m = head.match(n)
        if m:
            found.add(m.group(1))
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue
            for item in env.split(b"\0"):
                if item.startswith(f"{ENV_MARK}=".encode()):
                    value = item.split(b"=", 1)[1].decode(errors="replace")
                    if net.PREFIX_PATTERN.fullmatch(value):
                        found.add(value)
    return found


def cleanup_testbeds(prefix: Optional[str] = None) -> list[str]:
    """Remove what testbeds left behind: with ``prefix``, everything of that testbed
    (even if its process still runs); without, of every testbed whose process has ended.
    Returns one line per thing removed. Touches only names and marks of the form
    ``so-<pid>-<n>``."""
    if prefix is not None:
        if not net.PREFIX_PATTERN.fullmatch(prefix):
            raise InvalidOption(f"--prefix {prefix!r}: a testbed prefix is so-<pid>-<n>, e.g. so-1234-0")
        targets = [prefix]
    else:
        targets = sorted(p for p in leftover_prefixes() if not _owner_alive(p))
    removed: list[str] = []
    hierarchy = cgroups.find_hierarchy()
    have_ip = net.find_tool("ip") is not None
    for p in targets:
        head = p + "-"
        ours = [n for n in net.namespaces() if n.startswith(head)] if have_ip else []
        groups = [] if isinstance(hierarchy, str) else hierarchy.groups(head)
        pids = set(marked_processes(p))
        for ns in ours:
            pids.update(net.namespace_pids(ns))
        for g in groups:
            pids.update(cgroups.pids(g))
        pids.discard(os.getpid())
        _kill_all(pids)
        removed += [f"process {pid}" for pid in sorted(pids)]
        if have_ip:
            for link in net.root_links():
                if net.prefix_of_root_link(link) == p and net.delete_root_link(link):
                    removed.append(f"interface {link}")
        for ns in ours:
            if net.delete_namespace(ns):
                removed.append(f"namespace {ns}")
        for g in groups:
            try:
                if cgroups.remove(g):
                    removed.append(f"cgroup {g}")
            except OSError as e:
                raise TestbedError(f"cgroup {g}: {e.strerror or e}") from None
        for d in Path(tempfile.gettempdir()).glob(f"{head}*"):
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
                removed.append(f"directory {d}")
    return removed
