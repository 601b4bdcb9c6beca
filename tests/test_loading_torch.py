"""The loading family's torch bridge on tiny block models: child files that load alone,
plans run with threads and processes (Case 1 and Case 2) giving the unsplit output, the
profiled instance parses and solves, the page cache is dropped, fine-tuning touches the
tail only, and the CLI verbs' bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from splitopt.api import load_instance, parse_instance, plan_from_dict, plan_to_dict  # noqa: E402
from splitopt.core.instance_io import instance_json  # noqa: E402
from splitopt.families.loading.plan import plan_from_starts  # noqa: E402
from splitopt.families.loading.data import data as loading_data  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.torch.loading.run import run_loading  # noqa: E402
from splitopt.torch.loading.cache import drop_page_cache, resident_fraction, warm_page_cache  # noqa: E402
from splitopt.torch.loading.children import load_child, read_child, write_children  # noqa: E402
from splitopt.torch.loading.finetune import fine_tune_last_child, synthetic_labels  # noqa: E402
from splitopt.torch.loading.models import (MODEL_NAMES, BlockModelConfig, block_specs, build_block_model,  # noqa: E402
                                           reference_plans, synthetic_input)
from splitopt.torch.loading.profile import profile_loading  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = {m: BlockModelConfig(m, width=1 / 16, depth=0.1, image_size=75 if m == "inception_v3" else 32)
        for m in MODEL_NAMES}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def tiny_resnet():
    """The tiny ResNet-152-style model and its profiled instance (2 threads, 2 repeats)."""
    config = TINY["resnet152"]
    profile = profile_loading(config, 2, repeats=2)
    return profile


def test_full_size_models_have_the_papers_blocks_and_table2_maps_onto_them():
    names = {m: [s.name for s in block_specs(BlockModelConfig(m))] for m in MODEL_NAMES}
    assert len(names["resnet152"]) == 1 + 3 + 8 + 36 + 3 + 2
    assert len(names["densenet201"]) == 1 + 6 + 12 + 48 + 32 + 3 + 2
    for m in MODEL_NAMES:
        assert len(set(names[m])) == len(names[m])
        for starts in reference_plans(BlockModelConfig(m)).values():
            assert starts[0] == names[m][0] and all(b in names[m] for b in starts)
            assert [names[m].index(b) for b in starts] == sorted(names[m].index(b) for b in starts)
    assert len(reference_plans(BlockModelConfig("densenet201"))["paper Table 2"]) == 11
    assert reference_plans(TINY["resnet152"]) == {}


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_children_load_alone_and_chain_to_the_unsplit_output(model, tmp_path):
    config = TINY[model]
    net = build_block_model(config, seed=3)
    x = synthetic_input(config)
    with torch.no_grad():
        reference = net(x)
    n = len(net.block_names)
    starts = [0, n // 3, 2 * n // 3, n - 1]
    files = write_children(net, config, starts, tmp_path, trainable_tail=1)
    del net
    y = x
    with torch.no_grad():
        for f in files:
            raw = read_child(f.path)  # torch.load(weights_only=True): tensors and plain data only
            assert raw["blocks"] == list(f.blocks)
            child = load_child(f.path)
            assert all(p.device.type == "cpu" for p in child.state_dict().values())
            y = child(y)
    assert float((y - reference).abs().max()) <= 1e-5 * max(1.0, float(reference.abs().max()))
    last = load_child(files[-1].path)
    assert last.trainable == [last.block_names[-1]]
    assert all(p.requires_grad for p in last.blocks[-1].parameters())
    assert not any(p.requires_grad for b in last.blocks[:-1] for p in b.parameters())
    assert not any(p.requires_grad for p in load_child(files[0].path).parameters())


def test_profiled_instance_parses_and_solves(tiny_resnet):
    inst = parse_instance(json.loads(instance_json(tiny_resnet.instance)))
    o = inst.settings.loading
    assert set(o["block_load_ms"]) == {layer.name for layer in inst.layers}
    assert o["threads"] == 2 and o["trainable_tail"] == 1 and o["storage_bytes_per_s"] > 0
    assert all(layer.latency_ms["host"] >= 0 for layer in inst.layers)
    assert inst.source["block_model"]["model"] == "resnet152"
    case1 = inst.with_settings(loading=dict(o, children={"min": 1, "max": 2}))
    result = solve(case1, "partition-search")
    assert result.status.has_plan and result.metrics.feasible
    result = solve(inst.with_settings(loading=dict(o, children={"min": 3, "max": 3})), "cpsat", time_limit=20)
    assert result.status.has_plan and result.plan.k == 3


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_plans_run_as_planned_and_give_the_unsplit_output(tiny_resnet, mode):
    inst, net = tiny_resnet.instance, tiny_resnet.model
    d = loading_data(inst)
    case1 = plan_from_starts(d, [0, 4, d.n - 1])                       # 3 children, 2 threads: one waits
    case2 = plan_from_starts(d, [0, 2, 4, 6, d.n - 1], [[0, 2, 4], [1, 3]])  # k = 5 > T = 2
    for plan in (case1, case2):
        report = run_loading(inst, plan, model=net, mode=mode, repeats=1)
        assert report["ok"], report["max_abs_diff"]
        assert report["k"] == plan.k and report["case"] == (1 if plan.k <= 2 else 2)
        children = report["measured"]["children"]
        for c in children:  # inference of a child starts after its load and after the previous inference
            assert c["infer_start_ms"] >= c["load_end_ms"] - 1e-6
        for a, b in zip(children, children[1:]):
            assert b["infer_start_ms"] >= a["infer_end_ms"] - 1e-6
        for order in plan.threads:  # each thread loads its children one after another
            for i, j in zip(order, order[1:]):
                assert children[j]["load_start_ms"] >= children[i]["load_start_ms"]
        assert report["measured"]["first_response_ms"] >= children[-1]["infer_end_ms"] - 1e-6
        assert report["predicted"]["first_response_ms"] > 0 and report["measured_monolithic"]["first_response_ms"] > 0


def test_single_thread_case2_and_cold_cache(tiny_resnet):
    inst, net = tiny_resnet.instance, tiny_resnet.model
    d = loading_data(inst)
    plan = plan_from_starts(d, [0, 3, 6], [[0, 1, 2]])
    report = run_loading(inst, plan, model=net, cache="cold", repeats=1, monolithic=False)
    assert report["ok"] and report["threads"] == 1 and report["case"] == 2
    if report["resident_fraction_before_load"] is not None:
        assert report["resident_fraction_before_load"] == 0.0


def test_page_cache_is_dropped_and_warmed(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(1 << 20))
    drop_page_cache([path])
    cold = resident_fraction(path)
    if cold is None:
        pytest.skip("mincore is not available here")
    assert cold == 0.0
    warm_page_cache([path])
    assert resident_fraction(path) == 1.0


def test_fine_tuning_changes_the_tail_only(tiny_resnet):
    inst, net = tiny_resnet.instance, tiny_resnet.model
    d = loading_data(inst)
    plan = plan_from_starts(d, [0, 5, d.n - 3])
    report = run_loading(inst, plan, model=net, repeats=1, monolithic=False, keep_children=True)
    children = report["child_models"]
    before = [{k: v.clone() for k, v in c.state_dict().items()} for c in children]
    x = synthetic_input(TINY["resnet152"], 4, seed=5)
    out = fine_tune_last_child(children, x, synthetic_labels(4, 1000), steps=3, lr=1e-5)
    assert out["trainable_blocks"] == ["fc"] and len(out["losses"]) == 3
    for c, old in zip(children, before):
        for key, value in c.state_dict().items():
            changed = not torch.equal(value, old[key])
            in_tail = c is children[-1] and key.startswith(f"blocks.{c.block_names.index('fc')}.")
            assert changed == in_tail, key


def test_plan_round_trip_and_a_reference_plan_on_a_full_size_instance():
    path = ROOT / "instances" / "loading_resnet152_host.json"
    if not path.exists():
        pytest.skip("instances/make_loading_instances.py has not been run")
    inst = load_instance(path)
    refs = inst.settings.loading["reference_plans"]
    plan = plan_from_dict(inst, {"format": "splitopt-loading-plan/1", "instance": inst.name,
                                 "children": refs["paper Table 2"]})
    assert plan_from_dict(inst, plan_to_dict(inst, plan)) == plan
    assert plan.k == 6


# ----- the command line -------------------------------------------------------------------

def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="60")
    return subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_cli_bad_input_is_one_line_exit_2(tmp_path, tiny_resnet):
    assert_one_line_error(cli("profile-loading", "vgg16", "-o", str(tmp_path / "x.json"), "--threads", "2"), 2,
                          "unknown block model 'vgg16'")
    assert_one_line_error(cli("profile-loading", "resnet152", "-o", str(tmp_path / "x.json"), "--threads", "0"), 2,
                          "--threads")
    assert_one_line_error(cli("profile-loading", "resnet152", "-o", str(tmp_path / "no" / "x.json"), "--threads",
                              "2"), 2, "does not exist")
    inst_path = tmp_path / "inst.json"
    inst_path.write_text(instance_json(tiny_resnet.instance))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps({"format": "splitopt-loading-plan/1", "instance": tiny_resnet.instance.name,
                                     "children": ["stem", "layer3.0"]}))
    assert_one_line_error(cli("run-loading", str(inst_path), str(plan_path), "--model", "densenet201"), 2,
                          "profiled from 'resnet152'")
    bad_plan = tmp_path / "bad.json"
    bad_plan.write_text(json.dumps({"format": "splitopt-loading-plan/1", "children": ["layer3.0", "stem"]}))
    assert_one_line_error(cli("run-loading", str(inst_path), str(bad_plan), "--model", "resnet152"), 2, "children")
    assert_one_line_error(cli("run-loading", str(ROOT / "tests" / "data" / "toy.json"), str(plan_path), "--model",
                              "resnet152"), 2, "not a loading instance")
    assert_one_line_error(cli("run-loading", str(inst_path), str(plan_path), "--model", "resnet152", "--mode",
                              "fibers"), 2)


def test_cli_profiles_and_runs_a_plan(tmp_path):
    inst_path = tmp_path / "m.json"
    proc = cli("profile-loading", "mobilenet_v1", "-o", str(inst_path), "--threads", "2", "--width", "0.0625",
               "--depth", "0.2", "--image-size", "32", "--repeats", "1", "--children-max", "3")
    assert proc.returncode == 0, proc.stderr
    inst = load_instance(inst_path)
    result = solve(inst, "cpsat", time_limit=20)
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan_to_dict(inst, result.plan)))
    proc = cli("run-loading", str(inst_path), str(plan_path), "--model", "mobilenet_v1", "--repeats", "1",
               "--fine-tune", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["k"] == result.plan.k and len(report["fine_tune"]["losses"]) == 2


BLOCKED_TORCH = """
import sys
for name in ("torch", "transformers", "sklearn"):
    sys.modules[name] = None
sys.argv = ["splitopt", *sys.argv[1:]]
from splitopt.cli import main
main()
"""


def test_cli_verbs_without_torch_say_so_in_one_line_exit_3(tmp_path, tiny_resnet):
    inst_path = tmp_path / "inst.json"
    inst_path.write_text(instance_json(tiny_resnet.instance))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps({"format": "splitopt-loading-plan/1", "instance": tiny_resnet.instance.name,
                                     "children": ["stem"]}))
    for args in (("profile-loading", "resnet152", "-o", str(tmp_path / "x.json"), "--threads", "2"),
                 ("run-loading", str(inst_path), str(plan_path), "--model", "resnet152")):
        proc = subprocess.run([sys.executable, "-c", BLOCKED_TORCH, *args], capture_output=True, text=True,
                              timeout=120)
        assert_one_line_error(proc, 3, f"splitopt {args[0]}: needs torch", "torch extra")
