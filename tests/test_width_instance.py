"""The compression width d as a solver decision with its measured accuracy
(``splitopt.torch.multiview.width_instance``, ``settings.multiview.accuracy``/``min_accuracy``) and
the latency / accuracy front (``splitopt.analysis.pareto.pareto_front``, ``splitopt pareto``).

The table below has the shape of a :func:`splitopt.torch.multiview.retrain.retrain_table` result
(accuracies as measured once on the digits CNN); training itself is tested in
tests/test_retrain.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from splitopt import Status, evaluate, load_instance  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from splitopt.families.multiview import data as _mv_data, plan as _mv_plan  # noqa: E402

#: the multiview family's functions these tests call, under short names
mv = SimpleNamespace(data=_mv_data.data, uniform_plan=_mv_plan.uniform_plan, REDUCE=_mv_data.REDUCE)

from splitopt.analysis.pareto import pareto_front  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.torch.multiview.width_instance import split_tensor, widths_instance  # noqa: E402

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
MEASURED = {1: 0.886, 2: 0.908, 4: 0.939, 8: 0.936, 16: 0.942}
TABLE = {"model": "digits_cnn", "data": "digits", "split": "block2", "channels": 32, "height": 4, "width": 4,
         "bits": 8, "unsplit_accuracy_packed": 0.967,
         "settings": {"loss": "kd", "epochs": 10, "seed": 0},
         "rows": [{"d": d, "init": "split-aware", "accuracy_after_packed": a} for d, a in MEASURED.items()]}


def test_split_tensor_is_the_blocks_last_layer():
    names = ["block1.0", "block2.0", "block2.2", "block3.0", "classifier.2"]
    assert split_tensor(names, "block2") == "block2.2" and split_tensor(names, "block1") == "block1.0"
    with pytest.raises(ValueError, match="block9"):
        split_tensor(names, "block9")


# the raw image must stay on the wearable (250 M MAC/s), so the choice is the sent tensor over the
# 1 Mbit/s link: d channels of 4x4 at 8 bits = 16*d B = 0.128*d ms, or block2's 512 B = 4.096 ms
# uncompressed; the least d meeting the limit wins (d=8 is dominated by d=4: less accurate, more bytes)
@pytest.mark.parametrize("limit, width", [(None, 1), (0.9, 2), (0.93, 4), (0.94, 16), (0.95, None)])
def test_the_limit_chooses_the_width(limit, width):
    inst = widths_instance(TABLE, limit)
    ref = solve(inst, "multiview-brute-force")
    assert ref.status is Status.OPTIMAL and ref.plan.width == width
    for name in ("cpsat", "milp-highs", "milp-cbc"):
        res = solve(inst, name)
        assert res.status is Status.OPTIMAL and res.plan.width == width, name
        assert abs(res.objective - ref.objective) <= 2 * res.extra.get("objective_tolerance_ms", 0.0) + 1e-9
    expected = 0.967 if width is None else MEASURED[width]
    assert ref.metrics.accuracy == expected
    sent = sum(v.sent_bytes for v in ref.metrics.views)
    assert sent == (512 if width is None else 16 * width)
    assert ref.plan.cuts["wearable"] == ("block2.2" if width is None else mv.REDUCE)


def test_infeasible_limit_names_the_best_measured_accuracy():
    res = solve(widths_instance(TABLE, 0.99), "cpsat")
    assert res.status is Status.INFEASIBLE
    assert "min_accuracy 0.99" in res.message and "0.9670 (no compression at 'block2.2')" in res.message


def test_raw_image_stays_on_the_sensor():
    inst = widths_instance(TABLE, None)
    assert inst.settings.edge_required == ("block1.0",)
    m = evaluate(inst, mv.uniform_plan(inst, "block2.2", None, "input"))
    assert any("required layer 'block1.0'" in v for v in m.violations)


def test_accuracy_front_has_every_corner():
    front = pareto_front(widths_instance(TABLE, None), solver="cpsat").points
    assert [p.result.plan.width for p in front] == [1, 2, 4, 16, None]  # d=8 is dominated by d=4
    assert [p.measure for p in front] == [0.886, 0.908, 0.939, 0.942, 0.967]
    lat = [p.latency_ms for p in front]
    assert lat == sorted(lat) and all(p.result.status is Status.OPTIMAL for p in front)


def test_bad_tables():
    with pytest.raises(ValueError, match="several initialisations"):
        widths_instance({**TABLE, "rows": TABLE["rows"] + [{**TABLE["rows"][0], "init": "xavier"}]})
    with pytest.raises(ValueError, match="digits_cnn"):
        widths_instance({**TABLE, "model": "resnet50"})


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "splitopt", *args], capture_output=True, text=True, timeout=120)


def test_shipped_instance_and_cli_front(tmp_path):
    inst = load_instance(INSTANCES / "digits_cnn_widths.json")
    d = mv.data(inst)
    assert d.min_accuracy == 0.93 and d.widths == (1, 2, 4, 8, 16)
    res = solve(inst, "cpsat")
    assert res.metrics.feasible and res.metrics.accuracy >= 0.93
    proc = _cli("pareto", str(INSTANCES / "digits_cnn_widths.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    front = json.loads(proc.stdout)
    assert [p["accuracy"] for p in front] == sorted(p["accuracy"] for p in front)
    assert front[-1]["width"] is None and front[0]["width"] == min(d.widths)
    # a multiview instance without measured accuracies has no front: one line, exit 2
    from splitopt.core.instance_io import to_dict

    data = to_dict(widths_instance(TABLE, None))
    del data["settings"]["multiview"]["accuracy"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    proc = _cli("pareto", str(bare))
    assert proc.returncode == 2 and "no measured accuracy" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
