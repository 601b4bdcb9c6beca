"""splitopt.torch: module -> fused layer graph, quantization-error tables, real
architectures and the shipped instances. Expected numbers are computed by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import splitopt  # noqa: E402
from splitopt.core import presets  # noqa: E402
from splitopt.api import FORMAT, parse_instance  # noqa: E402
from splitopt.torch.capture import capture, capture_layers  # noqa: E402
from splitopt.torch.quant_error import (  # noqa: E402
    layer_dicts_with_errors, quantize_activation, quantize_weight, relative_mse, run_layers,
)
from splitopt.families.edge_cloud.plan import uniform_plan  # noqa: E402

pytestmark = pytest.mark.torch
INSTANCES = Path(__file__).resolve().parent.parent / "instances"


class Tiny(nn.Module):
    """conv+bn+relu -> residual (conv + add + relu) -> two branches (1x1 conv,
    depthwise 3x3) -> concat -> 2x2 max-pool -> global avg-pool -> flatten -> fc."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.b1 = nn.Conv2d(4, 2, 1)
        self.b2 = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.conv2(y) + y)
        y = torch.cat([self.b1(y), self.b2(y)], dim=1)
        y = self.gap(self.pool(y)).flatten(1)
        return self.fc(y)


def tiny() -> nn.Module:
    torch.manual_seed(0)
    m = Tiny()
    with torch.no_grad():  # a non-trivial batch norm to fold
        m.bn1.weight.uniform_(0.5, 1.5)
        m.bn1.bias.uniform_(-0.5, 0.5)
        m.bn1.running_mean.uniform_(-0.5, 0.5)
        m.bn1.running_var.uniform_(0.5, 2.0)
    return m.eval()


X = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))


def test_tiny_network_by_hand():
    layers, graph_input = capture_layers(tiny(), X)
    assert graph_input == {"name": "input", "shape": [3, 8, 8], "bits": 8}
    # out elements: conv1/conv2/add/b2: 4*8*8 = 256; b1: 2*8*8 = 128; pool: 6*4*4 = 96
    expected = [
        # name, op, inputs, macs, weights, shape, fused
        ("conv1", "conv", ["input"], 256 * 3 * 9, 4 * 3 * 9 + 4, [4, 8, 8], ["batch_norm", "relu"]),
        ("conv2", "conv", ["conv1"], 256 * 4 * 9, 4 * 4 * 9 + 4, [4, 8, 8], []),
        ("add", "add", ["conv2", "conv1"], 256, 0, [4, 8, 8], ["relu"]),
        ("b1", "conv", ["add"], 128 * 4, 2 * 4 + 2, [2, 8, 8], []),
        ("b2", "dwconv", ["add"], 256 * 1 * 9, 4 * 9 + 4, [4, 8, 8], []),
        ("concat", "concat", ["b1", "b2"], 0, 0, [6, 8, 8], []),
        ("pool", "pool", ["concat"], 96 * 4, 0, [6, 4, 4], []),
        ("gap", "pool", ["pool"], 96, 0, [6], ["flatten"]),
        ("fc", "linear", ["gap"], 3 * 6, 6 * 3 + 3, [3], []),
    ]
    got = [(l["name"], l["op"], l["inputs"], l["macs"], l["weights"], l["output_shape"], l.get("fused", []))
           for l in layers]
    assert got == expected


def test_folded_batch_norm_and_post_fusion_outputs():
    m = tiny()
    cap = capture(m, X)
    conv1 = cap.layers[0]
    # the folded conv reproduces conv -> bn -> relu
    with torch.no_grad():
        ref = F.relu(m.bn1(m.conv1(X)))
        folded = F.relu(F.conv2d(X, conv1.weight, conv1.bias, padding=1))
    assert torch.allclose(folded, ref, atol=1e-5)
    # recorded layer outputs are the fused (post-ReLU) tensors and the program is exact
    rec = {}
    out = run_layers(cap, X, lambda name, t: rec.__setitem__(name, t.clone()))
    assert torch.allclose(rec["conv1"], ref, atol=1e-6)
    assert (rec["add"] >= 0).all()
    with torch.no_grad():
        assert torch.allclose(out, m(X), atol=1e-6)
    assert torch.equal(rec["fc"], out)


class Shared(nn.Module):
    """A ReLU whose input has two consumers, a BN after a ReLU (not foldable), a view of
    the raw input, an elementwise multiply by a constant, and a softmax."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = x.reshape(1, 3, 4, 4)
        c = self.conv(x)
        r = torch.relu(c)  # c is read twice: the ReLU stays a layer
        y = self.bn(r) * 2.0 + c
        return torch.softmax(self.fc(y.flatten(1)), dim=-1)


def test_fusion_rules_on_shared_tensors():
    layers, graph_input = capture_layers(Shared().eval(), torch.randn(1, 48))
    assert graph_input["shape"] == [48]
    by = {l["name"]: l for l in layers}
    assert [l["op"] for l in layers] == ["conv", "relu", "norm", "add", "linear", "softmax"]
    assert by["conv"]["inputs"] == ["input"] and "fused" not in by["conv"]
    assert by["relu"]["inputs"] == ["conv"] and by["relu"]["macs"] == 64
    assert by["bn"]["weights"] == 8 and by["bn"]["fused"] == ["mul"]
    assert sorted(by["add"]["inputs"]) == ["bn", "conv"] and by["add"]["fused"] == ["flatten"]
    assert by["fc"]["macs"] == 5 * 64 and by["fc"]["inputs"] == ["add"]


def test_embedding_lookup_is_a_layer_with_its_table_as_weights():
    import warnings

    from splitopt.torch.quant_error import weight_error_table

    class Lookup(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.table = nn.Embedding(50, 8)
            self.fc = nn.Linear(8, 3)

        def forward(self, ids):
            return self.fc(self.table(ids))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "unknown op" warning
        cap = capture(Lookup(), torch.randint(0, 50, (1, 5)))
    emb = cap.layers[0]
    assert (emb.op, emb.inputs, emb.output_shape) == ("embedding", ["input"], [5, 8])
    assert emb.weights == 400 and emb.macs == 40  # 50 x 8 table; one gathered element per output
    table = weight_error_table(emb, (2, 8))
    assert table[2] > table[8] > 0  # the table is quantized per tensor


def test_quantizers_by_hand():
    # symmetric per output channel, 2 bits: levels {-1, 0, 1} * max|w_c|
    w = torch.tensor([[1.0, 0.25, -1.0], [2.0, -2.0, 2.0]])
    q = quantize_weight(w, 2)
    assert torch.equal(q, torch.tensor([[1.0, 0.0, -1.0], [2.0, -2.0, 2.0]]))
    assert relative_mse(q, w) == pytest.approx(0.0625 / (2.0625 + 12.0))
    # asymmetric per tensor, range [-1, 2] at 2 bits: scale 1, zero point 1 -> integers exact
    x = torch.tensor([-1.0, 0.0, 1.0, 2.0, 0.4])
    qa = quantize_activation(x, 2, -1.0, 2.0)
    assert torch.equal(qa, torch.tensor([-1.0, 0.0, 1.0, 2.0, 0.0]))
    assert relative_mse(qa, x) == pytest.approx(0.16 / (1 + 1 + 4 + 0.16))
    # a range that excludes 0 is widened to contain it; out-of-range values clamp
    assert torch.equal(quantize_activation(torch.tensor([3.0, 9.0]), 2, 3.0, 3.0), torch.tensor([3.0, 3.0]))


def test_tiny_instance_is_accepted_and_evaluates():
    m = tiny()
    cap = capture(m, X)
    calib = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    layers = layer_dicts_with_errors(cap, calib, [2, 4, 6, 8])
    for l in layers:
        a = l["activation_error"]
        assert a["2"] > a["4"] > a["6"] > a["8"] >= 0
        if l["weights"] > 0:
            assert set(l["weight_error"]) == {"2", "4", "6", "8"}
            assert l["weight_error"]["2"] > l["weight_error"]["8"]
        else:
            assert "weight_error" not in l
    data = {
        "format": FORMAT, "name": "tiny",
        "graph": {"inputs": [cap.graph_input], "layers": layers},
        "devices": [presets.eyeriss_edge(), presets.tpu_cloud()],
        "links": [presets.uplink_3mbps()],
        "settings": {"problem": "split_bits", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [2, 4, 6, 8],
                     "cloud_bits": 16, "edge_memory_bytes": 4e6, "error_budget": 1.0},
    }
    inst = parse_instance(json.loads(json.dumps(data)))
    assert len(inst.layers) == 9
    edge_all = splitopt.evaluate(inst, uniform_plan(inst, [l.name for l in inst.layers], 8))
    assert edge_all.transmitted_bytes == 0 and edge_all.feasible  # nothing crosses the cut
    cloud = splitopt.evaluate(inst, uniform_plan(inst, []))
    assert cloud.transmitted_bytes == 3 * 8 * 8


def _check_dag(layers, graph_input):
    seen = {graph_input["name"]}
    for l in layers:
        assert l["name"] not in seen
        assert l["inputs"] and all(src in seen for src in l["inputs"])
        seen.add(l["name"])


def test_resnet50_capture_matches_the_paper():
    transformers = pytest.importorskip("transformers")  # noqa: F841
    from splitopt.torch.architectures import resnet50

    m, rename = resnet50(recalibrate=False)
    layers, graph_input = capture_layers(m, torch.zeros(1, 3, 224, 224), rename=rename)
    _check_dag(layers, graph_input)
    by = {l["name"]: l for l in layers}
    assert len(layers) == 72  # 53 conv + 16 add + max-pool + avg-pool + fc
    assert sum(l["macs"] for l in layers) == pytest.approx(4.1e9, rel=0.01)
    assert sum(l["weights"] for l in layers) == pytest.approx(25.5e6, rel=0.01)
    # AUTO-SPLIT Table 10
    assert math.prod(graph_input["shape"]) == 150_528
    for name in ("layer4.0.conv3", "layer4.1.conv3", "layer4.2.conv3"):
        assert by[name]["output_shape"] == [2048, 7, 7]
    assert by["fc"]["output_shape"] == [1000]
    assert by["layer1.0.add"]["inputs"] == ["layer1.0.conv3", "layer1.0.downsample"]


def test_mobilenet_v2_and_googlenet_capture():
    pytest.importorskip("transformers")
    from splitopt.torch.architectures import googlenet, mobilenet_v2

    m, rename = mobilenet_v2(recalibrate=False)
    layers, graph_input = capture_layers(m, torch.zeros(1, 3, 224, 224), rename=rename)
    _check_dag(layers, graph_input)
    assert sum(l["macs"] for l in layers) == pytest.approx(301e6, rel=0.01)
    assert sum(l["weights"] for l in layers) == pytest.approx(3.5e6, rel=0.01)
    assert sum(l["op"] == "dwconv" for l in layers) == 17

    m, rename = googlenet(recalibrate=False)
    layers, graph_input = capture_layers(m, torch.zeros(1, 3, 224, 224), rename=rename)
    _check_dag(layers, graph_input)
    by = {l["name"]: l for l in layers}
    assert sum(l["op"] == "concat" for l in layers) == 9
    assert by["inception4a.concat"]["output_shape"] == [512, 14, 14]
    readers = [l["name"] for l in layers if "inception3b.concat" in l["inputs"]]
    assert readers == ["maxpool3"]
    readers = [l["name"] for l in layers if "maxpool3" in l["inputs"]]
    assert len(readers) == 4  # the module input feeds the four branches
    assert sum(l["macs"] for l in layers) == pytest.approx(1.5e9, rel=0.02)


def edge_cloud_instances():
    return [p for p in sorted(INSTANCES.glob("*.json"))
            if json.loads(p.read_text())["settings"]["problem"] in ("split", "split_bits")]


@pytest.mark.parametrize("path", edge_cloud_instances(), ids=lambda p: p.name)
def test_shipped_instances_load(path):
    inst = splitopt.load_instance(path)
    assert inst.source.get("script") == "instances/make_instances.py"
    cloud = splitopt.evaluate(inst, uniform_plan(inst, []))
    assert cloud.feasible


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("*.json")), ids=lambda p: p.name)
def test_every_shipped_instance_loads_and_its_start_plan_evaluates(path):
    inst = splitopt.load_instance(path)
    assert (INSTANCES.parent / inst.source["script"]).exists() if "script" in inst.source else True
    from splitopt.families.registry import family_of

    start = family_of(inst).start_plan(inst)
    assert splitopt.evaluate(inst, start).objective_ms > 0
