"""splitopt.torch.multiview.splitting / retrain and ``splitopt retrain`` (splitopt.cli.retrain): the SplitNets splitting module
(Conv-Reduce, Conv-Recover, View-Fuse, split-aware initialisation), retraining with
knowledge distillation on scikit-learn's digits, and ``splitopt retrain``.

The digits CNN is trained once per module (fixture, 12 epochs, seed 0; a few seconds)."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")
import typer  # noqa: E402
from torch import nn  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from splitopt.core.errors import InvalidModel  # noqa: E402
from splitopt.torch import architectures as arch  # noqa: E402
from splitopt.torch.packing import pack  # noqa: E402
from splitopt.torch.multiview.retrain import (  # noqa: E402
    Data, accuracy, distill, kd_loss, retrain_table, train_digits, width_options,
)
from splitopt.cli.retrain import retrain_command  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from splitopt.families.multiview import data as _mv_data, plan as _mv_plan  # noqa: E402

#: the multiview family's functions these tests call, under short names
mv = SimpleNamespace(data=_mv_data.data, uniform_plan=_mv_plan.uniform_plan, REDUCE=_mv_data.REDUCE)
from splitopt.torch.multiview.splitting import (  # noqa: E402
    ConvRecover, ConvReduce, MultiViewSplitNet, SplitNet, ViewFuse, init_conv_, init_variance, split_aware_init_,
)

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def base():
    return train_digits(seed=0, epochs=12, progress=False)


# ----- initialisation ------------------------------------------------------------------------

def test_split_aware_variance_matches_the_formula_on_a_large_layer():
    # c_in = 512, c_out = 64, k = 3: 294,912 weights; the sample variance's relative
    # standard error is sqrt(2 / n) = 0.26 %
    conv = nn.Conv2d(512, 64, 3)
    split_aware_init_(conv, torch.Generator().manual_seed(0))
    want = 2.0 / (9 * math.sqrt(512 * 64))
    got = float(conv.weight.detach().var())
    assert got == pytest.approx(want, rel=0.02)
    assert abs(float(conv.weight.detach().mean())) < 3 * math.sqrt(want / conv.weight.numel())
    assert float(conv.bias.detach().abs().max()) == 0.0
    # the three rules differ on such a layer: kaiming fan-in 2/(9*512), xavier 2/(9*288)
    assert init_variance(conv, "kaiming") == pytest.approx(2.0 / (9 * 512))
    assert init_variance(conv, "xavier") == pytest.approx(2.0 / (9 * 288))
    kaiming = init_conv_(nn.Conv2d(512, 64, 3), "kaiming", torch.Generator().manual_seed(0))
    assert float(kaiming.weight.detach().var()) == pytest.approx(2.0 / (9 * 512), rel=0.02)
    assert got / float(kaiming.weight.detach().var()) == pytest.approx(math.sqrt(512 / 64), rel=0.03)


def test_reduce_recover_1x1_use_the_geometric_mean():
    red = ConvReduce(256, 8)
    assert red.kernel_size == (1, 1)
    assert init_variance(red) == pytest.approx(2.0 / math.sqrt(256 * 8))
    with pytest.raises(InvalidModel, match="unknown initialisation 'he'"):
        init_variance(red, "he")


# ----- shapes, View-Fuse ---------------------------------------------------------------------

def test_reduce_recover_shapes():
    x = torch.randn(3, 32, 4, 4)
    z = ConvReduce(32, 2)(x)
    assert z.shape == (3, 2, 4, 4)
    assert ConvRecover(2, 32)(z).shape == (3, 32, 4, 4)
    with pytest.raises(InvalidModel):
        ConvReduce(32, 0)


def test_view_fuse_interlaces_channels():
    V, d = 3, 2
    views = [torch.full((1, d, 2, 2), 0.0) + 10 * v + torch.arange(d).reshape(1, d, 1, 1) for v in range(V)]
    fused = ViewFuse(V)(views)
    assert fused.shape == (1, V * d, 2, 2)
    # channel i = j * V + v holds channel j of view v: 0, 10, 20, 1, 11, 21
    assert [float(fused[0, i, 0, 0]) for i in range(V * d)] == [0.0, 10.0, 20.0, 1.0, 11.0, 21.0]
    for i in range(V * d):
        assert int(fused[0, i, 0, 0]) // 10 == i % V
    with pytest.raises(InvalidModel, match="expected 3 views"):
        ViewFuse(V)(views[:2])


def test_multiview_split_net_shapes_and_bytes():
    heads = [nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU()) for _ in range(3)]
    tail = nn.Sequential(nn.Conv2d(3 * 4, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    net = MultiViewSplitNet(heads, 16, 4, tail)
    out = net([torch.rand(2, 1, 8, 8) for _ in range(3)], bits=8)
    assert out.shape == (2, 10)
    assert pack(net.heads[0](torch.rand(1, 1, 8, 8))[0], 8).payload_bytes == 4 * 8 * 8


# ----- SplitNet ------------------------------------------------------------------------------

def test_split_net_head_tail_and_transmitted_bytes():
    model = arch.digits_cnn(0)
    x = torch.rand(5, 1, 8, 8)
    for split, (c, h, w) in {"block1": (16, 8, 8), "block2": (32, 4, 4), "block3": (32, 4, 4)}.items():
        for d in (1, 3, c):
            net = SplitNet(model, split, d, x[:1])
            assert isinstance(net.head[-1], ConvReduce) and isinstance(net.tail[0], ConvRecover)
            assert net.head(x).shape == (5, d, h, w)
            assert net(x).shape == (5, 10)
            sent = net.transmitted(8)
            assert sent["elements"] == net.transmitted_elements == d * h * w
            assert sent["payload_bytes"] == d * h * w  # 8 bits: one byte per element
            assert sent["header_bytes"] == 2 + 4 * 3 + 8
            assert net.transmitted(4)["payload_bytes"] == math.ceil(d * h * w / 2)
    # the trained blocks are copies: the original model is untouched
    net = SplitNet(model, "block2", 4, x[:1])
    with torch.no_grad():
        net.head[0][0].weight.add_(1.0)
    assert not torch.equal(net.head[0][0].weight, model.block1[0].weight)


def test_split_net_bad_inputs():
    model, x = arch.digits_cnn(0), torch.rand(1, 1, 8, 8)
    with pytest.raises(InvalidModel, match="unknown block 'block9'"):
        SplitNet(model, "block9", 2, x)
    with pytest.raises(InvalidModel, match="unknown block 'classifier'"):
        SplitNet(model, "classifier", 2, x)  # nothing after the last block
    with pytest.raises(InvalidModel, match=r"in \[1, 16\]"):
        SplitNet(model, "block1", 17, x)
    with pytest.raises(InvalidModel, match=r"in \[1, 32\]"):
        SplitNet(model, "block2", 0, x)
    with pytest.raises(InvalidModel, match="unknown initialisation"):
        SplitNet(model, "block2", 2, x, init="orthogonal")


# ----- data and retraining -------------------------------------------------------------------

def test_digits_split_is_deterministic():
    a, b = Data.digits(), Data.digits()
    assert a.x_train.shape == (1437, 1, 8, 8) and a.x_test.shape == (360, 1, 8, 8)
    assert torch.equal(a.x_test, b.x_test) and torch.equal(a.y_train, b.y_train)
    assert float(a.x_train.min()) == 0.0 and float(a.x_train.max()) == 1.0
    assert sorted(set(a.y_test.tolist())) == list(range(10))


def test_kd_loss_is_zero_for_equal_logits_with_pure_soft_targets():
    s = torch.randn(4, 10)
    assert float(kd_loss(s, s.clone(), torch.zeros(4, dtype=torch.long), 4.0, 1.0)) == pytest.approx(0.0, abs=1e-6)
    assert float(kd_loss(s, -s, torch.zeros(4, dtype=torch.long), 4.0, 1.0)) > 0.1


def test_short_kd_retraining_improves_the_split_model(base):
    model, data, _ = base
    unsplit = accuracy(model, data)
    assert unsplit > 0.9
    net = SplitNet(model, "block2", 2, data.x_test[:1], seed=0)
    before = accuracy(net, data)
    log = distill(net, model, data, epochs=5, seed=0, lr=3e-3, progress=False)
    after = accuracy(net, data)
    assert before < 0.3  # a fresh 32 -> 2 -> 32 bottleneck scrambles the features
    assert after > 0.7 and after > before + 0.4
    assert len(log.losses) == 5 and log.losses[-1] < log.losses[0]
    assert accuracy(net, data, bits=8) > after - 0.02  # 8-bit transmission costs ~nothing
    # fixed seed: the same run gives the same accuracy
    again = SplitNet(model, "block2", 2, data.x_test[:1], seed=0)
    distill(again, model, data, epochs=5, seed=0, lr=3e-3, progress=False)
    assert accuracy(again, data) == after


def test_retrain_table_rows(base):
    table = retrain_table(split="block1", widths=[1, 4], inits=("split-aware", "xavier"), epochs=1,
                          progress=False, base=base)
    assert (table["channels"], table["height"], table["width"]) == (16, 8, 8)
    assert table["unsplit_bytes"] == 16 * 64
    assert [(r["init"], r["d"]) for r in table["rows"]] == [("split-aware", 1), ("split-aware", 4),
                                                            ("xavier", 1), ("xavier", 4)]
    for r in table["rows"]:
        assert r["payload_bytes"] == r["d"] * 64 and r["elements"] == r["d"] * 64
        assert r["accuracy_unsplit"] == table["unsplit_accuracy"]
        assert r["accuracy_after"] > r["accuracy_before"]
    opts = width_options(table)
    assert [o["bytes_per_sample"] for o in opts] == [1024, 64, 256, 64, 256]
    with pytest.raises(InvalidModel, match="unknown loss"):
        retrain_table(loss="mse", progress=False, base=base)
    with pytest.raises(InvalidModel, match=r"in \[1, 32\]"):
        retrain_table(widths=[64], progress=False, base=base)


# ----- CLI -----------------------------------------------------------------------------------

def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("retrain")(retrain_command)

    @app.command("noop")
    def noop() -> None:  # a second command, so that typer keeps "retrain" as a subcommand
        pass

    return app


def test_cli_retrain(tmp_path):
    out_file = tmp_path / "table.json"
    res = CliRunner().invoke(_app(), ["retrain", "--epochs", "1", "--base-epochs", "2", "--widths", "1,2",
                                      "--no-progress", "--json", "-o", str(out_file)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [r["d"] for r in data["rows"]] == [1, 2]
    assert [r["payload_bytes"] for r in data["rows"]] == [16, 32]
    assert data["settings"]["epochs"] == 1 and data["settings"]["base_epochs"] == 2
    assert json.loads(out_file.read_text())["rows"] == data["rows"]
    res = CliRunner().invoke(_app(), ["retrain", "--epochs", "1", "--base-epochs", "1", "--widths", "4",
                                      "--init", "kaiming", "--loss", "ce", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "kaiming" in res.stdout and "ce" in res.stdout


def test_cli_retrain_writes_an_instance_whose_width_the_solver_chooses(tmp_path):
    from splitopt import load_instance
    from splitopt.solve import solve

    table_file, inst_file = tmp_path / "table.json", tmp_path / "widths.json"
    res = CliRunner().invoke(_app(), ["retrain", "--epochs", "1", "--base-epochs", "2", "--widths", "1,4",
                                      "--no-progress", "-o", str(table_file), "--instance-out", str(inst_file),
                                      "--min-accuracy", "0.0"])
    assert res.exit_code == 0, res.output
    table, inst = json.loads(table_file.read_text()), load_instance(inst_file)
    d = mv.data(inst)
    assert d.widths == (1, 4) and d.fusions == ("block2.2",) and d.min_accuracy == 0.0
    measured = {r["d"]: r["accuracy_after_packed"] for r in table["rows"]}
    assert d.accuracy == {("block2.2", None): table["unsplit_accuracy_packed"],
                          ("block2.2", 1): measured[1], ("block2.2", 4): measured[4]}
    res = solve(inst, "cpsat")
    assert res.metrics.feasible and res.metrics.accuracy == d.accuracy[(res.plan.fusion, res.plan.width)]


@pytest.mark.parametrize("args, message", [
    (["--split", "block7"], "unknown block 'block7'"),
    (["--widths", "0"], "in [1, 32]"),
    (["--widths", "2,33"], "got 33"),
    (["--split", "block1", "--widths", "17"], "in [1, 16]"),
    (["--widths", "1,two"], "'two' is not an integer"),
    (["--init", "he"], "unknown initialisation 'he'"),
    (["--loss", "mse"], "unknown loss 'mse'"),
    (["--epochs", "-1"], "epochs"),
    (["--min-accuracy", "0.9"], "--min-accuracy: needs --instance-out"),
    (["--min-accuracy", "1.5", "--instance-out", "x.json"], "must be a fraction in [0, 1]"),
])
def test_cli_retrain_bad_input(args, message):
    res = CliRunner().invoke(_app(), ["retrain", "--no-progress", *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


# ----- multi-view --------------------------------------------------------------------------------

def test_view_masks_cover_the_image_with_overlapping_bands():
    from splitopt.torch.multiview.retrain_views import view_masks

    m = view_masks(2)
    assert m.shape == (2, 1, 8, 8)
    assert torch.nonzero(m[0, 0, 0]).flatten().tolist() == [0, 1, 2, 3, 4]
    assert torch.nonzero(m[1, 0, 0]).flatten().tolist() == [3, 4, 5, 6, 7]
    for v in (1, 3, 4):
        assert (view_masks(v).amax(dim=0) == 1).all()  # every pixel is seen by some view
    with pytest.raises(InvalidModel, match=r"views: must be an integer in \[1, 4\]"):
        view_masks(5)


def test_multiview_split_model_is_reduce_fuse_then_conv():
    from splitopt.torch.multiview.retrain_views import MultiViewDigits, ViewPoolNet, split_sequential
    from splitopt.torch.architectures import digits_cnn

    head, tail = split_sequential(digits_cnn(0), "block2")
    pool = ViewPoolNet(head, tail)
    net = MultiViewDigits(pool, 2, 32, 3, seed=5).eval()
    x = torch.rand(4, 2, 1, 8, 8)
    with torch.no_grad():
        assert len(net.net.heads) == 1  # one head and Conv-Reduce shared by the views
        z = [net.net.head(v)(x[:, v]) for v in range(2)]
        assert z[0].shape == (4, 3, 4, 4)
        fused = torch.stack(z, dim=2).reshape(4, 6, 4, 4)  # channel j*V + v = channel j of view v
        assert torch.equal(net(x), net.net.tail(fused))
        pooled = torch.maximum(head(x[:, 0]), head(x[:, 1]))
        assert torch.equal(pool(x), tail(pooled))
    assert net.transmitted(x[:1, 0])["payload_bytes"] == 3 * 16


def test_short_multiview_retraining_improves_the_split_model():
    from splitopt.torch.multiview.retrain_views import multiview_retrain_table
    from splitopt.torch.multiview.width_instance import widths_instance
    from splitopt.solve import solve

    table = multiview_retrain_table(views=2, widths=[2], epochs=2, base_epochs=3, progress=False)
    row = table["rows"][0]
    assert table["views"] == 2 and "columns 0-4, 3-7" in table["data"]
    assert row["accuracy_after"] > row["accuracy_before"] + 0.2, row
    assert row["payload_bytes"] == 32 and table["unsplit_bytes"] == 512
    inst = widths_instance(table, 0.0)
    d = mv.data(inst)
    assert d.sensors == ("wearable0", "wearable1") and d.accuracy[("block2.2", 2)] == row["accuracy_after_packed"]
    res = solve(inst, "cpsat")
    assert res.metrics.feasible and res.metrics.accuracy is not None


def test_retrained_weights_run_the_solved_plan_at_the_measured_accuracy(tmp_path):
    """retrain --save + --instance-out, solve, then run the plan with the weights retrained
    for its width on the 360 test digits: the split run's accuracy (sent tensors packed) is
    the accuracy the solver was given."""
    from splitopt.cli import app
    from splitopt import load_instance
    from splitopt.torch.multiview.weights import load, weights_file

    weights, inst_file, plan_file = tmp_path / "w", tmp_path / "inst.json", tmp_path / "plan.json"
    runner = CliRunner()
    res = runner.invoke(app, ["retrain", "--epochs", "1", "--base-epochs", "2", "--widths", "2", "--no-progress",
                              "--save", str(weights), "--instance-out", str(inst_file)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in weights.iterdir()) == ["d2.pt", "none.pt"]
    assert load(weights_file(weights, 2)).meta["d"] == 2
    res = runner.invoke(app, ["solve", str(inst_file), "-o", str(plan_file)])
    assert res.exit_code == 0, res.output
    inst = load_instance(inst_file)
    for width in (2, None):  # the solved plan's width and no compression
        plan = mv.uniform_plan(inst, "block2.2", width, "mv.reduce" if width else "block2.2")
        plan_file.write_text(json.dumps(plan.to_dict(inst)))
        res = runner.invoke(app, ["run", str(inst_file), str(plan_file), "--model", "digits_cnn", "--weights",
                                  str(weights), "--samples", "360", "--json"])
        assert res.exit_code == 0, res.output
        report = json.loads(res.stdout)
        assert report["ok"] and report["max_abs_diff"] == 0.0
        assert abs(report["accuracy"] - mv.data(inst).accuracy[("block2.2", width)]) <= 1 / 360 + 1e-9
    # weights of another width, or for another number of views: one line, exit 2
    bad = mv.uniform_plan(inst, "block2.2", None, "block2.2")
    plan_file.write_text(json.dumps(bad.to_dict(inst)))
    (weights / "none.pt").unlink()
    res = runner.invoke(app, ["run", str(inst_file), str(plan_file), "--model", "digits_cnn", "--weights", str(weights)])
    assert res.exit_code == 2 and "no file" in res.output and "none.pt" in res.output
    raw = torch.load(weights / "d2.pt", weights_only=True)
    raw["meta"]["views"] = 2
    torch.save(raw, weights / "d2.pt")
    plan_file.write_text(json.dumps(mv.uniform_plan(inst, "block2.2", 2, "mv.reduce").to_dict(inst)))
    res = runner.invoke(app, ["run", str(inst_file), str(plan_file), "--model", "digits_cnn", "--weights", str(weights)])
    assert res.exit_code == 2 and "retrained for 2 view(s), the instance has 1" in res.output
