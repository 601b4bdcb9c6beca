"""The llm family's measured times and torch bridge: the fits of settings.measured are exact
on synthetic measurements and replace the roofline where given, bad measured tables are
one-line errors; tiny GPT-2 and Llama decoders profiled on this host make valid instances
with measured tables; a plan run as two and three processes gives the unsplit model's
greedy tokens and reports measured and predicted times; bad input to profile and run is
one line, exit 2."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import pytest

from splitopt.api import parse_instance, plan_from_dict
from splitopt.core.errors import InvalidInstance
from splitopt.families.llm.data import data, mean_decode_ms
from splitopt.families.llm.examples import decoder_instance_data
from splitopt.families.llm.measured import affine_fit, interpolate

GPT2_TINY = "gpt2-l2-h64-a4-v512"
LLAMA_TINY = "llama-l3-h64-a4-kv2-i128-v512"


# ----- the measured times (no torch) ------------------------------------------------------------

def _device(name: str) -> dict:
    return {"name": name, "mac_per_s": 1e10, "offchip_bytes_per_s": 1e10, "onchip_bytes": 0, "memory_bytes": 1e9,
            "bit_widths": [16, 32]}


def _measured_data(prefill, decode, prompt=(8, 16, 64), contexts=(10, 40, 100)) -> dict:
    config = {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 128, "vocab": 256,
              "tied": False, "max_context": 1024}
    links = [{"source": a, "target": b, "bandwidth_bits_per_s": 1e9, "latency_ms": 0.1}
             for a, b in (("host", "host2"), ("host2", "host"))]
    d = decoder_instance_data("measured", config, [_device("host"), _device("host2")], links, prompt_tokens=32,
                              generated_tokens=9, bit_widths=[16, 32])
    parts = [layer["name"] for layer in d["graph"]["layers"]]
    d["settings"]["measured"] = {"host": {
        "weight_bits": 32, "prompt_tokens": list(prompt), "contexts": list(contexts),
        "parts": {p: {"prefill_ms": [prefill(i, P) for P in prompt], "decode_ms": [decode(i, c) for c in contexts]}
                  for i, p in enumerate(parts)}, "how": "synthetic"}}
    return d


def test_fits_are_exact_on_affine_measurements():
    xs = [3, 10, 17, 50]
    alpha, beta = affine_fit(xs, [0.25 + 0.125 * x for x in xs])
    assert alpha == pytest.approx(0.25, abs=1e-12) and beta == pytest.approx(0.125, abs=1e-12)
    assert interpolate(xs, [2.0 * x for x in xs], 30) == pytest.approx(60.0)
    assert interpolate(xs, [2.0 * x + 1 for x in xs], 80) == pytest.approx(161.0)  # the last segment extended
    assert interpolate(xs, [2.0 * x - 10 for x in xs], 1) == 0.0  # never below 0
    assert interpolate([5], [1.5], 99) == 1.5


def test_measured_times_replace_the_roofline_on_their_device_and_width():
    inst = parse_instance(_measured_data(lambda i, P: 0.5 + i + 0.01 * P, lambda i, c: 0.2 * (i + 1) + 0.003 * c))
    t = data(inst)
    first, last = t.decode_contexts
    assert (first, last) == (33, 40)
    w32, w16 = t.widths.index(32), t.widths.index(16)
    host, host2 = t.devices.index("host"), t.devices.index("host2")
    for i in range(t.n):
        assert t.prefill_ms[i, host, w32] == pytest.approx(0.5 + i + 0.01 * 32)
        mean = 0.2 * (i + 1) + 0.003 * (first + last) / 2
        assert t.decode_ms[i, host, w32] == pytest.approx(mean)
        assert t.decode_first_ms[i, host, w32] == pytest.approx(0.2 * (i + 1) + 0.003 * first)
    # the roofline elsewhere: another width on the same device, the other device
    bare = _measured_data(lambda i, P: 0, lambda i, c: 0)
    bare["settings"].pop("measured")
    plain = data(parse_instance(bare))
    assert t.prefill_ms[:, host, w16].tolist() == plain.prefill_ms[:, host, w16].tolist()
    assert t.decode_ms[:, host2, :].tolist() == plain.decode_ms[:, host2, :].tolist()


def test_a_decode_line_below_zero_counts_zero():
    inst = parse_instance(_measured_data(lambda i, P: 1.0, lambda i, c: 1.0 - 0.02 * c, contexts=(10, 20)))
    t = data(inst)
    d, w = t.devices.index("host"), t.widths.index(32)
    # 1 - 0.02 c is below 0 for c > 50: the steps at 33..40 are all above it
    assert t.decode_ms[0, d, w] == pytest.approx(1.0 - 0.02 * 36.5)
    assert mean_decode_ms((0.0, 0.0, 1.0, -0.02), 45, 60) == pytest.approx(
        math.fsum(max(0.0, 1.0 - 0.02 * c) for c in range(45, 61)) / 16)


@pytest.mark.parametrize("change, field", [
    (lambda m: m.update(contexts=[40, 10, 100]), "instance.settings.measured.host.contexts"),
    (lambda m: m.update(contexts=[40], parts={}), "instance.settings.measured.host.contexts"),
    (lambda m: m.update(prompt_tokens=[8, 8, 64]), "instance.settings.measured.host.prompt_tokens"),
    (lambda m: m.update(weight_bits=8), "instance.settings.measured.host.weight_bits"),
    (lambda m: m["parts"].update(nowhere={"prefill_ms": [1, 1, 1], "decode_ms": [1, 1, 1]}),
     "instance.settings.measured.host.parts.nowhere"),
    (lambda m: m["parts"]["head"].update(decode_ms=[1.0]), "instance.settings.measured.host.parts.head.decode_ms"),
    (lambda m: m["parts"]["head"].update(prefill_cpu_ms=[1.0, 1.0, 1.0], decode_cpu_ms=[1.0]),
     "instance.settings.measured.host.parts.head.decode_cpu_ms"),
])
def test_bad_measured_tables_are_one_line_naming_the_field(change, field):
    d = _measured_data(lambda i, P: 1.0, lambda i, c: 1.0)
    change(d["settings"]["measured"]["host"])
    with pytest.raises(InvalidInstance) as e:
        parse_instance(d)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)


def test_measured_times_of_an_unknown_device_are_refused_by_the_command_line(tmp_path):
    d = _measured_data(lambda i, P: 1.0, lambda i, c: 1.0)
    d["settings"]["measured"]["laptop"] = copy.deepcopy(d["settings"]["measured"]["host"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    done = _cli("solve", str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines() or done.stdout.strip().splitlines()
    assert len(lines) == 1 and "settings.measured.laptop" in lines[0]


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, timeout=timeout)


# ----- the torch bridge --------------------------------------------------------------------------

torch_needed = pytest.mark.skipif(
    any(__import__("importlib").util.find_spec(m) is None for m in ("torch", "transformers")),
    reason="needs the torch extra (torch, transformers)")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """Tiny GPT-2 and Llama instances over three processes of this host (one repeat: quick)."""
    from splitopt.core.instance_io import instance_json
    from splitopt.torch.llm.options import parse_model
    from splitopt.torch.llm.profile import profile_decoder

    out = {}
    for name in (GPT2_TINY, LLAMA_TINY):
        inst, _ = profile_decoder(parse_model(name), ["host", "host2", "host3"], 12, 6, (6, 12), (8, 18), repeats=1,
                                  threads=1, seed=0, name=name.replace("-", "_"))
        path = tmp_path_factory.mktemp("llm") / f"{name}.json"
        path.write_text(instance_json(inst))
        out[name] = (inst, path)
    return out


def _plan(inst, cuts):
    """The plan cutting ``inst`` before the parts ``cuts``, stage k on ``host``, ``host2``, ``host3``."""
    names = [layer.name for layer in inst.layers]
    bounds = [0, *cuts, len(names)]
    devices = ["host", "host2", "host3"]
    return {"format": "splitopt-llm-plan/1", "instance": inst.name,
            "stages": [{"device": devices[k], "layers": [names[a], names[b - 1]], "weight_bits": 32}
                       for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]}


@torch_needed
@pytest.mark.torch
def test_profile_writes_a_valid_instance_with_measured_tables(profiled):
    from splitopt.torch.llm.models import build_model, parameter_count
    from splitopt.torch.llm.options import parse_model

    for name, (inst, path) in profiled.items():
        s = inst.settings
        assert [layer.op for layer in inst.layers] == ["embedding", "block", "block", *(["block"] if "l3" in name
                                                                                         else []), "head"]
        assert set(s.measured) == {"host", "host2", "host3"}
        m = s.measured["host"]
        assert m.weight_bits == 32 and m.prompt_tokens == (6, 12) and m.contexts == (8, 18)
        assert set(m.parts) == {layer.name for layer in inst.layers}
        assert all(t > 0 for pre, dec in m.parts.values() for t in (*pre, *dec))
        assert set(m.cpu_parts) == set(m.parts)
        assert all(t >= 0 for pre, dec in m.cpu_parts.values() for t in (*pre, *dec))
        assert m.how and m.where and m.when
        assert len(inst.links) == 6 and all(link.bandwidth_bits_per_s > 0 for link in inst.links)
        assert inst.source["hf_model"]["name"] == name and s.topology == "ring"
        spec = parse_model(name)
        tied = spec.vocab * spec.hidden if spec.arch == "gpt2" else 0  # the head's copy of the tied matrix
        assert sum(layer.weights for layer in inst.layers) == parameter_count(build_model(spec, 0)) + tied
        t = data(inst)
        d, w = t.devices.index("host"), t.widths.index(32)
        assert t.prefill_ms[0, d, w] == pytest.approx(m.parts["embedding"][0][1])  # measured at P = 12
        parse_instance(json.loads(path.read_text()))


@torch_needed
@pytest.mark.torch
def test_gpt2_split_over_two_processes_gives_the_unsplit_tokens(profiled):
    inst, path = profiled[GPT2_TINY]
    plan = path.parent / "plan2.json"
    plan.write_text(json.dumps(_plan(inst, [2])))
    done = _cli("run", str(path), str(plan), "--repeats", "1", "--warmup", "0", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["tokens_equal"] and report["tokens"] == report["reference_tokens"]
    assert len(report["tokens"]) == 6 and len(set(report["tokens"])) > 1
    assert report["processes"] == 2 and [s["device"] for s in report["stages"]] == ["host", "host2"]
    for key in ("ttft_ms", "token_latency_ms", "tokens_per_s"):
        assert report["measured"][key] > 0 and report["predicted"][key] > 0
    assert report["ratios"]["ttft"] > 0 and report["ratios"]["tokens_per_s"] > 0
    assert [(l["source"], l["target"], l["in_model"]) for l in report["links"]] == [
        ("host", "host2", True), ("host2", "host", True)]
    for piece in (*report["stages"], *report["links"]):
        assert piece["measured"]["prefill_ms"] > 0 and piece["predicted"]["decode_ms"] > 0
    for stage in report["stages"]:  # CPU time of the run's steps, and the profile's of the same parts
        assert stage["measured"]["prefill_cpu_ms"] >= 0 and stage["measured"]["decode_cpu_ms"] >= 0
        assert stage["profiled_cpu"]["prefill_cpu_ms"] > 0 and stage["profiled_cpu"]["decode_cpu_ms"] > 0
    assert len(report["load_average"]["before"]) == 3 and len(report["load_average"]["after"]) == 3


@torch_needed
@pytest.mark.torch
@pytest.mark.parametrize("name, cuts", [(LLAMA_TINY, [2, 3]), (GPT2_TINY, [1, 3])])  # two stages: the CLI test
def test_split_runs_give_the_unsplit_tokens(profiled, name, cuts):
    from splitopt.torch.llm.run import run_plan

    inst, _ = profiled[name]
    report = run_plan(inst, plan_from_dict(inst, _plan(inst, cuts)), repeats=1, warmup=0, timeout_s=60,
                      run_timeout_s=300)
    assert report["ok"] and report["tokens"] == report["reference_tokens"]
    assert report["processes"] == len(cuts) + 1 and len(report["links"]) == len(cuts) + 1
    assert report["predicted"]["ttft_ms"] > 0 and report["measured"]["ttft_ms"] > 0


@torch_needed
@pytest.mark.torch
def test_bad_run_input_is_one_line_exit_2(profiled, tmp_path):
    inst, path = profiled[GPT2_TINY]
    other, _ = profiled[LLAMA_TINY]
    cases = []
    foreign = tmp_path / "foreign.json"  # a plan of another instance
    foreign.write_text(json.dumps(_plan(other, [2])))
    cases.append((path, foreign, "instance"))
    raw = json.loads(path.read_text())  # a device that is not a process of this host
    raw["devices"].append(dict(raw["devices"][0], name="laptop"))
    raw["links"] += [dict(raw["links"][0], source="laptop", target="host"),
                     dict(raw["links"][0], source="host", target="laptop")]
    remote = tmp_path / "remote.json"
    remote.write_text(json.dumps(raw))
    remote_plan = tmp_path / "remote_plan.json"
    plan = _plan(inst, [2])
    plan["stages"][1]["device"] = "laptop"
    remote_plan.write_text(json.dumps(plan))
    cases.append((remote, remote_plan, "laptop"))
    shipped = tmp_path / "shipped_plan.json"  # an instance no profile made
    shipped.write_text(json.dumps({"format": "splitopt-llm-plan/1", "instance": "llm_gpt2_pi5_macbook",
                                   "stages": [{"device": "pi5", "layers": ["embedding", "head"],
                                               "weight_bits": 16}]}))
    cases.append(("instances/llm_gpt2_pi5_macbook.json", shipped, "source.hf_model"))
    for instance, plan_path, word in cases:
        done = _cli("run", str(instance), str(plan_path))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and word in lines[0], (done.returncode, done.stderr)


@torch_needed
@pytest.mark.torch
@pytest.mark.parametrize("model, word", [("llama-l2-h60-a7-kv1-i64-v100", "heads"), ("gpt2-l2-h64-q4-v512", "q4"),
                                         ("llama-l2-h64-a4-v512", "-kv"), ("gpt2-l2-h64-a4-v512", "--contexts")])
def test_bad_profile_input_is_one_line_exit_2(tmp_path, model, word):
    extra = ["--contexts", "5"] if word == "--contexts" else []
    done = _cli("profile", model, "-o", str(tmp_path / "x.json"), "--family", "llm", *extra)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and word in lines[0], (done.returncode, done.stderr)
