"""The sweep runner (``splitopt sweep``): the same records whatever the worker count,
resume from the JSONL store, a hard kill at the limit, a cut-short store line, bad input
in one line, and the Ray executor where Ray is installed."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from splitopt.families.edge_cloud.examples import random_instance_data
from splitopt.sweep.jobs import Job, expand
from splitopt.sweep.runner import run_sweep
from splitopt.sweep.store import read_records

#: what a record must repeat exactly for the same job (timings excluded)
SAME = ("key", "instance", "solver", "seed", "status", "objective", "bound", "plan")


@pytest.fixture()
def files(tmp_path):
    paths = []
    for seed in range(3):
        p = tmp_path / f"inst{seed}.json"
        p.write_text(json.dumps(random_instance_data(seed, 6, edge_required=False)))
        paths.append(p)
    return paths


def outcome(records):
    return [{k: r.get(k) for k in SAME} for r in records]


def test_two_workers_give_the_sequential_records(files, tmp_path):
    jobs = expand(files, ["cpsat", "milp-highs"], range(2), 20.0, 1)
    one = run_sweep(jobs, tmp_path / "one.jsonl", workers=1)
    two = run_sweep(jobs, tmp_path / "two.jsonl", workers=2)
    assert len(one) == len(jobs) == 12
    assert outcome(one) == outcome(two)
    assert all(r["status"] == "OPTIMAL" for r in one), [r.get("message") for r in one]
    assert [r["key"] for r in one] == [j.key for j in jobs]  # job order, whatever ended first


def test_a_sweep_resumes_from_its_store(files, tmp_path):
    store = tmp_path / "runs.jsonl"
    jobs = expand(files, ["cpsat"], range(1), 20.0, 1)
    first = run_sweep(jobs[:2], store, workers=2)
    ran = []
    again = run_sweep(jobs, store, workers=2, progress=lambda r, done, total: ran.append(r["key"]))
    assert ran == [jobs[2].key]  # only the job not stored yet
    assert outcome(again[:2]) == outcome(first)
    assert len(read_records(store)) == 3


def test_a_limit_given_as_an_int_is_the_same_job_as_its_float(files, tmp_path):
    """The worker reads the limit back from JSON as a float: a job keyed with the int had
    come back under another key, so the sweep returned no record and a resume ran it again."""
    jobs = expand(files[:1], ["cpsat"], range(1), 20, 1)
    assert jobs[0].key == expand(files[:1], ["cpsat"], range(1), 20.0, 1)[0].key
    assert jobs[0].key == Job.from_dict(json.loads(json.dumps(jobs[0].to_dict()))).key
    store = tmp_path / "runs.jsonl"
    assert [r["key"] for r in run_sweep(jobs, store, workers=1)] == [jobs[0].key]
    ran = []
    run_sweep(jobs, store, workers=1, progress=lambda r, done, total: ran.append(r["key"]))
    assert ran == []


def test_a_store_line_cut_short_by_a_kill_is_run_again(files, tmp_path):
    store = tmp_path / "runs.jsonl"
    jobs = expand(files[:2], ["cpsat"], range(1), 20.0, 1)
    run_sweep(jobs, store, workers=1)
    text = store.read_text().splitlines()
    store.write_text(text[0] + "\n" + text[1][: len(text[1]) // 2])  # the last record cut short
    ran = []
    records = run_sweep(jobs, store, workers=1, progress=lambda r, done, total: ran.append(r["key"]))
    assert ran == [jobs[1].key]
    assert len(records) == 2 and len(read_records(store)) == 2
    # cut short with its newline kept: skipped, removed, and the store reads again after
    # the rerun (the rerun's record had followed the bad line, which then broke the store)
    text = store.read_text().splitlines()
    store.write_text(text[0] + "\n" + text[1][: len(text[1]) // 2] + "\n")
    ran.clear()
    run_sweep(jobs, store, workers=1, progress=lambda r, done, total: ran.append(r["key"]))
    assert ran == [jobs[1].key]
    assert len(run_sweep(jobs, store, workers=1)) == 2 and len(store.read_text().splitlines()) == 2


def test_a_store_resumes_however_the_paths_are_spelled_and_a_file_named_twice_is_one_job(files, tmp_path,
                                                                                         monkeypatch):
    store = tmp_path / "runs.jsonl"
    monkeypatch.chdir(files[0].parent)
    jobs = expand([files[0].name, files[0], f"./{files[0].name}"], ["cpsat", "cpsat"], [0, 0], 20.0, 1)
    assert len(jobs) == 1
    run_sweep(jobs, store, workers=1)
    ran = []
    run_sweep(expand([files[0]], ["cpsat"], [0], 20.0, 1), store, progress=lambda r, done, total: ran.append(r))
    assert ran == []


def test_a_job_past_its_limit_is_killed(files, tmp_path):
    """With no grace, a 0.01 s limit ends before the worker has even started Python."""
    job = Job(str(files[0]), "cpsat", 0, 0.01, 1)
    t0 = time.perf_counter()
    [record] = run_sweep([job], tmp_path / "runs.jsonl", grace_s=0.0)
    assert record["status"] == "KILLED" and "killed after" in record["message"]
    assert time.perf_counter() - t0 < 5.0


def test_bad_input_is_one_line_and_exit_2(files, tmp_path):
    out = ["--out", str(tmp_path / "x.jsonl")]
    cases = [
        [str(tmp_path / "missing.json"), *out],
        [str(files[0]), "--executor", "spark", *out],
        [str(files[0]), "--seeds", "0", *out],
        [str(files[0]), "--time-limit", "-1", *out],
        [str(files[0]), "--out", str(tmp_path)],
        # checked before anything runs: an unknown solver, an output that is another output
        [str(files[0]), "-s", "bogus", *out],
        [str(files[0]), *out, "--table", str(tmp_path / "x.jsonl")],
        [str(files[0]), *out, "--ray-address", "auto"],  # without --executor ray
    ]
    bad_stores = {"list_key.jsonl": '{"key": [1, 2], "instance": "a", "solver": "s", "seed": 0, "status": "OK"}\n',
                  "no_instance.jsonl": '{"key": "k", "solver": "s", "seed": 0, "status": "OK"}\n',
                  "foreign.jsonl": '{"key": "k1", "value": 1}\n{"key": "k2", "value": 2}\n',
                  "binary.jsonl": b"\xff\xfe\x00garbage\n"}
    for name, text in bad_stores.items():
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        cases.append([str(files[0]), "-s", "cpsat", "--out", str(path)])
    for args in cases:
        proc = subprocess.run([sys.executable, "-m", "splitopt", "sweep", *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert (tmp_path / "foreign.jsonl").read_text().count("\n") == 2  # a foreign file is left as it was


def test_the_command_prints_and_writes_the_table(files, tmp_path):
    md, csv = tmp_path / "t.md", tmp_path / "t.csv"
    proc = subprocess.run([sys.executable, "-m", "splitopt", "sweep", *map(str, files[:2]), "-s", "cpsat", "-t", "20",
                           "-j", "2", "--out", str(tmp_path / "r.jsonl"), "--table", str(md), "--csv", str(csv)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "| inst0.json | cpsat | 1 | 1 OPTIMAL |" in md.read_text()
    assert csv.read_text().splitlines()[0].startswith("instance,solver,runs,statuses")


def test_ray_gives_the_local_records(files, tmp_path):
    pytest.importorskip("ray")
    jobs = expand(files[:2], ["cpsat"], range(2), 20.0, 1)
    local = run_sweep(jobs, tmp_path / "local.jsonl", workers=2)
    remote = run_sweep(jobs, tmp_path / "ray.jsonl", executor="ray", workers=2)
    assert outcome(local) == outcome(remote)


def test_ctrl_c_kills_the_running_jobs_and_exits_130(tmp_path):
    """SIGINT to ``splitopt sweep`` while a job solves: exit 130 with one line, and the job's
    worker process (its own session) is gone."""
    import os
    import signal

    instance = "instances/transformer1000_chain8_throughput.json"  # a solve that runs its whole limit
    proc = subprocess.Popen([sys.executable, "-m", "splitopt", "sweep", instance, "-s", "cpsat", "-t", "60", "-j", "1",
                             "--out", str(tmp_path / "r.jsonl")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while not workers and time.monotonic() < deadline:
        time.sleep(0.5)
        listed = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
        workers = [int(x) for x in listed.split()]
    assert workers, "the sweep started no worker"
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and len(err.strip().splitlines()) == 1, (proc.returncode, err)
    time.sleep(0.5)
    for pid in workers:
        try:
            os.kill(pid, 0)
            alive = open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        assert not alive, f"worker {pid} survived Ctrl-C"


def test_a_record_carries_the_results_scalar_extras(files):
    from splitopt.sweep.worker import scalar_extras, solve_job

    assert scalar_extras({"variables": 7, "returned": "start plan", "presolve": False, "tol": 0.5, "none": None,
                          "nan": float("nan"), "probe": {"s": 1.0}, "anytime": [[0.1, 1, 2.0, True]]}) == \
        {"variables": 7, "returned": "start plan", "presolve": False, "tol": 0.5, "none": None}
    record = solve_job(Job(str(files[0]), "milp-highs", 0, 20.0, 1))
    assert record["status"] == "OPTIMAL", record.get("message")
    extra = record["extra"]
    assert extra and all(v is None or isinstance(v, (str, bool, int, float)) for v in extra.values())
    assert isinstance(extra.get("variables"), int)  # the program's size, as the benchmarks report it
    json.dumps(record, allow_nan=False)
