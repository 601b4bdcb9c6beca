"""splitopt.torch.packing: quantize + bit-pack transmitted tensors. Expected bytes and
codes come from hand computation or an independent pure-Python reference packer."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from splitopt.core.errors import InvalidPlan  # noqa: E402
from splitopt.api import evaluate  # noqa: E402
from splitopt.api import load_instance  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.families.edge_cloud.examples import random_instance  # noqa: E402
from splitopt.torch.packing import (  # noqa: E402
    QUANTIZED_BITS, SUPPORTED_BITS, PackedTensor, activation_codes,
    check_against_evaluator, pack, unpack, unpack_codes,
)
from splitopt.torch.edge_cloud.packing import pack_sent_tensors  # noqa: E402
from splitopt.torch.quant_error import quantize_activation  # noqa: E402
from splitopt.families.edge_cloud.plan import edge_cloud_plan, uniform_plan

pytestmark = pytest.mark.torch
INSTANCES = Path(__file__).resolve().parent.parent / "instances"


def reference_payload(codes: list[int], bits: int) -> bytes:
    """Independent packer: code i occupies bits [i*bits, (i+1)*bits) of one little-endian
    integer."""
    value = 0
    for i, c in enumerate(codes):
        assert 0 <= c < 2 ** bits
        value |= c << (i * bits)
    return value.to_bytes(math.ceil(len(codes) * bits / 8), "little")


def reference_codes(x: torch.Tensor, p: PackedTensor) -> list[int]:
    """Codes from the header's scale/zero point, in float64 on exactly-float32 inputs
    (x / scale rounded to float32 first, as float32 arithmetic does)."""
    levels = 2 ** p.bits - 1
    if p.scale == 0.0:
        return [0] * x.numel()
    q = (x.float() / torch.tensor(p.scale, dtype=torch.float32)).double()
    return [int(min(max(v + p.zero_point, 0), levels)) for v in torch.round(q).reshape(-1).tolist()]


def header_size(shape, bits) -> int:
    return 1 + 1 + 4 * len(shape) + (4 + 4 if bits <= 8 else 0)


def check_round_trip(x: torch.Tensor, bits: int, lo=None, hi=None) -> PackedTensor:
    p = pack(x, bits, lo, hi)
    n = x.numel()
    assert p.bits == bits and p.shape == tuple(x.shape)
    assert p.payload_bytes == len(p.payload) == math.ceil(n * bits / 8)
    assert p.header_bytes == header_size(x.shape, bits)
    wire = p.to_bytes()
    assert len(wire) == p.total_bytes == p.header_bytes + p.payload_bytes
    assert PackedTensor.from_bytes(wire) == p
    y = unpack(p)
    assert y.dtype == torch.float32 and tuple(y.shape) == tuple(x.shape)
    if bits in QUANTIZED_BITS:
        codes = reference_codes(x, p)
        assert unpack_codes(p).reshape(-1).tolist() == codes
        assert p.payload == reference_payload(codes, bits)
        lo_ = min(float(x.min()) if lo is None and n else (lo or 0.0), 0.0)
        hi_ = max(float(x.max()) if hi is None and n else (hi or 0.0), 0.0)
        assert torch.equal(y, quantize_activation(x.float(), bits, lo_, hi_))
        inside = (x >= lo_) & (x <= hi_)
        err = (y.double() - x.double()).abs()[inside]
        if err.numel():
            assert float(err.max()) <= p.scale / 2 * (1 + 1e-5) + 1e-6 * float(x.abs().max())
    elif bits == 16:
        assert p.scale is None and p.zero_point is None
        assert torch.equal(y, x.half().float())
    else:
        assert torch.equal(y, x.float())
    return p


# ----- hand-computed bytes -----------------------------------------------------------------

def test_hand_computed_payloads():
    # range [0, 2^b - 1] -> scale 1, zero 0, codes = the values
    x = torch.tensor([5.0, 3.0, 7.0])
    p = pack(x, 3, 0.0, 7.0)
    assert (p.scale, p.zero_point) == (1.0, 0)
    # 5 | 3 << 3 | 7 << 6 = 477 = 0x01DD, LSB first
    assert p.payload == bytes([0xDD, 0x01])
    assert pack(torch.tensor([1.0, 2.0, 15.0]), 4, 0.0, 15.0).payload == bytes([0x21, 0x0F])
    assert pack(torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]), 1).payload == bytes([0x0D, 0x01])
    assert pack(torch.tensor([3.0, 0.0, 1.0, 2.0, 3.0]), 2, 0.0, 3.0).payload == bytes([0b10010011, 0b11])
    # 7 bits across bytes: 127 | 1 << 7 = 0xFF, 0x00
    assert pack(torch.tensor([127.0, 1.0]), 7, 0.0, 127.0).payload == bytes([0xFF, 0x00])
    # asymmetric: [-1, 2] at 2 bits: scale 1, zero 1; -1 -> 0, 0 -> 1, 2 -> 3
    p = pack(torch.tensor([-1.0, 0.0, 2.0]), 2)
    assert (p.scale, p.zero_point) == (1.0, 1)
    assert p.payload == bytes([0b110100])
    assert unpack(p).tolist() == [-1.0, 0.0, 2.0]


def test_header_layout():
    p = pack(torch.tensor([[5.0, 3.0, 7.0]]), 3, 0.0, 7.0)
    assert p.to_bytes() == bytes([3, 2, 1, 0, 0, 0, 3, 0, 0, 0]) + bytes([0, 0, 0x80, 0x3F, 0, 0, 0, 0]) + bytes([0xDD, 0x01])
    q = pack(torch.tensor([1.0, -2.0]), 16)
    assert q.to_bytes() == bytes([16, 1, 2, 0, 0, 0]) + bytes([0x00, 0x3C, 0x00, 0xC0])
    assert (q.header_bytes, q.payload_bytes, q.total_bytes) == (6, 4, 10)


# ----- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("bits", SUPPORTED_BITS)
def test_round_trip_every_width(bits):
    g = torch.Generator().manual_seed(bits)
    check_round_trip(torch.randn(3, 5, 7, generator=g) * 4 + 1, bits)       # 105 elements, mixed sign
    check_round_trip(torch.rand(2, 11, generator=g) * 9, bits)               # non-negative
    check_round_trip(-torch.rand(13, generator=g), bits)                     # non-positive
    check_round_trip(torch.randn(4, 9, generator=g, dtype=torch.float64), bits)


@pytest.mark.parametrize("bits", SUPPORTED_BITS)
@pytest.mark.parametrize("n", [1, 3, 7, 13, 101, 1001])
def test_odd_element_counts_byte_count(bits, n):
    x = torch.linspace(-2.0, 5.0, n)
    p = check_round_trip(x, bits)
    assert p.payload_bytes == -(-n * bits // 8)


@pytest.mark.parametrize("bits", SUPPORTED_BITS)
def test_constant_and_empty_tensors(bits):
    z = torch.zeros(3, 7)
    p = check_round_trip(z, bits)
    assert torch.equal(unpack(p), z)
    if bits in QUANTIZED_BITS:
        assert (p.scale, p.zero_point) == (0.0, 0)
        assert unpack_codes(p).eq(0).all()
    for c in (5.0, -3.0):
        x = torch.full((5,), c)
        p = check_round_trip(x, bits)
        if bits in QUANTIZED_BITS:
            assert torch.allclose(unpack(p), x, rtol=1e-6)
            assert unpack_codes(p).eq(2 ** bits - 1 if c > 0 else 0).all()
    e = check_round_trip(torch.zeros(0, 4), bits)
    assert e.payload == b"" and unpack(e).shape == (0, 4)
    s = check_round_trip(torch.tensor(2.5), bits)          # 0-d tensor
    assert s.shape == () and s.header_bytes == header_size((), bits)


@pytest.mark.parametrize("bits", QUANTIZED_BITS)
def test_calibrated_range_saturates_and_matches_quant_error(bits):
    g = torch.Generator().manual_seed(100 + bits)
    x = torch.randn(4, 6, 5, generator=g) * 3
    lo, hi = -1.5, 2.0
    p = check_round_trip(x, bits, lo, hi)
    codes = unpack_codes(p)
    assert codes[x <= lo - p.scale].eq(0).all() and codes[x >= hi + p.scale].eq(2 ** bits - 1).all()
    # a range wider than the tensor, and a zero range (everything -> 0, as quantize_activation)
    check_round_trip(x, bits, -10.0, 12.0)
    assert torch.equal(unpack(pack(x, bits, 0.0, 0.0)), quantize_activation(x, bits, 0.0, 0.0))


def test_activation_codes_numpy_and_torch_agree():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(5000, generator=g) * 10
    for bits in QUANTIZED_BITS:
        scale, zero = 20.0 / (2 ** bits - 1) * 1.0000001, 2 ** (bits - 1)
        t = activation_codes(x.clone(), bits, scale, zero)
        a = activation_codes(x.numpy(), bits, scale, zero)
        assert a.dtype == np.float32 and torch.equal(t, torch.from_numpy(a))


@given(shape=st.lists(st.integers(min_value=0, max_value=9), min_size=0, max_size=4),
       bits=st.sampled_from(SUPPORTED_BITS),
       seed=st.integers(min_value=0, max_value=2 ** 31 - 1),
       magnitude=st.sampled_from([1e-3, 1.0, 250.0]),
       offset=st.floats(min_value=-1.0, max_value=1.0),
       use_range=st.booleans())
def test_round_trip_property(shape, bits, seed, magnitude, offset, use_range):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(tuple(shape), generator=g) + offset) * magnitude
    if use_range and bits in QUANTIZED_BITS:
        check_round_trip(x, bits, -magnitude, 2 * magnitude)
    else:
        check_round_trip(x, bits)


@given(shape=st.lists(st.integers(min_value=0, max_value=7), min_size=0, max_size=3),
       bits=st.sampled_from(SUPPORTED_BITS),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64, torch.bool]),
       seed=st.integers(min_value=0, max_value=2 ** 31 - 1),
       use_range=st.booleans())
def test_numpy_core_packs_the_same_bytes_as_the_torch_wrapper(shape, bits, dtype, seed, use_range):
    """splitopt.core.packing (numpy, what an agent without torch uses) and
    splitopt.torch.packing give the same wire bytes and the same unpacked values."""
    from splitopt.core.packing import pack_array, unpack_array

    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(tuple(shape), generator=g) * 3).to(dtype)
    lo, hi = (-2.0, 5.0) if use_range and bits in QUANTIZED_BITS else (None, None)
    p = pack(x, bits, lo, hi)
    q = pack_array(x.numpy(), bits, lo, hi)
    assert q.to_bytes() == p.to_bytes()
    assert np.array_equal(unpack_array(q), unpack(p).numpy())


def test_fast_on_a_resnet_activation():
    x = torch.randn(64, 56, 56, generator=torch.Generator().manual_seed(0)).relu_()
    for bits in SUPPORTED_BITS:
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            y = unpack(pack(x, bits))
            best = min(best, time.perf_counter() - t)
        assert y.shape == x.shape
        assert best < 0.1, f"{bits} bits: pack + unpack took {best:.3f} s"


# ----- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [0, 9, 10, 12, 15, 17, 24, 64, -4, 4.0, 2.5, "4", True, None])
def test_unsupported_widths_one_line_error(bits):
    with pytest.raises(InvalidPlan) as e:
        pack(torch.ones(3), bits)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"bit-width {bits!r}" in msg and "1, 2, 3, 4, 5, 6, 7, 8, 16, 32" in msg


def test_other_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        pack(torch.tensor([1.0, float("nan")]), 4)
    with pytest.raises(ValueError, match="range"):
        pack(torch.ones(3), 4, 2.0, 1.0)
    with pytest.raises(ValueError, match="float16 range"):
        pack(torch.tensor([1e6]), 16)
    wire = pack(torch.ones(5), 3).to_bytes()
    with pytest.raises(ValueError, match="payload"):
        PackedTensor.from_bytes(wire[:-1])
    with pytest.raises(ValueError):
        PackedTensor.from_bytes(wire[:5])
    with pytest.raises(InvalidPlan, match="bit-width 9"):
        PackedTensor.from_bytes(bytes([9]) + wire[1:])
    with pytest.raises(ValueError, match="payload"):
        unpack(PackedTensor(4, (5,), 1.0, 0, b"\x00\x00"))


# ----- against the evaluator ----------------------------------------------------------------

def test_against_evaluator_on_resnet50_plan():
    inst = load_instance(INSTANCES / "resnet50_eyeriss.json")
    res = solve(inst, "cpsat")
    metrics = evaluate(inst, res.plan)
    assert metrics.sent_tensors
    g = torch.Generator().manual_seed(1)
    total = 0
    for name, ev in metrics.sent_tensors:
        shape = inst.layer_by_name[name].output_shape if name in inst.layer_by_name else inst.input_by_name[name].shape
        ab = inst.input_by_name[name].bits if name in inst.input_by_name else res.plan.activation_bits[name]
        bits = inst.sent_bits(name, ab)
        p = pack(torch.randn(*shape, generator=g).relu_(), bits)
        assert p.payload_bytes == math.ceil(inst.tensor_elements(name) * bits / 8)
        assert 0 <= p.payload_bytes - ev < 1
        total += p.payload_bytes
    assert 0 <= total - metrics.transmitted_bytes < len(metrics.sent_tensors)
    # the same through the helpers
    values = {n: torch.randn(1, *inst.layer_by_name[n].output_shape, generator=g) for n, _ in metrics.sent_tensors}
    packed = pack_sent_tensors(inst, res.plan, values)
    check = check_against_evaluator(packed, metrics)
    assert check.payload_bytes == total
    assert check.evaluator_bytes == metrics.transmitted_bytes
    assert check.header_bytes == sum(p.header_bytes for p in packed.values())
    assert check.total_bytes == sum(len(p.to_bytes()) for p in packed.values())


def test_against_evaluator_fractional_bytes_and_pass_through():
    """A synthetic instance at 3/5/7 bits with a 16-bit raw input: the evaluator counts
    fractional bytes, the packer whole bytes per tensor."""
    inst = random_instance(0, 6, bit_widths=(3, 5, 7, 8), edge_required=False)
    names = [l.name for l in inst.layers]
    plan = edge_cloud_plan(inst, {n: (8, (3, 5, 7)[i % 3]) for i, n in enumerate(names[:4])})
    metrics = evaluate(inst, plan)
    fractional = [b for _, b in metrics.sent_tensors if b != int(b)]
    assert fractional, metrics.sent_tensors
    g = torch.Generator().manual_seed(3)
    values = {t.name: torch.randn(*t.shape, generator=g) for t in inst.inputs}
    values.update({l.name: torch.randn(*l.output_shape, generator=g) for l in inst.layers})
    packed = pack_sent_tensors(inst, plan, values)
    assert {p.bits for p in packed.values()} >= {16}
    check = check_against_evaluator(packed, metrics.sent_tensors)
    for row in check.tensors:
        assert row.payload_bytes == math.ceil(row.elements * row.bits / 8)
        assert 0 <= row.payload_bytes - row.evaluator_bytes < 1
    assert check.payload_bytes - check.evaluator_bytes == pytest.approx(sum(math.ceil(b) - b for _, b in metrics.sent_tensors))
    assert check.payload_bytes > check.evaluator_bytes


def test_check_against_evaluator_rejects_mismatches():
    p3 = pack(torch.randn(7), 3)
    assert check_against_evaluator({"a": p3}, [("a", 7 * 3 / 8)]).payload_bytes == 3
    with pytest.raises(InvalidPlan, match="packed at 3 bits"):
        check_against_evaluator({"a": p3}, [("a", 7.0)])
    with pytest.raises(InvalidPlan, match="missing \\['b'\\]"):
        check_against_evaluator({"a": p3}, [("a", 2.625), ("b", 1.0)])
    with pytest.raises(InvalidPlan, match="not sent \\['a'\\]"):
        check_against_evaluator({"a": p3}, [])
    bad = PackedTensor(3, (7,), p3.scale, p3.zero_point, p3.payload + b"\x00")
    with pytest.raises(InvalidPlan, match="payload is 4 bytes"):
        check_against_evaluator({"a": bad}, [("a", 2.625)])


def test_pack_sent_tensors_bad_input():
    inst = load_instance(INSTANCES / "resnet50_eyeriss.json")
    plan = uniform_plan(inst, ["conv1", "maxpool"], 4)
    with pytest.raises(InvalidPlan, match="'maxpool'.*no value"):
        pack_sent_tensors(inst, plan, {})
    with pytest.raises(InvalidPlan, match="'maxpool' has shape"):
        pack_sent_tensors(inst, plan, {"maxpool": torch.zeros(64, 56, 55)})
    packed = pack_sent_tensors(inst, plan, {"maxpool": torch.rand(64, 56, 56)})
    assert packed["maxpool"].bits == 4 and packed["maxpool"].payload_bytes == 64 * 56 * 56 // 2
