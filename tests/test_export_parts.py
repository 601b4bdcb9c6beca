"""``splitopt export`` and :mod:`splitopt.torch.export_parts`: one ONNX / pt2 file per part
and a manifest; each saved part loads and runs on its own (onnxruntime,
``torch.export.load``), chaining the parts by the manifest reproduces the in-process split
and the unsplit model, and the manifest's crossing bytes are the evaluator's.

Models: a small residual CNN (a skip connection crosses the cut), profiled in code and
written as a user model file for the command line, and the built-in ``tiny_gpt2`` (a
transformer block). Plans: an edge/cloud float ``split`` cut across the skip, a quantized
``split_bits`` plan (W4A4 and mixed bits), a 3-device ``chain`` plan with a forwarded
tensor, and ``mesh`` plans with a device visited twice (two stages). Bad input: one line,
exit 2; a missing extra: one line naming it, exit 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from resblock_model import SOURCE  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import splitopt  # noqa: E402
from splitopt.api import parse_instance  # noqa: E402
from splitopt.cli import app  # noqa: E402
from splitopt.core import presets  # noqa: E402
from splitopt.core.errors import InvalidModel, InvalidOption  # noqa: E402
from splitopt.core.instance_io import save_instance  # noqa: E402
from splitopt.families.chain.plan import plan_on_devices  # noqa: E402
from splitopt.families.mesh.plan import MeshPlan  # noqa: E402
from splitopt.torch import architectures as arch  # noqa: E402
from splitopt.torch.capture import capture  # noqa: E402
from splitopt.torch.export_manifest import MANIFEST, onnx_graph_name, read_manifest  # noqa: E402
from splitopt.torch.export_parts import check_exported, check_format, export_split  # noqa: E402
from splitopt.torch.exported_run import run_exported  # noqa: E402
from splitopt.torch.packing import activation_qparams  # noqa: E402
from splitopt.torch.mesh.compare import evaluator_mesh_crossings  # noqa: E402
from splitopt.torch.partition import evaluator_sent_bytes, identity_transmit, partition  # noqa: E402
from splitopt.torch.profile import profile  # noqa: E402
from splitopt.families.edge_cloud.plan import edge_cloud_plan, uniform_plan
from splitopt.api import plan_to_dict

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
ATOL = 1e-5

MODEL_FILE = SOURCE


# ----- fixtures: one build, capture and instance per model ---------------------------------

class Setup:
    """A model, its capture, an instance and inputs to run."""

    def __init__(self, module, example, rename, inst, x, calibration=None):
        self.module, self.example, self.rename, self.inst, self.x = module, example, rename, inst, x
        self.calibration = calibration
        self.cap = capture(module, example, rename=rename, input_bits=inst.inputs[0].bits)
        self.names = [l.name for l in self.cap.layers]

    def split(self, plan, inst=None):
        return partition(self.module, self.example, plan, inst or self.inst, capture=self.cap,
                         calibration=self.calibration)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """The residual CNN (layers c1, c2, c3, add, mean, fc) as a split_bits instance
    profiled with error tables, and its model file for the command line."""
    folder = tmp_path_factory.mktemp("cnn")
    (folder / "resnet_tiny.py").write_text(MODEL_FILE)
    torch.manual_seed(0)
    namespace: dict = {}
    exec(MODEL_FILE, namespace)
    module, example = namespace["build"]()
    for bn in (module.b1, module.b2):  # non-trivial batch-norm statistics (folded into the convs)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
    calibration = torch.randn(8, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    inst = profile(module, example, [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()],
                   {"problem": "split_bits", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [2, 4, 6, 8, 16],
                    "cloud_bits": 16, "edge_memory_bytes": 4e6, "error_budget": None},
                   name="resnet_tiny", calibration=calibration)
    s = Setup(module, example, None, inst, torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(2)),
              calibration)
    s.spec = f"{folder / 'resnet_tiny.py'}:build"
    return s


@pytest.fixture(scope="module")
def gpt2():
    module, rename = arch.tiny_gpt2()
    example = arch.synthetic_tokens(1, seed=3)
    graph = capture(module, example, rename=rename).graph_dict()
    graph["inputs"][0]["bits"] = 32  # int64 token ids sent as 32-bit integers
    inst = parse_instance({
        "format": "splitopt-instance/1", "name": "tiny_gpt2", "graph": graph,
        "devices": [presets.eyeriss_edge(), presets.tpu_cloud()], "links": [presets.uplink_3mbps()],
        "settings": {"problem": "split", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [16], "cloud_bits": 16,
                     "edge_memory_bytes": 4e6, "error_budget": None}})
    return Setup(module, example, rename, inst, arch.synthetic_tokens(2, seed=7))


def chain_instance(inst, devices=("d0", "d1", "d2")):
    """A 3-device chain instance with the layer graph of ``inst`` (float, 16 bits)."""
    data = splitopt.core.instance_io.to_dict(inst)
    layers = [{k: v for k, v in l.items() if k not in ("weight_error", "activation_error", "latency_ms")}
              for l in data["graph"]["layers"]]
    devs = [{"name": d, "mac_per_s": 1e10 * (i + 1), "offchip_bytes_per_s": None, "onchip_bytes": 0,
             "memory_bytes": 1e12, "bit_widths": [16]} for i, d in enumerate(devices)]
    links = [{"source": a, "target": b, "bandwidth_bits_per_s": 1e8, "latency_ms": 0.0}
             for a, b in zip(devices, devices[1:])]
    return parse_instance({"format": data["format"], "name": inst.name + "_chain",
                           "graph": {"inputs": data["graph"]["inputs"], "layers": layers}, "devices": devs,
                           "links": links, "settings": {"problem": "chain", "objective": "latency",
                                                        "chain": list(devices), "cloud_bits": 16}})


MESH_DEVICES = ("UE", "SBS", "MBS1", "cloud")
MESH_LINKS = (("UE", "SBS"), ("SBS", "MBS1"), ("MBS1", "SBS"), ("MBS1", "cloud"))


def mesh_instance(inst):
    """A mesh instance UE -> SBS <-> MBS1 -> cloud with the layer graph of ``inst``."""
    data = splitopt.core.instance_io.to_dict(inst)
    layers = [{k: v for k, v in l.items() if k not in ("weight_error", "activation_error", "latency_ms")}
              for l in data["graph"]["layers"]]
    devices = [{"name": d, "mac_per_s": 1e6, "offchip_bytes_per_s": None, "onchip_bytes": 0, "memory_bytes": 1e9,
                "bit_widths": [16]} for d in MESH_DEVICES]
    links = [{"source": u, "target": v, "bandwidth_bits_per_s": 1e9, "latency_ms": 0.0} for u, v in MESH_LINKS]
    return parse_instance({"format": data["format"], "name": inst.name + "_mesh",
                           "graph": {"inputs": data["graph"]["inputs"], "layers": layers}, "devices": devices,
                           "links": links, "settings": {"problem": "mesh", "edge": "UE", "cloud": "cloud",
                                                        "cloud_bits": 16, "mesh": {"routing": "shortest"}}})


# ----- checks shared by the round trips -------------------------------------------------------

def run_each_part_alone(manifest):
    """Load every saved part in a fresh runtime, feed it inputs of the manifest's shapes
    and dtypes, and check its outputs' names, shapes and dtypes against the manifest."""
    for p in manifest.parts:
        if p["file"] is None:
            assert not p["inputs"] and not p["outputs"]
            continue
        path = manifest.directory / p["file"]
        args = [torch.zeros(t["shape"], dtype=getattr(torch, t["dtype"])) for t in p["inputs"]]
        if manifest.part_format == "onnx":
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            assert [o.name for o in session.get_outputs()] == [onnx_graph_name(t["name"]) for t in p["outputs"]]
            declared = {i.name for i in session.get_inputs()}
            assert declared <= {onnx_graph_name(t["name"]) for t in p["inputs"]}
            outs = session.run(None, {onnx_graph_name(t["name"]): a.numpy() for t, a in zip(p["inputs"], args)
                                      if onnx_graph_name(t["name"]) in declared})
            outs = [torch.from_numpy(o) for o in outs]
        else:
            outs = torch.export.load(str(path)).module()(*args)
        assert len(outs) == len(p["outputs"])
        for o, t in zip(outs, p["outputs"]):
            assert list(o.shape) == t["shape"] and str(o.dtype) == f"torch.{t['dtype']}", (p["file"], t)


def check_bytes(manifest, split, inst, plan):
    """Manifest bytes per tensor = elements * bits / 8; per crossing = SplitModel's = the
    evaluator's; the sends after each part carry the same (tensor, destination, bits)."""
    data = manifest.data
    assert len(data["crossings"]) == len(split.crossings)
    for c, ours in zip(data["crossings"], split.crossings):
        assert (c["source"], c["target"]) == (ours.source, ours.target)
        assert [(t["name"], t["elements"], t["bits"]) for t in c["tensors"]] == list(ours.tensors)
        for t in c["tensors"]:
            assert t["bytes"] == t["elements"] * t["bits"] / 8
        assert c["bytes"] == pytest.approx(ours.bytes, rel=1e-12)
    assert manifest.crossing_bytes == pytest.approx(evaluator_sent_bytes(inst, plan), rel=1e-12)
    assert data["transmitted_bytes"] == pytest.approx(split.transmitted_bytes, rel=1e-12)
    sends = sorted((s["name"], p["device"], s["to_device"], s["bits"]) for p in data["parts"] for s in p["sends"])
    sends += [(s["name"], data["input"]["device"], s["to_device"], s["bits"]) for s in data["input"]["sends"]]
    assert sorted(sends) == sorted((n, c.source, c.target, b) for c in split.crossings for n, _, b in c.tensors)


def round_trip(s: Setup, plan, inst, fmt, out, *, unsplit=True):
    """Export, load each part alone, chain them; returns (manifest, split)."""
    split = s.split(plan, inst)
    manifest = export_split(split, fmt, out, model="test", seed=0)
    assert (out / MANIFEST).is_file()
    files = [p["file"] for p in manifest.parts if p["file"] is not None]
    assert sorted(files) == sorted(f.name for f in out.iterdir() if f.name != MANIFEST)
    assert len(files) == sum(p.module is not None for p in split.parts)
    run_each_part_alone(manifest)
    check_bytes(manifest, split, inst, plan)
    got = run_exported(out, s.x)
    ref = split.run(s.x, identity_transmit)
    assert float((got - ref).abs().max()) <= ATOL, fmt
    if unsplit:
        with torch.no_grad():
            assert float((got - s.module(s.x)).abs().max()) <= ATOL, fmt
    report = check_exported(manifest, split, s.module, s.x)
    assert report["ok"], report
    return manifest, split


# ----- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_float_split_across_a_skip(cnn, fmt, tmp_path):
    inst = cnn.inst.with_settings(problem="split")
    plan = uniform_plan(inst, ["c1", "c2"])
    manifest, split = round_trip(cnn, plan, inst, fmt, tmp_path)
    edge, cloud = manifest.parts
    assert (edge["device"], cloud["device"]) == ("eyeriss", "tpu") and manifest.data["kind"] == "sequential"
    assert edge["file"] == f"part0_eyeriss.{fmt}" and not manifest.data["quantized"]
    assert [t["name"] for t in edge["inputs"]] == ["input"] and edge["inputs"][0]["from_part"] is None
    assert edge["inputs"][0]["bits"] is None  # produced on the edge: no crossing
    assert sorted(t["name"] for t in edge["outputs"]) == ["c1", "c2"]  # the skip crosses too
    for t in cloud["inputs"]:
        assert (t["from_part"], t["from_device"], t["bits"], t["shape"], t["dtype"]) == \
            (0, "eyeriss", 16, [1, 8, 8, 8], "float32")
    for t in edge["outputs"]:
        assert (t["to_parts"], t["to_devices"], t["bits"]) == ([1], ["tpu"], 16)
    assert manifest.data["outputs"] == [{"name": "fc", "part": 1, "device": "tpu", "shape": [1, 5],
                                         "dtype": "float32"}]
    assert all(t["transmit"] == {"scheme": "identity"} for t in manifest.data["crossings"][0]["tensors"])
    assert manifest.crossing_bytes == [2 * 512 * 16 / 8]
    # numpy in, numpy out (ONNX parts need no torch tensors)
    got = run_exported(tmp_path, cnn.x.numpy())
    assert type(got).__module__ == "numpy" and got.shape == (3, 5)


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_quantized_split_bits(cnn, fmt, tmp_path):
    """W4A4 on the edge, the cloud at 16 bits: the parts hold the quantize-dequantized
    weights and quantize their activations as the in-process split does; the transmission
    at 4 bits is in the manifest, and applying it reproduces the split's own."""
    inst = cnn.inst
    plan = uniform_plan(inst, ["c1", "c2"], bits=4)
    manifest, split = round_trip(cnn, plan, inst, fmt, tmp_path, unsplit=False)
    assert split.quantized and manifest.data["quantized"]
    for t in manifest.data["crossings"][0]["tensors"]:
        lo, hi = split.ranges[t["name"]]
        scale, zero = activation_qparams(4, lo, hi)
        assert t["transmit"] == {"scheme": "affine", "bits": 4, "min": lo, "max": hi, "scale": scale,
                                 "zero_point": zero}
        assert t["bits"] == 4 and t["bytes"] == 512 * 4 / 8
    sent = run_exported(manifest, cnn.x, transmit=True)
    assert float((sent - split.run(cnn.x)).abs().max()) <= ATOL
    if fmt == "pt2":  # the same ATen ops: bit for bit
        assert torch.equal(run_exported(manifest, cnn.x), split.run(cnn.x, identity_transmit))
    with torch.no_grad():  # and quantized: not the float model
        assert float((sent - cnn.module(cnn.x)).abs().max()) > 1e-4


def test_mixed_bits_and_16_bit_transmission(cnn, tmp_path):
    """c1 at W2A8 sent at 8 bits, c2 at W8A16 sent at 16 bits (float16 in the manifest)."""
    inst = cnn.inst
    plan = edge_cloud_plan(inst, {"c1": (2, 8), "c2": (8, 16)})
    manifest, split = round_trip(cnn, plan, inst, "onnx", tmp_path, unsplit=False)
    transmit = {t["name"]: t["transmit"] for t in manifest.data["crossings"][0]["tensors"]}
    assert transmit["c1"]["scheme"] == "affine" and transmit["c1"]["bits"] == 8
    assert transmit["c2"] == {"scheme": "float16"}
    assert float((run_exported(manifest, cnn.x, transmit=True) - split.run(cnn.x)).abs().max()) <= ATOL


def test_chain_of_three_with_a_forwarded_tensor(gpt2, tmp_path):
    """tiny GPT-2 on d0 -> d1 -> d2: the embedding (the residual stream) is read on d2 and
    forwarded by d1, which sends it without producing it."""
    inst = chain_instance(gpt2.inst)
    names = gpt2.names
    a, b = names.index("h.0.attn.c_attn"), names.index("h.0.attn.c_proj")
    plan = plan_on_devices(inst, {n: "d0" if i <= a else "d1" if i <= b else "d2" for i, n in enumerate(names)})
    manifest, split = round_trip(gpt2, plan, inst, "onnx", tmp_path)
    d0, d1, d2 = manifest.parts
    assert [p["device"] for p in manifest.parts] == ["d0", "d1", "d2"] and all(p["file"] for p in manifest.parts)
    forwarded = {s["name"] for s in d1["sends"]} - {t["name"] for t in d1["outputs"]}
    assert "wte.embedding" in forwarded
    emb = next(t for t in d2["inputs"] if t["name"] == "wte.embedding")
    assert (emb["from_part"], emb["from_device"], emb["bits"]) == (0, "d0", 16)
    assert d0["inputs"][0]["dtype"] == "int64" and manifest.data["input"]["bits"] == 32


def test_tiny_gpt2_cloud_only_part_forwards(gpt2, tmp_path):
    """Cloud-only plan: the edge runs no layer (no file) and sends the token ids at 32 bits."""
    plan = uniform_plan(gpt2.inst, [])
    manifest, _ = round_trip(gpt2, plan, gpt2.inst, "onnx", tmp_path)
    edge, cloud = manifest.parts
    assert edge["file"] is None and edge["sends"] == [{"name": "input", "to_device": "tpu", "bits": 32,
                                                       "elements": 16, "bytes": 64.0}]
    assert cloud["inputs"][0] == {"name": "input", "shape": [1, 16], "dtype": "int64", "from_part": None,
                                  "from_device": "eyeriss", "bits": 32}


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_mesh_plan_with_a_device_visited_twice(cnn, fmt, tmp_path):
    """UE: c1; SBS: c2; MBS1: c3; SBS again: the skip's add (two stages on SBS); cloud: the
    head. Parts are stages; the manifest's per-pair crossings are the mesh evaluator's."""
    inst = mesh_instance(cnn.inst)
    where = {"c1": "UE", "c2": "SBS", "c3": "MBS1", "add": "SBS", "mean": "cloud", "fc": "cloud"}
    plan = MeshPlan({n: where[n] for n in cnn.names})
    manifest, split = round_trip(cnn, plan, inst, fmt, tmp_path)
    assert manifest.data["kind"] == "mesh" and manifest.data["problem"] == "mesh"
    assert [p["device"] for p in manifest.parts] == ["UE", "SBS", "MBS1", "SBS", "cloud"]
    assert [p["file"] for p in manifest.parts][1] == f"part1_SBS.{fmt}"
    pairs = [(c["source"], c["target"], c["bytes"]) for c in manifest.data["crossings"]]
    assert pairs == [(a, b, pytest.approx(v, rel=1e-12)) for a, b, v in evaluator_mesh_crossings(inst, plan)]
    add = manifest.parts[3]
    c1 = next(t for t in add["inputs"] if t["name"] == "c1")
    assert (c1["from_part"], c1["from_device"], c1["bits"]) == (0, "UE", 16)
    c3 = next(t for t in add["inputs"] if t["name"] == "c3")
    assert (c3["from_part"], c3["from_device"]) == (2, "MBS1")
    assert manifest.data["outputs"][0]["device"] == "cloud"


# ----- the manifest is checked on reading -------------------------------------------------------

def test_manifest_is_checked(cnn, tmp_path):
    inst = cnn.inst.with_settings(problem="split")
    export_split(cnn.split(uniform_plan(inst, ["c1", "c2"]), inst), "onnx", tmp_path)
    good = json.loads((tmp_path / MANIFEST).read_text())
    with pytest.raises(InvalidModel, match=r"input shape \(2, 3, 4, 4\) does not match"):
        run_exported(tmp_path, torch.zeros(2, 3, 4, 4))
    with pytest.raises(InvalidModel, match="input dtype float64 does not match"):
        run_exported(tmp_path, torch.zeros(2, 3, 8, 8, dtype=torch.float64))

    def broken(edit, *needles):
        data = json.loads(json.dumps(good))
        edit(data)
        (tmp_path / MANIFEST).write_text(json.dumps(data))
        with pytest.raises(InvalidModel) as e:
            read_manifest(tmp_path)
        text = str(e.value)
        assert "\n" not in text and all(n in text for n in needles), text

    broken(lambda d: d.update(format_version=2), "format_version")
    broken(lambda d: d.update(extra=1), "extra", "unknown field")
    broken(lambda d: d.update(run_order=[1, 0]), "parts[1].inputs[0].name", "not produced before")
    broken(lambda d: d.update(run_order=[0, 0]), "run_order")
    broken(lambda d: d["parts"][1]["inputs"][0].update(from_part=1), "parts[1].inputs[0].from_part")
    broken(lambda d: d["parts"][1]["inputs"][0].update(shape=[1, 2]), "parts[1].inputs[0]", "[1, 8, 8, 8]")
    broken(lambda d: d["parts"][0].update(file="../x.onnx"), "manifest.json: parts[0].file", "does not match")
    broken(lambda d: d["parts"][0].update(file="gone.onnx"), "parts[0].file", "'gone.onnx' is not a file")
    broken(lambda d: d["crossings"][0]["tensors"][0].update(bytes=1.0), "crossings[0].tensors[0].bytes")
    broken(lambda d: d["outputs"][0].update(name="nope"), "outputs[0].name")
    broken(lambda d: d["outputs"][0].update(device="eyeriss"), "outputs[0].device", "'fc' is not on device 'eyeriss'")
    broken(lambda d: d["parts"][0]["sends"].pop(), "parts[1].inputs", "does not reach device 'tpu'")
    broken(lambda d: d["parts"][0]["sends"][0].update(name="fc"), "parts[0].sends[0].name", "'fc' is not on device")
    broken(lambda d: d.update(part_format="tflite"), "part_format")
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(InvalidModel, match="not a readable JSON file"):
        read_manifest(tmp_path)
    with pytest.raises(InvalidModel, match="no manifest"):
        read_manifest(tmp_path / "elsewhere")
    with pytest.raises(InvalidOption, match="unknown part format"):
        check_format("tflite")


# ----- the command line -----------------------------------------------------------------------

def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(res, code, *needles):
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert all(n in lines[0] for n in needles), (needles, lines[0])


@pytest.fixture(scope="module")
def files(cnn, tmp_path_factory):
    """The CNN's split_bits instance and a W8A8 plan cut across the skip, as files."""
    folder = tmp_path_factory.mktemp("files")
    save_instance(cnn.inst, folder / "inst.json")
    plan = uniform_plan(cnn.inst, ["c1", "c2"], bits=8)
    (folder / "plan.json").write_text(json.dumps(plan_to_dict(cnn.inst, plan)))
    return folder


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_export_command(cnn, files, fmt, tmp_path):
    out = tmp_path / "parts"
    res = invoke("export", files / "inst.json", files / "plan.json", "--model", cnn.spec, "--format", fmt,
                 "-o", out, "--json", "--samples", "1")
    assert res.exit_code == 0, (res.output, res.exception)
    report = json.loads(res.stdout)
    assert report["ok"] and report["bytes_match"] and report["quantized"] and report["format"] == fmt
    assert [p["file"] for p in report["parts"]] == [f"part0_eyeriss.{fmt}", f"part1_tpu.{fmt}"]
    assert report["crossings"][0]["bytes"] == report["crossings"][0]["evaluator_bytes"] == 2 * 512
    manifest = read_manifest(out)
    assert manifest.data["model"] == cnn.spec and manifest.data["instance"] == "resnet_tiny"
    assert manifest.data["onnx_opset"] == (17 if fmt == "onnx" else None)
    if fmt == "onnx":
        res = invoke("export", files / "inst.json", files / "plan.json", "--model", cnn.spec, "-o", out,
                     "--samples", "1")
        assert res.exit_code == 0 and "OK" in res.stdout and "eyeriss -> tpu" in res.stdout, res.output


def test_export_command_tiny_gpt2(gpt2, tmp_path):
    save_instance(gpt2.inst, tmp_path / "inst.json")
    plan = uniform_plan(gpt2.inst, gpt2.names[:gpt2.names.index("h.0.attn.c_proj") + 1])
    (tmp_path / "plan.json").write_text(json.dumps(plan_to_dict(gpt2.inst, plan)))
    res = invoke("export", tmp_path / "inst.json", tmp_path / "plan.json", "--model", "tiny_gpt2", "-o",
                 tmp_path / "out", "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    report = json.loads(res.stdout)
    assert report["ok"] and report["max_abs_diff_unsplit"] <= ATOL and report["bytes_match"]


def test_bad_input_is_one_line(cnn, files, gpt2, tmp_path):
    inst, plan, spec = files / "inst.json", files / "plan.json", cnn.spec
    one_line_error(invoke("export", inst, plan, "--model", spec, "--format", "tflite", "-o", tmp_path / "o"), 2,
                   "--format", "tflite")
    (tmp_path / "afile").write_text("")
    one_line_error(invoke("export", inst, plan, "--model", spec, "-o", tmp_path / "afile"), 2,
                   "--output", "not a directory")
    # a plan made for another instance
    one_line_error(invoke("export", INSTANCES / "resnet50_eyeriss.json", plan, "--model", spec, "-o", tmp_path / "o"),
                   2, "the plan is for instance")
    # a model that is not the instance's
    one_line_error(invoke("export", inst, plan, "--model", "tiny_gpt2", "-o", tmp_path / "o"), 2,
                   "does not match instance")
    one_line_error(invoke("export", inst, plan, "--model", "alexnet", "-o", tmp_path / "o"), 2,
                   "unknown model 'alexnet'")
    one_line_error(invoke("export", INSTANCES / "splitnets_mobilenetv2_multiview12_serial.json", plan, "--model",
                          "mobilenet_v2", "-o", tmp_path / "o"), 2, "problem 'multiview' is not supported")
    one_line_error(invoke("export", inst, plan, "--model", spec, "--samples", "-1", "-o", tmp_path / "o"), 2,
                   "--samples")
    assert not (tmp_path / "o").exists()


def test_missing_extras_exit_3(files, cnn, tmp_path, monkeypatch):
    import splitopt.onnx.deps as deps

    monkeypatch.setattr(deps, "missing", lambda: ["onnxruntime"])
    one_line_error(invoke("export", files / "inst.json", files / "plan.json", "--model", cnn.spec, "-o",
                          tmp_path / "o"), 3, "onnxruntime", "onnx extra")
    monkeypatch.undo()
    # without torch (blocked in a fresh process): the torch extra, before anything is read
    program = ("import sys; sys.modules['torch'] = None; sys.argv = ['splitopt', *sys.argv[1:]]; "
               "from splitopt.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", program, "export", str(files / "inst.json"),
                           str(files / "plan.json"), "--model", "resnet50", "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, env=dict(os.environ, COLUMNS="80"), timeout=120)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "splitopt export" in lines[0] and "torch extra" in lines[0], lines


def test_an_nn_sequential_model_exports_to_onnx(tmp_path):
    """``nn.Sequential`` names its layers "0", "1", ...: the TorchScript exporter refuses
    digit-only tensor names ("Invalid name: '2'"), so every user model built as a
    Sequential had failed to export to ONNX, the default format. The graph names them
    ``t_2``; the manifest keeps "2", and the parts chain as before."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                 torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()
    example = torch.randn(1, 3, 16, 16)
    inst = profile(module, example, [presets.eyeriss_edge(), presets.tpu_cloud()], [presets.uplink_3mbps()],
                   {"problem": "split", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [16], "cloud_bits": 16,
                    "edge_memory_bytes": 4e6, "error_budget": None}, name="sequential")
    names = [layer.name for layer in inst.layers]
    assert names[0].isdigit()
    setup = Setup(module, example, None, inst, torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2)))
    manifest, _ = round_trip(setup, uniform_plan(inst, names[:3]), inst, "onnx", tmp_path)
    assert [t["name"] for t in manifest.parts[1]["inputs"]] == [names[2]]
