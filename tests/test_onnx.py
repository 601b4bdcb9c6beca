"""The ONNX bridge (``splitopt.onnx``, ``splitopt profile MODEL.onnx``) and saved
``torch.export`` programs (``splitopt profile MODEL.pt2``).

Small real torch models built here are exported with ``torch.onnx.export(...,
dynamo=False)`` into tmp_path and profiled; their layers, MACs, weights and shapes must
equal the torch capture of the same module, their error tables the torch bridge's on
the same calibration inputs (same definitions, computed with numpy on onnxruntime's
tensors), and the instances must validate and solve."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from splitopt.core import presets  # noqa: E402
from splitopt.core.errors import InvalidModel, MissingDependency  # noqa: E402
from splitopt.core.result import Status  # noqa: E402
from splitopt.onnx import profile_onnx  # noqa: E402
from splitopt.onnx.graph import load  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.torch.capture import capture  # noqa: E402

FLOAT = {"problem": "split", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [8], "cloud_bits": 16,
         "edge_memory_bytes": 4e6}


class SmallCNN(nn.Module):
    """conv/bn/relu, max pool, conv/bn/relu6, global average pool, flatten, dropout, linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.bn2 = nn.BatchNorm2d(16)
        self.act = nn.ReLU6()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.act(self.bn2(self.conv2(x)))
        return self.fc(self.drop(torch.flatten(self.gap(x), 1)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class ResNet(nn.Module):
    """stem conv, two residual blocks in a Sequential, average pool, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.layer1 = nn.Sequential(Block(16), Block(16))
        self.pool = nn.AvgPool2d(2)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(self.pool(self.layer1(torch.relu(self.stem(x)))).flatten(1))


def _randomize_bn(module: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(7)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module.eval()


def export(module: nn.Module, x: torch.Tensor, path, **kw) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(path), dynamo=False, **kw)
    return str(path)


def same_layers(onnx_layers, torch_layers, names: bool = True) -> None:
    """Layer by layer: op, MACs, weights, output shape and (by position) inputs equal."""
    assert len(onnx_layers) == len(torch_layers), ([l["name"] for l in onnx_layers], [l["name"] for l in torch_layers])
    o_index = {l["name"]: i for i, l in enumerate(onnx_layers)} | {"input": -1}
    t_index = {l["name"]: i for i, l in enumerate(torch_layers)} | {"input": -1}
    for o, t in zip(onnx_layers, torch_layers):
        where = (o["name"], t["name"])
        assert o["op"] == t["op"], where
        assert o["macs"] == t["macs"], where
        assert o["weights"] == t["weights"], where
        assert o["output_shape"] == t["output_shape"], where
        assert [o_index[i] for i in o["inputs"]] == [t_index[i] for i in t["inputs"]], where
        if names:
            assert o["name"] == t["name"]


def torch_layers(module, x):
    return capture(module, x).layer_dicts()


@pytest.fixture(autouse=True)
def _quiet_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # onnxruntime and torch may write caches there


def test_small_cnn_matches_the_torch_capture_and_solves(tmp_path):
    torch.manual_seed(0)
    net = _randomize_bn(SmallCNN())
    x = torch.randn(1, 3, 16, 16)
    path = export(net, x, tmp_path / "small.onnx")
    g = load(path)
    same_layers([l.to_dict() for l in g.layers], torch_layers(net, x))
    conv1, pool, conv2, gap, fc = g.layers
    assert conv1.op == "conv" and conv1.macs == 8 * 16 * 16 * 27 and conv1.weights == 8 * 27 + 8
    assert conv2.op == "dwconv" and "hardtanh" not in conv2.fused and conv2.fused  # Clip fused (ReLU6)
    assert gap.output_shape == [16] and gap.macs == 16 * 8 * 8 and fc.macs == 160

    # error tables: the torch bridge's definitions on the same calibration inputs
    calib = torch.randn(3, 3, 16, 16)
    inst = profile_onnx(path, [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()],
                        dict(FLOAT, problem="split_bits", bit_widths=[2, 4, 6, 8], error_budget=0.05),
                        calibration=calib.numpy(), measure_latency=True, repeats=3)
    from splitopt.torch.profile import profile

    ref = profile(net, x, [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()],
                  dict(FLOAT, problem="split_bits", bit_widths=[2, 4, 6, 8], error_budget=0.05), calibration=calib)
    for lo, lt in zip(inst.layers, ref.layers):
        for b in (2, 4, 6, 8):
            assert lo.activation_error[b] == pytest.approx(lt.activation_error[b], rel=1e-3, abs=1e-9), (lo.name, b)
            assert lo.weight_error.get(b, 0.0) == pytest.approx(lt.weight_error.get(b, 0.0), rel=1e-3, abs=1e-9)
        errs = [lo.activation_error[b] for b in (2, 4, 6, 8)]
        assert errs == sorted(errs, reverse=True), lo.name
        assert lo.latency_ms["host"] > 0
    assert "host" in inst.device_by_name
    assert solve(inst, "cpsat").status is Status.OPTIMAL


def test_residual_blocks_match_the_torch_capture(tmp_path):
    torch.manual_seed(1)
    net = _randomize_bn(ResNet())
    x = torch.randn(1, 3, 16, 16)
    path = export(net, x, tmp_path / "res.onnx")
    g = load(path)
    ref = torch_layers(net, x)
    same_layers([l.to_dict() for l in g.layers], ref)
    adds = [l for l in g.layers if l.op == "add"]
    assert [l.name for l in adds] == ["layer1.0.add", "layer1.1.add"] and adds[0].fused == ["relu"]
    inst = profile_onnx(path, calibration=4)  # the eyeriss preset, W8A8 budget
    assert inst.problem == "split_bits" and inst.settings.error_budget > 0
    mean = {b: np.mean([l.activation_error[b] + l.weight_error.get(b, 0.0) for l in inst.layers]) for b in (2, 4, 6, 8)}
    assert mean[2] > mean[4] > mean[6] > mean[8] > 0
    assert solve(inst, "cpsat").status is Status.OPTIMAL


def test_matmul_add_is_a_linear_layer_and_dynamic_batch_is_one(tmp_path):
    class Tokens(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 32)
            self.fc2 = nn.Linear(32, 4)

        def forward(self, x):  # (1, 5, 8): nn.Linear on 3-D exports as MatMul + Add
            return torch.softmax(self.fc2(torch.nn.functional.gelu(self.fc1(x))), -1)

    torch.manual_seed(2)
    net = Tokens().eval()
    x = torch.randn(1, 5, 8)
    path = export(net, x, tmp_path / "tok.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    g = load(path)
    same_layers([l.to_dict() for l in g.layers], torch_layers(net, x))
    assert [l.op for l in g.layers] == ["linear", "linear", "softmax"]
    assert g.layers[0].weights == 8 * 32 + 32 and g.layers[0].fused == ["gelu"]


def test_dynamic_shapes_need_input_shape(tmp_path):
    torch.manual_seed(0)
    net = _randomize_bn(SmallCNN())
    path = export(net, torch.randn(1, 3, 16, 16), tmp_path / "dyn.onnx", input_names=["image"],
                  dynamic_axes={"image": {0: "n", 2: "h", 3: "w"}})
    with pytest.raises(InvalidModel, match="input 'image' has a dynamic dimension 2.*--input-shape") as e:
        profile_onnx(path, calibration=0)
    assert "\n" not in str(e.value)
    inst = profile_onnx(path, calibration=0, input_shape="1,3,32,32")
    assert inst.inputs[0].shape == (3, 32, 32) and inst.layers[0].output_shape == (8, 32, 32)
    assert inst.problem == "split"


def test_cli_profiles_onnx_and_pt2_files(tmp_path):
    from typer.testing import CliRunner

    from splitopt import load_instance
    from splitopt.cli import app

    torch.manual_seed(0)
    net = _randomize_bn(ResNet())
    x = torch.randn(1, 3, 16, 16)
    path = export(net, x, tmp_path / "res.onnx")
    out = tmp_path / "res.json"
    res = CliRunner().invoke(app, ["profile", path, "-o", str(out), "--calibration", "2", "--measure", "--edge-host",
                                   "--repeats", "2"])
    assert res.exit_code == 0, res.output
    inst = load_instance(out)
    assert inst.name == "res" and inst.settings.edge == "host" and all(l.latency_ms["host"] > 0 for l in inst.layers)
    assert solve(inst, "cpsat").status is Status.OPTIMAL
    bad = CliRunner().invoke(app, ["profile", str(tmp_path / "missing.onnx"), "-o", str(out)])
    assert bad.exit_code == 2 and "not found" in bad.output and "\n" not in bad.output.strip()

    # a saved torch.export program: the same layers as the torch capture of the module
    ep = torch.export.export(net, (x,))
    torch.export.save(ep, str(tmp_path / "res.pt2"))
    res = CliRunner().invoke(app, ["profile", str(tmp_path / "res.pt2"), "-o", str(out), "--calibration", "2"])
    assert res.exit_code == 0, res.output
    pt2 = load_instance(out)
    same_layers([{"name": l.name, "op": l.op, "macs": l.macs, "weights": l.weights, "inputs": list(l.inputs),
                  "output_shape": list(l.output_shape)} for l in pt2.layers], torch_layers(net, x))
    assert pt2.problem == "split_bits"


def test_exported_program_module_profiles_and_a_factory_of_one_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from splitopt.cli import app
    from splitopt.torch.profile import profile

    torch.manual_seed(0)
    net = _randomize_bn(SmallCNN())
    x = torch.randn(1, 3, 16, 16)
    gm = torch.export.export(net, (x,)).module()  # refuses eval(): the capture exports it as it is
    inst = profile(gm, x, [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()], FLOAT)
    assert [l.op for l in inst.layers] == [l["op"] for l in torch_layers(net, x)]
    factory = tmp_path / "fac.py"
    factory.write_text("import torch\nfrom torch import nn\n"
                       "def build():\n    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()\n"
                       "    return torch.export.export(m, (torch.randn(1, 3, 8, 8),)).module()\n")
    res = CliRunner().invoke(app, ["profile", f"{factory}:build", "--input-shape", "1,3,8,8",
                                   "-o", str(tmp_path / "f.json")])
    if res.exit_code != 0:  # loading user models puts them in eval mode, which such a module refuses
        assert res.exit_code == 2 and "ExportedProgram.module()" in res.output and "\n" not in res.output.strip()
        assert "Traceback" not in res.output


def test_missing_extra_is_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from splitopt.cli import app

    path = tmp_path / "m.onnx"
    path.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingDependency, match=r"needs onnxruntime.*pip install 'splitopt\[onnx\]'") as e:
        profile_onnx(path)
    assert "\n" not in str(e.value)
    monkeypatch.setitem(sys.modules, "onnx", None)
    res = CliRunner().invoke(app, ["profile", str(path), "-o", str(tmp_path / "o.json")])
    assert res.exit_code == 3, res.output
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert len(lines) == 1 and "onnx extra" in lines[0] and "splitopt[onnx]" in lines[0], lines


def test_mobilenet_v2_matches_the_torch_capture(tmp_path):
    pytest.importorskip("transformers")
    from splitopt.torch.architectures import mobilenet_v2

    net, _ = mobilenet_v2(seed=0)
    x = torch.randn(1, 3, 224, 224)
    path = export(net, x, tmp_path / "mobilenet_v2.onnx")
    g = load(path)
    same_layers([l.to_dict() for l in g.layers], torch_layers(net, x))
    assert len(g.layers) == 64 and 290e6 < g.total_macs < 320e6
    inst = profile_onnx(path, calibration=2, measure_latency=True, repeats=2)
    assert all(l.latency_ms["host"] >= 0 for l in inst.layers)
    assert sum(l.latency_ms["host"] for l in inst.layers) > 0
    assert solve(inst, "cpsat").status is Status.OPTIMAL


def test_torchvision_resnet18_if_installed(tmp_path):
    tv = pytest.importorskip("torchvision")
    try:
        net = tv.models.resnet18(weights=None).eval()
    except Exception as e:  # noqa: BLE001 - torchvision's compiled ops fail with the CPU wheel here
        pytest.skip(f"torchvision unusable: {e}")
    x = torch.randn(1, 3, 224, 224)
    g = load(export(net, x, tmp_path / "r18.onnx"))
    same_layers([l.to_dict() for l in g.layers], torch_layers(net, x))
