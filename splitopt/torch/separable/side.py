"""The separable family's torch side: ``splitopt profile sep_resnext`` trains (or loads)
the Sep-ResNeXt on the digits, measures its layers and the accuracy of policy classes
and writes the separable instance with the records
(:mod:`splitopt.torch.separable.profile`); ``splitopt run`` runs a plan over G worker
processes, one per device, and compares outputs, bytes and latency with the evaluator
(:func:`splitopt.torch.separable.run.run_policy`). Imports no torch."""

from __future__ import annotations

import json
from typing import Any, Mapping

from splitopt.core.errors import InvalidOption, NotApplicable, SplitoptError
from splitopt.torch.separable.options import (MODEL, SeparableProfileOptions, SeparableRunOptions,
                                              parse_blocks)
from splitopt.torch.side import Profiled, TorchSide


class SeparableSide(TorchSide):
    family = "separable"
    former_verbs = ("profile-separable", "run-separable")
    run_options = SeparableRunOptions
    profile_models = (MODEL,)
    profile_options = SeparableProfileOptions

    # ----- profile -------------------------------------------------------------------------------
    def profile(self, model: str, options: SeparableProfileOptions) -> Profiled:
        """Train (or load) the networks, measure the accuracy records and the layers, and
        make the instance; the checkpoint is written here (``options.checkpoint``), the
        records returned to be written (``--records``)."""
        import torch

        from splitopt.torch.separable.model import (SepConfig, accuracy, identity_policy, intensive_policy,
                                                    load_digits_split)
        from splitopt.torch.separable.nas import load_models, save_models
        from splitopt.torch.separable.profile import TrainedPair, measured_records, profile_instance, train_pair

        torch.set_num_threads(options.torch_threads)
        seed = options.seed
        if options.load is not None:
            try:
                net, reference, _ = load_models(options.load)
            except ValueError as e:
                raise InvalidOption(f"--load {e}") from None
            pair = TrainedPair(net, reference, load_digits_split(seed), seed=seed)
        else:
            try:
                config = SepConfig(groups=options.groups, alpha=options.alpha,
                                   blocks_per_stage=parse_blocks(options.blocks_per_stage))
            except ValueError as e:
                raise InvalidOption(str(e)) from None
            pair = train_pair(config, seed=seed, epochs=options.epochs)
            if options.checkpoint is not None:
                save_models(options.checkpoint, pair.model, pair.reference, {"seed": seed, "epochs": options.epochs})
        c = pair.model.config
        recs, details = measured_records(pair.model, pair.data, samples=options.samples, statistic=options.statistic,
                                         seed=seed)
        link = None if options.bandwidth_mbps is None else {"bits_per_s": options.bandwidth_mbps * 1e6,
                                                            "latency_ms": options.link_latency_ms}
        prof = profile_instance(pair.model, name=options.name or f"separable_digits_{options.devices}",
                                devices=options.devices, link=link, mac_per_s=options.mac_per_s, records=recs,
                                source={"seed": seed,
                                        "checkpoint": str(options.checkpoint or options.load or "") or None})
        d = pair.data
        acc = {"no_communication": accuracy(pair.model, d.x_test, d.y_test, identity_policy(c)),
               "all_intensive_100_float32": accuracy(pair.model, d.x_test, d.y_test, intensive_policy(c))}
        if pair.reference is not None:
            acc["unseparated"] = accuracy(pair.reference, d.x_test, d.y_test, None)
        outputs = []
        if options.records is not None:
            outputs.append(("--records", options.records,
                            json.dumps({"accuracy": recs, "classes": details, "test_accuracy": acc}, indent=1) + "\n"))
        summary = (f"G = {c.groups}, {c.blocks} blocks, alpha = {c.alpha}, {len(recs)} accuracy records; test "
                   f"accuracy " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
        return Profiled(prof.instance, summary, outputs)

    # ----- run -----------------------------------------------------------------------------------
    def check_run_plan(self, inst: Any, plan: Any, options: SeparableRunOptions, where: str) -> None:
        """A ring all-reduce plan is the unseparated model: nothing to run over devices."""
        if plan.ring:
            raise NotApplicable(f"{where}: a ring all-reduce plan is the unseparated model; run-separable runs "
                                f"separable policies")

    def run(self, inst: Any, plan: Any, options: SeparableRunOptions, plan_path: str | None = None) -> dict[str, Any]:
        """Run ``plan`` over G worker processes (one per device, gloo on localhost), each
        holding only its part, and compare the head's logits with the single-process
        forward, the bytes sent with the evaluator's ``total_bytes`` and the median wall
        time with its latency; ``ok``: outputs and bytes agree."""
        import torch

        from splitopt.families.separable.evaluate import evaluate
        from splitopt.torch.separable.model import load_digits_split
        from splitopt.torch.separable.profile import check_matches, model_from_source
        from splitopt.torch.separable.run import RunError, run_policy

        try:
            model, info = model_from_source(inst, options.checkpoint)
            check_matches(inst, model.config)
        except ValueError as e:
            raise InvalidOption(str(e)) from None
        torch.set_num_threads(1)
        metrics = evaluate(inst, plan)
        x = load_digits_split(info.get("seed", 0)).x_test[:options.batch]
        try:
            rep = run_policy(model, plan, x, repeats=options.repeats, timeout_s=options.timeout)
        except RunError as e:
            raise SplitoptError(f"run-separable: {e}") from None
        bytes_ok = abs(rep["bytes_per_sample"] - metrics.total_bytes) < 0.5
        return {"instance": inst.name, "plan": plan_path, "weights": info.get("weights"), "batch": options.batch,
                "repeats": options.repeats, "devices": model.config.groups, "outputs_equal": rep["ok"],
                "max_abs_diff": rep["max_abs_diff"], "bytes_per_sample": rep["bytes_per_sample"],
                "predicted_bytes": metrics.total_bytes, "bytes_equal": bytes_ok,
                "sent_bytes": rep["sent_bytes"], "measured_ms": rep["median_ms"], "times_ms": rep["times_ms"],
                "predicted_ms": metrics.latency_ms,
                "ratio": rep["median_ms"] / metrics.latency_ms if metrics.latency_ms > 0 else None,
                "ratio_to_ring": metrics.ratio_to_ring, "parts_params": rep["parts_params"],
                "ok": bool(rep["ok"] and bytes_ok)}

    def print_run(self, console: Any, report: Mapping[str, Any]) -> None:
        """The bytes sent per image and the latency beside the evaluator's, and the output
        difference from the single-process forward."""
        console.print(f"[bold]{report['instance']}[/bold] <- {report['plan']}: {report['devices']} processes (gloo, "
                      f"localhost), batch {report['batch']}, {report['repeats']} run(s), weights {report['weights']}",
                      highlight=False)
        console.print(f"  bytes sent per image: {report['bytes_per_sample']:,.0f} (evaluator "
                      f"{report['predicted_bytes']:,.0f}, {report['ratio_to_ring']:.2%} of the ring all-reduce)",
                      highlight=False)
        console.print(f"  latency: measured {report['measured_ms']:.2f} ms (median), predicted "
                      f"{report['predicted_ms']:.2f} ms (ratio {report['ratio']:.2f})", highlight=False)
        console.print(f"  max abs difference vs the single-process forward: {report['max_abs_diff']:.3g}",
                      highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
