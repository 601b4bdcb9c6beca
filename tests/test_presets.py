"""Device presets (``splitopt.core.presets``): every preset validates inside an instance,
topologies built from presets solve, ``splitopt devices`` lists them, and ``profile
--preset`` builds chains and meshes (the torch part only where torch is installed)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from splitopt.api import parse_instance
from splitopt.cli.profile import Topology
from splitopt.families.topologies import preset_hardware, topology
from splitopt.core import presets
from splitopt.core.errors import InvalidOption
from splitopt.core.result import Status
from splitopt.solve import solve

ROOT = Path(__file__).resolve().parent.parent


def tiny_instance(devices, links, settings) -> dict:
    """Two convolutions on a 3x32x32 image over the given hardware."""
    return {
        "format": "splitopt-instance/1", "name": "tiny",
        "graph": {"inputs": [{"name": "x", "shape": [3, 32, 32], "bits": 8}],
                  "layers": [{"name": "c1", "op": "conv", "inputs": ["x"], "macs": 1.0e6, "weights": 432.0,
                              "output_shape": [16, 16, 16]},
                             {"name": "c2", "op": "conv", "inputs": ["c1"], "macs": 2.0e6, "weights": 4608.0,
                              "output_shape": [8, 8, 8]}]},
        "devices": devices, "links": links, "settings": settings,
    }


@pytest.mark.parametrize("name", presets.preset_names())
def test_every_preset_validates_inside_an_instance(name):
    device = presets.device_preset(name)
    assert device["name"] == name and device["description"]
    cloud = presets.device_preset(name, "cloud")
    bits = 16 if 16 in device["bit_widths"] else 8
    data = tiny_instance([device, cloud], [presets.link(name, "cloud", 1e7)],
                         {"problem": "split", "edge": name, "cloud": "cloud", "cloud_bits": bits})
    inst = parse_instance(copy.deepcopy(data))
    assert inst.device_by_name[name].mac_per_s == device["mac_per_s"]
    assert solve(inst, "brute-force").status is Status.OPTIMAL


def test_presets_state_their_sources():
    for key, (build, source) in presets.DEVICE_PRESETS.items():
        assert source and build.__doc__ and key in presets.preset_names()
    for key in ("pi4", "jetson", "xavier_nx", "phone_npu", "laptop_gpu", "v100"):
        doc = presets.DEVICE_PRESETS[key][0].__doc__
        assert "assumption" in doc and "mac_per_s" in doc and "offchip_bytes_per_s" in doc
        assert "assumption" in presets.device_preset(key)["description"]
    # the V100 and Pi 4 figures the docstrings derive
    assert presets.device_preset("v100")["mac_per_s"] == 125e12 / 2
    assert presets.device_preset("pi4")["mac_per_s"] == 4 * 1.5e9 * 4
    with pytest.raises(InvalidOption, match="unknown"):
        presets.device_preset("cray1")


@pytest.mark.parametrize("kind", ["chain", "mesh"])
def test_topologies_from_presets_solve(kind):
    devices, links, settings = topology(["pi4", "jetson", "jetson", "v100"], kind, 1e7)
    assert [d["name"] for d in devices] == ["pi4", "jetson", "jetson_2", "v100"]
    inst = parse_instance(tiny_instance(devices, links, dict(settings, cloud_bits=16)))
    res = solve(inst, "cpsat")
    assert res.status is Status.OPTIMAL


def test_topology_errors():
    with pytest.raises(InvalidOption, match="exactly 2"):
        topology(["pi4", "jetson", "v100"], "edge-cloud", 1e7)
    with pytest.raises(InvalidOption, match="at least 2"):
        topology(["pi4"], "chain", 1e7)
    with pytest.raises(InvalidOption, match="topology 'ring'"):
        topology(["pi4", "v100"], "ring", 1e7)


def test_profile_preset_hardware():
    # the scenarios as before
    devices, links, settings = preset_hardware("eyeriss", None, 1e7, (2, 4, 6, 8), True)
    assert [d["name"] for d in devices] == ["eyeriss", "tpu"] and settings["problem"] == "split_bits"
    # three device presets: a chain by default; a mesh on request; two: edge/cloud
    devices, links, settings = preset_hardware("pi4,jetson,v100", None, 5e6, (2, 4, 6, 8), True)
    assert settings["problem"] == "chain" and settings["chain"] == ["pi4", "jetson", "v100"]
    assert [l["bandwidth_bits_per_s"] for l in links] == [5e6, 5e6]
    _, links, settings = preset_hardware("pi4,jetson,v100", Topology.mesh, 5e6, (2, 4, 6, 8), True)
    assert settings["problem"] == "mesh" and len(links) == 3
    _, _, settings = preset_hardware("pi4,v100", None, 5e6, (2, 4, 6, 8), True)
    assert settings["problem"] == "split_bits" and settings["bit_widths"] == [8]
    _, _, settings = preset_hardware("eyeriss,v100", None, 5e6, (2, 4, 6, 8), False)
    assert settings["problem"] == "split"
    for bad, match in [("pi4", "at least two"), ("pi4,cray1", "unknown: cray1"), ("nope", "scenario")]:
        with pytest.raises(InvalidOption, match=match):
            preset_hardware(bad, None, 1e7, (2, 4, 6, 8), True)
    with pytest.raises(InvalidOption, match="--topology chain"):
        preset_hardware("eyeriss", Topology.chain, 1e7, (2, 4, 6, 8), True)
    with pytest.raises(InvalidOption, match="--bandwidth"):
        preset_hardware("pi4,v100", None, 0.0, (2, 4, 6, 8), True)


def test_devices_command_json_and_table():
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "splitopt", "devices", "--json"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["preset"] for r in rows] == presets.preset_names()
    assert rows[0]["device"] == presets.device_preset(rows[0]["preset"])
    proc = subprocess.run([sys.executable, "-m", "splitopt", "devices"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "v100" in proc.stdout and "6.25e+13" in proc.stdout


def test_profile_builds_a_chain_from_presets(tmp_path):
    pytest.importorskip("torch")
    from typer.testing import CliRunner

    from splitopt.api import load_instance
    from splitopt.cli import app
    from splitopt.torch.profile import DEFAULT_BITS

    assert tuple(DEFAULT_BITS) == (2, 4, 6, 8)  # what profile offers before torch is imported
    model = tmp_path / "net.py"
    model.write_text("from torch import nn\nimport torch\n\n"
                     "def mlp():\n    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), "
                     "torch.zeros(1, 6)\n")
    out = tmp_path / "chain.json"
    res = CliRunner().invoke(app, ["profile", f"{model}:mlp", "-o", str(out), "--calibration-images", "0",
                                   "--preset", "pi4,jetson,v100", "--bandwidth", "2e7"])
    assert res.exit_code == 0, (res.output, res.exception)
    inst = load_instance(out)
    assert inst.problem == "chain" and inst.settings.chain == ("pi4", "jetson", "v100")
    assert solve(inst, "cpsat").status is Status.OPTIMAL
