"""Bits of a profiled model's input (``splitopt.core.input_bits``): integer ids at the
width their range needs (``--input-high``, or the embedding they index), else at their
dtype's width; float inputs at 8 bits as before; the rule used is recorded in
``source["input_bits"]``."""

from __future__ import annotations

import math

import pytest

from splitopt.core.input_bits import integer_input_bits, range_bits

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

FLOAT = {"problem": "split", "edge": "eyeriss", "cloud": "tpu", "bit_widths": [8], "cloud_bits": 16,
         "edge_memory_bytes": 1e9}


def hardware():
    from splitopt.families.topologies import preset_hardware

    devices, links, _ = preset_hardware("eyeriss", None, 3e6, (2, 4, 6, 8), False)
    return devices, links, dict(FLOAT)


def test_range_bits_is_ceil_log2():
    assert [range_bits(h) for h in (1, 2, 3, 4, 5, 100, 256, 257, 50257)] == [1, 1, 2, 2, 3, 7, 8, 9, 16]
    assert all(range_bits(h) == math.ceil(math.log2(h)) for h in range(2, 3000))
    assert integer_input_bits(64, input_high=1000, embedding_rows=100)[0] == 10  # the user's range first
    assert integer_input_bits(64, embedding_rows=100)[0] == 7
    assert integer_input_bits(32) == (32, "the dtype's width (32 bits): no known range of the ids")


def test_tiny_gpt2_ids_take_the_bits_of_its_vocabulary():
    from splitopt.torch.architectures import TINY_GPT2_VOCAB
    from splitopt.torch.models import build_model
    from splitopt.torch.profile import profile

    module, rename, example, _, _ = build_model("tiny_gpt2", 0)
    assert example.dtype == torch.int64
    inst = profile(module, example, *hardware(), rename=rename)
    assert inst.inputs[0].bits == math.ceil(math.log2(TINY_GPT2_VOCAB)) == 7
    assert inst.source["input_bits"] == f"7: ceil(log2({TINY_GPT2_VOCAB})): ids index an embedding of " \
                                        f"{TINY_GPT2_VOCAB} rows"
    # --input-high, where given, is the range
    inst = profile(module, example, *hardware(), rename=rename, input_high=1000)
    assert inst.inputs[0].bits == 10 and "--input-high" in inst.source["input_bits"]


class IdsAsNumbers(nn.Module):
    """Integer ids used as numbers (no embedding): their range is unknown."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, ids):
        return self.fc(ids.float())


@pytest.mark.parametrize("dtype, width", [(torch.int64, 64), (torch.int32, 32)])
def test_integer_input_without_a_known_range_takes_its_dtype_width(dtype, width):
    from splitopt.torch.profile import profile

    torch.manual_seed(0)
    inst = profile(IdsAsNumbers().eval(), torch.randint(0, 9, (1, 6), dtype=dtype), *hardware())
    assert inst.inputs[0].bits == width
    assert inst.source["input_bits"] == f"{width}: the dtype's width ({width} bits): no known range of the ids"


def test_float_input_is_unchanged():
    from splitopt.torch.profile import profile

    torch.manual_seed(0)
    inst = profile(nn.Sequential(nn.Linear(6, 4)).eval(), torch.randn(1, 6), *hardware())
    assert inst.inputs[0].bits == 8 and "input_bits" not in inst.source


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.fc = nn.Linear(8, 4)

    def forward(self, ids):
        return self.fc(self.emb(ids))


def _onnx(module, x, path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    torch.onnx.export(module, (x,), str(path), dynamo=False, input_names=["ids"])
    return path


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.onnx.export(dynamo=False)
def test_onnx_integer_inputs(tmp_path):
    from splitopt.onnx.profile import profile_onnx

    torch.manual_seed(0)
    ids = torch.randint(0, 50, (1, 5))
    path = _onnx(Tokens().eval(), ids, tmp_path / "tokens.onnx")
    inst = profile_onnx(path, *hardware(), input_high=None, calibration=0)
    assert inst.inputs[0].bits == 6 and "embedding of 50 rows" in inst.source["input_bits"]
    inst = profile_onnx(path, *hardware(), input_high=20, calibration=0)
    assert inst.inputs[0].bits == 5 and "--input-high" in inst.source["input_bits"]
    path = _onnx(IdsAsNumbers().eval(), torch.randint(0, 9, (1, 6)), tmp_path / "numbers.onnx")
    inst = profile_onnx(path, *hardware(), input_high=9, calibration=0)
    assert inst.inputs[0].bits == 4
    inst = profile_onnx(path, *hardware(), input_high=None, calibration=0)
    assert inst.inputs[0].bits == 64 and "dtype's width" in inst.source["input_bits"]
