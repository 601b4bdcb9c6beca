"""Real ``splitopt agent`` processes on loopback for the agent tests: started on port 0
with a ready file (the address read back from it), stopped with SIGTERM (it must exit
0), and the check that no child process is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TOKEN = "agent-test-token-0123456789abcdef"
#: ``python -c`` program: the command line with torch (and what needs it) unimportable
BLOCKING = ("import sys\nfor name in {names!r}:\n    sys.modules[name] = None\n"
            "sys.argv = ['splitopt', *sys.argv[1:]]\nfrom splitopt.cli import main\nmain()\n")
WITHOUT_TORCH = ("torch", "transformers", "sklearn")
START_TIMEOUT_S = 30.0


class AgentProcess:
    """One agent: ``name``, ``address`` (HOST:PORT), ``proc``; :meth:`stop` ends it.
    ``block_torch``: torch cannot be imported in the agent (a device with the onnx extra
    alone); ``block``: more packages that cannot be imported."""

    def __init__(self, tmp: Path, name: str, *args: str, token: str | None = TOKEN, block_torch: bool = False,
                 block: tuple[str, ...] = ()) -> None:
        blocked = (WITHOUT_TORCH if block_torch else ()) + block
        self.name = name
        ready = tmp / f"{name}.ready.json"
        ready.unlink(missing_ok=True)
        self.stderr_path = tmp / f"{name}.stderr.txt"
        env = dict(os.environ)
        env.pop("SPLITOPT_AGENT_TOKEN", None)
        if token is not None:
            env["SPLITOPT_AGENT_TOKEN"] = token
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, *(("-c", BLOCKING.format(names=blocked)) if blocked else ("-m", "splitopt")), "agent", "--listen", "127.0.0.1:0", "--name", name,
             "--ready-file", str(ready), "--timeout-s", "10", *args],
            stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.is_file():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"agent {name} did not start: {self.log()}")
            time.sleep(0.05)
        self.address = json.loads(ready.read_text())["address"]

    def log(self) -> str:
        self.stderr.flush()
        return self.stderr_path.read_text()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> int:
        """SIGTERM, then the exit status (killed after 10 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.stderr.close()
        return self.proc.returncode


def wait_for_log(agent: AgentProcess, text: str, timeout_s: float = 10.0) -> str:
    """The first line of ``agent``'s log that holds ``text``, once it is there (an
    AssertionError after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while text not in agent.log():
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not in the log of {agent.name}: {agent.log()}")
        time.sleep(0.05)
    return next(line for line in agent.log().splitlines() if text in line)


def children(pid: int | None = None) -> list[int]:
    """The live child processes of ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def export_edge_cloud(source: str, folder: Path, name: str, calibration, edge_layers: int, samples: int,
                      edge_memory_bytes: float) -> dict:
    """The user model ``source`` (a ``build()`` factory's file text) profiled as a
    split_bits edge/cloud instance (devices 'edge' and 'cloud' on the eyeriss/tpu presets),
    cut after its first ``edge_layers`` layers and exported by ``splitopt export``'s
    function at 32 bits (float) and at 4 bits: ``{"parts": {bits: (manifest, files)},
    "names": the layer names, "x": samples inputs, "unsplit": the model's outputs on them}``."""
    import torch

    from splitopt.agents.chain import export_parts
    from splitopt.core import presets
    from splitopt.families.edge_cloud.plan import uniform_plan
    from splitopt.torch.export_parts import export_plan
    from splitopt.torch.models import build_model
    from splitopt.torch.profile import profile

    (folder / f"{name}.py").write_text(source)
    spec = f"{folder / name}.py:build"
    namespace: dict = {}
    exec(source, namespace)
    torch.manual_seed(0)
    module, example = namespace["build"]()
    edge = dict(presets.eyeriss_edge(), name="edge", bit_widths=[4, 8, 16, 32])
    cloud = dict(presets.tpu_cloud(), name="cloud", bit_widths=[8, 16, 32])
    link = dict(presets.uplink_3mbps(), source="edge", target="cloud")
    inst = profile(module, example, [edge, cloud], [link],
                   {"problem": "split_bits", "edge": "edge", "cloud": "cloud", "bit_widths": [4, 8, 16, 32],
                    "cloud_bits": 32, "edge_memory_bytes": edge_memory_bytes, "error_budget": None},
                   name=name, calibration=calibration, bits=(4, 8, 16, 32))
    names = [layer.name for layer in inst.layers]
    parts = {}
    for bits in (32, 4):
        plan = uniform_plan(inst, names[:edge_layers], bits=bits)
        report = export_plan(inst, plan, model=spec, fmt="onnx", directory=folder / f"bits{bits}", seed=0, samples=1)
        assert report["ok"], report
        parts[bits] = export_parts(folder / f"bits{bits}")
    module, _, _, inputs, _ = build_model(spec, 0, inst)
    x = inputs(samples)
    with torch.no_grad():
        unsplit = module(x).numpy()
    return {"parts": parts, "names": names, "x": x.numpy(), "unsplit": unsplit}
