"""``splitopt testbed up|down``: emulated devices and links on this machine for device
agents (:mod:`splitopt.agents.testbed`). ``up`` makes the testbed, starts a command (by
default the device agent) in every device, writes where they are and stays in the
foreground until Ctrl-C or SIGTERM, then removes everything; ``down`` removes what a
killed ``up`` left behind."""

import json
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from splitopt.cli.common import OneLineErrorsGroup

testbed_app = typer.Typer(
    cls=OneLineErrorsGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Emulate devices (CPU shares) and links (rates) on this Linux machine for device agents: network "
         "namespaces joined by veth pairs shaped by tbf, one cgroup CPU quota per device; plain processes on "
         "loopback where that is not permitted.",
)

#: seconds between checks that the devices' processes still run
POLL_S = 0.25


class Emulation(str, Enum):
    auto = "auto"
    netns = "netns"
    loopback = "loopback"


def _description_path(out: Path) -> Path:
    return out.with_name(out.name[: -len(".json")] + ".description.json") if out.name.endswith(".json") \
        else out.with_name(out.name + ".description.json")


@testbed_app.command("up")
def up_command(
    devices: str = typer.Option(..., "--devices", help="Devices, comma-separated: NAME\\[:cpu=SHARE]\\[:threads=N], e.g. edge:cpu=0.3:threads=1,server:cpu=1.0,cloud:cpu=2. SHARE: fraction of one core (cgroup CPU quota); no cpu=: no quota."),
    link: Optional[list[str]] = typer.Option(None, "--link", help="A link (repeat for more): A-B:RATE\\[/RATE_BA]\\[:LATENCY], e.g. edge-server:10mbit, edge-server:10mbit/2mbit:5ms. RATE in bits/s (8e6) or bit/kbit/mbit/gbit; each direction shaped by tbf. LATENCY (ms) is recorded for the senders to pace: the kernel does not delay packets."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write {device: {\"address\": HOST:PORT, \"peers\": {other: HOST:PORT}}} (what agent controllers read) here once every device listens, and the full description (CPU shares, link rates, tbf parameters, emulation) beside it as NAME.description.json. Default: print the map."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="The agents' shared token file ({token_file}); made with a fresh token (mode 600) when missing. Default: a fresh token in a private temporary file, removed at the end."),
    command: str = typer.Option("", "--command", help="The command started in every device, with placeholders {python} {address} (where it listens) {port} {control} {device} {threads} {token_file} {prefix}. Default: the device agent, `{python} -m splitopt agent --listen {address} --allow-remote --token-file {token_file} --threads {threads} --name {device}`."),
    port: Optional[int] = typer.Option(None, "--port", help="Port the devices' commands listen at inside their namespaces (default 7431, the agent's own; loopback: a free port each)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Private /24 for the testbed's addresses (default: the first free 10.213.K.0/24); refused when the host already routes any of it."),
    emulation: Emulation = typer.Option(Emulation.auto, "--emulation", help="auto: namespaces where permitted (root, iproute2, cgroups), else loopback; netns: refuse where not permitted; loopback: plain processes on 127.0.0.1, links and CPU not shaped."),
    ready_timeout: float = typer.Option(30.0, "--ready-timeout", help="Seconds every device's command has to listen at its port before the testbed gives up (0: do not wait)."),
    log_dir: Optional[Path] = typer.Option(None, "--log-dir", help="Write each device's output to DIR/DEVICE.log (default: this terminal)."),
    pin: bool = typer.Option(True, "--pin/--no-pin", help="Pin every device with a share to ceil(share) CPUs of its own, the devices taking this machine's CPUs in turn (a quota on a process that moves between CPUs is enforced unevenly)."),
    cpu_period_us: Optional[int] = typer.Option(None, "--cpu-period-us", help="CFS period of the devices' CPU quotas, microseconds (1000 to 1000000). Default: 5000, or longer where the smallest share needs it to get the kernel's 1 ms quota (10000 for cpu=0.1). Below about 5 ms the throttling itself slows a part that follows an idle wait; above it a share acts less like a slower core on short work."),
) -> None:
    """Make the testbed, start a command (the device agent) in every device and stay until
    Ctrl-C or SIGTERM; then end every process and remove every namespace, veth, qdisc and
    cgroup it made."""
    from splitopt.cli.common import check_output_path, console, error_line, errors, print_json
    from splitopt.core.errors import InvalidOption

    with errors():
        from splitopt.agents.testbed import DEFAULT_AGENT_COMMAND, Testbed, check_period, check_template
        from splitopt.agents.testbed_net import TestbedError
        from splitopt.agents.testbed_spec import DEFAULT_PORT, parse_devices, parse_link

        specs = parse_devices(devices)
        links = [parse_link(item) for item in link or []]
        template = command or DEFAULT_AGENT_COMMAND
        check_template(template)
        if cpu_period_us is not None:
            check_period(cpu_period_us, specs, "--cpu-period-us")
        if not 0 <= ready_timeout <= 3600:
            raise InvalidOption(f"--ready-timeout {ready_timeout!r}: must be seconds in [0, 3600]")
        check_output_path(out, "--out", (".json",))
        if out is not None:
            check_output_path(_description_path(out), "--out (its description)")
        if log_dir is not None and not log_dir.is_dir():
            raise InvalidOption(f"--log-dir {log_dir}: not a directory")
        if token_file is not None:
            _ensure_token(token_file)
        testbed = Testbed(specs, links, port=DEFAULT_PORT if port is None else port, subnet=subnet, emulation=emulation.value, token_file=token_file,
                          notice=error_line, cpu_period_us=cpu_period_us, pin_cpus=pin)
        logs: list[Any] = []
        try:
            with testbed:
                for spec in specs:
                    output: dict[str, Any] = {}
                    if log_dir is not None:
                        logs.append(open(log_dir / f"{spec.name}.log", "ab"))
                        output = {"stdout": logs[-1], "stderr": logs[-1]}
                    testbed.start(spec.name, testbed.command(template, spec.name), **output)
                if ready_timeout > 0:
                    for spec in specs:
                        testbed.wait_listening(spec.name, ready_timeout)
                agents = testbed.agents_map()
                if out is not None:  # the map last: once it exists, both are complete
                    _write_whole(_description_path(out), testbed.describe())
                    _write_whole(out, agents)
                    console.print(f"testbed {testbed.prefix} ({testbed.emulated}): {len(specs)} devices; "
                                  f"agents map in {out}, description in {_description_path(out)}")
                else:
                    print_json(agents)
                for name, where in agents.items():
                    console.print(f"  {name}: {where['address']}" + "".join(
                        f", reaches {peer} at {address}" for peer, address in where["peers"].items()))
                console.print("Ctrl-C or SIGTERM removes it.")
                while True:
                    for spec in specs:
                        code = testbed.processes(spec.name)[-1].poll()
                        if code is not None:
                            raise TestbedError(f"device {spec.name}: its command exited with status {code}")
                    time.sleep(POLL_S)
        except KeyboardInterrupt:
            console.print(f"testbed {testbed.prefix}: stopped and removed")
        finally:
            for f in logs:
                f.close()


def _write_whole(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so that a reader sees the whole file or none (a rename)."""
    import os

    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def _ensure_token(path: Path) -> None:
    """Make ``path`` with a fresh 32-byte hex token (mode 600) when it does not exist."""
    import os
    import secrets

    if path.exists():
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        from splitopt.core.errors import InvalidOption

        raise InvalidOption(f"--token-file {path}: cannot create it ({e.strerror or e})") from None
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")


@testbed_app.command("down")
def down_command(
    prefix: Optional[str] = typer.Option(None, "--prefix", help="The testbed to remove, so-<pid>-<n> (as `up` printed), even while its process runs. Default: every testbed whose process has ended."),
) -> None:
    """Remove what testbeds left behind (a killed `up`): their processes, namespaces,
    veths, cgroups and temporary files; nothing else is touched."""
    from splitopt.cli.common import console, errors

    with errors():
        from splitopt.agents.testbed import cleanup_testbeds

        removed = cleanup_testbeds(prefix)
        for line in removed:
            console.print(f"removed {line}")
        if not removed:
            console.print("nothing to remove")
