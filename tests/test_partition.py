"""splitopt.torch.partition: cut a module by a plan into one fx module per device, run
the parts in sequence and compare with the unsplit model and the evaluator.

Each architecture is built and captured once (module-scoped fixture) and checked in one
test over five plans: cloud-only, edge-only, a middle cut (one tensor crosses), a cut
across a skip connection (several tensors cross) and a 3-device chain plan."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from torch import nn  # noqa: E402

import splitopt  # noqa: E402
from splitopt import presets  # noqa: E402
from splitopt.chain import plan_on_devices  # noqa: E402
from splitopt.errors import InvalidModel, InvalidPlan  # noqa: E402
from splitopt.instance import parse_instance, to_dict  # noqa: E402
from splitopt.plan import Plan  # noqa: E402
from splitopt.torch import architectures as arch  # noqa: E402
from splitopt.torch.capture import capture  # noqa: E402
from splitopt.torch.partition import (  # noqa: E402
    FLOAT_ATOL, compare, evaluator_sent_bytes, identity_transmit, partition,
)

pytestmark = pytest.mark.torch
INSTANCES = Path(__file__).resolve().parent.parent / "instances"


# ----- helpers ---------------------------------------------------------------------------------

def chain_instance(inst, devices=("d0", "d1", "d2")):
    """A chain instance over ``devices`` with the layer graph of ``inst`` (no error tables)."""
    data = to_dict(inst)
    layers = [{k: v for k, v in l.items() if k not in ("weight_error", "activation_error", "latency_ms")}
              for l in data["graph"]["layers"]]
    devs = [{"name": d, "description": "test", "mac_per_s": 1e10 * (i + 1), "offchip_bytes_per_s": None,
             "onchip_bytes": 0, "memory_bytes": 1e12, "bit_widths": [8, 16]} for i, d in enumerate(devices)]
    links = [{"source": a, "target": b, "bandwidth_bits_per_s": 1e8, "latency_ms": 0.0}
             for a, b in zip(devices, devices[1:])]
    return parse_instance({"format": data["format"], "name": inst.name + "_chain", "graph":
                           {"inputs": data["graph"]["inputs"], "layers": layers}, "devices": devs, "links": links,
                           "settings": {"problem": "chain", "objective": "latency", "chain": list(devices),
                                        "cloud_bits": 16}})


def prefix(names, last):
    """The layers up to and including ``last`` (a prefix of the execution order is
    closed under predecessors)."""
    return names[:names.index(last) + 1]


class Setup:
    def __init__(self, module, rename, example, x, inst):
        self.module, self.example, self.x = module, example, x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.cap = capture(module, example, rename=rename, input_bits=inst.inputs[0].bits if inst else 8)
        self.names = [l.name for l in self.cap.layers]
        with torch.no_grad():
            self.ref = module(x)


def run_plan(s: Setup, plan, inst, label):
    split = partition(s.module, s.example, plan, inst, capture=s.cap)
    out = split.run(s.x)
    diff = float((out - s.ref).abs().max())
    assert diff <= FLOAT_ATOL, f"{label}: max abs difference {diff} vs the unsplit model"
    assert split.sent_bytes == pytest.approx(evaluator_sent_bytes(inst, plan), rel=1e-12, abs=1e-9), label
    assert split.last_run.crossing_bytes == pytest.approx(split.sent_bytes, rel=1e-12, abs=1e-9), label
    # every layer is computed in exactly one part, the one of its device
    placed = [n for p in split.parts for n in p.layers]
    assert sorted(placed) == sorted(s.names), label
    for p in split.parts:
        assert all(plan.device[n] == p.device for n in p.layers), label
        assert (p.module is None) == (not p.layers and not p.outputs), label
    # parameters travel with their layers: no parameter tensor lives in two parts
    seen: dict[int, str] = {}
    for p in split.parts:
        if p.module is None:
            continue
        for name, t in p.module.named_buffers():
            if t.numel() > 1:
                assert seen.setdefault(t.data_ptr(), p.device) == p.device, f"{label}: {name} in two parts"
    return split


def check_architecture(s: Setup, two_tier, middle, skip, chain_cuts):
    """The five plans on one architecture; ``two_tier`` is a float (problem split)
    instance, ``middle``/``skip`` the last edge layer of the two cuts."""
    names = s.names
    cloud = run_plan(s, Plan.uniform(two_tier, []), two_tier, "cloud-only")
    assert cloud.parts[0].module is None and cloud.parts[1].inputs == ("input",)
    assert [c.names for c in cloud.crossings] == [("input",)]

    edge = run_plan(s, Plan.uniform(two_tier, names), two_tier, "edge-only")
    assert edge.parts[1].module is None and edge.transmitted_bytes == 0

    mid = run_plan(s, Plan.uniform(two_tier, prefix(names, middle)), two_tier, "middle cut")
    assert [c.names for c in mid.crossings] == [(middle,)]
    assert mid.parts[1].inputs == (middle,) and mid.parts[0].outputs == (middle,)

    cut = run_plan(s, Plan.uniform(two_tier, prefix(names, skip)), two_tier, "skip cut")
    assert len(cut.crossings[0].names) >= 2 and skip in cut.crossings[0].names
    assert set(cut.parts[1].inputs) == set(cut.crossings[0].names)

    chain = chain_instance(two_tier)
    a, b = names.index(chain_cuts[0]), names.index(chain_cuts[1])
    plan = plan_on_devices(chain, {n: "d0" if i <= a else "d1" if i <= b else "d2" for i, n in enumerate(names)})
    split = run_plan(s, plan, chain, "3-device chain")
    assert [len(p.layers) > 0 for p in split.parts] == [True, True, True]
    return split


def float_instance(path):
    return splitopt.load_instance(INSTANCES / path).with_settings(problem="split")


def image_setup(builder, path):
    module, rename = builder()
    inst = splitopt.load_instance(INSTANCES / path)
    return Setup(module, rename, torch.zeros(1, 3, 224, 224), arch.synthetic_images(1, seed=7), inst)


# ----- fixtures (one build and capture per module) --------------------------------------------

@pytest.fixture(scope="module")
def resnet():
    return image_setup(arch.resnet50, "resnet50_eyeriss.json")


@pytest.fixture(scope="module")
def gpt2():
    module, rename = arch.tiny_gpt2()
    example = arch.synthetic_tokens(1, seed=3)
    s = Setup(module, rename, example, arch.synthetic_tokens(1, seed=7), None)
    graph = s.cap.graph_dict()
    graph["inputs"][0]["bits"] = 32  # int64 token ids sent as 32-bit integers
    s.inst = parse_instance({
        "format": "splitopt-instance/1", "name": "tiny_gpt2", "graph": graph,
        "devices": [presets.eyeriss_edge(), presets.tpu_cloud()], "links": [presets.uplink_3mbps()],
        "settings": {"problem": "split", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [16], "cloud_bits": 16,
                     "edge_memory_bytes": 4e6, "error_budget": None}})
    return s


# ----- equivalence on every architecture ------------------------------------------------------

def test_resnet50_splits_match_unsplit(resnet):
    inst = float_instance("resnet50_eyeriss.json")
    check_architecture(resnet, inst, middle="layer2.3.add", skip="layer2.1.conv3",
                       chain_cuts=("layer1.2.add", "layer3.5.add"))
    # the shipped 4-device JMSNAS chain, nothing on SBS: the tensors are forwarded over it
    chain = splitopt.load_instance(INSTANCES / "jmsnas_chain_resnet50.json")
    names = resnet.names
    a, b = names.index("layer1.0.conv1"), names.index("layer4.2.add")
    plan = plan_on_devices(chain, {n: "UE" if i <= a else "MBS" if i <= b else "cloud" for i, n in enumerate(names)})
    split = run_plan(resnet, plan, chain, "jmsnas chain with an idle device")
    assert split.parts[1].module is None
    assert split.crossings[0].names == split.crossings[1].names == ("maxpool", "layer1.0.conv1")


def test_mobilenet_v2_splits_match_unsplit():
    s = image_setup(arch.mobilenet_v2, "mobilenetv2_eyeriss.json")
    check_architecture(s, float_instance("mobilenetv2_eyeriss.json"), middle="block3.add", skip="block4.dw",
                       chain_cuts=("block2.project", "block10.project"))


def test_googlenet_splits_match_unsplit():
    s = image_setup(arch.googlenet, "googlenet_eyeriss.json")
    # cut inside inception4a: maxpool3 still feeds branches 3 and 4 on the cloud
    split = check_architecture(s, float_instance("googlenet_eyeriss.json"), middle="maxpool3",
                               skip="inception4a.branch2.0", chain_cuts=("inception3b.concat", "inception4e.concat"))
    assert split.crossings[0].names == ("inception3b.concat",)


def test_tiny_gpt2_splits_match_unsplit(gpt2):
    # skip cut: the residual stream (the embedding) and the attention output both cross
    split = check_architecture(gpt2, gpt2.inst, middle="h.0.add", skip="h.0.attn.c_proj",
                               chain_cuts=("h.0.add_1", "h.1.add"))
    assert split.crossings[0].names == ("h.0.add_1",)
    # a cut between the qkv projection and the heads: the split pieces are recomputed on
    # the cloud from the one tensor that crosses
    names = gpt2.names
    cut = run_plan(gpt2, Plan.uniform(gpt2.inst, prefix(names, "h.0.attn.c_attn")), gpt2.inst, "qkv cut")
    assert set(cut.crossings[0].names) == {"wte.embedding", "h.0.attn.c_attn"}


# ----- quantized plans -------------------------------------------------------------------------

def test_quantized_cpsat_plan_on_resnet50(resnet):
    from splitopt.solve import solve

    inst = splitopt.load_instance(INSTANCES / "resnet50_eyeriss.json")
    plan = solve(inst, "cpsat").plan
    edge = plan.edge_layers(inst)
    assert edge and any(plan.activation_bits[n] < 16 for n in edge)
    split = partition(resnet.module, resnet.example, plan, inst, capture=resnet.cap,
                      calibration=arch.synthetic_images(2, seed=1234))
    assert split.quantized
    metrics = splitopt.evaluate(inst, plan)
    assert split.sent_bytes == pytest.approx([metrics.transmitted_bytes], rel=1e-12)

    calls = []

    def spy(name, t, bits):
        calls.append((name, bits))
        return identity_transmit(name, t, bits)

    report = compare(split, resnet.module, resnet.x, inst, transmit=spy)
    sent = [t for t, _ in metrics.sent_tensors]
    assert sorted(calls) == sorted((t, inst.sent_bits(t, plan.activation_bits[t])) for t in sent)
    assert report["bytes_match"] and report["quantized"]
    err = report["relative_mse"]
    assert math.isfinite(err) and 0 < err < 0.5, err
    # the activation quantizer really ran: a sent tensor takes at most 2^bits values
    last = edge[-1]
    store = {}
    split.run(resnet.x, transmit=lambda n, t, b: store.setdefault(n, t))
    assert torch.unique(store[last]).numel() <= 2 ** plan.activation_bits[last]
    # the default hook packs the sent tensors (splitopt.torch.packing) and stays close
    with_packing = compare(split, resnet.module, resnet.x, inst)
    assert math.isfinite(with_packing["relative_mse"]) and with_packing["relative_mse"] < 0.5


# ----- bad input -------------------------------------------------------------------------------

class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.conv(x).mean(dim=(2, 3)))


class Untraceable(nn.Module):
    def forward(self, x):
        return torch.from_numpy(x.numpy() * 2)  # leaves torch: export cannot trace it


def small_plan(names, devices=("edge", "cloud"), edge=1):
    return Plan({n: devices[0] if i < edge else devices[1] for i, n in enumerate(names)},
                {n: 16 for n in names}, {n: 16 for n in names})


def test_bad_inputs_raise_one_line_errors():
    torch.manual_seed(0)
    m = Small().eval()
    x = torch.randn(1, 3, 8, 8)
    cap = capture(m, x)
    names = [l.name for l in cap.layers]
    plan = small_plan(names)
    split = partition(m, x, plan, capture=cap, devices=["edge", "cloud"])
    with torch.no_grad():
        assert float((split.run(x) - m(x)).abs().max()) <= FLOAT_ATOL

    bad = Plan({**plan.device, "nope": "cloud"}, {**plan.weight_bits, "nope": 16}, {**plan.activation_bits, "nope": 16})
    with pytest.raises(InvalidPlan, match=r"plan\.layers\.nope: the module has no layer 'nope'"):
        partition(m, x, bad, capture=cap, devices=["edge", "cloud"])

    backwards = small_plan(names, devices=("cloud", "edge"))
    with pytest.raises(InvalidPlan, match="later in"):
        partition(m, x, backwards, capture=cap, devices=["edge", "cloud"])

    with pytest.raises(InvalidModel, match=r"input shape \(1, 3, 9, 9\) does not match .*\(n, 3, 8, 8\)"):
        split.run(torch.zeros(1, 3, 9, 9))

    with pytest.raises(InvalidModel, match="cannot be exported by torch.export") as e:
        partition(Small().eval(), torch.zeros(1, 5, 8, 8), plan, devices=["edge", "cloud"])
    assert "\n" not in str(e.value)

    with pytest.raises(InvalidModel, match="Untraceable cannot be exported by torch.export: RuntimeError: .numpy()") as e:
        partition(Untraceable(), x, Plan({}, {}, {}), devices=["edge", "cloud"])
    assert "\n" not in str(e.value)

    inst = float_instance("resnet50_eyeriss.json")
    with pytest.raises(InvalidModel, match=r"example input shape \(1, 3, 8, 8\) does not match instance "
                                           r"'resnet50_eyeriss' input 'input' \(expected \(1, 3, 224, 224\)\)"):
        partition(m, x, Plan.uniform(inst, []), inst)
    with pytest.raises(InvalidModel, match="instance 'resnet50_eyeriss' layer 'conv1' is not a layer"):
        partition(m, torch.zeros(1, 3, 224, 224), Plan.uniform(inst, []), inst)


# ----- CLI -------------------------------------------------------------------------------------

def test_run_command(gpt2, tmp_path):
    import typer
    from typer.testing import CliRunner

    from splitopt.instance import save_instance
    from splitopt.torch.run_cli import RUN_INPUT_SEED, run_command

    app = typer.Typer()
    app.command("run")(run_command)
    app.command("other")(lambda: None)  # two commands: `run` is addressed by name
    inst_path = tmp_path / "tiny_gpt2.json"
    save_instance(gpt2.inst, inst_path)
    plan = Plan.uniform(gpt2.inst, prefix(gpt2.names, "h.0.attn.c_proj"))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan.to_dict(gpt2.inst)))
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2", "--samples", "2", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["bytes_match"] and report["max_abs_diff"] <= FLOAT_ATOL
    assert report["crossings"][0]["bytes"] == splitopt.evaluate(gpt2.inst, plan).transmitted_bytes
    assert [p["device"] for p in report["parts"]] == ["eyeriss", "tpu"] and RUN_INPUT_SEED

    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 0 and "OK" in res.stdout and "eyeriss -> tpu" in res.stdout

    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "alexnet"])
    assert res.exit_code == 2 and "unknown model 'alexnet'" in res.stderr and res.stderr.count("\n") == 1
    # a plan naming layers the instance does not have
    res = runner.invoke(app, ["run", str(INSTANCES / "resnet50_eyeriss.json"), str(plan_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 2 and "unknown layer" in res.stderr and res.stderr.count("\n") == 1
    # the instance is not the model's: the model's input has another shape
    inst = splitopt.load_instance(INSTANCES / "resnet50_eyeriss.json")
    cloud_path = tmp_path / "cloud.json"
    cloud_path.write_text(json.dumps(Plan.uniform(inst, []).to_dict(inst)))
    res = runner.invoke(app, ["run", str(INSTANCES / "resnet50_eyeriss.json"), str(cloud_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 2 and "expected (1, 3, 224, 224)" in res.stderr and res.stderr.count("\n") == 1
