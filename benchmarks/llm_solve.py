"""Benchmark of the llm family's exact methods: solve time (build + solve, median of
``--repeats``) on the shipped ``instances/llm_*.json`` and on Llama-3.1-70B (82 parts) over
4, 6 and 8 devices (chain and ring), without and with a binding error budget (4/8/16-bit
weights, the assumed error table of ``instances/make_llm_instances.py``, the budget 40 %
of the error at 4 bits everywhere), and with that budget over 8 devices no two alike, for
each objective.

Backends: ``llm-dp`` on every case (where the budget binds: its Lagrangian bound and
search); beside it, on the shipped instance whose budget binds, ``milp-highs`` (time limit
``--time-limit`` s, not repeated when it is reached). Every plan goes through
``splitopt.solve.solve`` and is re-evaluated by the evaluator. In-process, one solve after
the other (``threads`` 2).

Run: ``python benchmarks/llm_solve.py [--repeats 3] [--time-limit 60]``; writes
``benchmarks/results/llm_solve.md``. ``--quick`` (one repeat, shipped instances only, a 10 s
limit) prints the table only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "instances"))

from machine import machine  # noqa: E402
from make_llm_instances import CONFIGS, LINKS, assumed_error, mesh  # noqa: E402
from splitopt.api import load_instance, parse_instance  # noqa: E402
from splitopt.core import presets  # noqa: E402
from splitopt.families.llm.examples import decoder_instance_data  # noqa: E402
from splitopt.families.llm.methods import budget_binds  # noqa: E402
from splitopt.solve import solve  # noqa: E402

OBJECTIVES = ("ttft", "token_latency", "throughput")
#: the 70B's device sets: 4, 6 and 8 heterogeneous devices
DEVICE_SETS = {4: ["macbook_m1max", "rtx4090", "orin", "pi5"],
               6: ["macbook_m1max", "macbook_m1max", "rtx4090", "orin", "pi5", "pi5"],
               8: ["macbook_m1max", "macbook_m1max", "rtx4090", "rtx4090", "orin", "orin", "pi5", "pi5"]}


def llama70b(devices: int, topology: str, budget: bool = False, distinct: bool = False):
    """Llama-3.1-70B over ``devices`` presets (gigabit Ethernet between all), 1,024 + 512
    tokens in a context of 8,192, 4 streams; 16-bit weights (8-bit on 4 devices: 141 GB
    does not fit their 128 GB), or with ``budget`` 4/8/16-bit weights under an error budget
    of 40 % of the error at 4 bits everywhere (assumed errors). ``distinct``: no two devices
    alike (device ``i``'s memory 3 i % smaller and bandwidth 5 i % larger than its preset's),
    so that no twins shrink the program."""
    kinds = DEVICE_SETS[devices]
    devs = presets.preset_devices(kinds)
    if distinct:
        for i, dev in enumerate(devs):
            dev["memory_bytes"] *= 1 - 0.03 * i
            dev["offchip_bytes_per_s"] *= 1 + 0.05 * i
    config = {k: v for k, v in CONFIGS["llama31_70b"].items() if k != "source"}
    widths = [4, 8, 16] if budget else [8] if devices == 4 else [16]
    name = f"llama31_70b_{devices}dev_{topology}" + ("_budget" if budget else "") + ("_distinct" if distinct else "")
    data = decoder_instance_data(name, config, devs, mesh(devs, "ethernet"), prompt_tokens=1024, generated_tokens=512,
                                 context_limit=8192, streams=4, topology=topology, bit_widths=widths)
    if budget:
        for layer in data["graph"]["layers"]:
            layer["weight_error"] = {str(b): assumed_error(b) for b in widths if b < 16}
        data["settings"]["error_budget"] = 0.4 * assumed_error(4) * len(data["graph"]["layers"])
    return parse_instance(data)


def prepare_s(inst) -> float:
    """Seconds to check a fresh copy of ``inst`` and build its tables (once per instance;
    the solves after reuse them)."""
    from splitopt.families.registry import family

    fresh = inst.with_settings()
    t0 = time.perf_counter()
    family("llm").prepare(fresh)
    return time.perf_counter() - t0


def cpu_s() -> float:
    """CPU seconds so far of this process (all threads) and of its finished children (a
    solver run as a separate program)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(inst, backend: str, repeats: int, limit: float) -> dict:
    """The median wall and CPU time (:func:`cpu_s`) of ``repeats`` solves (one where the
    limit is reached) and the last result."""
    times, cpu, res = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), cpu_s()
        res = solve(inst, backend, time_limit=limit, threads=2)
        times.append(time.perf_counter() - t0)
        cpu.append(cpu_s() - c0)
        if times[-1] >= limit * 0.95:
            break
    assert res is not None
    return {"status": res.status.value, "objective": res.objective, "gap": res.gap, "s": statistics.median(times),
            "cpu_s": statistics.median(cpu), "runs": len(times)}


def cases(quick: bool):
    for path in sorted((ROOT / "instances").glob("llm_*.json")):
        yield path.stem, load_instance(path)
    if quick:
        return
    for budget in (False, True):
        for devices in (4, 6, 8):
            for topology in ("chain", "ring"):
                inst = llama70b(devices, topology, budget)
                yield inst.name, inst
    for topology in ("chain", "ring"):
        inst = llama70b(8, topology, budget=True, distinct=True)
        yield inst.name, inst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeats, limit = (1, 10.0) if args.quick else (args.repeats, args.time_limit)
    load_start = os.getloadavg()[0]
    rows = []
    for name, base in cases(args.quick):
        for objective in OBJECTIVES:
            inst = base.with_settings(objective=objective)
            shipped_budget = (ROOT / "instances" / f"{name}.json").exists() and budget_binds(inst)
            backends = ["llm-dp", "milp-highs"] if shipped_budget else ["llm-dp"]
            for backend in backends:
                r = timed(inst, backend, repeats, limit)
                r["prepare_s"] = prepare_s(inst)
                rows.append((name, len(inst.layers), len(inst.devices), inst.settings.topology, budget_binds(inst),
                             objective, backend, r))
                print(f"{name} {objective} {backend}: {r['status']} {r['objective']:.6g} ms in {r['s']:.3f} s",
                      flush=True)
    lines = ["# llm: exact solve times\n", f"`python benchmarks/llm_solve.py --repeats {repeats} --time-limit {limit:g}` "
             f"on {machine()} ({sys.platform}); time = build + solve, median of the runs (one where the limit is "
             "reached; CPU: the CPU time of this process, all threads, and of the solver programs it ran, beside it "
             "because the machine is shared), "
             "after the instance's tables are built (prepare: checks and tables of a fresh copy, once "
             f"per instance); load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; links: gigabit Ethernet ({LINKS['ethernet'][0]:.0e} bit/s, {LINKS['ethernet'][1]} ms) "
             "unless the instance says otherwise.\n",
             "| instance | parts | devices | topology | budget binds | objective | backend | status | objective (ms) | "
             "gap | prepare (s) | time (s) | CPU (s) |",
             "|---|---:|---:|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for name, parts, devices, topology, binds, objective, backend, r in rows:
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2g} %"
        lines.append(f"| {name} | {parts} | {devices} | {topology} | {'yes' if binds else 'no'} | {objective} | "
                     f"{backend} | {r['status']} | {r['objective']:.6g} | {gap} | {r['prepare_s']:.3f} | {r['s']:.3f} | "
                     f"{r['cpu_s']:.3f} |")
    text = "\n".join(lines) + "\n"
    if args.quick:
        print(text)
        return
    out = ROOT / "benchmarks" / "results" / "llm_solve.md"
    out.write_text(text)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
