"""User models in ``splitopt profile`` / ``splitopt run`` (``PATH.py:FACTORY``,
``package.module:FACTORY``): a profiled instance solves and its plans run; every bad
model or input gives one line on stderr, exit status 2 and no traceback."""

from __future__ import annotations

import json
import logging
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
from typer.testing import CliRunner  # noqa: E402

from splitopt.cli import app  # noqa: E402
from splitopt.core.errors import InvalidModel  # noqa: E402
from splitopt.api import load_instance  # noqa: E402
from splitopt.torch.models import build_model  # noqa: E402
from splitopt.core.input_text import parse_shape  # noqa: E402
from splitopt.torch.user_model import capture_checked, load_user_model  # noqa: E402
from splitopt.families.edge_cloud.plan import uniform_plan
from splitopt.api import plan_to_dict

MODEL_FILE = textwrap.dedent('''
    import torch
    from torch import nn


    class SmallCNN(nn.Module):
        """conv 3->4 + BN + ReLU on 3x16x16, 2x2 max pool, flatten, linear 256->5."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(4 * 8 * 8, 5)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(torch.relu(self.bn1(self.conv1(x)))), 1))


    def build():
        return SmallCNN()


    def mlp():  # returns its own example input: no --input-shape needed
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), torch.zeros(1, 6)


    def tokens():  # integer inputs: token ids below 50
        model = nn.Sequential(nn.Embedding(50, 4), nn.Flatten(), nn.Linear(4 * 3, 2))
        return model, torch.tensor([[0, 7, 49]])


    class Untraceable(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:  # Python control flow on a tensor value
                return self.fc(x)
            return -self.fc(x)


    def untraceable():
        return Untraceable()


    def broken():
        raise ValueError("no weights for this model\\nsecond line")


    def number():
        return 42
''')


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL_FILE)
    return path


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_line_error(res, *needles):
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception  # nothing escaped the CLI
    assert "Traceback" not in res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ----- the whole path: profile, solve, run -------------------------------------------------------

def test_profile_solve_run_a_user_cnn(model_file, tmp_path):
    out, plan = tmp_path / "out.json", tmp_path / "plan.json"
    spec = f"{model_file}:build"
    res = invoke("profile", spec, "--input-shape", "1,3,16,16", "-o", out, "--calibration-images", "2")
    assert res.exit_code == 0, (res.output, res.exception)
    inst = load_instance(out)
    assert inst.name == "build"  # the factory's name
    assert [layer.name for layer in inst.layers] == ["conv1", "pool", "fc"]
    assert inst.layers[0].macs == 4 * 16 * 16 * 3 * 9 and inst.layers[0].weights == 4 * 3 * 9 + 4  # BN folded
    assert inst.inputs[0].shape == (3, 16, 16) and inst.problem == "split_bits"

    res = invoke("solve", out, "-o", plan, "--no-layers")
    assert res.exit_code == 0 and "OPTIMAL" in res.stdout, res.output
    res = invoke("run", out, plan, "--model", spec, "--input-shape", "1,3,16,16")
    assert res.exit_code == 0 and "OK" in res.stdout, (res.output, res.exception)

    # a W8A8 cut after the pool: its 4x8x8 output crosses at 8 bits; no --input-shape: the instance's
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(plan_to_dict(inst, uniform_plan(inst, ["conv1", "pool"], bits=8))))
    res = invoke("run", out, cut, "--model", spec, "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    report = json.loads(res.stdout)
    assert report["ok"] and report["bytes_match"] and report["quantized"]
    assert [[t["tensor"] for t in c["tensors"]] for c in report["crossings"]] == [["pool"]]
    assert report["crossings"][0]["bytes"] == 4 * 8 * 8


def test_factory_with_its_own_example_input(model_file, tmp_path):
    out = tmp_path / "mlp.json"
    res = invoke("profile", f"{model_file}:mlp", "-o", out, "--calibration-images", "0", "--preset", "splitnets",
                 "--name", "my_mlp")
    assert res.exit_code == 0, (res.output, res.exception)
    inst = load_instance(out)
    assert inst.name == "my_mlp" and inst.inputs[0].shape == (6,) and inst.problem == "split"
    assert [layer.op for layer in inst.layers] == ["linear", "linear"]


def test_integer_inputs_and_seeded_weights(model_file):
    spec = f"{model_file}:tokens"
    module, rename, example, inputs, calibration = load_user_model(spec, seed=3)
    assert rename is None and not module.training
    assert example.dtype == torch.int64 and tuple(example.shape) == (1, 3)
    x = inputs(5)
    assert x.dtype == torch.int64 and tuple(x.shape) == (5, 3) and int(x.min()) >= 0 and int(x.max()) < 50
    assert torch.equal(x, inputs(5)) and tuple(calibration().shape) == (8, 3)  # seeded
    _, _, _, inputs7, _ = load_user_model(spec, input_shape="1,3", input_dtype="int64", input_high=7)
    assert int(inputs7(50).max()) < 7
    # the factory runs under torch's seed: same seed, same weights; another seed, others
    again = load_user_model(spec, seed=3)[0]
    other = load_user_model(spec, seed=4)[0]
    assert torch.equal(module[0].weight, again[0].weight) and not torch.equal(module[0].weight, other[0].weight)
    # float inputs: standard normal, seeded
    _, _, example, inputs, _ = build_model(f"{model_file}:build", 0, input_shape="1x3x16x16")
    assert example.dtype == torch.float32 and tuple(inputs(2).shape) == (2, 3, 16, 16)
    assert torch.equal(example, inputs(1))


def test_importable_module_spec(tmp_path, monkeypatch):
    package = tmp_path / "splitopt_test_user_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "nets.py").write_text(MODEL_FILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module, _, example, _, _ = build_model("splitopt_test_user_pkg.nets:mlp", 0)
        assert isinstance(module, torch.nn.Sequential) and tuple(example.shape) == (1, 6)
        with pytest.raises(InvalidModel, match="'splitopt_test_user_pkg.nets' has no attribute 'nope'"):
            build_model("splitopt_test_user_pkg.nets:nope", 0)
    finally:
        for name in [n for n in sys.modules if n.startswith("splitopt_test_user_pkg")]:
            del sys.modules[name]


# ----- one-line errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec, extra, needles", [
    ("{dir}/nothere.py:build", ["--input-shape", "1,3,16,16"], ["model file", "nothere.py", "not found"]),
    ("no_such_package_xyz.models:build", [], ["cannot import module 'no_such_package_xyz.models'"]),
    ("{file}:missing", [], ["has no attribute 'missing'", "build"]),
    ("{file}:broken", [], ["factory 'broken'", "raised ValueError: no weights for this model"]),
    ("{file}:number", [], ["factory 'number'", "returned int, not a torch.nn.Module"]),
    ("{file}:build", ["--input-shape", "1,3,a,16"], ["--input-shape", "'1,3,a,16'", "positive integers"]),
    ("{file}:build", ["--input-shape", "2,3,16,16"], ["--input-shape", "batch size 1"]),
    ("{file}:build", [], ["--input-shape: needed"]),
    ("{file}:build", ["--input-shape", "1,3,16,16", "--input-dtype", "int64"], ["--input-high: needed"]),
    ("{file}:build", ["--input-shape", "1,3,16,16", "--input-dtype", "complex"], ["--input-dtype", "unknown dtype"]),
    ("{file}:build", ["--input-shape", "1,3,8,8"],
     ["example input of shape (1, 3, 8, 8)", "does not fit the module", "RuntimeError", "mat1 and mat2"]),
    ("{file}:untraceable", ["--input-shape", "1,4"],
     ["the module cannot be captured by torch.export", "data-dependent"]),
    ("resnet50", ["--input-shape", "1,3,16,16"], ["--input-shape", "user models", "resnet50"]),
    ("alexnet", [], ["unknown model 'alexnet'", "PATH.py:FACTORY"]),
])
def test_bad_models_and_inputs_give_one_line(model_file, tmp_path, spec, extra, needles):
    spec = spec.format(dir=tmp_path, file=model_file)
    res = invoke("profile", spec, *extra, "-o", tmp_path / "out.json", "--calibration-images", "2")
    assert_one_line_error(res, *needles)
    assert not (tmp_path / "out.json").exists()


def test_run_reports_bad_user_models_in_one_line(model_file, tmp_path):
    out, plan = tmp_path / "out.json", tmp_path / "plan.json"
    assert invoke("profile", f"{model_file}:build", "--input-shape", "1,3,16,16", "-o", out,
                  "--calibration-images", "0").exit_code == 0
    inst = load_instance(out)
    plan.write_text(json.dumps(plan_to_dict(inst, uniform_plan(inst, ["conv1"]))))
    assert_one_line_error(invoke("run", out, plan, "--model", f"{model_file}:number"), "returned int")
    assert_one_line_error(invoke("run", out, plan, "--model", f"{model_file}:build", "--input-shape", "1,3,8,8"),
                          "example input of shape (1, 3, 8, 8)", "does not fit the module")
    assert_one_line_error(invoke("run", out, plan, "--model", f"{model_file}:mlp"),
                          "example input shape (1, 6) does not match instance")


def test_library_capture_gives_the_same_one_liners(model_file):
    module = load_user_model(f"{model_file}:untraceable", input_shape="1,4")[0]
    with pytest.raises(InvalidModel, match="the module cannot be captured by torch.export: ") as e:
        capture_checked(module, torch.randn(1, 4))
    assert "\n" not in str(e.value)
    cnn = load_user_model(f"{model_file}:build", input_shape="1,3,16,16")[0]
    with pytest.raises(InvalidModel, match=r"example input of shape \(1, 3, 9, 9\) \(float32\) does not fit the module"):
        capture_checked(cnn, torch.randn(1, 3, 9, 9))
    assert [layer.name for layer in capture_checked(cnn, torch.randn(1, 3, 16, 16)).layers] == ["conv1", "pool", "fc"]
    assert parse_shape("(1, 3, 32, 32)") == (1, 3, 32, 32)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_torch_export_failure_output_is_held_back(model_file, tmp_path):
    """While it fails, torch.export logs warnings and errors (to handlers of its own that
    write to the process's stderr, out of CliRunner's sight) and prints a partial graph
    to sys.stderr; the CLI holds both back."""
    handler = _Records()
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if name == "torch" or name.startswith("torch.")]
    for logger in loggers:  # torch's loggers do not propagate: listen on each
        logger.addHandler(handler)
    try:
        res = invoke("profile", f"{model_file}:untraceable", "--input-shape", "1,4", "-o", tmp_path / "u.json")
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert_one_line_error(res, "the module cannot be captured by torch.export")
    assert [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING] == []


def test_synthetic_integer_inputs_need_high():
    """Integer inputs are drawn from [0, high): without high, a one-line ValueError (the
    loaders ask for --input-high before they get here), not a TypeError from int(None)."""
    from splitopt.torch.user_model import synthetic_inputs

    ids = synthetic_inputs(3, (5,), torch.int64, 7, seed=0)
    assert ids.shape == (3, 5) and int(ids.min()) >= 0 and int(ids.max()) < 7
    with pytest.raises(ValueError, match="exclusive upper bound"):
        synthetic_inputs(1, (5,), torch.int64, None, seed=0)
    assert synthetic_inputs(2, (4,), torch.float32, None, seed=0).dtype == torch.float32
