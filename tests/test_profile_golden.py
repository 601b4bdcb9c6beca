"""The instances the profilers write, byte for byte (``tests/data/profile_golden/``,
written by ``splitopt profile``, ``profile-separable`` and ``retrain --instance-out``): a
small CNN (a user model) and tiny GPT-2 on every kind of hardware preset, its ONNX export,
the separable network and a width instance. Each settings object holds its family's keys
only (the keys other problems define are not written). Both the command and, for the former names, the hidden alias write
them; only the versions of torch, onnx and onnxruntime recorded in ``source`` are those
installed."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from typer.testing import CliRunner  # noqa: E402

from splitopt.cli import app  # noqa: E402

pytestmark = pytest.mark.torch
GOLDEN = Path(__file__).resolve().parent / "data" / "profile_golden"
MODEL = f"{GOLDEN / 'tiny_cnn.py'}:build"


def expected(name: str) -> str:
    """The golden file, with the packages' versions of this environment."""
    text = (GOLDEN / f"{name}.json").read_text()
    text = text.replace('"torch": "2.13.0+cpu"', f'"torch": "{torch.__version__}"')
    if '"onnx": ' in text:
        import onnx
        import onnxruntime

        text = text.replace('"onnx": "1.23.2"', f'"onnx": "{onnx.__version__}"')
        text = text.replace('"onnxruntime": "1.32.0"', f'"onnxruntime": "{onnxruntime.__version__}"')
    return text


def invoke(*args) -> None:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, (res.output, res.exception)


@pytest.mark.parametrize("name, args", [
    ("eyeriss", [MODEL]),
    ("splitnets", [MODEL, "--preset", "splitnets"]),
    ("float", [MODEL, "--calibration-images", "0"]),
    ("pi4v100", [MODEL, "--preset", "pi4,v100"]),
    ("chain", [MODEL, "--preset", "pi4,jetson,v100", "--bandwidth", "5e6"]),
    ("mesh", [MODEL, "--preset", "pi4,jetson,v100", "--topology", "mesh"]),
    ("ec2", [MODEL, "--preset", "eyeriss,v100", "--topology", "edge-cloud", "--name", "named"]),
    ("gpt", ["tiny_gpt2", "--preset", "pi4,v100"]),
    ("onnx", [GOLDEN / "tiny.onnx"]),
    ("onnxchain", [GOLDEN / "tiny.onnx", "--preset", "pi4,jetson,v100", "--calibration-images", "2"]),
])
def test_profile_writes_the_instance_it_wrote_before(tmp_path, name, args):
    if name.startswith("onnx"):
        pytest.importorskip("onnxruntime")
    out = tmp_path / f"{name}.json"
    invoke("profile", *args, "-o", out)
    assert out.read_text() == expected(name)


def test_profile_of_a_family_model_by_its_family_flag_writes_the_same(tmp_path):
    """``--family chain`` is ``--topology chain`` (three presets make a chain anyway)."""
    out = tmp_path / "chain.json"
    invoke("profile", MODEL, "--family", "chain", "--preset", "pi4,jetson,v100", "--bandwidth", "5e6", "-o", out)
    assert out.read_text() == expected("chain")


@pytest.mark.slow
@pytest.mark.parametrize("verb", [["profile", "sep_resnext"], ["profile-separable"]], ids=["profile", "former"])
def test_the_separable_profile_writes_the_instance_and_records_it_wrote_before(tmp_path, verb):
    out, records = tmp_path / "sep.json", tmp_path / "records.json"
    invoke(*verb, "-o", out, "--devices", "analytic", "--bandwidth-mbps", "100", "--epochs", "1", "--samples", "2",
           "--records", records)
    assert out.read_text() == expected("sep")
    assert records.read_text() == (GOLDEN / "sep_records.json").read_text()


@pytest.mark.slow
def test_retrain_writes_the_width_instance_it_wrote_before(tmp_path):
    out = tmp_path / "widths.json"
    invoke("retrain", "--epochs", "1", "--base-epochs", "1", "--widths", "1,2", "--instance-out", out,
           "--no-progress", "--json")
    assert out.read_text() == expected("widths")
