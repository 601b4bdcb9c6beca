"""The separable family's torch bridge on tiny Sep-ResNeXts: the policy forward equals a
hand-written one, bad policies and configurations are one-line errors, the profiled
instance parses and the family evaluator's bytes are the model's, training and the
controller run, the multi-process run (gloo, one process per device) equals the
single-process forward and sends exactly the evaluator's bytes, and workers never
outlive an error or a timeout."""

from __future__ import annotations

import importlib.util
import json
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("sklearn") is None:  # found, not imported: spawned workers import this module
    pytest.skip("needs scikit-learn (the torch extra)", allow_module_level=True)


from splitopt.torch.separable.model import (PolicyStep, SepConfig, accuracy, build_model, build_reference,  # noqa: E402
                                            identity_policy, intensive_policy, load_digits_split, normalize_policy,
                                            policy_bytes, policy_to_plan, random_policy, ring_bytes)

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("one_torch_thread")]  # the fixture: tests/conftest.py

#: G = 2, two stages of windows of two blocks each way: small and quick
TINY = dict(groups=2, paths=2, widths=(4, 8, 8), bottleneck=(2, 2, 2), blocks_per_stage=(2, 2, 2), stem_channels=4,
            alpha=2, levels=3, min_percent=50.0)




@pytest.fixture(scope="module")
def digits():
    return load_digits_split(0)


@pytest.fixture(scope="module")
def few_digits(digits):
    """The split with 400 training images (quick epochs)."""
    import dataclasses

    return dataclasses.replace(digits, x_train=digits.x_train[:400], y_train=digits.y_train[:400])


def _tiny(**changes):
    m = build_model(SepConfig(**{**TINY, **changes}), seed=3)
    m.eval()
    return m


def _pad(t, channels):
    return torch.cat([t, torch.zeros(t.shape[0], channels - t.shape[1], *t.shape[2:])], dim=1)


def test_policy_forward_equals_a_hand_written_forward(digits):
    m = _tiny()
    x = digits.x_test[:5]
    policy = [((1, 0), 0, "float16"), ((0, 1), 2, "float32"), ((1, 0), 2, "float32")]
    p0, p1 = m.parts[0].blocks, m.parts[1].blocks
    with torch.no_grad():
        x0 = m.stem(x)
        # step 0 over blocks 0..1: 50 % of 4 channels = 2, sent in float16, added after block 1
        a, b = p0[0](x0), p1[0](x0)
        ma, mb = a[:, :2].half().float(), b[:, :2].half().float()
        a, b = p0[1](a) + _pad(mb, 4), p1[1](b) + _pad(ma, 4)
        # step 1 over blocks 2..3: nobody sends
        a, b = p0[3](p0[2](a)), p1[3](p1[2](b))
        # step 2 over blocks 4..5: 100 % of 8 channels each way in float32
        a, b = p0[4](a), p1[4](b)
        a, b = p0[5](a) + b, p1[5](b) + a
        expected = m.parts[0].head(a)
        got = m(x, policy)
        silent = m(x, None)
    assert torch.allclose(got, expected, atol=1e-6)
    assert not torch.allclose(got, silent, atol=1e-3)  # the messages matter
    steps = normalize_policy(policy, m.config)
    assert policy_bytes(m.config, steps) == 2 * (2 * 64 * 2) + 0 + 2 * (8 * 4 * 4)


def test_float16_and_sparsification_change_what_is_added(digits):
    m = _tiny()
    x = digits.x_test[:3]
    with torch.no_grad():
        full = m(x, [((1, 0), 2, "float32")] * 3)
        half = m(x, [((1, 0), 2, "float16")] * 3)
        sparse = m(x, [((1, 0), 0, "float32")] * 3)
    assert 0 < float((full - half).abs().max()) < 1e-2
    assert float((full - sparse).abs().max()) > 1e-4


def test_bad_policies_and_configurations_are_one_line_errors():
    m = _tiny()
    c = m.config
    cases = [
        ([((0, 1, 2), 0, "float32")] * 3, "not a permutation of the G = 2 devices"),
        ([((1, 0), 3, "float32")] * 3, "level 3 is out of range [0, 2]"),
        ([((1, 0), -1, "float32")] * 3, "out of range"),
        ([((1, 0), 0, "bfloat16")] * 3, "dtype 'bfloat16'"),
        ([((1, 0), 0, "float32")] * 2, "2 steps; the model has 3"),
        ([((1, 1), 0, "float32")] * 3, "not a permutation"),
    ]
    for policy, text in cases:
        with pytest.raises(ValueError) as e:
            normalize_policy(policy, c)
        assert text in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"G = 3 devices do not divide the C = 8 paths") as e:
        SepConfig(groups=3)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="crosses a stage boundary"):
        SepConfig(blocks_per_stage=(3, 2, 2), alpha=2)
    from splitopt.families.separable.plan import SeparablePlan

    with pytest.raises(ValueError, match="ring all-reduce"):
        normalize_policy(SeparablePlan((), ring=True), c)


def test_reference_is_the_unseparated_resnext_and_trains(few_digits):
    digits = few_digits
    c = SepConfig(**TINY)
    ref = build_reference(c)
    assert ref.config.groups == 1 and len(ref.parts) == 1
    # all C paths on one device, the stream as wide as one device's
    assert ref.parts[0].blocks[0].conv1.out_channels == c.paths * c.bottleneck[0]
    assert ref.parts[0].blocks[0].conv3.out_channels == c.widths[0]
    from splitopt.torch.separable.nas import train_separable

    log = train_separable(ref, digits, epochs=3, lr=1e-2, batch=32, policy=None)
    assert log.epochs == 3 and log.policies_sampled == 0
    assert log.losses[-1] < log.losses[0] - 0.05


def test_instance_loads_and_the_evaluator_counts_the_models_bytes():
    from splitopt.api import evaluate, parse_instance
    from splitopt.families.separable.data import data as separable_data
    from splitopt.torch.separable.profile import check_matches, profile_instance

    m = build_model(SepConfig(), seed=0)
    prof = profile_instance(m, name="sep_test", devices="analytic", repeats=2,
                            records=[{"name": "any", "accuracy": 0.5}], options={"mixing": False})
    inst = parse_instance(json.loads(json.dumps(prof.data)))
    d = separable_data(inst)
    c = m.config
    assert d.g == 4 and len(d.blocks) == 6 and d.steps == 3
    assert list(d.channels) == [16, 16, 32, 32, 64, 64]
    assert [l.output_shape for l in inst.layers[1:-1]] == [(64, 8, 8)] * 2 + [(128, 4, 4)] * 2 + [(256, 2, 2)] * 2
    check_matches(inst, c)
    rng = np.random.default_rng(0)
    for _ in range(20):
        steps = random_policy(c, rng)
        metrics = evaluate(inst, policy_to_plan(steps))
        assert metrics.total_bytes == policy_bytes(c, steps)
    assert evaluate(inst, policy_to_plan(intensive_policy(c))).total_bytes == 4 * (4096 + 2048 + 1024)
    assert d.ring_bytes == ring_bytes(c)
    with pytest.raises(ValueError, match="G = 4 devices, the model has G = 2"):
        check_matches(inst, SepConfig(groups=2))


def test_records_controller_and_accuracy_of_policies(few_digits):
    digits = few_digits
    from splitopt.torch.separable.nas import (accuracy_of_policies, accuracy_records, meets, search_controller,
                                              train_separable)

    m = _tiny()
    log = train_separable(m, digits, epochs=1, batch=32)
    assert log.policies_sampled == 13  # one policy per mini-batch (Eq. 9, M = 1)
    pols = [identity_policy(m.config), intensive_policy(m.config)]
    accs = accuracy_of_policies(m, pols, digits, split="val")
    assert len(accs) == 2 and all(0 <= a <= 1 for a in accs)
    assert accs[0] == accuracy(m, digits.x_val, digits.y_val, None)
    records, details = accuracy_records(m, digits, samples=3)
    assert records and all(0 <= r["accuracy"] <= 1 for r in records)
    assert any(r.get("mixing") for r in records)
    for r, dt in zip(records, details):
        assert dt["min"] - 1e-9 <= dt["mean"] <= dt["max"] + 1e-9 and r["accuracy"] == round(dt["min"], 6)
    from splitopt.torch.separable.nas import cheapest_member

    rng = np.random.default_rng(0)
    for req in ({"mixing": True}, {"min_intensive_steps": 2, "max_float16_steps": 1}, {"min_level": 1}):
        p = [PolicyStep((1, 0), 2, "float32")] * 3
        q = cheapest_member(m.config, p, req, rng)
        assert meets(m.config, q, req) and policy_bytes(m.config, q) < policy_bytes(m.config, p)
    top = records[-1]
    assert meets(m.config, intensive_policy(m.config), top) and not meets(m.config, identity_policy(m.config), top)
    res = search_controller(m, digits, steps=6, samples=3)
    assert len(res.best) == m.config.steps and res.evaluations >= 1 and len(res.rewards) == 6
    assert res.best_val == accuracy(m, digits.x_val, digits.y_val, res.best)


@pytest.mark.slow
def test_multiprocess_run_equals_single_process_and_sends_the_evaluators_bytes(digits):
    from splitopt.api import parse_instance
    from splitopt.families.separable.evaluate import evaluate
    from splitopt.torch.separable.profile import profile_instance
    from splitopt.torch.separable.run import run_policies

    m = _tiny(groups=4, paths=4)
    c = m.config
    policies = [
        [((1, 2, 3, 0), 0, "float16"), ((0, 1, 2, 3), 2, "float32"), ((2, 3, 0, 1), 1, "float32")],
        [((0, 1, 3, 2), 2, "float32"), ((3, 2, 1, 0), 0, "float16"), ((1, 0, 2, 3), 2, "float16")],
    ]
    inst = parse_instance(profile_instance(m, name="t", devices="analytic", repeats=1).data)
    reports = run_policies(m, policies, digits.x_test[:1], repeats=2, timeout_s=90)
    for policy, rep in zip(policies, reports):
        steps = normalize_policy(policy, c)
        assert rep["ok"] and rep["max_abs_diff"] <= 1e-5
        assert torch.allclose(rep["logits"], m(digits.x_test[:1], policy), atol=1e-5)
        assert rep["total_bytes"] == evaluate(inst, policy_to_plan(steps)).total_bytes > 0
        # per device and step: exactly the family's message size for the senders, 0 elsewhere
        for g in range(c.groups):
            assert rep["sent_bytes"][g] == [c.message_bytes(j, s.level, s.dtype) if s.send_to[g] != g else 0
                                            for j, s in enumerate(steps)]
        assert len(rep["times_ms"]) == 2 and rep["median_ms"] > 0
    # each process held only its own part (the head device also the classifier)
    own = [sum(v.numel() for v in m.parts[g].state_dict().values()) + sum(v.numel() for v in
           m.stem.state_dict().values()) for g in range(4)]
    assert reports[0]["parts_params"] == own


def _raise_in_rank_1(rank, results):
    if rank == 1:
        raise RuntimeError("boom")
    time.sleep(60)


def _sleep(rank, results):
    time.sleep(60)


@pytest.mark.slow
def test_workers_are_stopped_on_error_and_on_timeout():
    import torch.multiprocessing as mp

    from splitopt.torch.separable.run import RunError, launch_workers

    for target, timeout, text in ((_raise_in_rank_1, 60.0, "died"), (_sleep, 2.0, "timed out")):
        before = set(p.pid for p in mp.active_children())
        t0 = time.monotonic()
        with pytest.raises(RunError, match=text):
            launch_workers(target, 2, lambda rank, results: (rank, results), timeout)
        assert time.monotonic() - t0 < 30
        assert not [p for p in mp.active_children() if p.pid not in before]


def _cli():
    import typer

    from splitopt.cli.common import OneLineErrorsGroup
    from splitopt.cli.separable import profile_separable_command, run_separable_command

    app = typer.Typer(cls=OneLineErrorsGroup, add_completion=False, pretty_exceptions_enable=False)
    app.command("profile-separable")(profile_separable_command)
    app.command("run-separable")(run_separable_command)
    return app


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    from typer.testing import CliRunner

    from splitopt.torch.separable.profile import profile_instance

    root = __import__("pathlib").Path(__file__).resolve().parent.parent
    runner = CliRunner()
    app = _cli()
    cases = [
        (["profile-separable", "-o", str(tmp_path / "a.json"), "--groups", "3"], "G = 3 devices do not divide"),
        (["profile-separable", "-o", str(tmp_path / "a.json"), "--blocks-per-stage", "2,x,2"], "--blocks-per-stage"),
        (["profile-separable", "-o", str(tmp_path / "a.json"), "--alpha", "3"], "crosses a stage boundary"),
        (["run-separable", str(root / "instances" / "resnet50_eyeriss.json"), str(tmp_path / "p.json")],
         "is not a separable instance"),
    ]
    m = build_model(SepConfig(), seed=0)
    inst_path = tmp_path / "sep.json"
    inst_path.write_text(json.dumps(profile_instance(m, name="sep", devices="analytic", repeats=1).data))
    bad_plan = tmp_path / "bad.json"
    bad_plan.write_text(json.dumps({"format": "splitopt-separable-plan/1", "steps": [
        {"send_to": [0, 1, 2], "level": 8, "dtype": "float32"}] * 3}))
    cases.append((["run-separable", str(inst_path), str(bad_plan)], "must list the receiver of each of the 4 devices"))
    # a file that is not a checkpoint (a JSON plan) for --load and --checkpoint
    cases.append((["profile-separable", "-o", str(tmp_path / "a.json"), "--load", str(bad_plan)],
                  "not a torch checkpoint of tensors"))
    good_plan = tmp_path / "good.json"
    good_plan.write_text(json.dumps({"format": "splitopt-separable-plan/1", "steps": [
        {"send_to": [1, 0, 3, 2], "level": 8, "dtype": "float32"}] * 3}))
    cases.append((["run-separable", str(inst_path), str(good_plan), "--checkpoint", str(bad_plan)],
                  "not a torch checkpoint of tensors"))
    for args, text in cases:
        result = runner.invoke(app, args)
        err = result.stderr if hasattr(result, "stderr") else result.output
        assert result.exit_code == 2, (args, result.output)
        lines = [l for l in err.splitlines() if l.strip()]
        assert len(lines) == 1 and text in lines[0], (args, err)


def test_checkpoints_round_trip_and_foreign_files_are_refused(tmp_path):
    """save_models / load_models keep both networks and the extras (read with weights_only:
    no code from the file runs); a torch file of other tensors is refused naming the file."""
    from splitopt.torch.separable.nas import load_models, save_models

    model, ref = _tiny(), build_reference(SepConfig(**TINY))
    path = tmp_path / "sep.pt"
    save_models(path, model, ref, {"seed": 3, "epochs": 2})
    got, got_ref, extra = load_models(path)
    assert got.config == model.config and extra == {"seed": 3, "epochs": 2}
    for a, b in ((got, model), (got_ref, ref)):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(ValueError, match="not a Sep-ResNeXt checkpoint"):
        load_models(other)
