"""Benchmark of the separable family's torch bridge, measured for real on this host (the
Separable NN paper's Tables 2 and 5 and its Sec. 4.6 deployment, scaled down to the
digits and one CPU).

1. Train (stage 1, Eq. 9: a uniform random policy per mini-batch; ``--epochs``) the
   Sep-ResNeXt of :mod:`splitopt.torch.separable.model` (G = 4, 8 paths, per-device
   widths 16/32/64, 2 blocks per stage, alpha = 2: 3 transmission steps; 9 levels from
   50 %, float32/float16) and the unseparated ResNeXt of the same widths; measure the
   accuracy records on the validation split (:func:`~splitopt.torch.separable.nas.accuracy_records`).
2. Accuracy vs bytes on the test split: the unseparated model (ring all-reduce: 100 %),
   no communication, every step intensive at 100 % float32 and at 50 % float16,
   ``--random`` uniform random policies, the REINFORCE controller's best
   (:func:`~splitopt.torch.separable.nas.search_controller`, ``--controller-steps``
   updates, reward = validation accuracy, then ``--stage3`` samples, best on validation),
   and the exact optimum of the family (``solve``, objective ``bytes``) for each
   accuracy record as ``min_accuracy`` (the fewest bytes the solver can prove for that
   credited accuracy), plus any ``--plans`` files. Bytes and the ratio to the ring
   all-reduce come from the family evaluator.
3. Multi-process runs (:func:`~splitopt.torch.separable.run.run_policies`: one process
   per device, gloo on 127.0.0.1, batch 1, median of ``--repeats``) of some of those
   policies: outputs equal to the single-process forward, bytes sent equal to the
   evaluator's, measured wall time against the evaluator's latency on the host
   instance (each layer's measured time, links measured by
   :func:`~splitopt.torch.separable.run.measure_link`); the same for a G = 2 network
   (random weights), where each process has a core of its own.

Run: ``python benchmarks/separable_torch.py [--epochs 25] [--checkpoint FILE]``; writes
``benchmarks/results/separable_torch.json`` and ``.md``. About 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from machine import machine  # benchmarks/, the script's folder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from splitopt.api import load_plan, parse_instance  # noqa: E402
from splitopt.families.separable.evaluate import evaluate  # noqa: E402
from splitopt.families.separable.plan import SeparablePlan  # noqa: E402
from splitopt.solve import solve  # noqa: E402
from splitopt.torch.separable.model import (SepConfig, accuracy, build_model, identity_policy,  # noqa: E402
                                            intensive_policy, normalize_policy, policy_to_json, policy_to_plan)
from splitopt.torch.separable.nas import (accuracy_of_policies, load_models, random_policies,  # noqa: E402
                                          save_models, search_controller)
from splitopt.torch.separable.profile import TrainedPair, measured_records, profile_instance, train_pair  # noqa: E402
from splitopt.torch.separable.run import run_policies  # noqa: E402


def _row(name: str, inst, policy, acc: float, **extra) -> dict:
    plan = policy if isinstance(policy, SeparablePlan) else policy_to_plan(policy)
    m = evaluate(inst, plan)
    return {"policy": name, "bytes": m.total_bytes, "ratio_to_ring": m.ratio_to_ring, "test_accuracy": acc,
            "predicted_latency_ms": m.latency_ms, "intensive_steps": m.intensive_steps, "mixing": m.mixing,
            "float16_steps": m.float16_steps, "credited_accuracy": m.accuracy,
            "steps": None if plan.ring else policy_to_json(normalize_policy(plan, SepConfig())), **extra}


def exact_optima(prof, pair: TrainedPair, records: list[dict], time_limit: float) -> list[dict]:
    """Per distinct record accuracy t: solve objective ``bytes`` with ``min_accuracy = t``."""
    out = []
    for t in sorted({r["accuracy"] for r in records}):
        data = json.loads(json.dumps(prof.data))
        data["name"] = f"{data['name']}_min{t:.3f}"
        data["settings"]["objective"] = "bytes"
        data["settings"]["separable"]["min_accuracy"] = t
        inst = parse_instance(data)
        t0 = time.perf_counter()
        try:
            res = solve(inst, time_limit=time_limit, threads=1)
        except Exception as e:  # noqa: BLE001 - reported in the table
            out.append({"min_accuracy": t, "error": f"{type(e).__name__}: {e}"})
            continue
        row = {"min_accuracy": t, "status": str(getattr(res.status, "value", res.status)), "backend": res.backend,
               "solve_s": round(time.perf_counter() - t0, 2)}
        if res.plan is not None:
            steps = normalize_policy(res.plan, pair.model.config)
            row["policy"] = steps
            row["bytes"] = res.metrics.total_bytes
        out.append(row)
    return out


def _s(seconds) -> str:
    return "?" if seconds is None else f"{seconds:.0f}"


def markdown(report: dict) -> str:
    meta = report["meta"]
    lines = ["# Separable family, torch bridge: accuracy vs bytes and a multi-process run on this host", "",
             f"Machine: {meta['machine']}; torch {meta['torch']}, 1 intra-op thread per process; started "
             f"{meta['started']}, {meta['seconds']:.0f} s in all. Run `python benchmarks/separable_torch.py`.", "",
             f"Network: {meta['network']}. Data: scikit-learn digits (1x8x8, 10 classes), split "
             f"{meta['split']} (seed 0). Stage 1: {meta['train']['epochs']} epochs in {_s(meta['train']['seconds'])} s "
             f"(Adam, one-cycle lr 0.01, +-1 px shifts), a uniform random policy per mini-batch "
             f"({meta['train']['policies_sampled']} policies sampled); the unseparated ResNeXt: same recipe, "
             f"{_s(meta['reference_train']['seconds'])} s. Parameters: separable {meta['params_separable']:,}, "
             f"unseparated {meta['params_reference']:,}.", "",
             "## Accuracy vs bytes (test split, 360 images; bytes per image from the family evaluator)", "",
             "| policy | bytes | of ring all-reduce | test accuracy | intensive steps | float16 steps | mixing | "
             "credited (records) |", "|---|---|---|---|---|---|---|---|"]
    for r in report["accuracy_vs_bytes"]:
        cred = "-" if r.get("credited_accuracy") is None else f"{r['credited_accuracy']:.3f}"
        acc = r["test_accuracy"]
        acc_s = f"{acc:.4f}" if isinstance(acc, float) else acc
        lines.append(f"| {r['policy']} | {r['bytes']:,.0f} | {r['ratio_to_ring']:.2%} | {acc_s} | "
                     f"{r['intensive_steps']} | {r['float16_steps']} | {'yes' if r['mixing'] else 'no'} | {cred} |")
    rnd = report["random"]
    lines += ["", f"Random policies ({rnd['count']}): test accuracy mean {rnd['mean']:.4f}, min {rnd['min']:.4f}, "
              f"max {rnd['max']:.4f}; bytes mean {rnd['bytes_mean']:,.0f} ({rnd['ratio_mean']:.2%} of ring). The "
              f"best on validation scores {rnd['best_on_val_test']:.4f} on test.", ""]
    c = report["controller"]
    lines += ["Every step intensive (the cyclic shifts g -> g + 1 + j mod 3) at each level and dtype:", "",
              "| level | percent | dtype | bytes | of ring | test accuracy | validation accuracy |",
              "|---|---|---|---|---|---|---|"]
    for s in report["intensive_sweep"]:
        lines.append(f"| {s['level']} | {s['percent']:.2f} | {s['dtype']} | {s['bytes']:,.0f} | {s['ratio_to_ring']:.2%} | "
                     f"{s['test_accuracy']:.4f} | {s['val_accuracy']:.4f} |")
    lines += [""]
    lines += [f"Controller (LSTM, 100 cells; REINFORCE, reward = validation accuracy on all 180 images): "
              f"{c['controller_steps']} updates + {c['stage3_samples']} stage-3 samples, {c['evaluations']} distinct "
              f"policy evaluations, {c['seconds']:.0f} s; mean reward first 20 {c['mean_reward_first_20']:.4f}, "
              f"last 20 {c['mean_reward_last_20']:.4f}; best validation accuracy {c['best_val_accuracy']:.4f}.", ""]
    lines += ["## Accuracy records (validation split; `settings.separable.accuracy`)", "",
              "Per class: 8 policies drawn uniformly in the class, plus each one's cheapest member (steps silenced "
              "while the class still holds, the lowest allowed level, float16 where allowed); the record is the "
              "minimum over all of them (the uniform members alone in the last column).", "",
              "| class | policies | record (min) | mean | max | min of the uniform members |",
              "|---|---|---|---|---|---|"]
    for d in report["record_details"]:
        lines.append(f"| {d['name']} | {d['policies']} | {d['min']:.4f} | {d['mean']:.4f} | {d['max']:.4f} | "
                     f"{d['min_uniform']:.4f} |")
    lines += ["", "## Exact optima (objective bytes, `min_accuracy` = each record)", "",
              "| min_accuracy | status | bytes | solve s |", "|---|---|---|---|"]
    for o in report["exact_optima"]:
        if "error" in o:
            lines.append(f"| {o['min_accuracy']:.4f} | error: {o['error']} | - | - |")
        else:
            b = "-" if o.get("bytes") is None else f"{o['bytes']:,.0f}"
            lines.append(f"| {o['min_accuracy']:.4f} | {o['status']} | {b} | {o['solve_s']} |")
    lines += ["", "## Multi-process runs: measured vs predicted (batch 1)", "",
              "| G | policy | bytes sent | evaluator bytes | outputs equal (max abs diff) | measured ms (median) | "
              "predicted ms | measured / predicted |", "|---|---|---|---|---|---|---|---|"]
    for r in report["multiprocess"]:
        lines.append(f"| {r['G']} | {r['policy']} | {r['bytes_sent']:,.0f} | {r['evaluator_bytes']:,.0f} | "
                     f"{'yes' if r['outputs_equal'] else 'NO'} ({r['max_abs_diff']:.2g}) | {r['measured_ms']:.2f} | "
                     f"{r['predicted_ms']:.2f} | {r['ratio']:.2f} |")
    lines += ["", "Links (gloo, 127.0.0.1, an isend/irecv exchange as the runner does it): "
              + "; ".join(f"G = {g}: {l['latency_ms']:.3f} ms + bytes at {l['bits_per_s'] / 1e9:.2f} Gbit/s"
                          for g, l in report["links"].items()) + ".", "", "## Notes", ""]
    lines += [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--checkpoint", type=Path, default=None, help="load the networks from here if it exists, "
                        "else train and write them here")
    parser.add_argument("--random", type=int, default=20)
    parser.add_argument("--controller-steps", type=int, default=200)
    parser.add_argument("--stage3", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--plans", type=Path, nargs="*", default=[], help="more plan files to measure")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    config = SepConfig()
    if args.checkpoint is not None and args.checkpoint.is_file():
        from splitopt.torch.separable.model import load_digits_split

        model, ref, extra = load_models(args.checkpoint)
        pair = TrainedPair(model, ref, load_digits_split(0))
        train_meta = dict(extra.get("train") or {"epochs": extra.get("epochs"), "seconds": None,
                                                  "policies_sampled": None})
        train_meta["loaded"] = str(args.checkpoint)
        ref_meta = dict(extra.get("reference_train") or {"seconds": None})
    else:
        pair = train_pair(config, seed=0, epochs=args.epochs)
        train_meta = pair.log.to_dict()
        ref_meta = pair.reference_log.to_dict()
        if args.checkpoint is not None:
            save_models(args.checkpoint, pair.model, pair.reference, {"seed": 0, "epochs": args.epochs,
                                                                      "train": train_meta, "reference_train": ref_meta})
    print(f"trained in {time.perf_counter() - t_start:.0f} s", flush=True)
    d = pair.data
    model, ref = pair.model, pair.reference
    records, details = measured_records(model, d, samples=8)
    prof = profile_instance(model, name="separable_digits_bench", devices="host", records=records)
    inst = prof.instance
    link4 = prof.data["source"]["link"]

    rows = [_row("unseparated ResNeXt (ring all-reduce)", inst, SeparablePlan((), ring=True),
                 accuracy(ref, d.x_test, d.y_test)),
            _row("no communication", inst, identity_policy(config),
                 accuracy_of_policies(model, [identity_policy(config)], d)[0])]
    fixed = {"all intensive, 100 %, float32": intensive_policy(config),
             "all intensive, 50 %, float16": intensive_policy(config, level=0, dtype="float16")}
    for name, pol in fixed.items():
        rows.append(_row(name, inst, pol, accuracy_of_policies(model, [pol], d)[0]))
    sweep = []
    for dtype in config.dtypes:
        for level in range(config.levels):
            pol = intensive_policy(config, level=level, dtype=dtype)
            m = evaluate(inst, policy_to_plan(pol))
            sweep.append({"level": level, "percent": config.percents[level], "dtype": dtype, "bytes": m.total_bytes,
                          "ratio_to_ring": m.ratio_to_ring, "test_accuracy": accuracy_of_policies(model, [pol], d)[0],
                          "val_accuracy": accuracy_of_policies(model, [pol], d, split="val")[0]})
    rnd = random_policies(config, args.random, seed=1)
    rnd_test = accuracy_of_policies(model, rnd, d)
    rnd_val = accuracy_of_policies(model, rnd, d, split="val")
    best_i = int(np.argmax(rnd_val))
    rnd_bytes = [evaluate(inst, policy_to_plan(p)).total_bytes for p in rnd]
    rows.append(_row(f"random: best of {args.random} on validation", inst, rnd[best_i], rnd_test[best_i]))
    search = search_controller(model, d, steps=args.controller_steps, samples=args.stage3)
    rows.append(_row("controller best (REINFORCE)", inst, search.best,
                     accuracy_of_policies(model, [search.best], d)[0]))
    print(f"controller {search.seconds:.0f} s", flush=True)
    optima = exact_optima(prof, pair, records, args.time_limit)
    for o in optima:
        if o.get("policy") is not None:
            rows.append(_row(f"exact: fewest bytes with min_accuracy {o['min_accuracy']:.3f} ({o['status']})", inst,
                             o["policy"], accuracy_of_policies(model, [o["policy"]], d)[0]))
            o["policy"] = policy_to_json(o["policy"])
    for path in args.plans:
        plan = load_plan(inst, path)
        acc = accuracy(ref, d.x_test, d.y_test) if plan.ring else accuracy_of_policies(model, [plan], d)[0]
        rows.append(_row(f"plan {path.name}", inst, plan, acc))
    print(f"table done {time.perf_counter() - t_start:.0f} s", flush=True)

    # multi-process: G = 4 (trained) and G = 2 (random weights)
    mp_rows = []
    run_set = [("no communication", identity_policy(config)),
               ("all intensive, 100 %, float32", intensive_policy(config)),
               ("all intensive, 50 %, float16", fixed["all intensive, 50 %, float16"]),
               ("controller best", search.best)]
    exact_pols = [o for o in optima if o.get("policy") is not None]
    if exact_pols:
        run_set.append((f"exact, min_accuracy {exact_pols[-1]['min_accuracy']:.3f}", exact_pols[-1]["policy"]))
    x = d.x_test[:1]
    reps = run_policies(model, [p for _, p in run_set], x, repeats=args.repeats, timeout_s=300)
    for (name, pol), rep in zip(run_set, reps):
        m = evaluate(inst, policy_to_plan(normalize_policy(pol, config)))
        mp_rows.append({"G": 4, "policy": name, "bytes_sent": rep["bytes_per_sample"], "evaluator_bytes": m.total_bytes,
                        "bytes_equal": rep["bytes_per_sample"] == m.total_bytes, "outputs_equal": rep["ok"],
                        "max_abs_diff": rep["max_abs_diff"], "measured_ms": rep["median_ms"],
                        "times_ms": rep["times_ms"], "predicted_ms": m.latency_ms,
                        "ratio": rep["median_ms"] / m.latency_ms})
    config2 = SepConfig(groups=2)
    model2 = build_model(config2, seed=0)
    model2.eval()
    prof2 = profile_instance(model2, name="separable_digits_g2", devices="host")
    run2 = [("no communication", identity_policy(config2)),
            ("all intensive, 100 %, float32", intensive_policy(config2)),
            ("all intensive, 50 %, float16", intensive_policy(config2, level=0, dtype="float16"))]
    reps2 = run_policies(model2, [p for _, p in run2], x, repeats=args.repeats, timeout_s=300)
    for (name, pol), rep in zip(run2, reps2):
        m = evaluate(prof2.instance, policy_to_plan(pol))
        mp_rows.append({"G": 2, "policy": name, "bytes_sent": rep["bytes_per_sample"], "evaluator_bytes": m.total_bytes,
                        "bytes_equal": rep["bytes_per_sample"] == m.total_bytes, "outputs_equal": rep["ok"],
                        "max_abs_diff": rep["max_abs_diff"], "measured_ms": rep["median_ms"],
                        "times_ms": rep["times_ms"], "predicted_ms": m.latency_ms,
                        "ratio": rep["median_ms"] / m.latency_ms})
    load = os.getloadavg()[0]
    notes = [
        "Digits is easy and the network tiny: differences of one or two test images (0.3-0.6 %) are noise. Accuracies "
        "are of ONE training run (seed 0); the records and the controller's reward use the validation split (180 "
        "images), the table the test split.",
        "The separable network is trained with uniformly random policies (an untrained controller's); every policy is "
        "then evaluated with the same weights, without the paper's final fine-tuning on the chosen policy, so a "
        "policy's accuracy here is that of the shared weights (the paper's stage 3).",
        "Exact optima: the family's solver minimises bytes subject to the credited accuracy (the best record the "
        "policy meets) being at least the threshold. A record is a class minimum over sampled members, so the chosen "
        "policy's own measured accuracy can still fall below its credit (on test, or on validation when the solver "
        "finds a cheaper member than any sampled): the 'credited' column against 'test accuracy' shows where. A "
        "first run that credited uniform members only was exploited exactly so (the cheapest mixing policy, two "
        "intensive steps at 50 % float16, credited 0.95, measured 0.908): hence the cheapest members.",
        "Records never lower a credit: a policy gets the best record it meets, so a specific class measured worse "
        "than a broader one it belongs to (all intensive at 100 % float32 below '>= 3 intensive steps') does not "
        "lower that policy's credit. The family reads a class's accuracy as a floor for every policy that "
        "dominates it in all four features; the intensive sweep shows that this does not hold for a network trained "
        "with uniform random policies: more channels (and float32) on every step is out of the training "
        "distribution (a device receives a message at 3 of 4 steps on average, of 75 % of the channels) and scores "
        "lower than 50 % float16. The paper's alternating stages (the network trained on the controller's samples) "
        "or training on the deployed policy would shift this; not done here.",
        "Measured latency: one process per device on a 2-core host. With G = 4, four processes share two cores "
        "(about 2x the compute time alone), and a gloo transfer cannot overlap computation when no core is idle: "
        "the evaluator assumes devices of their own and links that progress during compute (alpha = 2 overlaps the "
        "transfer with one block), so it under-predicts. The G = 2 rows give each process a core; their remaining "
        "gap is gloo's per-message cost under load (the link fit is measured with nothing else running).",
        f"The host was shared with other engineers' jobs (1-minute load average {load:.1f} at the end); times vary "
        "from run to run by tens of percent.",
        "Bytes: each process counts the payload it hands to dist.isend (numel x element size, per image); they equal "
        "the evaluator's total_bytes exactly in every run.",
    ]
    report = {"meta": {"machine": machine(shared=True), "torch": torch.__version__, "started": started,
                       "seconds": time.perf_counter() - t_start,
                       "network": "Sep-ResNeXt, G = 4 devices, C = 8 paths (2 per device), per-device stream widths "
                                  "16/32/64, bottleneck 4/8/16 per path, 2 blocks per stage (6 blocks), alpha = 2 "
                                  "(3 transmission steps), 9 levels 50-100 %, float32/float16; stem shared "
                                  "(duplicated G times, Table 1), head on device 0's stream",
                       "split": f"{d.sizes}", "train": train_meta, "reference_train": ref_meta,
                       "params_separable": sum(p.numel() for p in model.parameters()),
                       "params_reference": sum(p.numel() for p in ref.parameters())},
              "accuracy_vs_bytes": rows,
              "random": {"count": len(rnd), "mean": float(np.mean(rnd_test)), "min": float(min(rnd_test)),
                         "max": float(max(rnd_test)), "bytes_mean": float(np.mean(rnd_bytes)),
                         "ratio_mean": float(np.mean(rnd_bytes)) / inst_ring(inst),
                         "best_on_val_test": rnd_test[best_i], "test": rnd_test, "val": rnd_val},
              "intensive_sweep": sweep, "controller": search.to_dict(), "records": records, "record_details": details,
              "exact_optima": optima, "multiprocess": mp_rows,
              "links": {"4": link4, "2": prof2.data["source"]["link"]}, "notes": notes}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "separable_torch.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (args.out / "separable_torch.md").write_text(markdown(report))
    print(markdown(report))


def inst_ring(inst) -> float:
    from splitopt.families.separable.data import data

    return data(inst).ring_bytes


if __name__ == "__main__":
    main()
