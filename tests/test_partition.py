"""splitopt.torch.partition: cut a module by a plan into runnable fx modules, run the
parts in sequence and compare with the unsplit model and the evaluator.

Each architecture is built and captured once (module-scoped fixture) and checked in one
test over five plans: cloud-only, edge-only, a middle cut (one tensor crosses), a cut
across a skip connection (several tensors cross) and a 3-device chain plan.

Mesh plans (problem ``mesh``): a small two-block inception network profiled into a mesh
instance (UE -> SBS <-> MBS1/MBS2 -> cloud, links both ways between SBS and the MBSs)
under single-device, inception-branches, ping-pong and CP-SAT plans; GoogLeNet on the
shipped ``jmsnas_mesh_googlenet`` instance; tiny GPT-2 through ``splitopt run``.

Multiview plans (problem ``multiview``): the same small network as the backbone of 3 and
of 1 views, View-Pool and Conv-Reduce + View-Fuse, early and late fusion, per-view cut
points, against the unsplit multi-view network and the multiview evaluator's bytes."""

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
from splitopt.core import presets  # noqa: E402
from splitopt.families.chain.plan import plan_on_devices  # noqa: E402
from splitopt.core.errors import InvalidModel, InvalidPlan, NotApplicable  # noqa: E402
from splitopt.api import parse_instance
from splitopt.core.instance_io import to_dict  # noqa: E402
from splitopt.core.plan import Plan  # noqa: E402
from splitopt.torch import architectures as arch  # noqa: E402
from splitopt.torch.capture import capture  # noqa: E402
from splitopt.families.mesh.plan import MeshPlan  # noqa: E402
from splitopt.families.multiview.plan import MultiviewPlan  # noqa: E402
from splitopt.torch.mesh.compare import evaluator_link_bytes, evaluator_mesh_crossings, link_bytes  # noqa: E402
from splitopt.torch.mesh.partition import mesh_layer_order, mesh_stages  # noqa: E402
from splitopt.torch.partition import (  # noqa: E402
    FLOAT_ATOL, compare, evaluator_sent_bytes, identity_transmit, partition,
)
from splitopt.torch.multiview.partition import (  # noqa: E402
    compare_multiview, evaluator_view_bytes, partition_multiview,
)
from splitopt.families.edge_cloud.plan import edge_layers, uniform_plan  # noqa: E402
from splitopt.api import plan_to_dict  # noqa: E402

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


def check_architecture(s: Setup, edge_cloud, middle, skip, chain_cuts):
    """The five plans on one architecture; ``edge_cloud`` is a float (problem split)
    instance, ``middle``/``skip`` the last edge layer of the two cuts."""
    names = s.names
    cloud = run_plan(s, uniform_plan(edge_cloud, []), edge_cloud, "cloud-only")
    assert cloud.parts[0].module is None and cloud.parts[1].inputs == ("input",)
    assert [c.names for c in cloud.crossings] == [("input",)]

    edge = run_plan(s, uniform_plan(edge_cloud, names), edge_cloud, "edge-only")
    assert edge.parts[1].module is None and edge.transmitted_bytes == 0

    mid = run_plan(s, uniform_plan(edge_cloud, prefix(names, middle)), edge_cloud, "middle cut")
    assert [c.names for c in mid.crossings] == [(middle,)]
    assert mid.parts[1].inputs == (middle,) and mid.parts[0].outputs == (middle,)

    cut = run_plan(s, uniform_plan(edge_cloud, prefix(names, skip)), edge_cloud, "skip cut")
    assert len(cut.crossings[0].names) >= 2 and skip in cut.crossings[0].names
    assert set(cut.parts[1].inputs) == set(cut.crossings[0].names)

    chain = chain_instance(edge_cloud)
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

    # the shipped mesh instance has the same layer graph (same capture, same names):
    # inception4a's branches on the three MBSs and the SBS, the rest on the cloud
    mesh = splitopt.load_instance(INSTANCES / "jmsnas_mesh_googlenet.json")
    device, after = {}, False
    for n in s.names:
        after |= n == "inception4a.concat"
        branch = next((k for k in (1, 2, 3) if n.startswith(f"inception4a.branch{k}")), None)
        device[n] = "cloud" if after else f"MBS{branch}" if branch else "SBS"
    split = run_mesh_plan(s, MeshPlan(device), mesh, "googlenet inception4a branches on the MBSs")
    assert [p.device for p in split.parts] == ["SBS", "MBS1", "MBS2", "MBS3", "cloud"]
    assert split.parts[-1].inputs == tuple(f"inception4a.branch{k}" for k in ("1", "2.1", "3.1", "4.1"))
    # maxpool3 once per MBS; branch4 from the SBS to the cloud over SBS->MBS1->cloud
    assert link_bytes(split)["SBS->MBS1"] == 188160 + 25088


def test_tiny_gpt2_splits_match_unsplit(gpt2):
    # skip cut: the residual stream (the embedding) and the attention output both cross
    split = check_architecture(gpt2, gpt2.inst, middle="h.0.add", skip="h.0.attn.c_proj",
                               chain_cuts=("h.0.add_1", "h.1.add"))
    assert split.crossings[0].names == ("h.0.add_1",)
    # a cut between the qkv projection and the heads: the split pieces are recomputed on
    # the cloud from the one tensor that crosses
    names = gpt2.names
    cut = run_plan(gpt2, uniform_plan(gpt2.inst, prefix(names, "h.0.attn.c_attn")), gpt2.inst, "qkv cut")
    assert set(cut.crossings[0].names) == {"wte.embedding", "h.0.attn.c_attn"}


# ----- mesh plans ------------------------------------------------------------------------------

MESH_DEVICES = ("UE", "SBS", "MBS1", "MBS2", "cloud")
#: UE -> SBS, SBS <-> MBS1/MBS2 both ways (so a tensor can go and come back), MBS -> cloud:
#: SBS reaches the cloud over MBS1 (two hops), the UE over three
MESH_LINKS = (("UE", "SBS"), ("SBS", "UE"), ("SBS", "MBS1"), ("MBS1", "SBS"), ("SBS", "MBS2"), ("MBS2", "SBS"),
              ("MBS1", "cloud"), ("MBS2", "cloud"))


class MiniInception(nn.Module):
    """Two GoogLeNet inception blocks (architectures.Inception) on 16x16 inputs."""

    def __init__(self):
        super().__init__()
        self.stem = arch.BasicConv2d(3, 8, kernel_size=3, padding=1)
        self.inc1 = arch.Inception(8, 4, 4, 8, 2, 4, 4)
        self.pool = nn.MaxPool2d(2)
        self.inc2 = arch.Inception(20, 8, 4, 8, 4, 8, 8)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.inc2(self.pool(self.inc1(self.stem(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def mesh_instance(graph: dict, name: str, **mesh):
    """A mesh instance of ``graph`` on MESH_DEVICES / MESH_LINKS; compute dominates (slow
    devices, fast links) so that CP-SAT spreads the branches."""
    devices = [{"name": d, "mac_per_s": 1e5 if d == "UE" else 1e6, "offchip_bytes_per_s": None, "onchip_bytes": 0,
                "memory_bytes": 1e9, "bit_widths": [16]} for d in MESH_DEVICES]
    links = [{"source": u, "target": v, "bandwidth_bits_per_s": 1e9, "latency_ms": 0.0} for u, v in MESH_LINKS]
    return parse_instance({"format": "splitopt-instance/1", "name": name, "graph": graph, "devices": devices,
                           "links": links, "settings": {"problem": "mesh", "edge": "UE", "cloud": "cloud",
                                                        "cloud_bits": 16, "mesh": {"routing": "shortest", **mesh}}})


@pytest.fixture(scope="module")
def mini():
    torch.manual_seed(0)
    module = MiniInception()
    for bn in module.modules():  # non-trivial batch-norm statistics (folded into the convs)
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)
    module.eval()
    s = Setup(module, arch.GOOGLENET_RENAME, torch.randn(1, 3, 16, 16), torch.randn(2, 3, 16, 16), None)
    s.inst = mesh_instance(s.cap.graph_dict(), "mini_inception_mesh")
    return s


def return_lower_bound(names, preds, device, d):
    """The most maximal runs of device ``d`` on one path of the layer graph: every return
    to ``d`` after leaving it needs another part, so ``d`` has at least this many."""
    runs = {}
    for n in names:
        best = max((runs[p] + (device[n] == d and device[p] != d) for p in preds[n]), default=int(device[n] == d))
        runs[n] = max(best, int(device[n] == d))
    return max(runs.values(), default=0)


def run_mesh_plan(s: Setup, plan, inst, label, parts=None):
    """Partition, run and compare a mesh plan; checks equality with the unsplit model, the
    bytes per device pair and per link against the mesh evaluator, the measured bytes,
    that stages read only earlier stages, and that no device has more parts than the
    returns to it force (or exactly ``parts``: device -> count)."""
    split = partition(s.module, s.example, plan, inst, capture=s.cap)
    report = compare(split, s.module, s.x, inst)
    assert report["max_abs_diff"] <= FLOAT_ATOL, f"{label}: max abs difference {report['max_abs_diff']}"
    assert report["ok"] and report["bytes_match"] and report["kind"] == "mesh", label
    ours = [(c.source, c.target, c.bytes) for c in split.crossings]
    assert ours == [(a, b, pytest.approx(v, rel=1e-12)) for a, b, v in evaluator_mesh_crossings(inst, plan)], label
    assert split.sent_bytes == pytest.approx(evaluator_sent_bytes(inst, plan), rel=1e-12), label
    assert split.last_run.crossing_bytes == pytest.approx(split.sent_bytes, rel=1e-12), label
    links = link_bytes(split)
    assert links == pytest.approx(evaluator_link_bytes(inst, plan), rel=1e-12), label
    # every layer in exactly one part, on its device; a part reads only earlier parts
    placed = [n for p in split.parts for n in p.layers]
    assert sorted(placed) == sorted(s.names), label
    made = {"input"}
    for p in split.parts:
        assert all(plan.device[n] == p.device for n in p.layers), label
        assert set(p.inputs) <= made, label
        made |= set(p.outputs)
    preds = {l.name: [i for i in l.inputs if i != "input"] for l in s.cap.layers}
    count = {d: sum(p.device == d for p in split.parts) for d in split.devices}
    for d in split.devices:
        assert count[d] == return_lower_bound(s.names, preds, plan.device, d), f"{label}: {d} has {count[d]} parts"
    if parts is not None:
        assert {d: c for d, c in count.items() if c} == parts, label
    return split


def on(names, default, **where):
    """A mesh plan: layer -> device, ``where``: prefix (dots as '__') -> device."""
    device = {}
    for n in names:
        device[n] = next((d for prefix, d in where.items() if n.startswith(prefix.replace("__", "."))), default)
    return MeshPlan(device)


def test_mesh_plans_match_unsplit(mini):
    inst, names = mini.inst, mini.names
    # one device: the input goes UE -> SBS, the output SBS -> MBS1 -> cloud (two hops)
    split = run_mesh_plan(mini, MeshPlan({n: "SBS" for n in names}), inst, "all on SBS", parts={"SBS": 1})
    assert [(c.source, c.target, c.names) for c in split.crossings] == [("UE", "SBS", ("input",)),
                                                                          ("SBS", "cloud", ("fc",))]
    assert link_bytes(split)["SBS->MBS1"] == link_bytes(split)["MBS1->cloud"] == 10 * 2
    split = run_mesh_plan(mini, MeshPlan({n: "UE" for n in names}), inst, "all on UE", parts={"UE": 1})
    assert [c.names for c in split.crossings] == [("fc",)] and split.input_sends == ()
    # outputs not delivered: nothing but the input moves
    stay = mesh_instance(mini.cap.graph_dict(), "stay", deliver_outputs=False)
    split = run_mesh_plan(mini, MeshPlan({n: "MBS2" for n in names}), stay, "outputs stay")
    assert [(c.source, c.target) for c in split.crossings] == [("UE", "MBS2")] and split.sink is None

    # inception branches on different devices; MBS1's two branches are not adjacent in
    # the execution order (branch1, then branches 2 and 3 elsewhere, then branch4) but
    # form one part; the SBS needs two (stem -> MBS1 -> concat leaves it and comes back)
    plan = on(names, "SBS", inc1__branch1="MBS1", inc1__branch2="MBS2", inc1__branch4="MBS1",
              avgpool="cloud", fc="cloud")
    split = run_mesh_plan(mini, plan, inst, "inc1 branches", parts={"SBS": 2, "MBS1": 1, "MBS2": 1, "cloud": 1})
    assert split.parts[0].layers == ("stem", "inc1.branch3.0", "inc1.branch3.1")
    assert set(split.parts[0].sends) == {("stem", "MBS1"), ("stem", "MBS2")}
    # inc2.concat goes SBS -> MBS1 -> cloud: one crossing SBS -> cloud, one hop per link
    assert ("SBS", "cloud", ("inc2.concat",)) in [(c.source, c.target, c.names) for c in split.crossings]
    assert link_bytes(split)["SBS->MBS1"] == 2 * (8 * 16 * 16 + 32 * 8 * 8)  # stem, inc2.concat at 16 bits
    assert link_bytes(split)["MBS1->cloud"] == 2 * 32 * 8 * 8

    # ping-pong: SBS -> MBS1 -> SBS -> MBS2 (-> cloud)
    plan = on(names, "SBS", inc1="MBS1", avgpool="MBS2", fc="MBS2")
    split = run_mesh_plan(mini, plan, inst, "ping-pong", parts={"SBS": 2, "MBS1": 1, "MBS2": 1})
    assert [p.device for p in split.parts] == ["SBS", "MBS1", "SBS", "MBS2"]
    assert split.parts[1].inputs == ("stem",) and split.parts[2].inputs == ("inc1.concat",)


def test_mesh_cpsat_plan_matches_unsplit(mini):
    from splitopt.solve import solve

    result = solve(mini.inst, "cpsat", time_limit=20, threads=1)
    plan = result.plan
    used = set(plan.device.values())
    assert len(used) >= 3 and plan.order, f"CP-SAT kept the network on {used}"
    split = run_mesh_plan(mini, plan, mini.inst, "cpsat")
    # the stages follow the plan's schedule: layers walked in the evaluator's start order
    order = mesh_layer_order(mini.cap, plan, mini.inst)
    starts = {t.label: t.start_ms for t in splitopt.evaluate(mini.inst, plan).schedule if t.kind == "compute"}
    assert [starts[n] for n in order] == sorted(starts[n] for n in order)
    assert len(split.parts) < sum(1 for a, b in zip(order, order[1:]) if plan.device[a] != plan.device[b]) + 1


def test_mesh_stages_merge_and_split():
    preds = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []}
    # c and d may join a's part; b sits between: A{a, c}, B{b}, A{d}
    stages = mesh_stages(["a", "b", "c", "d"], {"a": "A", "b": "B", "c": "A", "d": "A"}, preds)
    assert stages == [("A", ["a", "c"]), ("B", ["b"]), ("A", ["d"])]
    # nothing comes back to A: one part, whatever the walk
    stages = mesh_stages(["a", "b", "c", "d"], {"a": "A", "b": "B", "c": "A", "d": "B"}, preds)
    assert stages == [("A", ["a", "c"]), ("B", ["b", "d"])]
    # two devices feeding each other crosswise cannot both have one part
    cross = {"a1": [], "b2": [], "b1": ["a1"], "a2": ["b2"]}
    stages = mesh_stages(["a1", "b2", "b1", "a2"], {"a1": "A", "a2": "A", "b1": "B", "b2": "B"}, cross)
    assert len(stages) == 3 and {d for d, _ in stages} == {"A", "B"}
    # random DAGs and placements: every layer once, each stage reads only earlier stages
    # or itself, and a device with no path leaving it and coming back has one stage when
    # it shares the graph with one other device that has a single layer
    import random

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 12)
        names = [f"l{i}" for i in range(n)]
        preds = {m: rng.sample(names[:i], k=min(i, rng.randint(0, 2))) for i, m in enumerate(names)}
        device = {m: rng.choice("ABC") for m in names}
        stages = mesh_stages(names, device, preds)
        seen = {}
        for k, (d, layers) in enumerate(stages):
            for m in layers:
                assert device[m] == d and m not in seen
                assert all(seen.get(q, k) <= k for q in preds[m]) and all(q in seen or q in layers for q in preds[m])
                seen[m] = k
        assert sorted(seen) == sorted(names)
        for d in "ABC":
            count = sum(1 for e, _ in stages if e == d)
            assert count >= return_lower_bound(names, preds, device, d)
        lone = [m for m in names if device[m] != "A"][:1]
        device = {m: "B" if m in lone else "A" for m in names}
        stages = mesh_stages(names, device, preds)
        assert sum(1 for e, _ in stages if e == "A") == return_lower_bound(names, preds, device, "A")


def test_mesh_bad_plans(mini):
    inst, names = mini.inst, mini.names
    # the cloud has no link out: a layer after it on another device cannot get its input
    plan = on(names, "cloud", fc="SBS")
    with pytest.raises(InvalidPlan, match=r"plan\.layers\.fc\.device: 'SBS' reads the output of layer 'avgpool' "
                                          r"from 'cloud', but there is no route") as e:
        partition(mini.module, mini.example, plan, inst, capture=mini.cap)
    assert "\n" not in str(e.value)
    with pytest.raises(InvalidPlan, match=r"plan\.layers\.stem\.device: 'TPU' is not one of the devices"):
        partition(mini.module, mini.example, on(names, "SBS", stem="TPU"), inst, capture=mini.cap)
    # no instance: the first device listed produces the input, outputs stay
    split = partition(mini.module, mini.example, on(names, "B", inc1__branch2="A"), devices=["A", "B"],
                      capture=mini.cap)
    assert float((split.run(mini.x) - mini.ref).abs().max()) <= FLOAT_ATOL
    assert [(c.source, c.target) for c in split.crossings] == [("A", "B"), ("B", "A")]
    multiview = splitopt.load_instance(INSTANCES / "splitnets_mobilenetv2_multiview12_serial.json")
    with pytest.raises(NotApplicable, match="problem 'multiview' is not supported by partition"):
        partition(mini.module, mini.example, MeshPlan({}), multiview, capture=mini.cap)


# ----- multiview plans ---------------------------------------------------------------------------

def multiview_instance(graph: dict, views: int, name: str, **multiview):
    sensors = [f"sensor{i}" for i in range(views)]
    devices = [{"name": n, "mac_per_s": 1e9, "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": 1e9,
                "bit_widths": [8]} for n in sensors + ["aggregator"]]
    return parse_instance({
        "format": "splitopt-instance/1", "name": name, "graph": graph, "devices": devices,
        "buses": [{"name": "bus", "bandwidth_bits_per_s": 1e8, "mode": "share"}],
        "links": [{"source": n, "target": "aggregator", "bus": "bus", "latency_ms": 0.0} for n in sensors],
        "settings": {"problem": "multiview", "edge": "sensor0", "cloud": "aggregator", "cloud_bits": 8,
                     "bit_widths": [8], "edge_memory_bytes": 1e9, "error_budget": None,
                     "multiview": {"sensors": sensors, **multiview}}})


def mv_plan(fusion, width, cuts):
    sensors = tuple(f"sensor{i}" for i in range(len(cuts)))
    return MultiviewPlan(fusion, width, dict(zip(sensors, cuts)), None, sensors)


def run_multiview_plan(s: Setup, plan, inst, views, label, **kw):
    split = partition_multiview(s.module, s.example, plan, inst, capture=s.cap, **kw)
    report = compare_multiview(split, views)
    assert report["max_abs_diff"] <= FLOAT_ATOL, f"{label}: max abs difference {report['max_abs_diff']}"
    assert report["ok"] and report["bytes_match"], label
    ours = [(v.sensor, tuple((n, e * b / 8.0) for n, e, b in v.crossing.tensors)) for v in split.views]
    assert ours == evaluator_view_bytes(inst, plan), label
    assert split.last_run.crossing_bytes == pytest.approx(split.sent_bytes, rel=1e-12), label
    for v in split.views:  # every pre-fusion layer once per view, on the sensor or the aggregator
        layers = [n for n in v.sensor_part.layers + v.aggregator_part.layers if n != "mv.reduce"]
        assert layers == [n for n in s.names if n in set(layers)], label
    return split, report


def test_multiview_plans_match_reference(mini):
    graph = mini.cap.graph_dict()
    inst = multiview_instance(graph, 3, "mini_mv", compression_widths=[2, 4, 8],
                              fusion_candidates=["input", "stem", "pool", "inc2.concat", "fc"])
    views = torch.randn(2, 3, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    # View-Pool at 'pool'; the sensors cut at the raw view, 'stem' and 'pool'
    split, report = run_multiview_plan(mini, mv_plan("pool", None, ["input", "stem", "pool"]), inst, views, "pool")
    assert [v.crossing.names for v in split.views] == [("input",), ("stem",), ("pool",)]
    assert split.views[0].sensor_part.module is None and split.views[2].aggregator_part.module is None
    assert split.fusion_part.layers[0] == "mv.fuse" and "fc" in split.fusion_part.layers
    same = mini.x.unsqueeze(1).expand(-1, 3, -1, -1, -1)  # max over equal views: the backbone itself
    assert float((split.run(same) - mini.ref).abs().max()) <= FLOAT_ATOL
    # Conv-Reduce d=4 + View-Fuse, given modules; one sensor sends the reduced tensor
    from splitopt.torch.multiview.splitting import ConvReduce, ConvRecover

    reduce, restore = ConvReduce(20, 4), ConvRecover(12, 20)
    plan = mv_plan("pool", 4, ["input", "stem", "mv.reduce"])
    split, _ = run_multiview_plan(mini, plan, inst, views, "reduce", reduce=reduce, restore=restore)
    assert split.reduce is reduce and split.restore is restore
    assert split.views[2].crossing.tensors == (("mv.reduce", 4 * 8 * 8, 8),)
    assert split.views[2].sensor_part.layers[-1] == split.views[0].aggregator_part.layers[-1] == "mv.reduce"
    # fresh seeded modules: the same seed gives the same network
    a = partition_multiview(mini.module, mini.example, plan, inst, capture=mini.cap, seed=3)
    b = partition_multiview(mini.module, mini.example, plan, inst, capture=mini.cap, seed=3)
    assert torch.equal(a.run(views), b.run(views))
    # early fusion on the raw views (d=2 < 3 channels) and late fusion on the logits
    run_multiview_plan(mini, mv_plan("input", 2, ["input", "mv.reduce", "mv.reduce"]), inst, views, "early")
    run_multiview_plan(mini, mv_plan("fc", None, ["fc", "inc2.concat", "stem"]), inst, views, "late")


def test_multiview_single_view(mini):
    inst = multiview_instance(mini.cap.graph_dict(), 1, "mini_mv1", compression_widths=[4])
    x = mini.x.unsqueeze(1)
    # the sensor runs the whole network: nothing crosses (as the evaluator counts it)
    split, report = run_multiview_plan(mini, mv_plan("fc", None, ["fc"]), inst, x, "all on sensor")
    assert split.crossings[0].tensors == () and split.fusion_part.module is None
    assert float((split.run(x) - mini.ref).abs().max()) <= FLOAT_ATOL
    split, _ = run_multiview_plan(mini, mv_plan("pool", None, ["stem"]), inst, x, "one view, no width")
    assert split.fusion_part.layers[0] != "mv.fuse" and float((split.run(x) - mini.ref).abs().max()) <= FLOAT_ATOL
    # bad input: one line each
    with pytest.raises(InvalidModel, match=r"multiview input: 2 views given, the plan has 1"):
        split.run([x[:, 0], x[:, 0]])
    with pytest.raises(InvalidPlan, match=r"plan\.cuts\.sensor0: 'fc' is not a cut point"):
        partition_multiview(mini.module, mini.example, mv_plan("pool", None, ["fc"]), inst, capture=mini.cap)
    with pytest.raises(NotApplicable, match="needs a multiview instance"):
        partition_multiview(mini.module, mini.example, mv_plan("pool", None, ["fc"]), mini.inst, capture=mini.cap)


# ----- quantized plans -------------------------------------------------------------------------

def test_quantized_cpsat_plan_on_resnet50(resnet):
    from splitopt.solve import solve

    inst = splitopt.load_instance(INSTANCES / "resnet50_eyeriss.json")
    plan = solve(inst, "cpsat").plan
    edge = edge_layers(inst, plan)
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

    with pytest.raises(InvalidModel, match=r"example input of shape \(1, 5, 8, 8\) .*does not fit the module") as e:
        partition(Small().eval(), torch.zeros(1, 5, 8, 8), plan, devices=["edge", "cloud"])
    assert "\n" not in str(e.value)

    with pytest.raises(InvalidModel, match=r"the module cannot be captured by torch.export: .*numpy") as e:
        partition(Untraceable(), x, Plan({}, {}, {}), devices=["edge", "cloud"])
    assert "\n" not in str(e.value)

    inst = float_instance("resnet50_eyeriss.json")
    with pytest.raises(InvalidModel, match=r"example input shape \(1, 3, 8, 8\) does not match instance "
                                           r"'resnet50_eyeriss' input 'input' \(expected \(1, 3, 224, 224\)\)"):
        partition(m, x, uniform_plan(inst, []), inst)
    with pytest.raises(InvalidModel, match="instance 'resnet50_eyeriss' layer 'conv1' is not a layer"):
        partition(m, torch.zeros(1, 3, 224, 224), uniform_plan(inst, []), inst)


# ----- CLI -------------------------------------------------------------------------------------

def test_run_command(gpt2, tmp_path):
    import typer
    from typer.testing import CliRunner

    from splitopt.core.instance_io import save_instance
    from splitopt.cli.run import run_command
    from splitopt.torch.seeds import RUN_INPUT_SEED

    app = typer.Typer()
    app.command("run")(run_command)
    app.command("other")(lambda: None)  # two commands: `run` is addressed by name
    inst_path = tmp_path / "tiny_gpt2.json"
    save_instance(gpt2.inst, inst_path)
    plan = uniform_plan(gpt2.inst, prefix(gpt2.names, "h.0.attn.c_proj"))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan_to_dict(gpt2.inst, plan)))
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
    assert res.exit_code == 2 and "the plan is for instance" in res.stderr and res.stderr.count("\n") == 1
    # the instance is not the model's: the model's input has another shape
    inst = splitopt.load_instance(INSTANCES / "resnet50_eyeriss.json")
    cloud_path = tmp_path / "cloud.json"
    cloud_path.write_text(json.dumps(plan_to_dict(inst, uniform_plan(inst, []))))
    res = runner.invoke(app, ["run", str(INSTANCES / "resnet50_eyeriss.json"), str(cloud_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 2 and "expected (1, 3, 224, 224)" in res.stderr and res.stderr.count("\n") == 1


def test_run_command_mesh(gpt2, tmp_path):
    """``splitopt run`` on a mesh plan of tiny GPT-2: the query and key views of the first
    attention on MBS1 and MBS2, the first MLP on MBS1 (SBS -> MBS1 -> SBS), the head on
    the cloud."""
    import typer
    from typer.testing import CliRunner

    from splitopt.core.instance_io import save_instance
    from splitopt.cli.run import run_command

    app = typer.Typer()
    app.command("run")(run_command)
    app.command("other")(lambda: None)
    graph = gpt2.cap.graph_dict()
    graph["inputs"][0]["bits"] = 32
    inst = mesh_instance(graph, "tiny_gpt2_mesh")
    inst_path = tmp_path / "mesh.json"
    save_instance(inst, inst_path)
    plan = on(gpt2.names, "SBS", h__0__attn__view_1="MBS2", h__0__attn__view="MBS1", h__0__mlp="MBS1",
              lm_head="cloud")
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan.to_dict(inst)))
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["kind"] == "mesh" and report["max_abs_diff"] <= FLOAT_ATOL
    assert [p["device"] for p in report["parts"]] == ["SBS", "MBS1", "MBS2", "SBS", "MBS1", "SBS", "cloud"]
    links = {l["link"]: l for l in report["links"]}
    assert links["UE->SBS"]["bytes"] == links["UE->SBS"]["evaluator_bytes"] == 16 * 4  # token ids at 32 bits
    assert all(l["bytes"] == l["evaluator_bytes"] for l in report["links"])
    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 0 and "OK" in res.stdout and "part 6 on cloud" in res.stdout
    assert "link SBS->MBS1" in res.stdout
    # a plan the routes cannot carry: one line, exit 2
    bad = on(gpt2.names, "cloud", lm_head="SBS")
    plan_path.write_text(json.dumps(bad.to_dict(inst)))
    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 2 and "no route" in res.stderr and res.stderr.count("\n") == 1
    # a mesh plan for a multiview instance
    res = runner.invoke(app, ["run", str(INSTANCES / "splitnets_mobilenetv2_multiview12_serial.json"),
                              str(plan_path), "--model", "mobilenet_v2"])
    assert res.exit_code == 2 and "expected 'splitopt-multiview-plan/1'" in res.stderr
    assert res.stderr.count("\n") == 1


def test_run_command_multiview(gpt2, tmp_path):
    """``splitopt run`` on a multiview plan: tiny GPT-2 as the backbone of two views,
    Conv-Reduce at the first block's output."""
    import typer
    from typer.testing import CliRunner

    from splitopt.core.instance_io import save_instance
    from splitopt.cli.run import run_command

    app = typer.Typer()
    app.command("run")(run_command)
    app.command("other")(lambda: None)
    graph = gpt2.cap.graph_dict()
    graph["inputs"][0]["bits"] = 32
    inst = multiview_instance(graph, 2, "tiny_gpt2_mv", compression_widths=[4])
    inst_path = tmp_path / "mv.json"
    save_instance(inst, inst_path)
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(mv_plan("h.0.add_1", 4, ["input", "mv.reduce"]).to_dict(inst)))
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["kind"] == "multiview" and report["max_abs_diff"] <= FLOAT_ATOL
    assert [v["bytes"] for v in report["views"]] == [16 * 4, 4 * 64]  # 16 token ids at 32 bits; d x 64 at 8 bits
    assert [v["evaluator_bytes"] for v in report["views"]] == [16 * 4, 4 * 64]
    res = runner.invoke(app, ["run", str(inst_path), str(plan_path), "--model", "tiny_gpt2"])
    assert res.exit_code == 0 and "OK" in res.stdout and "Conv-Reduce d=4" in res.stdout
