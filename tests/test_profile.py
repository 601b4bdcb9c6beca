"""``splitopt.torch.profile``: sizes by hand on a small network, error tables, measured
host latency, and the instance it returns solves."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from splitopt.core import presets  # noqa: E402
from splitopt.core.errors import InvalidInstance  # noqa: E402
from splitopt.core.result import Status  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.torch.profile import profile  # noqa: E402
from splitopt.families.edge_cloud.plan import edge_layers


class SmallNet(nn.Module):
    """conv 3->8 (3x3, pad 1) + BN + ReLU on 3x16x16, 2x2 max pool, flatten, linear 512->10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn1(self.conv1(x)))), 1))


SETTINGS = {"problem": "split_bits", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [4, 8],
            "edge_memory_bytes": 1e6, "error_budget": 0.1}


def small_instance(**kw):
    torch.manual_seed(0)
    links = [presets.uplink_3mbps()]
    if kw.get("measure_latency"):
        links.append(presets.uplink_3mbps(source="host"))
    return profile(SmallNet().eval(), torch.randn(1, 3, 16, 16), [presets.eyeriss_edge(), presets.tpu_cloud()],
                   links, SETTINGS, name="small", **kw)


def test_sizes_match_hand_computed_ones():
    inst = small_instance(calibration=torch.randn(4, 3, 16, 16), bits=(4, 8))
    conv, pool, fc = inst.layers
    # conv: 8 x 16 x 16 outputs, 3 x 3 x 3 MACs each; 216 weights + 8 biases (BN folded into the bias)
    assert (conv.name, conv.op, conv.inputs, conv.output_shape) == ("conv1", "conv", ("input",), (8, 16, 16))
    assert conv.macs == 8 * 16 * 16 * 3 * 9 and conv.weights == 8 * 3 * 9 + 8
    assert conv.fused == ("batch_norm", "relu")
    # pool: 8 x 8 x 8 outputs over 2 x 2 windows; the flatten is fused into it
    assert (pool.op, pool.macs, pool.weights, pool.output_shape) == ("pool", 512 * 4, 0, (512,))
    assert (fc.op, fc.macs, fc.weights, fc.output_shape) == ("linear", 10 * 512, 5120 + 10, (10,))
    assert inst.inputs[0].shape == (3, 16, 16) and inst.inputs[0].bits == 8
    for layer in inst.layers:
        assert set(layer.activation_error) == {4, 8}
        assert layer.activation_error[4] > layer.activation_error[8] > 0
    assert set(conv.weight_error) == {4, 8} and pool.weight_error == {}
    res = solve(inst, "cpsat")
    assert res.status is Status.OPTIMAL


def test_measured_host_latency_becomes_a_device():
    inst = small_instance(calibration=torch.randn(2, 3, 16, 16), bits=(4, 8), measure_latency=True, repeats=3)
    assert "host" in inst.device_by_name
    for layer in inst.layers:
        assert layer.latency_ms["host"] > 0
    as_edge = inst.with_settings(edge="host")
    res = solve(as_edge, "cpsat")
    assert res.status is Status.OPTIMAL
    assert res.metrics.edge_compute_ms == pytest.approx(
        sum(inst.layer_by_name[n].latency_ms["host"] for n in edge_layers(as_edge, res.plan)))


def test_bad_profile_inputs_are_one_line_errors():
    with pytest.raises(ValueError, match="calibration inputs have shape"):
        small_instance(calibration=torch.randn(2, 3, 8, 8))
    with pytest.raises(InvalidInstance, match="settings.edge"):
        torch.manual_seed(0)
        profile(SmallNet().eval(), torch.randn(1, 3, 16, 16), [presets.tpu_cloud()], [], SETTINGS)


def test_cli_profiles_a_model_and_the_instance_solves(tmp_path):
    pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from splitopt import load_instance
    from splitopt.cli import app

    out = tmp_path / "gpt.json"
    res = CliRunner().invoke(app, ["profile", "tiny_gpt2", "-o", str(out), "--calibration-images", "2",
                                   "--measure", "--edge-host", "--repeats", "2"])
    assert res.exit_code == 0, res.output
    inst = load_instance(out)
    assert inst.problem == "split_bits" and inst.settings.edge == "host"
    assert inst.settings.error_budget == pytest.approx(
        sum(l.weight_error.get(8, 0.0) + l.activation_error[8] for l in inst.layers))
    assert all(l.latency_ms["host"] > 0 for l in inst.layers)
    assert solve(inst, "cpsat").status is Status.OPTIMAL
    bad = CliRunner().invoke(app, ["profile", "vgg", "-o", str(out)])
    assert bad.exit_code == 2 and "\n" not in bad.output.strip()
    bad = CliRunner().invoke(app, ["profile", "tiny_gpt2", "-o", str(out), "--edge-host"])
    assert bad.exit_code == 2 and "--edge-host: needs --measure" in bad.output
