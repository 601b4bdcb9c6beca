"""Which CFS period makes a testbed CPU share act most like a slower core for the work a
split runs: MobileNetV2 (built in code, exported to ONNX, one onnxruntime thread) in a
device of share 0.3, pinned to one CPU, at several CFS periods, its runs back to back
and each after 30 ms idle (as a part of a split waits for its input); beside it the same
runs without a quota, and the same at one period unpinned, in two processes each.

A core 3.3 times slower would take the no-quota times divided by 0.3. What a prediction
from layers measured back to back needs is that a run after an idle wait takes what a
run back to back takes. Writes ``benchmarks/results/testbed_period.md`` and ``.json``.
Run: ``sudo python benchmarks/testbed_period.py`` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitopt.agents.testbed import Testbed  # noqa: E402
from splitopt.agents.testbed_spec import DeviceSpec  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SHARE = 0.3
#: runs of the model in one process after 3 not counted, each after ``gap`` ms idle; prints JSON
RUNS_PROGRAM = """
import json, statistics, sys, time
import numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
sess = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
i = sess.get_inputs()[0]
x = np.random.default_rng(0).random([d if isinstance(d, int) else 1 for d in i.shape], dtype=np.float32)
out = {}
for gap in (0.0, 30.0):
    times = []
    for k in range(int(sys.argv[2]) + 3):
        time.sleep(gap / 1000)
        t = time.perf_counter(); sess.run(None, {i.name: x}); times.append((time.perf_counter() - t) * 1000)
    out[f"{gap:g}"] = statistics.median(times[3:])
print(json.dumps(out))
"""


def export_model(path: Path) -> None:
    from splitopt.agents.model_onnx import model_onnx
    from splitopt.torch.models import build_model

    module, _, example = build_model("mobilenet_v2", 0, None)[:3]
    path.write_bytes(model_onnx(module, example).data)


def runs(tb: Testbed, device: str, model: Path, count: int) -> dict[str, float]:
    argv = [sys.executable, "-c", RUNS_PROGRAM, str(model), str(count)]
    proc = tb.start(device, argv, stdout=subprocess.PIPE, text=True)
    text, _ = proc.communicate(timeout=600)
    return json.loads(text.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods-us", default="3334,5000,10000,20000")
    parser.add_argument("--count", type=int, default=40, help="timed runs per process and idle wait")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="splitopt_period_") as tmp:
        model = Path(tmp) / "mobilenet_v2.onnx"
        export_model(model)
        with Testbed([DeviceSpec("free", threads=1)]) as tb:
            rows.append({"setting": "no quota", "runs": [runs(tb, "free", model, args.count) for _ in range(2)]})
        for period in (int(p) for p in args.periods_us.split(",")):
            with Testbed([DeviceSpec("edge", cpu=SHARE, threads=1)], cpu_period_us=period) as tb:
                rows.append({"setting": f"share {SHARE:g}, period {period / 1000:g} ms, pinned",
                             "runs": [runs(tb, "edge", model, args.count) for _ in range(2)]})
                print(rows[-1], flush=True)
        with Testbed([DeviceSpec("edge", cpu=SHARE, threads=1)], cpu_period_us=10_000, pin_cpus=False) as tb:
            rows.append({"setting": f"share {SHARE:g}, period 10 ms, unpinned",
                         "runs": [runs(tb, "edge", model, args.count) for _ in range(2)]})
            print(rows[-1], flush=True)
    report = {"machine": machine(shared=True), "started": time.strftime("%Y-%m-%d %H:%M"), "count": args.count,
              "load_before": load_before, "load_after": os.getloadavg(), "rows": rows}
    (RESULTS / "testbed_period.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "testbed_period.md").write_text(markdown(report))
    print(f"wrote {RESULTS / 'testbed_period.md'}")


def markdown(r: dict) -> str:
    free = r["rows"][0]["runs"]
    slow = {g: min(x[g] for x in free) / SHARE for g in ("0", "30")}
    lines = ["# A testbed CPU share against a slower core, by CFS period", "",
             f"{r['machine']}; load average {r['load_before'][0]:.2f} before, {r['load_after'][0]:.2f} after; "
             f"{r['started']}. `python benchmarks/testbed_period.py --count {r['count']}`.", "",
             "MobileNetV2 (ONNX, one onnxruntime thread), median ms of "
             f"{r['count']} runs per process, in two processes (a, b), back to back and each after 30 ms idle. A core "
             f"{1 / SHARE:.2f} times slower would take {slow['0']:.1f} and {slow['30']:.1f} ms (the no-quota times over "
             f"{SHARE:g}).", "",
             "| setting | back to back (a, b) | after 30 ms idle (a, b) |", "|---|---|---|"]
    for row in r["rows"]:
        a, b = row["runs"]
        lines.append(f"| {row['setting']} | {a['0']:.1f}, {b['0']:.1f} | {a['30']:.1f}, {b['30']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
