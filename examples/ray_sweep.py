"""A sweep of solves on Ray: every instance x solver x seed as one job, run as Ray tasks, tabulated (needs the ray extra).

`splitopt.sweep` runs each job (one solve) in its own process, pinned to its thread
count and killed at its time limit x 1.1 plus a grace period, with its solver children.
The executor decides where those processes run: `local` (a process pool on this
machine) or `ray` (Ray tasks: a local Ray instance started here, or a cluster's address
as `ray_address`, with splitopt and the instance files at the same paths on every node).
Records come back in job order whatever the executor or the worker count, and each is
appended to a JSONL store as it ends, so running the same sweep again resumes it (here:
runs nothing and returns the same records). The command line does the same: `splitopt
sweep INSTANCE... -s cpsat -s milp-highs --executor ray`.

Usage: `python examples/ray_sweep.py [STORE.jsonl]` (default: a temporary file).
"""

import os
import sys
import tempfile
from pathlib import Path

from splitopt.sweep.jobs import expand
from splitopt.sweep.report import summary_rows
from splitopt.sweep.runner import run_sweep

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = [ROOT / "instances" / name for name in
             ("resnet50_eyeriss.json", "mobilenetv2_eyeriss.json", "jmsnas_chain_mobilenetv2.json")]

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # else Ray writes a token under $HOME

with tempfile.TemporaryDirectory() as tmp:
    store = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp, "runs.jsonl")
    jobs = expand(INSTANCES, solvers=["cpsat", "milp-highs"], seeds=[0], time_limit_s=60.0, threads=1)
    records = run_sweep(jobs, store, executor="ray", workers=2)
    print(f"{len(records)} jobs on Ray, stored in {store.name}")

    columns = ("instance", "solver", "statuses", "best objective", "median wall s")
    print(" | ".join(columns))
    for row in summary_rows(records):
        print(" | ".join(f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c]) for c in columns))

    # Both exact backends prove the same optimum on every instance.
    best = {}
    for r in records:
        assert r["status"] == "OPTIMAL", r
        best.setdefault(r["instance"], []).append(r["objective"])
    assert all(max(v) - min(v) <= 1e-6 * max(v) for v in best.values()), best

    again = run_sweep(jobs, store, executor="ray", workers=2)  # everything is in the store: nothing runs
    assert [r["objective"] for r in again] == [r["objective"] for r in records]
    print("resumed from the store: same records, nothing re-run")
