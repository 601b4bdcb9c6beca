"""The llm family: the cost model on a hand-computed model, the dynamic program and the
programs against brute force and each other, plans and their JSON form, baselines, the
shipped instances, and bad input (one line, exit 2, or INFEASIBLE naming the limit).
The contract suites (tests/test_contracts.py) cover it as every family."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from splitopt.api import load_instance, parse_instance, plan_from_dict, plan_to_dict
from splitopt.cli.app import app
from splitopt.core.errors import InvalidInstance, InvalidPlan
from splitopt.core.result import Status
from splitopt.families.llm.data import decode_step_ms, mean_decode_ms
from splitopt.families.llm.examples import decoder_instance_data, random_data
from splitopt.families.llm.methods import proportional_counts
from splitopt.families.llm.plan import plan_of
from splitopt.families.registry import family
from splitopt.solve import solve

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
TINY = {"hidden": 4, "layers": 1, "heads": 1, "kv_heads": 1, "head_dim": 4, "intermediate": 8, "vocab": 10,
        "mlp": "plain", "max_context": 64}


def device(name: str, memory: float = 1e6, bits=(16,)) -> dict:
    return {"name": name, "mac_per_s": 1e3, "offchip_bytes_per_s": 1e3, "onchip_bytes": 0, "memory_bytes": memory,
            "bit_widths": list(bits)}


def tiny(objective: str = "token_latency", devices=("a", "b"), links=(("a", "b"),), **settings):
    """One block (136 weights), an embedding (40) and a head (44) over identical devices of
    1,000 MAC/s and 1,000 B/s, links of 8,000 bit/s with 1 ms latency; P = 2, G = 3."""
    data = decoder_instance_data("tiny", TINY, [device(d) for d in devices],
                                 [{"source": s, "target": t, "bandwidth_bits_per_s": 8000.0, "latency_ms": 1.0}
                                  for s, t in links],
                                 objective=objective, prompt_tokens=2, generated_tokens=3, **settings)
    return parse_instance(data)


def evaluate(inst, stages):
    return family("llm").evaluate(inst, plan_of(stages))


# ----- the cost model, by hand ----------------------------------------------------------------

def test_one_device_by_hand():
    inst = tiny()
    m = evaluate(inst, [("a", 0, 3, 16)])
    # prefill: embedding reads 2 rows (16 B: 16 ms), the block 296 MACs vs 272 + 32 B (304 ms), the
    # head one position: 44 MACs vs 88 B (88 ms)
    assert m.ttft_ms == pytest.approx(16 + 304 + 88)
    # decode at contexts 3 and 4: embedding 8 ms, block (272 + 16 c) B -> 320 and 336 ms, head 88 ms
    assert m.token_latency_ms == pytest.approx(8 + 328 + 88)
    assert m.ms_per_token == pytest.approx(424) and m.bottleneck == "stage 'a'"
    st0 = m.stages[0]
    assert (st0.weight_bytes, st0.kv_bytes, st0.activation_bytes) == (440.0, 80.0, 36.0)
    assert st0.decode_first_ms == pytest.approx(8 + 320 + 88) and st0.decode_last_ms == pytest.approx(8 + 336 + 88)
    assert m.feasible


def test_two_devices_and_a_ring_by_hand():
    chain = tiny(streams=2)
    m = evaluate(chain, [("a", 0, 2, 16), ("b", 2, 3, 16)])
    # the link carries 2 x 4 x 16 bits in the prefill (16 ms + 1 ms) and 64 bits per token (8 + 1 ms)
    assert m.ttft_ms == pytest.approx(16 + 304 + 17 + 88)
    assert m.token_latency_ms == pytest.approx(8 + 328 + 9 + 88)
    assert m.ms_per_token == pytest.approx(336)  # stage a, not the round trip over 2 streams (216.5)
    ring = tiny(streams=2, topology="ring", links=(("a", "b"), ("b", "a")))
    m = evaluate(ring, [("a", 0, 2, 16), ("b", 2, 3, 16)])
    # the sampled token (32 bits: 4 ms + 1 ms) back to the first device, in both
    assert m.ttft_ms == pytest.approx(425 + 5) and m.token_latency_ms == pytest.approx(433 + 5)
    many = tiny(streams=1, topology="ring", links=(("a", "b"), ("b", "a")))
    assert evaluate(many, [("a", 0, 2, 16), ("b", 2, 3, 16)]).ms_per_token == pytest.approx(438)


def test_missing_links_and_memory_are_violations_naming_the_limit():
    ring = tiny(topology="ring")  # no link from b back to a
    m = evaluate(ring, [("a", 0, 2, 16), ("b", 2, 3, 16)])
    assert not m.feasible and "back to 'a'" in m.violations[0]
    small = parse_instance(decoder_instance_data("tiny", TINY, [device("a", memory=500.0)], [], prompt_tokens=2,
                                                 generated_tokens=3))
    m = evaluate(small, [("a", 0, 3, 16)])
    assert m.violations == ("device 'a' memory: weights 440 B at 16 bits + KV cache at 5 tokens x 1 stream 80 B + "
                            "activations 36 B = 556 B over its 500 B",)


def test_tied_embeddings_are_held_once_on_one_device_only():
    inst = tiny(devices=("a", "b"))
    data = decoder_instance_data("t", dict(TINY, tied=True), [device("a"), device("b")],
                                 [{"source": "a", "target": "b", "bandwidth_bits_per_s": 8000.0}], prompt_tokens=2,
                                 generated_tokens=3)
    tied = parse_instance(data)
    assert tied.settings.model.tied_embeddings
    one = evaluate(tied, [("a", 0, 3, 16)]).stages[0].weight_bytes
    assert one == evaluate(inst, [("a", 0, 3, 16)]).stages[0].weight_bytes - 80  # the 40-weight copy
    split = evaluate(tied, [("a", 0, 2, 16), ("b", 2, 3, 16)])
    assert sum(s.weight_bytes for s in split.stages) == 440


@given(a1=st.floats(0, 10), b1=st.floats(0, 1), a2=st.floats(0, 10), b2=st.floats(0, 1),
       first=st.integers(1, 50), count=st.integers(1, 60))
@settings(max_examples=300, deadline=None)
def test_mean_decode_is_the_mean_of_the_steps(a1, b1, a2, b2, first, count):
    lines = (a1, b1, a2, b2)
    last = first + count - 1
    steps = [decode_step_ms(lines, c) for c in range(first, last + 1)]
    assert mean_decode_ms(lines, first, last) == pytest.approx(math.fsum(steps) / count, rel=1e-9, abs=1e-12)


# ----- exact methods --------------------------------------------------------------------------

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)


@given(seed=SEEDS)
@settings(max_examples=60, deadline=None)
def test_the_dynamic_program_is_the_brute_force_optimum(seed):
    inst = family("llm").random_instance(seed)
    ref = solve(inst, "brute-force")
    res = solve(inst, "llm-dp")
    assert res.status is ref.status
    if ref.status is Status.OPTIMAL:
        assert res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)


@given(seed=SEEDS, objective=st.sampled_from(["ttft", "token_latency", "throughput"]))
@settings(max_examples=8, deadline=None)
def test_the_programs_and_the_dynamic_program_agree_beyond_brute_force(seed, objective):
    """Four devices and six blocks (too many plans to enumerate): the path program on HiGHS,
    the CP-SAT model and the dynamic program find the same optimum."""
    fam = family("llm")
    inst = fam.instance_from_data(random_data(seed, devices=4)).with_settings(objective=objective, error_budget=None)
    fam.prepare(inst)
    values = {}
    for backend in ("llm-dp", "milp-highs", "cpsat"):
        res = solve(inst, backend, time_limit=120)
        values[backend] = (res.status, res.objective)
    statuses = {s for s, _ in values.values()}
    assert len(statuses) == 1, values
    if Status.OPTIMAL in statuses:
        best = values["llm-dp"][1]
        for _, value in values.values():
            assert value == pytest.approx(best, rel=1e-4), values


def test_the_error_budget_moves_bits():
    data = decoder_instance_data("e", TINY, [device("a", bits=(8, 16))], [], prompt_tokens=2, generated_tokens=3,
                                 bit_widths=[8, 16], error_budget=0.015)
    base = parse_instance({**data, "settings": {**data["settings"], "error_budget": None}})
    for layer in data["graph"]["layers"]:
        layer["weight_error"] = {"8": 0.01}
    budget = parse_instance(data)
    free = solve(base, "llm-dp")
    assert free.plan.stages[0].bits == 8  # fewer bits cost nothing without a budget
    for backend in ("llm-dp", "milp-highs"):
        res = solve(budget, backend)
        assert res.status is Status.OPTIMAL and res.plan.stages[0].bits == 16 and res.metrics.error == 0.0


# ----- plans ----------------------------------------------------------------------------------

def test_plan_json_carries_the_runtime_assignment_and_refuses_edits():
    inst = load_instance(ROOT / "instances" / "llm_llama31_8b_3dev.json")
    plan = plan_of([("pi5", 0, 2, 16), ("macbook_m1max", 2, 20, 16), ("rtx4090", 20, 34, 16)])
    data = plan_to_dict(inst, plan)
    assert data["runtime"][1] == {"device": "macbook_m1max", "start": 2, "end": 20, "first_block": 1,
                                  "end_block": 19, "embedding": False, "head": False, "weight_bits": 16, "kv_bits": 16,
                                  "kv_cache_tokens": 8192}
    assert plan_from_dict(inst, json.loads(json.dumps(data))).key() == plan.key()
    edited = copy.deepcopy(data)
    edited["runtime"][0]["end"] = 3
    with pytest.raises(InvalidPlan, match="plan.runtime: does not match"):
        plan_from_dict(inst, edited)


@pytest.mark.parametrize("stages, needle", [
    ([{"device": "pi9", "layers": ["embedding", "head"], "weight_bits": 16}], "unknown device"),
    ([{"device": "pi5", "layers": ["embedding", "block_3"], "weight_bits": 16},
      {"device": "pi5", "layers": ["block_4", "head"], "weight_bits": 16}], "runs two stages"),
    ([{"device": "pi5", "layers": ["embedding", "head"], "weight_bits": 3}], "weight_bits: 3 bits"),
    ([{"device": "pi5", "layers": ["embedding", "block_3"], "weight_bits": 16},
      {"device": "rtx4090", "layers": ["block_5", "head"], "weight_bits": 16}], "stages[1].layers: must start"),
    ([{"device": "pi5", "layers": ["embedding", "block_3"], "weight_bits": 16}], "end before the last part"),
    ([{"device": "pi5", "layers": ["embedding"], "weight_bits": 16}], "[first layer, last layer]"),
    ([{"device": "pi5", "layers": ["embedding", "head"], "weight_bits": 16, "kv_bits": 8}], "not a field"),
])
def test_malformed_plans_are_one_line(stages, needle):
    inst = load_instance(ROOT / "instances" / "llm_llama31_8b_3dev.json")
    with pytest.raises(InvalidPlan) as info:
        plan_from_dict(inst, {"format": "splitopt-llm-plan/1", "stages": stages})
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_an_excluded_device_in_a_plan_is_refused():
    inst = load_instance(ROOT / "instances" / "llm_llama31_8b_3dev.json", overrides=['settings.exclude=["pi5"]'])
    with pytest.raises(InvalidPlan, match="excluded"):
        plan_from_dict(inst, {"stages": [{"device": "pi5", "layers": ["embedding", "head"], "weight_bits": 16}]})


# ----- baselines ------------------------------------------------------------------------------

def test_largest_remainder_counts():
    assert proportional_counts([32, 24, 64, 8], 82) == [21, 15, 41, 5]  # 20.5, 15.375, 41, 5.125
    assert proportional_counts([1, 1, 1], 4) == [2, 1, 1]
    assert proportional_counts([100, 1], 2) == [1, 1]


@pytest.mark.parametrize("name", ["llm_llama31_8b_3dev", "llm_qwen25_7b_ring3", "llm_mixtral_8x7b_4dev"])
def test_baselines_never_beat_the_optimum_on_the_shipped_instances(name):
    inst = load_instance(ROOT / "instances" / f"{name}.json")
    best = solve(inst, "llm-dp")
    assert best.status is Status.OPTIMAL
    for method in ("memory-proportional-ring", "equal-layers", "greedy-blocks", "layer-dp", "best-single-device"):
        res = solve(inst, method)
        assert res.status is not Status.OPTIMAL
        if res.metrics is not None and res.metrics.feasible:
            assert res.objective >= best.objective * (1 - 1e-9), method


def test_the_kv_blind_dynamic_program_overflows_where_the_context_is_long():
    """Blind to the KV cache, the layer-only program packs a device to its weights; at a long
    context the evaluator finds the cache does not fit."""
    inst = load_instance(ROOT / "instances" / "llm_llama31_8b_3dev.json",
                         overrides=["settings.context_limit=131072", 'settings.exclude=["rtx4090"]'])
    blind = solve(inst, "layer-dp")
    exact = solve(inst, "llm-dp")
    assert exact.status is Status.OPTIMAL
    assert blind.status is Status.NO_SOLUTION_FOUND and "KV cache at 131,072 tokens" in blind.metrics.violations[0]


# ----- instances and the command line ---------------------------------------------------------

@pytest.mark.parametrize("path", sorted((ROOT / "instances").glob("llm_*.json")), ids=lambda p: p.stem)
def test_shipped_instances_are_what_the_script_writes(path):
    import sys

    sys.path.insert(0, str(ROOT / "instances"))
    from make_llm_instances import build

    assert json.loads(path.read_text()) == json.loads(json.dumps(_as_written(build(path.stem))))


def _as_written(data: dict) -> dict:
    from splitopt.core.instance_io import to_dict

    return to_dict(parse_instance(json.loads(json.dumps(data))))


def test_solve_prints_the_memory_dry_run_and_the_runtime_layers():
    res = runner.invoke(app, ["solve", str(ROOT / "instances" / "llm_qwen25_7b_ring3.json")])
    assert res.exit_code == 0, res.stderr
    for needle in ("Memory per device (dry run", "Time to first token", "Runtime layers",
                   "OPTIMAL"):
        assert needle in res.stdout


@pytest.mark.parametrize("override, needles", [
    ("settings.context_limit=200000", ["instance.settings.context_limit", "maximum context 131,072"]),
    ("settings.streams=0", ["instance.settings.streams", "at least 1"]),
    ("settings.bit_widths=[3]", ["instance.settings.bit_widths", "3 bits runs on no device"]),
    ('settings.pins={"pi5":["block_0","block_5"],"rtx4090":["block_4","block_9"]}',
     ["instance.settings.pins.rtx4090", "overlaps device 'pi5'"]),
    ('settings.pins={"pi5":["head","block_0"]}', ["instance.settings.pins.pi5", "comes after"]),
    ('settings.exclude=["pi5","macbook_m1max","rtx4090"]', ["instance.settings.exclude", "every device"]),
    ("settings.context_limit=100", ["instance.settings.context_limit", "1,024 + 256"]),
    ("settings.error_budget=0.1", None),  # 16-bit only: no table needed, solves
    ("settings.bit_widths=[4,16]", None),
])
def test_bad_input_is_one_line_and_exit_2(override, needles):
    res = runner.invoke(app, ["solve", str(ROOT / "instances" / "llm_llama31_8b_3dev.json"), "--set", override, "-q"])
    if needles is None:
        assert res.exit_code == 0, res.stderr
        return
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(n in lines[0] for n in needles), res.stderr


def test_an_error_budget_needs_the_tables_of_lower_bits():
    with pytest.raises(InvalidInstance, match=r"layers\[0\].weight_error: no entry for 4 bits"):
        load_instance(ROOT / "instances" / "llm_llama31_8b_3dev.json",
                      overrides=["settings.bit_widths=[4,16]", "settings.error_budget=0.1"])


@pytest.mark.parametrize("overrides, needle", [
    (["settings.context_limit=131072", "settings.streams=16"],
     "KV cache at 131,072 tokens x 16 streams 274.88 GB = 290.94 GB over the memory of all 3 usable devices"),
    (['settings.pins={"pi5":["block_0","block_20"]}', "settings.context_limit=131072"],
     "device 'pi5' is pinned to block_0..block_20: weights 9.16 GB at 16 bits + KV cache at 131,072 tokens"),
])
def test_a_cache_that_fits_nowhere_is_infeasible_naming_the_limit(overrides, needle):
    inst = load_instance(ROOT / "instances" / "llm_llama31_8b_3dev.json", overrides=overrides)
    for backend in ("auto", "llm-dp", "milp-highs", "evolutionary"):
        res = solve(inst, backend)
        assert res.status is Status.INFEASIBLE and needle in res.message, (backend, res.message)


def test_random_instances_are_valid_and_small():
    for seed in range(40):
        inst = family("llm").random_instance(seed)
        assert 3 <= len(inst.layers) <= 6 and 2 <= len(inst.devices) <= 3
